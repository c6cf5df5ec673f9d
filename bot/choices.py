"""Autocomplete answers shared by several cogs: films, characters and the /act vocabulary, from the
bot's cached configuration (autocomplete asks on every keystroke)."""

from __future__ import annotations

import discord
from discord import app_commands

from bot import context
from game.catalogue import FILMS, Character, Film, suggest


def split_names(text: str | None) -> list[str]:
    return [p.strip() for p in (text or "").split(",") if p.strip()]


async def film_choices(interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
    """Films by title (/game start, /admin film)."""
    titles = {f.title: f.id for f in FILMS.values()}
    return [app_commands.Choice(name=t[:100], value=titles[t]) for t in suggest(tuple(titles), current)]


async def film_and_cast(interaction: discord.Interaction) -> tuple[Film | None, list[Character]]:
    """The film played in this channel (its game's, else the configured one) and its playable
    characters, from the bot's cache: autocomplete asks on every keystroke."""
    cache = context.bot_of(interaction).config
    guild_id, channel_id = context.place(interaction)
    cfg = await cache.config(guild_id, channel_id)
    game = await cache.live_game(channel_id)
    film = FILMS.get(game.film_id) if game is not None else cfg.film
    return film, (cfg.cast_for(film) if film else [])


def catalogue_choices(attr: str):
    """Autocomplete for an /act option offered by the film's catalogue (`Film.<attr>`)."""

    async def choices(interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
        film, _ = await film_and_cast(interaction)
        if film is None:
            return []
        return [app_commands.Choice(name=o, value=o) for o in suggest(getattr(film, attr), current)]

    return choices


async def others_choices(interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
    """Autocomplete for /act's `with`: completes the last name of a comma-separated list."""
    _, cast = await film_and_cast(interaction)
    done, _, typing = current.rpartition(",")
    chosen = {n.casefold() for n in split_names(done)}
    prefix = ", ".join(split_names(done))
    names = tuple(c.name for c in cast if c.name.casefold() not in chosen)
    out = []
    for n in suggest(names, typing):
        value = f"{prefix}, {n}" if prefix else n
        out.append(app_commands.Choice(name=value[:100], value=value[:100]))
    return out


async def join_choices(interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
    """/game join's character: the channel's playable cast, saying who already plays whom."""
    _, cast = await film_and_cast(interaction)
    game = await context.bot_of(interaction).config.live_game(context.channel_id(interaction))
    taken = game.players if game else {}
    by_name = {c.name: c for c in cast}
    out = []
    for name in suggest(tuple(by_name), current):
        c = by_name[name]
        label = f"{name} (played by {taken[c.id]})" if c.id in taken else name
        out.append(app_commands.Choice(name=label[:100], value=c.id))
    return out


async def character_choices(interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
    """/admin character: every character of the film configured here."""
    cfg = await context.bot_of(interaction).config.config(context.guild_id(interaction), context.channel_id(interaction))
    if cfg.film is None:
        return []
    names = {c.name: c.id for c in cfg.film.characters}
    return [app_commands.Choice(name=n, value=names[n]) for n in suggest(tuple(names), current)]
