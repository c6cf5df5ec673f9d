"""Vote mode through the fake Discord: proposals, changeable votes on persistent buttons, closing on
the last player's vote or the deadline (kept in Postgres), ties, empty rounds, pauses, resets,
the mode turned off, and a bot restarted in the middle of a round."""

from __future__ import annotations

from sqlalchemy import func, select, text, update

from db.models import Turn, VoteBallot, VoteRound
from testkit.queue import wait_until
from tests.bot.conftest import stop_bot
from tests.bot.helpers import say, status_message, turns_of


def round_messages(w, channel=None):
    return [m for m in w.server.channel_messages(channel or w.games) if m.embeds and m.embeds[0]["title"].startswith("Vote · ")]


def round_message(w, channel=None):
    found = round_messages(w, channel)
    assert found, "no round message"
    return w.server.messages[found[-1].id]


async def wait_round(w, title: str, n_buttons: int | None = None, timeout: float = 10.0):
    def ok():
        found = round_messages(w)
        if not found:
            return None
        m = w.server.messages[found[-1].id]
        if m.embeds[0]["title"] != title or (n_buttons is not None and len(m.custom_ids) != n_buttons):
            return None
        return m

    return await w.server.wait_until(ok, timeout=timeout, what=f"round message {title!r}")


async def click(w, member, option: int) -> str:
    m = round_message(w)
    h = await w.server.click(m, member, m.custom_ids[option - 1])
    return (await h.wait_followup(timeout=10)).content


async def setup_vote_game(w, seconds: int = 600) -> None:
    await say(w, w.erin, "admin film", {"film": "qiqi"})
    await say(w, w.alice, "game start")
    await say(w, w.alice, "game join", {"character": "qiqi"})
    await say(w, w.bob, "game join", {"character": "jiji"})
    assert f"Vote mode is on ({seconds} s rounds)" in await say(w, w.erin, "vote mode", {"enabled": True, "seconds": seconds})


async def expire(sessions) -> None:
    """The round's time is up (as if its seconds had passed)."""
    async with sessions.begin() as s:
        await s.execute(update(VoteRound).where(VoteRound.status == "open").values(deadline=func.now() - text("interval '1 second'")))


async def test_a_round_from_proposals_to_the_winning_turn(world, start_bot, sessions):
    w = world
    await start_bot()
    await setup_vote_game(w)
    assert "turned on vote mode" in w.server.channel_messages(w.games)[-1].content
    assert "plays by vote" in await say(w, w.alice, "act", {"motion": "walk", "background": "town"})
    assert "plays by vote" in await say(w, w.carol, "act", {"motion": "walk", "background": "town"})
    assert "Only admins" not in await say(w, w.carol, "vote open")  # anyone may open a round
    assert "Manage Server" in await say(w, w.carol, "vote mode", {"enabled": False})

    # carol has no character, and names who is in the shot; bob's proposal has his own character.
    assert "Your proposal is option 1: Character: Qiqi, Jiji; Motion: quickly fly on broomstick" in await say(
        w, w.carol, "vote propose", {"motion": "fly on broomstick", "background": "sky", "adverb": "quickly", "with": "Qiqi, Jiji"}
    )
    assert "name at least one character" in await say(w, w.dave, "vote propose", {"motion": "walk", "background": "town"})
    assert "Your proposal is option 2: Character: Jiji; Motion: walk" in await say(
        w, w.bob, "vote propose", {"motion": "walk", "background": "town"}
    )
    assert "You already proposed option 2" in await say(w, w.bob, "vote propose", {"motion": "run", "background": "town"})
    assert "not a character of" in await say(w, w.dave, "vote propose", {"motion": "walk", "background": "town", "with": "Totoro"})
    m = await wait_round(w, "Vote · open", 2)
    assert len(round_messages(w)) == 1 and m.custom_ids[0].startswith("ag:vote:")
    assert [f["name"] for f in m.embeds[0]["fields"]] == ["1. carol · 0 votes", "2. bob · 0 votes"]

    # One vote per member, and voting again moves it.
    assert (await click(w, w.carol, 2)).startswith("You voted for option 2.")
    assert (await click(w, w.carol, 1)).startswith("You voted for option 1.")
    await w.server.wait_until(lambda: round_message(w).embeds[0]["fields"][0]["name"] == "1. carol · 1 vote")
    assert round_message(w).embeds[0]["fields"][1]["name"] == "2. bob · 0 votes"
    await click(w, w.alice, 2)
    # The round's message is edited through the channel's edit scheduler: a moment after the answer.
    await w.server.wait_until(lambda: round_message(w).embeds[0]["footer"]["text"].endswith("2 votes · 1 of 2 players voted"))

    # bob is the last joined player to vote: the round closes at once, 2 votes to 1.
    old_buttons = round_message(w).components
    await click(w, w.bob, 1)
    m = await wait_round(w, "Vote · closed", 0)
    assert m.embeds[0]["description"] == "Option 1 won with 2 votes: it is turn #1."
    assert m.embeds[0]["fields"][0]["name"] == "1. carol · 2 votes · winner"
    (turn,) = await turns_of(sessions)
    assert (turn.author_id, turn.author_name, turn.characters) == (w.carol.id, "carol", ["qiqi", "jiji"])
    assert turn.instruction == "Character: Qiqi, Jiji; Motion: quickly fly on broomstick; Background: sky."
    await w.server.wait_until(lambda: status_message(w, 1).embeds[0]["title"] == "Turn #1 · queued")

    # The closed round's buttons are gone; an old copy of them (a stale client) is refused.
    stale = w.server.post_message(w.games, components=old_buttons)
    h = await w.server.click(stale, w.dave, stale.custom_ids[1])
    assert "That vote round is over" in (await h.wait_followup()).content
    async with sessions() as s:
        assert (await s.scalar(select(func.count()).select_from(VoteBallot))) == 3
    assert w.server.unhandled == []


