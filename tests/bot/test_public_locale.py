"""Public posts in the server's language, answers in the member's (issue #23, item 4), for what the
bot posts outside the cogs: a turn's status message (queued, its Cancel button, progress, closed),
its post (embed, state bars, Regenerate button), the moderation log's entries; and the pieces they
are made of (stored codes shown through the catalogs, Discord's limits after translation).

The server's Discord language is the pseudo-locale (every catalog string rendered as ⟦Ţĥîš...·⟧),
the members' clients are English. The pseudo catalog is built from a fresh template of the code,
written to a temporary i18n directory (the shipped i18n/locales is never written)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import discord
import pytest

from bot.answers.modlog import log_embed
from bot.parts import embeds
from bot.parts.audit import describe
from db.models import AuditLog, Turn
from game import turn_texts
from i18n import locales, use_locale
from i18n.pseudo import CLOSE, OPEN
from testkit.fake_discord.interactions import MESSAGE_COMPONENT
from tests.bot.helpers import answer, command, say, setup_game, turns_of
from tests.i18n.helpers import current_template, pseudo_catalogs

ACT = {"motion": "walk", "background": "town"}
# English labels of the status message and the post, none of which may show in the server's language
ENGLISH = re.compile(r"\b(?:Turn|Author|Queue position|Progress|Note|Motion scope|Clip|Stamina|Social|Entertainment|"
                     r"queued|generating|cancelled|Cancelled by|Cancel|Regenerate|Preview clip|render|preview rules)\b")


@pytest.fixture(scope="module")
def fresh_template():
    return current_template()


@pytest.fixture
def pseudo_catalog(tmp_path: Path, fresh_template) -> Iterator[Path]:
    with pseudo_catalogs(tmp_path, fresh_template) as root:
        yield root


def pseudo(text: str) -> bool:
    return OPEN in text and CLOSE in text


def labels(payload: dict) -> list[str]:
    """Every button label of a message payload."""
    out = []
    for row in payload.get("components") or ():
        for c in row.get("components", [row]):
            if c.get("label"):
                out.append(c["label"])
    return out


def assert_in_server_language(embed: dict, *, data: tuple[str, ...] = ()) -> None:
    """Every label of the embed rendered in the pseudo-locale, no English label left. `data`: field
    names that are film data (character names), shown as the film names them."""
    assert pseudo(embed["title"]) and not ENGLISH.search(embed["title"]), embed["title"]
    for f in embed.get("fields", []):
        if f["name"] not in data:
            assert pseudo(f["name"]) and not ENGLISH.search(f["name"]), f
        assert not ENGLISH.search(f["value"]), f
    footer = (embed.get("footer") or {}).get("text", "")
    assert not ENGLISH.search(footer), footer


def assert_english(text: str) -> None:
    assert OPEN not in text and CLOSE not in text, text


async def test_turn_post_and_status_message_in_the_servers_language(world, start_bot, start_worker, sessions,
                                                                    pseudo_catalog):
    # long: one turn's messages followed in the server's language from /act to the post
    w, server = world, world.server
    w.guild.locale = "qps"  # the server's Discord language, before the bot connects (GUILD_CREATE carries it)
    await start_bot()
    await setup_game(w, (w.alice, "qiqi"), (w.bob, "jiji"))  # every answer on the way: English (say() checks ephemeral)
    assert_english(await say(w, w.alice, "act", ACT))
    assert_english(await say(w, w.bob, "act", {"motion": "wave", "background": "town"}))
    t1, t2 = await turns_of(sessions)

    # Queued: the status message, its queue position and its Cancel button, in the server's language.
    sent = {}
    for r in server.requests_to("POST", "/channels/{channel_id}/messages"):
        for c in (r.json or {}).get("components") or ():
            for b in c.get("components", []):
                sent[b.get("custom_id")] = r.json
    queued = sent[f"ag:cancel:{t1.id}"]
    assert_in_server_language(queued["embeds"][0])
    assert "#1" in queued["embeds"][0]["title"]
    assert [f["value"] for f in queued["embeds"][0]["fields"]][:2] == ["alice", "1"]
    assert labels(queued) and all(pseudo(label) and "Cancel" not in label for label in labels(queued))

    # bob cancels his turn: answered in English; the public message is closed in the server's language,
    # with the note written in the click's handler rendered there.
    status2 = server.messages[t2.status_message_id]
    h = await server.click(status2, w.bob, f"ag:cancel:{t2.id}")
    assert (await h.wait_followup(timeout=15)).content == "Turn #2 is cancelled."

    def closed():
        m = server.messages[t2.status_message_id]
        return m if m.components == [] and m.embeds and "#2" in m.embeds[0]["title"] and len(m.embeds[0]["fields"]) == 2 else None

    m = await server.wait_until(closed, 10, "turn #2's status message closed")
    assert_in_server_language(m.embeds[0])
    note = m.embeds[0]["fields"][1]["value"]
    assert pseudo(note) and "bob" in note and "Cancelled" not in note

    # Running: the progress bar's stage in the server's language.
    await start_worker(films=["qiqi"], backend_options={"delay": 1.5})

    def post():
        m = server.messages[t1.status_message_id]
        return m if any(c.startswith("ag:regen:") for c in m.custom_ids) else None

    posted = await server.wait_until(post, 30, "turn #1's post")
    bodies = [e["body"] for e in posted.edits if isinstance(e.get("body"), dict)]
    progress = [b["embeds"][0] for b in bodies  # Author, Queue position, Progress (a bar and a percentage)
                if b.get("embeds") and len(b["embeds"][0].get("fields", [])) == 3 and "%" in b["embeds"][0]["fields"][2]["value"]]
    assert progress, "no progress edit of turn #1's status message"
    for e in progress:
        assert_in_server_language(e)
        bar = e["fields"][2]["value"]
        assert "%" in bar and ("·" not in bar or pseudo(bar.split("·", 1)[1])), bar

    # The post: embed, state bars and the Regenerate button in the server's language.
    embed = posted.embeds[0]
    assert_in_server_language(embed, data=("Qiqi",))
    assert "#1" in embed["title"] and posted.attachments
    bars = [f["value"] for f in embed["fields"] if f["name"] == "Qiqi"][0].split("\n")
    assert len(bars) == 3 and all(line.startswith(OPEN) for line in bars), bars
    assert pseudo(embed["footer"]["text"])  # the preview's note
    buttons = labels({"components": posted.components})
    assert buttons and all(pseudo(label) and "Regenerate" not in label for label in buttons)

    # The member's own view stays in their language: /status (English labels) and Regenerate's answer.
    h, _ = await command(w, w.alice, "status")
    text, shown, ephemeral = await answer(h)
    assert ephemeral and shown and not pseudo(shown[0]["title"]) and "Stamina" in shown[0]["fields"][0]["value"]
    assert all(not pseudo(f["value"]) for f in shown[0]["fields"])
    h = await server.click(posted, w.alice, f"ag:regen:{t1.id}")
    assert (await h.wait_followup(timeout=15)).content == "Turn #1 is being generated again with a new seed."

    # The new take's status message is public again: the server's language, its note too.
    def new_take():
        found = [r.json for r in server.requests_to("POST", "/channels/{channel_id}/messages")
                 if r.json and f"ag:cancel:{t1.id}" in str(r.json.get("components"))]
        return found[-1] if len(found) >= 2 else None

    again = await server.wait_until(new_take, 15, "the new take's status message")
    assert_in_server_language(again["embeds"][0])
    note = again["embeds"][0]["fields"][-1]
    assert pseudo(note["name"]) and pseudo(note["value"]) and "seed" not in note["value"]


# --- the pieces, without Discord


def test_moderation_log_entry_in_the_servers_language(pseudo_catalog):
    entry = AuditLog(id=7, guild_id=1, channel_id=2, actor_id=3, actor_name="dave", action="remove_shot", target="4",
                     details={"reason": "spoilers", "author_id": "5", "author": "alice", "game_channel_id": "2",
                              "message_id": "6", "by": "moderator"},
                     created_at=datetime(2026, 1, 1, tzinfo=UTC))
    with use_locale(locales.PSEUDO):
        e = log_embed(entry)
        said = describe(entry)
    assert pseudo(e.title or "") and all(pseudo(f.name or "") for f in e.fields) and pseudo(e.footer.text or "")
    assert [f.value for f in e.fields][1:] == ["<@5> (alice)", "spoilers"]
    assert "removed" not in said and pseudo(said) and "<@3> (dave)" in said and "<#2>" in said
    with use_locale(locales.SOURCE):
        assert describe(entry).endswith("<@3> (dave) removed turn #4 (spoilers) in <#2>")
        assert log_embed(entry).title == "Shot removed"


def test_stored_codes_are_shown_through_the_catalogs(pseudo_catalog):
    from inference.queue import LOST_TURN

    generic = turn_texts.generator_failed("RuntimeError")
    assert embeds.failure_text(LOST_TURN) == "This turn was lost: its worker stopped with an error. Try again."
    assert embeds.failure_text(generic) == ("The generator failed on this turn (RuntimeError). Try again, or ask a "
                                            "moderator to check the worker's log.")
    assert embeds.stage_text("render 3/17") == "drawing frame 3 of 17"
    with use_locale(locales.PSEUDO):
        for stored in (LOST_TURN, generic, None, "failed", "the GPU caught fire"):
            assert pseudo(embeds.failure_text(stored)), stored
        assert "RuntimeError" in embeds.failure_text(generic)
        for stage in ("mllm", "decode", "vae", "encode", "done", "preview rules", "render 3/17", "denoise 2/30", "new"):
            assert pseudo(embeds.stage_text(stage)), stage
        assert pseudo(embeds.person("a player")) and embeds.person("alice") == "alice"


def test_rendered_texts_are_fitted_to_discords_limits():
    long = "ŵ" * 3000
    e = discord.Embed(title=long, description=long * 2)
    for _ in range(6):
        e.add_field(name=long, value=long)
    e.set_footer(text=long)
    embeds.fit_embed(e)
    assert len(e.title or "") <= 256 and len(e.description or "") <= 4096 and len(e.footer.text or "") <= 2048
    assert all(len(f.name or "") <= 256 and len(f.value or "") <= 1024 for f in e.fields)
    assert len(e) <= 6000
    assert embeds.fit_label(long).endswith("…") and len(embeds.fit_label(long)) == 80


async def test_a_button_answers_in_the_clickers_language_and_closes_the_message_in_the_servers(world, start_bot, sessions,
                                                                                                pseudo_catalog):
    """The reverse: an English server, a member whose client is in the pseudo-locale clicks Cancel.
    The answer follows the member (the button adopts the interaction's locale); the status message
    it closes, rendered in a task the click started, follows the server."""
    w, server = world, world.server
    await start_bot()
    await setup_game(w, (w.alice, "qiqi"))  # no worker: the turn stays queued
    await say(w, w.alice, "act", ACT)
    (t1,) = await turns_of(sessions)
    status = server.messages[t1.status_message_id]
    assert [c["label"] for row in status.components for c in row["components"]] == ["Cancel"]
    data = {"custom_id": f"ag:cancel:{t1.id}", "component_type": 2}
    h = await server._push_interaction(MESSAGE_COMPONENT, w.guild, w.games, w.alice, data, message=status, locale="qps")
    said = (await h.wait_followup(timeout=15)).content
    assert pseudo(said) and "#1" in said

    def closed():
        m = server.messages[t1.status_message_id]
        return m if m.components == [] and m.embeds and len(m.embeds[0]["fields"]) == 2 else None

    m = await server.wait_until(closed, 10, "turn #1's status message closed")
    assert m.embeds[0]["title"] == "Turn #1 · cancelled" and m.embeds[0]["fields"][1]["value"] == "Cancelled by alice."
    async with sessions() as s:
        row = await s.get(Turn, t1.id)
        assert (row.error, row.cancelled_by_name) == ("cancelled_by_author", "alice")  # a code and a name, in no language
