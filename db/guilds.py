"""Guild and channel configuration: film, playable cast, roles, limits.

Limits: the operator's settings are the loosest a guild may play with. A guild admin can only
tighten them (a longer cooldown, a smaller backlog, shorter instructions); a looser value is
stored as asked but clamped wherever limits are read, so it never applies, and the admin is told
the value that does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import false, func, literal, null, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from db import content_filters, notify
from db.bounds import fits_bigint, require_id
from db.models import ChannelSettings, GuildSettings
from game import vocabulary
from game.catalogue import FILMS, Film, find_film
from game.content_errors import ContentRefused
from game.content_rules import NEUTRAL_NAME, RuleSet, check_all
from game.errors import GameError, NoFilm, UnknownFilm
from game.instruction import Instruction, build_instruction
from game.operator_rules import operator_rules
from game.session_errors import UnknownCharacter
from i18n import L_
from settings import Settings
from settings.limits import SERVER_LIMITS


@dataclass(frozen=True)
class Limits:
    max_instruction_len: int
    cooldown_seconds: float
    backlog_cap: int

    @classmethod
    def of(cls, settings: Settings) -> Limits:
        """The operator's limits: the loosest any guild plays with."""
        return cls(settings.max_instruction_len, settings.cooldown_seconds, settings.backlog_cap)

    def tightened(
        self, *, max_instruction_len: int | None = None, cooldown_seconds: float | None = None, backlog_cap: int | None = None
    ) -> Limits:
        """These limits with a guild's choices applied where they are stricter (None: no choice)."""
        return Limits(
            max_instruction_len=min(self.max_instruction_len, max_instruction_len or self.max_instruction_len),
            cooldown_seconds=max(self.cooldown_seconds, cooldown_seconds if cooldown_seconds is not None else 0),
            backlog_cap=min(self.backlog_cap, backlog_cap or self.backlog_cap),
        )


@dataclass(frozen=True)
class ChannelConfig:
    """What applies in one channel: the channel's settings over the guild's over the app's."""

    film: Film | None
    playable: frozenset[str] | None  # character ids; None = the film's whole cast
    admin_role_ids: frozenset[int]
    moderator_role_ids: frozenset[int]
    limits: Limits
    # The operator's rules, then the server's filter (db.content_filters); a face adds its own
    # (the bot: the server's AutoMod keyword rules) as `extra_rules`.
    content_rules: tuple[RuleSet, ...] = ()
    language: str | None = None  # public posts' catalog (/admin language): the channel's over the guild's

    def cast(self) -> list:
        if self.film is None:
            return []
        return [c for c in self.film.characters if self.playable is None or c.id in self.playable]

    def cast_for(self, film: Film) -> list:
        """The playable characters of a game of `film` here: the configured cast when `film` is
        the configured film, else (a game an admin started on another film) its whole cast.
        The one rule both faces (Discord and the play page) use."""
        if self.film is not None and self.film.id == film.id:
            return self.cast()
        return list(film.characters)

    def instruction(
        self, film: Film, characters: list[str] | tuple[str, ...], motion: str, background: str,
        adverb: str = "", time_of_day: str = "", extra_rules: Sequence[RuleSet] = (),
    ) -> Instruction:
        """A turn's instruction under this channel's rules (its length limit, its playable cast,
        its content rules); the one assembly for /act, /vote propose and the page's act and
        propose. ContentRefused names the rule set that refused it."""
        # A suggestion typed by hand in the member's language reaches the model as its English term.
        motion, background, adverb, time_of_day = vocabulary.fields_to_model(film, motion, background, adverb, time_of_day)
        ins = build_instruction(
            film, characters, motion, background, adverb, time_of_day,
            max_len=self.limits.max_instruction_len, playable={c.id for c in self.cast_for(film)},
        )
        self.require_allowed("instruction", ins.typed, extra_rules)
        return ins

    def require_allowed(self, what: str, texts: Sequence[str], extra_rules: Sequence[RuleSet] = ()) -> None:
        """ContentRefused when a content rule set refuses one of `texts` (`what`: "instruction",
        "reason", named in the refusal)."""
        refusal = check_all(texts, (*self.content_rules, *extra_rules))
        if refusal is not None:
            raise ContentRefused(what, refusal.rule_set, refusal.term, " | ".join(texts))

    def shown_name(self, name: str, extra_rules: Sequence[RuleSet] = ()) -> str:
        """A member's display name as posts show it: a neutral stand-in when a content rule set
        refuses it (the turn goes ahead; a name is not the member's instruction)."""
        return NEUTRAL_NAME if check_all((name,), (*self.content_rules, *extra_rules)) else name


