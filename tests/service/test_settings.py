"""Admins' settings as service actions against a real Postgres: the limits, the bot's roles, the
filter, the moderation log, the language of public posts, previews, and what /admin show reads.
Each change is audited in its transaction under the action names the audit registry
(bot.audit.ACTIONS) renders; the play page's game (no audit log) changes the same settings."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from db import modlog
from db.models import AuditLog
from game.content_errors import FilterTermExists, FilterTermUnknown
from game.errors import GameError
from service import admin
from service.deps import Deps, Member, Place
from service.jobs import StoredJobs

HERE = Place(100, 200)
OTHER_CHANNEL = Place(100, 201)
ADMIN = Member(9, "boss")


@pytest.fixture
def deps(sessions, settings) -> Deps:
    return Deps(settings, sessions, StoredJobs())


async def _audit(sessions) -> list[tuple[str, str | None, dict]]:
    async with sessions() as s:
        rows = (await s.scalars(select(AuditLog).order_by(AuditLog.id))).all()
    for r in rows:  # who and where, as the bot recorded them from the interaction
        assert (r.guild_id, r.channel_id, r.actor_id, r.actor_name) == (100, 200, 9, "boss")
    return [(r.action, r.target, r.details) for r in rows]


async def test_limits_tighten_and_say_which_asked_values_are_looser_than_the_operators(deps, sessions, settings):
    """The operator's backlog is 5 and cooldown 0: a cooldown of 30 and 200 characters apply, a
    backlog of 10 is stored but the operator's 5 applies, and the change says so."""
    change = await admin.set_limits(deps, HERE, ADMIN, cooldown=30, backlog=10, max_length=200)
    assert (change.effective.cooldown_seconds, change.effective.backlog_cap, change.effective.max_instruction_len) == (
        30, settings.backlog_cap, 200)
    assert change.clamped == {"backlog_cap": (10, settings.backlog_cap)}
    kept = await admin.set_limits(deps, HERE, ADMIN, backlog=2)  # left out: unchanged
    assert (kept.effective.cooldown_seconds, kept.effective.backlog_cap, kept.clamped) == (30, 2, {})
    with pytest.raises(GameError):  # outside what a server may store: refused, nothing recorded
        await admin.set_limits(deps, HERE, ADMIN, cooldown=-1)
    assert await _audit(sessions) == [
        ("set_limits", None, {"cooldown": 30, "backlog": 10, "max_length": 200}),
        ("set_limits", None, {"cooldown": None, "backlog": 2, "max_length": None}),
    ]


async def test_roles_are_given_and_taken_per_kind(deps, sessions):
    assert await admin.set_role(deps, HERE, ADMIN, "admin", 501, "Admins", True) == [501]
    assert await admin.set_role(deps, HERE, ADMIN, "admin", 502, "Leads", True) == [501, 502]
    assert await admin.set_role(deps, HERE, ADMIN, "moderator", 601, "Mods", True) == [601]
    assert await admin.set_role(deps, HERE, ADMIN, "admin", 501, "Admins", False) == [502]
    shown = await admin.shown(deps, OTHER_CHANNEL)  # the server's roles, whatever the channel
    assert (shown.config.admin_role_ids, shown.config.moderator_role_ids) == ({502}, {601})
    assert await _audit(sessions) == [
        ("add_admin_role", "501", {"role": "Admins"}),
        ("add_admin_role", "502", {"role": "Leads"}),
        ("add_moderator_role", "601", {"role": "Mods"}),
        ("remove_admin_role", "501", {"role": "Admins"}),
    ]


async def test_filter_terms_are_stored_normalised_refused_twice_and_removed_as_typed(deps, sessions):
    assert await admin.add_filter_term(deps, HERE, ADMIN, "  Dragon  ") == "dragon"
    assert await admin.add_filter_term(deps, HERE, ADMIN, "*Fire*") == "*fire*"
    with pytest.raises(FilterTermExists):
        await admin.add_filter_term(deps, HERE, ADMIN, "DRAGON")
    assert sorted(await admin.filter_terms(deps, HERE)) == ["*fire*", "dragon"]
    assert await admin.remove_filter_term(deps, HERE, ADMIN, "Dragon") == "dragon"
    with pytest.raises(FilterTermUnknown):
        await admin.remove_filter_term(deps, HERE, ADMIN, "dragon")
    assert await admin.filter_terms(deps, HERE) == ["*fire*"]
    assert await _audit(sessions) == [("filter_add", "dragon", {}), ("filter_add", "*fire*", {}),
                                      ("filter_remove", "dragon", {})]


async def test_the_moderation_log_is_set_and_turned_off(deps, sessions):
    await admin.set_log_channel(deps, HERE, ADMIN, 777)
    async with sessions() as s:
        assert await modlog.log_channel(s, HERE.guild_id) == 777
    await admin.set_log_channel(deps, HERE, ADMIN, None)
    async with sessions() as s:
        assert await modlog.log_channel(s, HERE.guild_id) is None
    assert await _audit(sessions) == [("log_channel", "777", {}), ("log_channel", None, {})]


async def test_show_says_where_the_language_and_previews_come_from(deps, sessions, settings):
    """Nothing chosen: Discord's server language and the operator's previews. A server's choice,
    then a channel's, which wins there only; previews off is the server's choice."""
    shown = await admin.shown(deps, HERE)
    assert (shown.language, shown.language_scope, shown.previews, shown.previews_default) == (
        None, None, settings.previews, True)
    assert shown.recent == []

    await admin.set_language(deps, HERE, ADMIN, "fr")
    await admin.set_language(deps, HERE, ADMIN, "ja", channel_id=HERE.channel_id)
    await admin.set_previews(deps, HERE, ADMIN, False)
    here, there = await admin.shown(deps, HERE), await admin.shown(deps, OTHER_CHANNEL)
    assert (here.language, here.language_scope, there.language, there.language_scope) == ("ja", "channel", "fr", "server")
    assert (here.previews, here.previews_default) == (False, False)
    assert [a.action for a in here.recent] == ["previews", "set_language", "set_language"]  # newest first

    await admin.set_language(deps, HERE, ADMIN, None, channel_id=HERE.channel_id)  # the server's choice again
    assert (await admin.shown(deps, HERE)).language_scope == "server"
    with pytest.raises(GameError):  # not a shipped catalog: refused, nothing recorded
        await admin.set_language(deps, HERE, ADMIN, "xx")
    assert await _audit(sessions) == [
        ("set_language", "fr", {"scope": "server"}),
        ("set_language", "ja", {"scope": "channel", "channel": "200"}),
        ("previews", "off", {}),
        ("set_language", admin.AUTOMATIC, {"scope": "channel", "channel": "200"}),
    ]
    assert len((await admin.shown(deps, HERE, recent=2)).recent) == 2


async def test_the_pages_game_changes_settings_without_an_audit_log(sessions, settings):
    page = Deps(settings, sessions, StoredJobs(), audited=False)
    await admin.set_previews(page, HERE, ADMIN, True)
    await admin.add_filter_term(page, HERE, ADMIN, "dragon")
    shown = await admin.shown(page, HERE)
    assert (shown.previews, shown.previews_default) == (True, False)
    assert await admin.filter_terms(page, HERE) == ["dragon"]
    async with sessions() as s:
        assert await s.scalar(select(func.count()).select_from(AuditLog)) == 0
