"""/export end to end: clips stitched by the worker's ffmpeg (imageio-ffmpeg's when the machine has
none, and never ffprobe), the stored clip lengths, the per-member rate limit, and an unexpected
failure answered as an internal error with a reference that is in the log with its traceback."""

from __future__ import annotations

import logging
import re
import subprocess

from sqlalchemy import update

from db.models import Turn
from inference import mp4
from inference.backends.preview import PreviewBackend
from tests.bot.helpers import command, posted_turns, result, say
from tests.bot.test_failures import setup_game


def decodes(data: bytes, ffmpeg: str, tmp_path) -> int:
    """Frames ffmpeg decodes from an MP4 (it fails on a broken file)."""
    path = tmp_path / "export.mp4"
    path.write_bytes(data)
    run = subprocess.run([ffmpeg, "-v", "error", "-i", str(path), "-map", "0:v", "-c", "copy", "-f", "null", "-"],
                         capture_output=True, text=True, check=True)
    assert run.stderr == ""
    probe = subprocess.run([ffmpeg, "-i", str(path), "-map", "0:v", "-f", "null", "-"], capture_output=True, text=True)
    return int(re.findall(r"frame=\s*(\d+)", probe.stderr)[-1])


async def play_two_turns(w, start_bot, start_worker):
    await start_bot()
    await start_worker(films=["qiqi"], backend=PreviewBackend(width=96, height=64))
    await setup_game(w, (w.alice, "qiqi"), (w.bob, "jiji"))
    for seq, motion in ((1, "walk"), (2, "run")):
        await say(w, w.alice, "act", {"motion": motion, "background": "town"})
        await result(w, seq)


async def test_export_without_system_ffmpeg_and_rate_limited(world, start_bot, start_worker, sessions, monkeypatch, tmp_path):
    w = world
    # No ffmpeg or ffprobe on PATH: the worker and the bot both use the imageio-ffmpeg wheel's binary.
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("ANIMEGAMER_FFMPEG", raising=False)
    mp4.ffmpeg_binary.cache_clear()
    try:
        binary = mp4.ffmpeg_binary()
        assert "imageio_ffmpeg" in binary
        await play_two_turns(w, start_bot, start_worker)
        turns = await posted_turns(sessions, 2)
        assert [t.clip_seconds for t in turns] == [17 / 8, 17 / 8]  # 17 frames at 8 fps, as encoded

        h, _ = await command(w, w.alice, "export")
        m = await h.wait_followup(timeout=60)
        assert m.ephemeral and "2 shots, turns #1 to #2" in m.content
        assert decodes(m.attachments[0].data, binary, tmp_path) == 2 * 17

        # the same member again at once: refused with the time left; another member is not held up
        assert "you can export again in 60 s" in await say(w, w.alice, "export")
        h, _ = await command(w, w.bob, "export")
        assert "2 shots" in (await h.wait_followup(timeout=60)).content
    finally:
        mp4.ffmpeg_binary.cache_clear()


async def test_unexpected_failure_gives_a_reference_that_is_logged(world, start_bot, start_worker, sessions, caplog, tmp_path):
    w = world
    await play_two_turns(w, start_bot, start_worker)
    await posted_turns(sessions, 2)
    async with sessions() as s, s.begin():  # a stored clip that is not an MP4 at all (the last one:
        # ffmpeg's concat would otherwise stop there and still succeed, with the video cut short)
        await s.execute(update(Turn).where(Turn.seq == 2).values(mp4=b"not an mp4 " * 100))

    with caplog.at_level(logging.ERROR, logger="bot.answers.replies"):
        text = await say(w, w.alice, "export", timeout=60)
    ref = re.fullmatch(r"Something went wrong on our side \(reference ([0-9a-f]{8})\)\. Please try again; if it keeps "
                       r"failing, tell a server admin and give them the reference\.", text)
    assert ref, text
    assert "database" not in text
    (record,) = [r for r in caplog.records if ref.group(1) in r.getMessage()]
    assert "export" in record.getMessage() and record.exc_info is not None
    assert "ffmpeg failed" in str(record.exc_info[1]) and "000002.mp4" in str(record.exc_info[1])
    # a failed export does not start the member's cooldown: the refusal is the same failure again
    assert "reference" in await say(w, w.alice, "export", timeout=60)


async def test_a_request_that_cannot_be_served_says_why_before_the_rate_limit(world, start_bot, start_worker, sessions):
    """A member who just exported in one channel asks in a channel with no game, then with a
    game without a finished shot: each answer says why, not "export again in 60 s"."""
    w = world
    await play_two_turns(w, start_bot, start_worker)
    await posted_turns(sessions, 2)
    h, _ = await command(w, w.alice, "export")
    assert "2 shots" in (await h.wait_followup(timeout=60)).content

    assert "No game is running in this channel" in await say(w, w.alice, "export", channel=w.games2)
    assert "This channel has no game 3 (games 1 to 1)" in await say(w, w.alice, "export", {"game": 3})
    await say(w, w.alice, "game start", channel=w.games2)
    assert "no finished shots" in await say(w, w.alice, "export", channel=w.games2)
    # where there is something to export, the rate limit still applies
    assert "you can export again in" in await say(w, w.alice, "export")