def film_or_error(film_id: str) -> Film:
    """A film by id or by any of its titles (a player may type it in their language)."""
    film = find_film(film_id)
    if film is None:
        raise UnknownFilm(film_id, sorted(FILMS))
    return film


async def channel_config(s: AsyncSession, settings: Settings, guild_id: int, channel_id: int) -> ChannelConfig:
    # One round trip (every command and cache load reads this): the guild's row and the channel's,
    # each there or not, and the server's filter terms. An id no row can have has nothing
    # configured (and must not reach the query).
    guild_ok, channel_ok = fits_bigint(guild_id), fits_bigint(channel_id)
    one = select(literal(1).label("one")).subquery("one")
    q = (
        select(GuildSettings, ChannelSettings, content_filters.terms_array(guild_id) if guild_ok else null())
        .select_from(one)
        .outerjoin(GuildSettings, GuildSettings.guild_id == guild_id if guild_ok else false())
        .outerjoin(ChannelSettings, ChannelSettings.channel_id == channel_id if channel_ok else false())
    )
    g, c, terms = (await s.execute(q)).one()
    # A channel with its own film has its own cast; otherwise the guild's film and cast apply.
    source = c if c is not None and c.film_id else g
    film_id = source.film_id if source is not None else None
    playable = source.playable if source is not None else None
    return ChannelConfig(
        film=FILMS.get(film_id) if film_id else None,
        playable=None if playable is None else frozenset(playable),
        admin_role_ids=frozenset(g.admin_role_ids if g else ()),
        moderator_role_ids=frozenset(g.moderator_role_ids if g else ()),
        limits=Limits.of(settings) if g is None else Limits.of(settings).tightened(
            max_instruction_len=g.max_instruction_len, cooldown_seconds=g.cooldown_seconds, backlog_cap=g.backlog_cap
        ),
        content_rules=tuple(r for r in (operator_rules(), content_filters.as_rule_set(terms or ())) if r is not None),
        language=(c.language if c is not None and c.language else None) or (g.language if g is not None else None),
    )


async def _upsert(s: AsyncSession, model, key: dict, values: dict) -> None:
    """Every settings write goes through here, and tells other processes (their caches) at commit."""
    stmt = insert(model).values(**key, **values)
    stmt = stmt.on_conflict_do_update(index_elements=list(key), set_={**values, "updated_at": func.now()})
    await s.execute(stmt)
    await notify.notify(s, notify.CONFIG_CHANGED, guild_id=key.get("guild_id", values.get("guild_id")))


async def set_film(s: AsyncSession, guild_id: int, film_id: str, channel_id: int | None = None) -> Film:
    """Choose the film of a guild, or of one channel when `channel_id` is given.

    The playable cast is reset to the new film's whole cast."""
    film = film_or_error(film_id)
    require_id(guild_id, "server id")
    if channel_id is not None:
        require_id(channel_id, "channel id")
    if channel_id is None:
        await _upsert(s, GuildSettings, {"guild_id": guild_id}, {"film_id": film.id, "playable": None})
    else:
        await _upsert(s, ChannelSettings, {"channel_id": channel_id}, {"guild_id": guild_id, "film_id": film.id, "playable": None})
    return film


async def set_language(s: AsyncSession, guild_id: int, language: str | None, channel_id: int | None = None) -> None:
    """The locale of the server's (or one channel's) public posts: a shipped catalog's name
    (i18n.locales.shipped), or None to follow the server's Discord language (a channel: the server's
    choice)."""
    from i18n import locales

    require_id(guild_id, "server id")
    if language is not None and language not in locales.shipped():
        raise GameError(L_("Unknown language %(language)s.", language=language))
    if channel_id is None:
        await _upsert(s, GuildSettings, {"guild_id": guild_id}, {"language": language})
    else:
        require_id(channel_id, "channel id")
        await _upsert(s, ChannelSettings, {"channel_id": channel_id}, {"guild_id": guild_id, "language": language})


