"""Rights checks, as decorators for app commands and as plain functions for buttons.

`default_permissions` on a command is only a hint Discord applies (a server can override it), so
the bot checks again here: admin = Manage Server or a configured admin role; moderator = Manage
Messages, a configured moderator role, or admin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import discord
from discord import app_commands

from bot.answers.replies import Refusal, as_game_error
from bot.parts.service_args import place
from game.errors import GuildOnly, MissingRights

if TYPE_CHECKING:
    from bot.client import AnimeGamerBot


def _member_role_ids(interaction: discord.Interaction[AnimeGamerBot]) -> set[int]:
    user = interaction.user
    return {r.id for r in user.roles} if isinstance(user, discord.Member) else set()


async def _configured_roles(interaction: discord.Interaction[AnimeGamerBot]) -> tuple[frozenset[int], frozenset[int]]:
    where = place(interaction)
    cfg = await interaction.client.config.config(where.guild_id, where.channel_id)  # cached
    return cfg.admin_role_ids, cfg.moderator_role_ids


async def is_admin(interaction: discord.Interaction[AnimeGamerBot]) -> bool:
    if interaction.guild_id is None:
        return False
    if interaction.permissions.manage_guild:  # includes Administrator
        return True
    admin_roles, _ = await _configured_roles(interaction)
    return bool(_member_role_ids(interaction) & admin_roles)


async def is_moderator(interaction: discord.Interaction[AnimeGamerBot]) -> bool:
    if interaction.guild_id is None:
        return False
    perms = interaction.permissions
    if perms.manage_messages or perms.manage_guild:
        return True
    admin_roles, mod_roles = await _configured_roles(interaction)
    return bool(_member_role_ids(interaction) & (admin_roles | mod_roles))


async def require(interaction: discord.Interaction[AnimeGamerBot], kind: Literal["admin", "moderator"]) -> bool:
    """True, or a Refusal saying what is missing. A cog whose every command needs the rights
    returns this from its `interaction_check` (one check for the whole cog)."""
    if interaction.guild_id is None:
        raise Refusal(GuildOnly())
    try:
        ok = await (is_admin if kind == "admin" else is_moderator)(interaction)
    except Exception as e:  # the database being down must read as such, not as "no rights"
        err = as_game_error(e)
        if err is None:
            raise
        raise Refusal(err) from e
    if not ok:
        raise Refusal(MissingRights(kind))
    return True



def rights(kind: Literal["admin", "moderator"]):
    """The same rule for one command of a cog whose other commands are open to everyone
    (/vote mode): `@checks.rights("admin")`."""
    return app_commands.check(lambda interaction: require(interaction, kind))
