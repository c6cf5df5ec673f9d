"""/mod: pause, resume, cancel, kick, reset; rights checked by the bot; audited; announced."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import func, text, update

from db import sessions as game_sessions
from db.models import GameSession
from game.states import CharacterState
from tests.bot.helpers import audit_actions, closed_as, field, say, setup_game, status_message, turns_of

RIGHTS = "You need the Manage Messages permission or the bot's moderator role"


async def job_statuses(sessions) -> list[str]:
    async with sessions() as s:
        return list((await s.scalars(text("SELECT status FROM procrastinate_jobs ORDER BY id"))).all())


async def test_moderation_commands_and_refusals(world, start_bot, sessions):
    w, server = world, world.server
    await start_bot()  # no worker: the turns stay queued
    mo = w.guild.create_member("mo", roles=[w.mod_role])  # moderator through the bot's configured role

    await setup_game(w, (w.alice, "qiqi"), (w.bob, "jiji"))
    assert "Turn #1 is queued (next in the queue)" in await say(w, w.alice, "act", {"motion": "walk", "background": "town"})
    assert "Turn #2 is queued (position 2 in the queue)" in await say(w, w.alice, "act", {"motion": "run", "background": "town"})
    assert field(status_message(w, 2).embeds[0], "Queue position") == "2"
    assert await say(w, w.bob, "queue") == "#1 by alice: next in the queue\n#2 by alice: position 2 in the queue"

    for name, options in (
        ("mod pause", {}),
        ("mod resume", {}),
        ("mod reset", {}),
        ("mod cancel", {"turn": 1}),
        ("mod kick", {"player": w.bob}),
    ):
        assert RIGHTS in await say(w, w.carol, name, options), name
        assert RIGHTS in await say(w, mo, name, options), name  # the role has no rights yet
    assert await audit_actions(sessions) == [("set_film", "erin")]

    assert "The game is paused" in await say(w, w.dave, "mod pause", {"reason": "dinner **now**"})
    said = await server.wait_for_message(w.games, lambda m: "paused the game" in m.content)
    assert said.content == "dave paused the game (dinner \\*\\*now\\*\\*)."
    assert "This game is paused (dinner \\*\\*now\\*\\*). A moderator can resume it" in await say(w, w.bob, "act", {"motion": "walk", "background": "town"})

    await say(w, w.erin, "admin role", {"kind": "moderator", "role": w.mod_role})
    assert "resumed" in await say(w, mo, "mod resume")

    assert "Turn #1 is cancelled" in await say(w, w.dave, "mod cancel", {"turn": 1, "reason": "off topic"})
    sm = await closed_as(w, 1, "cancelled")
    assert "Cancelled by dave: off topic." in str(sm.embeds[0]["fields"])
    assert "only queued turns can be cancelled" in await say(w, w.dave, "mod cancel", {"turn": 1})
    assert "Turn 9 was not found" in await say(w, w.dave, "mod cancel", {"turn": 9})
    assert (await job_statuses(sessions))[0] == "cancelled"

    assert "bob no longer plays Jiji" in await say(w, mo, "mod kick", {"player": w.bob})
    assert "carol is not playing" in await say(w, mo, "mod kick", {"player": w.carol})
    assert "have not joined" in await say(w, w.bob, "act", {"motion": "walk", "background": "town"})
    assert "You play Jiji" in await say(w, w.carol, "game join", {"character": "jiji"})

    async with sessions() as s:
        old = await game_sessions.live_session(s, w.games.id)
    assert "1 waiting turn cancelled" in await say(w, w.dave, "mod reset")
    turns = await turns_of(sessions)
    assert [t.status for t in turns] == ["cancelled", "cancelled"]
    await closed_as(w, 2, "cancelled")
    assert await job_statuses(sessions) == ["cancelled", "cancelled"]
    async with sessions() as s:
        assert (await s.get(GameSession, old.id)).status == "archived"
        fresh = await game_sessions.live_session(s, w.games.id)
        assert fresh.id != old.id and fresh.next_seq == 1
        assert {p.user_name: p.character_id for p in await game_sessions.players(s, fresh.id)} == {"alice": "qiqi", "carol": "jiji"}
        assert set((await game_sessions.states(s, fresh.id)).values()) == {CharacterState()}
    assert "is queued" in await say(w, w.alice, "act", {"motion": "wave", "background": "town"})
    assert (await turns_of(sessions))[-1].seq == 1  # numbering restarts with the new session

    assert await audit_actions(sessions) == [
        ("set_film", "erin"),
        ("pause", "dave"),
        ("add_moderator_role", "erin"),
        ("resume", "mo"),
        ("cancel_turn", "dave"),
        ("kick", "mo"),
        ("reset", "dave"),
    ]
    assert server.unhandled == []


async def test_scheduled_jobs_pause_idle_games_and_prune_clips(world, start_bot, sessions, qsettings):
    w = world
    bot = await start_bot()
    await setup_game(w)
    async with sessions.begin() as s:
        await s.execute(update(GameSession).values(last_activity_at=func.now() - timedelta(minutes=qsettings.idle_pause_minutes + 1)))
    # Discord cannot take the notice for now: the game stays active until a check can tell it.
    w.server.fail_next("POST", route="/channels/{channel_id}/messages", status=503)
    assert await bot.maintenance.pause_idle() == []
    async with sessions() as s:
        assert (await game_sessions.live_session(s, w.games.id)).status == "active"
    assert len(await bot.maintenance.pause_idle()) == 1
    said = await w.server.wait_for_message(w.games, lambda m: "No turn for" in m.content)
    assert sum("No turn for" in m.content for m in w.server.channel_messages(w.games)) == 1
    assert "This game is paused (idle). A moderator can resume it with /mod resume." in said.content
    assert "paused (idle)" in await say(w, w.alice, "act", {"motion": "walk", "background": "town"})
    assert await bot.maintenance.pause_idle() == []  # already paused
    assert await bot.maintenance.prune() == 0  # nothing old enough
    assert {j.id for j in bot.maintenance.scheduler.get_jobs()} == {
        "sweep", "pause_idle", "prune", "pause_withdrawn", "vote_rounds", "privacy", "departed",
    }


async def test_a_film_withdrawn_from_the_catalogue_pauses_its_games(world, start_bot, sessions):
    """The operator removes the film a game uses: the game is paused with a message in its
    channel, /act says why, /states still shows; the film back, /mod resume continues it."""
    from game.catalogue import packaged_films, use_films

    w = world
    bot = await start_bot()
    await say(w, w.erin, "admin film", {"film": "qiqi"})
    await say(w, w.alice, "game start")
    await say(w, w.alice, "game join", {"character": "qiqi"})
    try:
        use_films({k: v for k, v in packaged_films().items() if k != "qiqi"})
        assert len(await bot.maintenance.pause_withdrawn()) == 1
        said = await w.server.wait_for_message(w.games, lambda m: "no longer offered" in m.content)
        assert "This game's film 'qiqi' is no longer offered here" in said.content
        refused = await say(w, w.alice, "act", {"motion": "walk", "background": "town"})
        assert "paused (film withdrawn)" in refused
        assert await bot.maintenance.pause_withdrawn() == []  # already paused
        await say(w, w.alice, "status")  # still answers, with the id standing in for the title
        refused = await say(w, w.dave, "mod resume")
        assert "no longer offered" in refused, refused
    finally:
        use_films(None)
    async with sessions.begin() as s:
        await game_sessions.set_paused(s, await game_sessions.live_session(s, w.games.id), False)
    assert await bot.maintenance.pause_withdrawn() == []
    assert "Turn #1 is queued" in await say(w, w.alice, "act", {"motion": "walk", "background": "town"})
    assert w.server.unhandled == []
