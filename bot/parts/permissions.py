"""What the bot asks Discord for: the one list of permissions, scopes and gateway intents.

The invite URL (`animegamer invite-url`), the README's table and the tests all read this module,
so the three cannot drift apart. Each entry says why the bot needs it; anything not listed is
deliberately not requested (least privilege: a guild admin can see exactly what is granted).
"""

from __future__ import annotations

from dataclasses import dataclass

import discord


@dataclass(frozen=True)
class Needed:
    flag: str  # attribute name on discord.Permissions
    label: str  # as Discord's invite screen shows it
    why: str


PERMISSIONS: tuple[Needed, ...] = (
    Needed("view_channel", "View Channels",
           "see the channels where games run; without it the bot cannot post there"),
    Needed("send_messages", "Send Messages",
           "send each turn's message with channel.send and edit it into the post (interaction tokens expire after 15 minutes)"),
    Needed("send_messages_in_threads", "Send Messages in Threads",
           "games may run in threads; posting there needs this instead of Send Messages"),
    Needed("embed_links", "Embed Links",
           "the character-state embed of each turn; without it Discord drops the embed"),
    Needed("attach_files", "Attach Files",
           "upload the turn's MP4 clip"),
    Needed("read_message_history", "Read Message History",
           "look through its recent messages for a turn's message whose recording a crash lost, so a turn is never posted twice"),
)

# Not requested, on purpose: Use External Emojis (the state bars are Unicode), Manage Messages
# (moderation acts on game sessions, not on messages), Add Reactions, Manage Threads, Mention
# Everyone, and Administrator.

SCOPES: tuple[str, ...] = ("bot", "applications.commands")
SCOPE_REASONS = {
    "bot": "adds the bot user to the guild so it can post clips in channels",
    "applications.commands": "registers the slash commands (/act, /film, moderation commands)",
}


def bot_permissions() -> discord.Permissions:
    return discord.Permissions(**{p.flag: True for p in PERMISSIONS})


def bot_intents() -> discord.Intents:
    """Default intents: none privileged. Roles for admin/moderator checks come with each
    interaction's member payload, and commands are slash commands, so neither the Members nor
    the Message Content intent is needed. `auto_moderation_configuration` (not privileged) brings
    the AUTO_MODERATION_RULE_* events that keep bot.parts.automod's copy of a server's rules current."""
    intents = discord.Intents.default()
    assert not (intents.members or intents.presences or intents.message_content)
    assert intents.auto_moderation_configuration
    return intents