async def test_deadline_tie_empty_round_pause_reset_and_mode_off(world, start_bot, sessions):
    w = world
    await start_bot()
    await setup_vote_game(w, seconds=10)

    # A real deadline; a 1-1 tie goes to the earliest proposal. alice and bob never vote.
    await say(w, w.carol, "vote propose", {"motion": "sit on railing", "background": "town", "with": "Qiqi"})
    await say(w, w.dave, "vote propose", {"motion": "turn head", "background": "sky", "with": "Jiji"})
    await wait_round(w, "Vote · open", 2)  # the message is edited a moment after the answer
    await click(w, w.erin, 2)
    await click(w, w.owner, 1)
    m = await wait_round(w, "Vote · closed", 0, timeout=20)
    assert m.embeds[0]["description"] == "Option 1 won with 1 vote, the earliest of 2 tied options: it is turn #1."
    (turn,) = await turns_of(sessions)
    assert turn.author_name == "carol" and turn.motion == "sit on railing"

    # An empty round closes without a turn and says so.
    assert "A vote round is open" in await say(w, w.carol, "vote open")
    assert "already open" in await say(w, w.dave, "vote open")
    m = await wait_round(w, "Vote · open", 0)
    assert m.embeds[0]["fields"][0]["value"] == "none yet"
    await expire(sessions)
    m = await wait_round(w, "Vote · closed", 0)
    assert m.embeds[0]["description"] == "Nobody proposed an action: no turn this round."
    assert len(await turns_of(sessions)) == 1

    # A pause voids the open round; nothing can be proposed until the game resumes.
    await say(w, w.carol, "vote propose", {"motion": "walk", "background": "town", "with": "Qiqi"})
    await say(w, w.dave, "mod pause")
    m = await wait_round(w, "Vote · void", 0)
    assert m.embeds[0]["description"] == "The game was paused; this round is void and no turn was played."
    assert "This game is paused" in await say(w, w.carol, "vote propose", {"motion": "walk", "background": "town", "with": "Qiqi"})
    await say(w, w.dave, "mod resume")

    # A reset voids it too (the new game starts without a round).
    await say(w, w.carol, "vote propose", {"motion": "walk", "background": "town", "with": "Qiqi"})
    await wait_round(w, "Vote · open", 1)
    await say(w, w.dave, "mod reset")
    m = await wait_round(w, "Vote · void", 0)
    assert "reset or ended" in m.embeds[0]["description"]

    # Turning the mode off voids the open round at once; /act works again.
    await say(w, w.carol, "vote propose", {"motion": "walk", "background": "town", "with": "Qiqi"})
    await wait_round(w, "Vote · open", 1)
    assert await say(w, w.erin, "vote mode", {"enabled": False}) == "Vote mode is off."
    m = await wait_round(w, "Vote · void", 0)
    assert "Voting was turned off" in m.embeds[0]["description"]
    assert "does not play by vote" in await say(w, w.carol, "vote propose", {"motion": "walk", "background": "town", "with": "Qiqi"})
    assert "is queued" in await say(w, w.alice, "act", {"motion": "walk", "background": "town"})
    async with sessions() as s:
        statuses = (await s.scalars(select(VoteRound.status).order_by(VoteRound.id))).all()
    assert statuses == ["closed", "closed", "void", "void", "void"]
    assert len(await turns_of(sessions)) == 2
    assert w.server.unhandled == []


