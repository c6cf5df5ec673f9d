"""Previews in Discord: the turn's status message shows the clip forming (an attachment edit within
the channel's edit budget), the post's clip replaces it; /admin previews turns them off."""

from __future__ import annotations

import io
import json
import time

from PIL import Image

from testkit.waits import wait_for
from tests.bot.helpers import (
    answer,
    audit_actions,
    command,
    edits_idle,
    is_result,
    posted_turns,
    result,
    say,
    turn_messages,
)

EDIT_LIMIT, EDIT_WINDOW = 5, 5.0  # Discord: about 5 edits per 5 s per channel
PREVIEW = "preview.webp"


def _window_clear(server, channel) -> bool:
    """No edit of the channel within the last EDIT_WINDOW seconds (the fake records its times)."""
    times = [at for at, _ in server.channel_edits(channel)]
    return not times or time.monotonic() - times[-1] >= EDIT_WINDOW


def _preview_edits(server, channel) -> list[dict]:
    return [e for m in server.channel_messages(channel) for e in m.edits if e["files"] == [PREVIEW]]


async def test_ten_channels_show_previews_within_the_edit_budget_and_post_each_clip_once(
    world, start_bot, start_worker, sessions, qsettings
):
    w, server = world, world.server
    settings = qsettings.model_copy(update={"preview_interval": 0.0, "preview_max": 4})
    bot = await start_bot(settings=settings)
    await say(w, w.erin, "admin film", {"film": "qiqi"})
    channels = [w.games, w.games2] + [w.guild.create_text_channel(f"games-{i}") for i in range(3, 11)]
    for channel in channels:
        await say(w, w.alice, "game start", channel=channel)
        await say(w, w.alice, "game join", {"character": "qiqi"}, channel=channel)
    for channel in channels:
        assert "is queued" in await say(w, w.alice, "act", {"motion": "walk", "background": "town"}, channel=channel)
    # All ten generate at once, each for ~5 s, offering previews as they draw.
    await start_worker(settings=settings, films=["qiqi"], concurrency=10, backend_options={"delay": 5.0})

    for channel in channels:
        await result(w, 1, channel, timeout=90)
    await posted_turns(sessions, 10, timeout=30)
    await wait_for(lambda: edits_idle(bot), timeout=30, what="the bot's edits done")  # no straggling edit left

    patches = server.requests_to("PATCH", "/channels/{channel_id}/messages/{message_id}")
    assert all(r.status == 200 for r in patches), [(r.status, r.json) for r in patches if r.status != 200]
    for channel in channels:
        (m,) = turn_messages(w, 1, channel)  # one message: the status message, edited into the post
        assert is_result(m, 1) and [a.filename for a in m.attachments] == ["turn-1.mp4"]  # the clip replaced the preview
        assert sum(e["files"] == ["turn-1.mp4"] for e in m.edits) == 1 and m.edits[-1]["files"] == ["turn-1.mp4"]
        previews = _preview_edits(server, channel)
        assert previews, f"{channel.name}: no preview was shown"
        for e in previews:  # the attachment replaces the last one, as Discord's edit defines it
            assert [a["id"] for a in e["body"]["attachments"]] == [0]
            # beside the picture, the progress: its step ("drawing frame k of n"), or a later stage
            # when a progress edit queued behind the preview's was merged into it
            assert '"name": "Progress"' in json.dumps(e["body"]["embeds"])
        times = [at for at, _ in server.channel_edits(channel)]
        assert server.max_edits_in_window(channel, EDIT_WINDOW) <= EDIT_LIMIT, f"{channel.name}: {times}"
    # The stills are small WebPs, and what the fake stored is what the bot uploaded.
    shown = [r.files[0] for r in patches if [f.filename for f in r.files] == [PREVIEW]]
    assert shown and all(Image.open(io.BytesIO(f.data)).format == "WEBP" for f in shown)


async def test_admin_previews_off_is_audited_shown_and_honoured(world, start_bot, start_worker, sessions, qsettings):
    w, server = world, world.server
    settings = qsettings.model_copy(update={"preview_interval": 0.0})
    await start_bot(settings=settings)
    await say(w, w.erin, "admin film", {"film": "qiqi"})
    assert "no longer show previews" in await say(w, w.erin, "admin previews", {"state": "off"})
    assert ("previews", "erin") in await audit_actions(sessions)
    h, _ = await command(w, w.erin, "admin show")
    _, embeds, _ = await answer(h)
    shown = embeds[0]
    assert {"name": "Previews", "value": "off", "inline": False} in shown["fields"]
    assert "previews of clips being made off" in json.dumps(shown)

    await say(w, w.alice, "game start")
    await say(w, w.alice, "game join", {"character": "qiqi"})
    await say(w, w.alice, "act", {"motion": "walk", "background": "town"})
    await start_worker(settings=settings, films=["qiqi"], backend_options={"delay": 2.0})
    await result(w, 1, timeout=60)
    assert _preview_edits(server, w.games) == []

    assert "now show their clip forming" in await say(w, w.erin, "admin previews", {"state": "on"})
    # Turn 1's progress and post spent the channel's edit window (5 edits per 5 s), and routine
    # edits (progress, previews) keep its last slot for posts: turn 2 starts once it is clear,
    # so that its 2 s leave room for its previews.
    await wait_for(lambda: _window_clear(server, w.games), timeout=30, what="the channel's edit window clear")
    await say(w, w.alice, "act", {"motion": "run", "background": "town"})
    await result(w, 2, timeout=60)
    assert _preview_edits(server, w.games)
