"""A film from a video file to a turn on the play page, every step the real one on tiny models:
ffmpeg's lavfi makes the video; `animegamer film prepare --captioner none` cuts it into clips; the
review is done through the review page's store (film.review.store.Folder: fields, then accepted);
`animegamer film games` builds the games; scripts/train_tiny.py computes the features (`film
features` with tiny VAE, T5 and CLIP), trains phases (a), (b) and (c) and installs the film; then
`animegamer play` with the model backend (its worker loads the installed checkpoints) takes an
instruction through the page's API and finishes it with a clip and its states.

Where the time goes (one core): the tiny VAE on 2 clips at 480x720 (~30 s), phase (a) and (c)'s
DiT steps at the full 60 x 90 latents (~6 s each), phase (b)'s 20 steps, the worker's start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import cv2
import numpy as np

from animegamer.cli import main
from film.review.store import Folder
from testkit.lavfi import Shot, make_video
from tests.play.helpers import ffprobe, running_play

ROOT = Path(__file__).resolve().parents[2]
FILM_ID = "tinyfilm"
# The two clips of one 4.5 s pan (one game of two turns), reviewed as an operator would.
REVIEWS = [
    {"character": "qiqi", "motion": "fly", "adverb": "quickly", "background": "sky", "time": "night",
     "social": 0, "entertainment": 1, "stamina": 1},
    {"character": "qiqi", "motion": "walk", "adverb": "slowly", "background": "town", "time": "morning",
     "social": 1, "entertainment": 0, "stamina": -1},
]


def prepared_set(root: Path) -> Path:
    """The pipeline's folder: prepared from a lavfi video, reviewed through the store, its games built."""
    video = root / "film.mp4"
    make_video(video, [Shot("pan", 4.5, 24, 0)], size=(360, 240))
    cv2.imwrite(str(root / "qiqi.png"), np.full((64, 64, 3), (40, 40, 200), np.uint8))
    (root / "cast.toml").write_text('[[characters]]\nid = "qiqi"\nname = "Qiqi"\nreference = "qiqi.png"\n',
                                    encoding="utf-8")
    folder = root / FILM_ID
    assert main(["film", "prepare", str(video), "--out", str(folder), "--characters", str(root / "cast.toml"),
                 "--captioner", "none", "--heldout", "0", "--no-progress"]) == 0
    review = Folder(folder)
    assert [review.clips[c].status for c in review.order] == ["needs_review", "needs_review"]
    for clip_id, fields in zip(review.order, REVIEWS, strict=True):
        review.save(clip_id, fields)
        saved, _ = review.save(clip_id, {"status": "accepted"})
        assert saved.status == "accepted"
    assert main(["film", "games", str(folder), "--heldout", "0"]) == 0
    games = [json.loads(line) for line in (folder / "games.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [len(g["turns"]) for g in games] == [2] and games[0]["split"] == "train"
    return folder


def request(url: str, body: dict | None = None) -> dict:
    origin = url.split("/api/")[0]
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Origin": origin, "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def test_a_film_from_video_to_a_played_turn(tmp_path):
    started = time.monotonic()
    folder = prepared_set(tmp_path)
    models, films, out = tmp_path / "models", tmp_path / "films.toml", tmp_path / "runs"
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "train_tiny.py"), str(folder), "--out", str(out),
                           "--models", str(models), "--films", str(films), "--steps", "a=2,b=20,c=2"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    trained = time.monotonic() - started

    # every phase ran and exported; the features came from the pipeline's own step
    [game] = [json.loads(line) for line in (folder / "games.jsonl").read_text().splitlines()]
    assert json.loads((folder / "features" / "index.json").read_text()).keys() == {t["clip"] for t in game["turns"]}
    for phase, steps in (("a", 2), ("b", 20), ("c", 2)):
        losses = [json.loads(line) for line in (out / phase / "losses.jsonl").read_text().splitlines()]
        assert [r["step"] for r in losses] == list(range(1, steps + 1)) and all(np.isfinite(r["loss"]) for r in losses)
    # the phase-(b) model predicts the training turns' states better than it did untrained (measured
    # by the worker's predictor, scored as the evaluation scores ACC-S)
    scores = json.loads((out / "b" / "state_accuracy.json").read_text())
    print(f"state accuracy on the training turns: ACC-S {scores['acc_s_before']:.3f} -> {scores['acc_s_after']:.3f}, "
          f"all four values {scores['acc_4_before']:.3f} -> {scores['acc_4_after']:.3f}")
    assert scores["acc_4_after"] > scores["acc_4_before"], scores
    assert "State predictions on the training games" in (out / "b" / "MODEL_CARD.md").read_text()

    # the installed film plays on the page: the model worker loads its checkpoints, a turn finishes
    env = {"ANIMEGAMER_BACKEND": "animegamer", "ANIMEGAMER_MODELS_DIR": str(models), "ANIMEGAMER_FILMS": str(films),
           "ANIMEGAMER_DEFAULT_FILM": FILM_ID, "ANIMEGAMER_DEVICE": "cpu", "ANIMEGAMER_DTYPE": "float32",
           "ANIMEGAMER_DECODER_STEPS": "2", "ANIMEGAMER_PREVIEWS": "false", "OMP_NUM_THREADS": "1"}
    with running_play(tmp_path / "data", "agtrain", **env) as (proc, _):
        api = f"{proc.url}/api"
        state = request(f"{api}/state")
        assert state["config"]["film"] == FILM_ID, state["config"]
        request(f"{api}/start", {})
        request(f"{api}/join", {"player_id": 1001, "name": "Ann", "character": "qiqi"})
        turn = request(f"{api}/act", {"player_id": 1001, "motion": "fly", "adverb": "quickly", "background": "sky",
                                      "time_of_day": "night"})
        assert turn["instruction"] == "Character: Qiqi; Motion: quickly fly; Background: night sky."
        deadline = time.monotonic() + 240
        while True:
            t = request(f"{api}/turns/{turn['turn_id']}")
            if t["status"] in ("done", "failed", "cancelled") or time.monotonic() > deadline:
                break
            time.sleep(0.5)  # sleep: poll interval on the turn's status; the deadline keeps the page's output
        assert t["status"] == "done", (t, proc.output[-3000:])
        assert t["backend"] == "animegamer" and not t["is_preview"]
        assert set(t["prediction"]) == {"motion_level", "social", "entertainment", "stamina"}
        assert t["states_before"] and t["states_after"]
        clip = tmp_path / "turn.mp4"
        with urllib.request.urlopen(f"{proc.url}{t['video']}", timeout=30) as r:
            clip.write_bytes(r.read())
        stream = ffprobe(clip)
        assert stream["codec_name"] == "h264" and int(stream["nb_read_frames"]) == 17
    print(f"trained and installed in {trained:.0f} s, played in {time.monotonic() - started - trained:.0f} s")