async def set_previews(s: AsyncSession, guild_id: int, on: bool | None) -> None:
    """Whether the server's turns show previews of their clip while they run (None: the operator's
    default, ANIMEGAMER_PREVIEWS); read by the worker at each turn's start (db.turn_previews)."""
    require_id(guild_id, "server id")
    await _upsert(s, GuildSettings, {"guild_id": guild_id}, {"previews": on})


async def set_character_enabled(
    s: AsyncSession, settings: Settings, guild_id: int, channel_id: int, character: str, enabled: bool
) -> frozenset[str]:
    """Enable or disable one character where the film is configured (channel or guild)."""
    require_id(guild_id, "server id")
    require_id(channel_id, "channel id")
    cfg = await channel_config(s, settings, guild_id, channel_id)
    if cfg.film is None:
        raise NoFilm()
    ch = cfg.film.character(character)
    if ch is None:
        raise UnknownCharacter(character, [c.name for c in cfg.film.characters])
    current = set(cfg.playable if cfg.playable is not None else (c.id for c in cfg.film.characters))
    (current.add if enabled else current.discard)(ch.id)
    value = sorted(current)
    c = await s.get(ChannelSettings, channel_id)
    if c is not None and c.film_id:
        await _upsert(s, ChannelSettings, {"channel_id": channel_id}, {"guild_id": guild_id, "playable": value})
    else:
        await _upsert(s, GuildSettings, {"guild_id": guild_id}, {"playable": value})
    return frozenset(value)


async def set_roles(
    s: AsyncSession, guild_id: int, *, admin_role_ids: list[int] | None = None, moderator_role_ids: list[int] | None = None
) -> None:
    require_id(guild_id, "server id")
    for r in (*(admin_role_ids or ()), *(moderator_role_ids or ())):
        require_id(r, "role id")
    values = {}
    if admin_role_ids is not None:
        values["admin_role_ids"] = admin_role_ids
    if moderator_role_ids is not None:
        values["moderator_role_ids"] = moderator_role_ids
    if values:
        await _upsert(s, GuildSettings, {"guild_id": guild_id}, values)


@dataclass(frozen=True)
class LimitsChange:
    """What /admin limits did: the limits that now apply, and the requests that were looser than
    the operator's (name -> (asked, applied))."""

    effective: Limits
    clamped: dict[str, tuple[float, float]]


# What a guild may store (the operator's settings clamp it further): settings/limits.py's table.
LIMIT_RANGES = {name: (limit.low, limit.high) for name, limit in SERVER_LIMITS.items()}


async def set_limits(
    s: AsyncSession,
    settings: Settings,
    guild_id: int,
    *,
    max_instruction_len: int | None = None,
    cooldown_seconds: float | None = None,
    backlog_cap: int | None = None,
) -> LimitsChange:
    """Set the guild's limits (the values given; others unchanged). Values looser than the
    operator's are stored but never apply (see channel_config); the result says which."""
    require_id(guild_id, "server id")
    asked = {"max_instruction_len": max_instruction_len, "cooldown_seconds": cooldown_seconds, "backlog_cap": backlog_cap}
    values = {}
    for name, v in asked.items():
        if v is None:
            continue
        lo, hi = LIMIT_RANGES[name]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
            raise GameError(L_("%(name)s must be between %(low)s and %(high)s.", name=name, low=lo, high=hi))
        values[name] = v
    if values:
        await _upsert(s, GuildSettings, {"guild_id": guild_id}, values)
    g = await s.get(GuildSettings, guild_id, populate_existing=True)
    effective = Limits.of(settings).tightened(
        max_instruction_len=g.max_instruction_len if g else None,
        cooldown_seconds=g.cooldown_seconds if g else None,
        backlog_cap=g.backlog_cap if g else None,
    )
    clamped = {n: (v, getattr(effective, n)) for n, v in values.items() if getattr(effective, n) != v}
    return LimitsChange(effective, clamped)
