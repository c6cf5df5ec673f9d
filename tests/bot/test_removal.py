"""Taking a shot down (/mod remove, the "Remove shot" message command): the post keeps its place
but shows a notice instead of the clip; the clip and the text are gone from /history, /export and
the next turns' context; the characters keep their states. The author may remove their own shot;
anyone else needs a moderator's rights. It works in a vote channel with a round open."""

from __future__ import annotations

from sqlalchemy import select

from bot.parts.removal import removed_fields
from db import removal
from db.models import Turn, VoteProposal
from game.stored_reasons import PRIVACY_DELETED, REMOVED, REMOVER_WORDS
from i18n import use_locale
from inference.backends.preview import PreviewBackend
from tests.bot.conftest import stop_bot
from tests.bot.helpers import answer, audit_actions, command, field, posted_turns, result, say, setup_game, turns_of
from tests.bot.test_vote import click, round_messages, setup_vote_game, wait_round
from tests.queue.test_worker import ScriptedBackend


class Recording(ScriptedBackend):
    """The preview backend with small clips; it records each request (its history: the context)."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = PreviewBackend(width=96, height=64)


RIGHTS = "You need the Manage Messages permission or the bot's moderator role"


async def shown_removed(w, message_id: int, seq: int, timeout: float = 10.0):
    """The post once its removal edit landed: the notice, no file, no button."""

    def ok():
        m = w.server.messages[message_id]
        done = m.embeds and m.embeds[0]["title"] == f"Turn #{seq} · removed" and not m.attachments and not m.components
        return m if done else None

    return await w.server.wait_until(ok, timeout, f"turn #{seq}'s post shown as removed")


async def menu(w, message, member, name: str) -> str:
    h = await w.server.message_command(message, member, name)
    text, _, ephemeral = await answer(h)
    assert ephemeral
    return text


async def test_mod_remove_takes_the_shot_down_everywhere(world, start_bot, start_worker, sessions):
    w = world
    await start_bot()
    backend = Recording()
    await start_worker(films=["qiqi"], backend=backend)
    await setup_game(w, (w.alice, "qiqi"), (w.bob, "jiji"))
    await say(w, w.alice, "act", {"motion": "walk", "background": "town"})
    post1 = await result(w, 1)
    assert post1.attachments
    await say(w, w.bob, "act", {"motion": "run", "background": "town"})
    await result(w, 2)

    assert RIGHTS in await say(w, w.carol, "mod remove", {"turn": 1, "reason": "no"})
    assert RIGHTS in await say(w, w.alice, "mod remove", {"turn": 1, "reason": "mine"})  # /mod is for moderators
    assert "Turn 9 was not found" in await say(w, w.dave, "mod remove", {"turn": 9, "reason": "x"})
    text = await say(w, w.dave, "mod remove", {"turn": 1, "reason": "spoilers **here**"})
    assert text.startswith("Turn #1 is removed") and "keep the states" in text
    m = await shown_removed(w, post1.id, 1)
    assert m.embeds[0]["description"] == "This shot was removed by a moderator."
    assert field(m.embeds[0], "Reason") == "spoilers \\*\\*here\\*\\*"
    assert "later turns go on from there" in m.embeds[0]["footer"]["text"]
    assert m.id == post1.id and [x.id for x in w.server.channel_messages(w.games)].count(post1.id) == 1  # in its place
    assert "Turn #1 was already removed" in await say(w, w.dave, "mod remove", {"turn": 1, "reason": "again"})

    h, _ = await command(w, w.alice, "history")
    _, embeds, _ = await answer(h)
    assert "**#2**" in embeds[0]["description"] and "#1" not in embeds[0]["description"]
    h, _ = await command(w, w.alice, "export")
    assert "1 shot, turns #2 to #2" in (await h.wait_followup(timeout=60)).content

    await say(w, w.alice, "act", {"motion": "wave", "background": "town"})
    await result(w, 3)
    t1, t2, t3 = await turns_of(sessions)
    assert [h.instruction for h in backend.requests[-1].history] == [t2.instruction]  # turn 1 skipped (window 2)
    assert t3.states_before and t1.states_after
    assert t3.states_before["qiqi"] == t1.states_after["qiqi"]  # the states are not rewound
    assert (t1.mp4, t1.mp4_size, t1.instruction, t1.motion, t1.background) == (None, None, "", "", "")
    async with sessions() as s:
        assert await s.scalar(select(Turn.representation).where(Turn.id == t1.id)) is None
    assert (t1.removed_reason, t1.removed_note, t1.removed_by_id, t1.removed_by_name) == (
        "remover_words", "spoilers **here**", w.dave.id, "dave")
    assert t2.mp4 is not None and t2.removed_at is None
    assert ("remove_shot", "dave") in await audit_actions(sessions)


async def test_the_author_removes_their_own_shot_and_nobody_else_can(world, start_bot, start_worker, sessions):
    w = world
    await start_bot()
    await start_worker(films=["qiqi"], backend=Recording())
    await setup_game(w, (w.alice, "qiqi"), (w.bob, "jiji"))
    await say(w, w.alice, "act", {"motion": "walk", "background": "town"})
    post = await result(w, 1)

    for member in (w.bob, w.carol):  # a fellow player, a member without rights
        assert "Only alice (who asked for this shot) or a moderator can remove it" in await menu(w, post, member, "Remove shot")
    chat = await w.server.user_message(w.games, w.carol, "nice shot")
    assert "not one of this server's game shots" in await menu(w, chat, w.alice, "Remove shot")
    assert w.server.messages[post.id].attachments  # nothing changed

    assert (await menu(w, post, w.alice, "Remove shot")).startswith("Turn #1 is removed")
    m = await shown_removed(w, post.id, 1)
    assert m.embeds[0]["description"] == "This shot was removed by its author."
    assert "fields" not in m.embeds[0] or not m.embeds[0]["fields"]
    assert "already removed" in await menu(w, post, w.dave, "Remove shot")
    (t,) = await turns_of(sessions)
    assert t.removed_by_id == w.alice.id and t.mp4 is None
    assert [a for a in await audit_actions(sessions) if a[0] == "remove_shot"] == [("remove_shot", "alice")]


async def test_removal_while_a_vote_round_is_open(world, start_bot, start_worker, sessions):
    w = world
    await start_bot()
    backend = Recording()
    await start_worker(films=["qiqi"], backend=backend)
    await setup_vote_game(w)
    await say(w, w.carol, "vote propose", {"motion": "fly on broomstick", "background": "sky", "with": "Qiqi"})
    await click(w, w.alice, 1)
    await click(w, w.bob, 1)
    await wait_round(w, "Vote · closed", 0)
    post = await result(w, 1)

    # the next round is open when the shot is taken down
    await say(w, w.carol, "vote propose", {"motion": "walk", "background": "town", "with": "Qiqi"})
    await wait_round(w, "Vote · open", 1)
    assert (await menu(w, post, w.dave, "Remove shot")).startswith("Turn #1 is removed")
    await shown_removed(w, post.id, 1)
    await click(w, w.alice, 1)
    await click(w, w.bob, 1)
    await wait_round(w, "Vote · closed", 0)
    await result(w, 2)
    assert backend.requests[-1].history == ()  # the removed shot is no context
    async with sessions() as s:
        texts = (await s.scalars(select(VoteProposal.instruction).order_by(VoteProposal.id))).all()
        t1 = (await s.scalars(select(Turn).where(Turn.seq == 1))).one()
    assert texts[0] == "" and texts[1].startswith("Character: Qiqi; Motion: walk")  # the winner's text went with it
    first_round = w.server.messages[round_messages(w)[0].id]  # its message shows the result again, without the text
    await w.server.wait_until(lambda: first_round.embeds[0]["fields"][0]["value"] == "(removed)", 10, "round 1 without the text")
    assert t1.removed_at is not None and t1.instruction == ""


async def test_a_shot_taken_down_before_its_post_is_posted_as_the_notice(world, start_bot, start_worker, sessions):
    """Taken down by the system (a member's data deleted, db.privacy) while the bot was away: the
    post it makes later is the notice, with no clip, no button and no reason."""
    w = world
    bot = await start_bot()
    await setup_game(w, (w.alice, "qiqi"))
    await say(w, w.alice, "act", {"motion": "walk", "background": "town"})
    message_id = w.server.channel_messages(w.games)[-1].id
    await stop_bot(w, bot)
    await start_worker(films=["qiqi"], backend=Recording())
    (t,) = await posted_or_done(sessions)
    async with sessions.begin() as s:
        assert await removal.take_down_turns(s, [t.id], reason=PRIVACY_DELETED, by_id=None, by_name=None) == [t.id]
    await start_bot()
    m = await shown_removed(w, message_id, 1)
    assert m.embeds[0]["description"] == "This shot was removed." and not m.embeds[0].get("fields")
    (t,) = await posted_turns(sessions, 1)
    assert t.posted_message_id == message_id


async def posted_or_done(sessions, timeout: float = 30.0):
    from testkit.queue import wait_until

    async def done():
        turns = await turns_of(sessions)
        return turns if turns and all(t.status == "done" for t in turns) else None

    return await wait_until(done, timeout=timeout)


def test_a_removed_posts_reason_is_its_code_rendered_in_the_servers_language():
    """The notice words a stored removal code in the language it is built in (the server's); a
    moderator's own words stay as typed; a privacy removal shows no reason."""
    plain = Turn(seq=3, author_id=1, removed_by_id=2, removed_reason=REMOVED)
    typed = Turn(seq=3, author_id=1, removed_by_id=2, removed_reason=REMOVER_WORDS, removed_note="spoilers")
    gone = Turn(seq=3, author_id=1, removed_by_id=None, removed_reason=PRIVACY_DELETED)
    assert [field(removed_fields(t)["embed"].to_dict(), "Reason") for t in (plain, typed)] == ["removed", "spoilers"]
    assert not removed_fields(gone)["embed"].fields
    with use_locale("ja"):
        shown = [removed_fields(t)["embed"].to_dict() for t in (plain, typed)]
    assert [field(e, "理由") for e in shown] == ["削除済み", "spoilers"]