async def test_bot_restarted_in_the_middle_of_a_round(world, start_bot, sessions):
    w = world
    bot = await start_bot()
    await setup_vote_game(w)
    await say(w, w.carol, "vote propose", {"motion": "fly on broomstick", "background": "sky", "with": "Qiqi"})
    await say(w, w.dave, "vote propose", {"motion": "walk", "background": "town", "with": "Jiji"})
    await wait_round(w, "Vote · open", 2)  # the message is edited a moment after the answer
    await click(w, w.alice, 2)

    # The buttons outlive the bot: a vote after a restart is counted and moved like any other.
    await stop_bot(w, bot)
    bot = await start_bot()
    assert (await click(w, w.carol, 2)).startswith("You voted for option 2.")
    assert (await click(w, w.carol, 1)).startswith("You voted for option 1.")
    await w.server.wait_until(lambda: round_message(w).embeds[0]["fields"][1]["name"] == "2. dave · 1 vote")

    # The deadline passes while the bot is down: the restarted bot closes the round from Postgres,
    # edits the same message and queues the winner (a 1-1 tie: option 1).
    await stop_bot(w, bot)
    message = round_message(w)
    await expire(sessions)
    async with sessions() as s:
        assert (await s.scalar(select(func.count()).select_from(Turn))) == 0
    await start_bot()
    m = await wait_round(w, "Vote · closed", 0)
    assert m.id == message.id and len(round_messages(w)) == 1
    assert m.embeds[0]["description"] == "Option 1 won with 1 vote, the earliest of 2 tied options: it is turn #1."
    await w.server.wait_until(lambda: status_message(w, 1).embeds[0]["title"] == "Turn #1 · queued")
    (turn,) = await turns_of(sessions)
    assert turn.author_id == w.carol.id

    async def shown():  # recorded after Discord answered the edit, so a moment after the fake saw it
        async with sessions() as s:
            rnd = (await s.scalars(select(VoteRound))).one()
        return rnd if rnd.result_shown_at is not None else None

    rnd = await wait_until(shown, timeout=10)
    assert rnd.turn_id == turn.id
    assert w.server.unhandled == []


async def test_propose_autocompletes_like_act(world, start_bot):
    """/vote propose offers the film's catalogue and cast as /act does (its motion, background,
    adverb and time suggestions once called a method the Play cog does not have)."""
    w = world
    await start_bot()
    await setup_vote_game(w)

    async def choices(options: dict, focused: str) -> list[str]:
        h = await w.server.autocomplete(w.guild, w.games, w.carol, "vote propose", options, focused=focused)
        return [c["name"] for c in (await h.wait_response(timeout=5)).choices]

    assert (await choices({"motion": "fly"}, "motion"))[0] == "fly on broomstick"
    assert await choices({"motion": "x", "background": "sk"}, "background")
    assert await choices({"motion": "x", "background": "y", "adverb": "qu"}, "adverb")
    assert await choices({"motion": "x", "background": "y", "time": "ni"}, "time")
    assert await choices({"motion": "x", "with": "Qiqi, Ji"}, "with") == ["Qiqi, Jiji"]
