"""Autocomplete answers shared by several cogs: films, characters and the /act vocabulary, from the
bot's cached configuration (autocomplete asks on every keystroke).

Each choice is shown in the member's language and matched against every name: a film by its
English title or any local one, a character by its English name or any local one (films.toml
`local` tables), a suggestion by its English term or its translation. The choice's value is what
the game uses, whatever the language: a film's id, a character's id or English name, the English
term the model was trained on.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

import discord
from discord import app_commands

from bot.parts import context
from bot.parts.service_args import place
from game import vocabulary
from game.catalogue import FILMS, NAME_SEPARATORS, Character, Film, fold
from i18n import _, current_locale, locales

if TYPE_CHECKING:
    from bot.client import AnimeGamerBot

CHOICE_MAX = 100  # Discord: a choice's name and a string choice's value are 1-100 characters
CHOICES_MAX = 25  # Discord shows at most 25

T = TypeVar("T")
_SEPARATOR = re.compile(f"[{re.escape(NAME_SEPARATORS)}]")


def split_names(text: str | None) -> list[str]:
    """The names of a list typed in /act's `with` (or /vote propose's): separated by commas or
    semicolons, full-width ones and the ideographic comma (、) included."""
    return [p.strip() for p in _SEPARATOR.split(text or "") if p.strip()]


def names_locale(interaction: discord.Interaction[AnimeGamerBot]) -> object:
    """Whose names to show: the member's Discord locale (its own local table first: es-419 before
    es, and a locale without a catalog can still have the films' names), or the pseudo-locale's
    (English names) when the bot runs in it."""
    if current_locale() == locales.PSEUDO:
        return locales.PSEUDO
    return getattr(interaction, "locale", None) or current_locale()


def _fit(text: str) -> str:
    return text[:CHOICE_MAX]


def ranked(entries: Iterable[tuple[T, str, Iterable[str]]], typed: str, limit: int = CHOICES_MAX) -> list[tuple[T, str]]:
    """(item, shown name) of the entries (item, shown name, every other name) that match what was
    typed: the shown name starting with it first, then another name starting with it, then any name
    containing it; the entries' order within each. Nothing typed: every entry."""
    t = fold(typed)
    scored = []
    for i, (item, shown, names) in enumerate(entries):
        folded = [fold(n) for n in names]
        s = fold(shown)
        if not t or s.startswith(t):
            rank = 0
        elif any(n.startswith(t) for n in folded):
            rank = 1
        elif t in s or any(t in n for n in folded):
            rank = 2
        else:
            continue
        scored.append((rank, i, item, shown))
    return [(item, shown) for _r, _i, item, shown in sorted(scored, key=lambda e: (e[0], e[1]))][:limit]


async def film_choices(interaction: discord.Interaction[AnimeGamerBot], current: str) -> list[app_commands.Choice[str]]:
    """Films by title in the member's language, matched by any title (/game start, /admin film)."""
    loc = names_locale(interaction)
    entries = [(f.id, f.title_in(loc), (f.id, *f.titles())) for f in FILMS.values()]
    return [app_commands.Choice(name=_fit(shown), value=fid) for fid, shown in ranked(entries, current)]


def character_entries(film: Film, cast: Iterable[Character], loc: object) -> list[tuple[Character, str, tuple[str, ...]]]:
    """(character, its name in `loc`, all its names) for ranked()."""
    return [(c, film.character_name_in(c.id, loc), film.names_of(c.id)) for c in cast]


async def film_and_cast(interaction: discord.Interaction[AnimeGamerBot]) -> tuple[Film | None, list[Character]]:
    """The film played in this channel (its game's, else the configured one) and its playable
    characters, from the bot's cache: autocomplete asks on every keystroke."""
    cache = interaction.client.config
    where = place(interaction)
    cfg = await cache.config(where.guild_id, where.channel_id)
    game = await cache.live_game(where.channel_id)
    film = FILMS.get(game.film_id) if game is not None else cfg.film
    return film, (cfg.cast_for(film) if film else [])


def catalogue_choices(attr: str) -> Callable:
    """Autocomplete for an /act option offered by the film's catalogue (`Film.<attr>`: motions,
    adverbs, backgrounds, times): shown translated, the English term as the value."""

    async def choices(interaction: discord.Interaction[AnimeGamerBot], current: str) -> list[app_commands.Choice[str]]:
        film, _cast = await film_and_cast(interaction)
        if film is None:
            return []
        entries = [(term, vocabulary.shown(attr, term), (term,)) for term in vocabulary.terms_of(film, attr)]
        return [app_commands.Choice(name=_fit(shown), value=term) for term, shown in ranked(entries, current)]

    return choices


async def others_choices(interaction: discord.Interaction[AnimeGamerBot], current: str) -> list[app_commands.Choice[str]]:
    """Autocomplete for /act's `with`: completes the last name of a list. Shown in the member's
    language; the value holds the English names (a name typed that the film does not know is kept
    as typed, for the command to refuse)."""
    film, cast = await film_and_cast(interaction)
    if film is None:
        return []
    loc = names_locale(interaction)
    parts = _SEPARATOR.split(current)
    done, typing = split_names(",".join(parts[:-1])), parts[-1]
    found = [(n, film.character(n)) for n in done]
    chosen = {c.id for _n, c in found if c is not None}
    shown_done = [film.character_name_in(c.id, loc) if c else n for n, c in found]
    value_done = [c.name if c else n for n, c in found]
    out = []
    entries = character_entries(film, [c for c in cast if c.id not in chosen], loc)
    for c, shown in ranked(entries, typing):
        name = ", ".join([*shown_done, shown])
        value = ", ".join([*value_done, c.name])
        if len(value) <= CHOICE_MAX:  # a cut value would name a character that does not exist
            out.append(app_commands.Choice(name=_fit(name), value=value))
    return out


async def join_choices(interaction: discord.Interaction[AnimeGamerBot], current: str) -> list[app_commands.Choice[str]]:
    """/game join's character: the channel's playable cast, saying who already plays whom."""
    film, cast = await film_and_cast(interaction)
    if film is None:
        return []
    game = await interaction.client.config.live_game(context.channel_id(interaction))
    taken = game.players if game else {}
    out = []
    for c, shown in ranked(character_entries(film, cast, names_locale(interaction)), current):
        # TRANSLATORS: an autocomplete choice (at most 100 characters, cut): a character, then the
        # member who plays it.
        label = _("%(character)s (played by %(player)s)", character=shown, player=taken[c.id]) if c.id in taken else shown
        out.append(app_commands.Choice(name=_fit(label), value=c.id))
    return out


async def character_choices(interaction: discord.Interaction[AnimeGamerBot], current: str) -> list[app_commands.Choice[str]]:
    """/admin character: every character of the film configured here."""
    cfg = await interaction.client.config.config(context.guild_id(interaction), context.channel_id(interaction))
    if cfg.film is None:
        return []
    entries = character_entries(cfg.film, cfg.film.characters, names_locale(interaction))
    return [app_commands.Choice(name=_fit(shown), value=c.id) for c, shown in ranked(entries, current)]
