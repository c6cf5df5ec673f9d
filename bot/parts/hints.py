"""What the bot tells a member to do next after a refusal, by the refusal's hint key
(game.errors.GameError.hint): its own slash commands. The play page names its buttons instead
(play.errors.PAGE_HINTS)."""

from __future__ import annotations

from i18n import L_

BOT_HINTS = {
    "start_game": L_("Start one with /game start."),
    "join_game": L_("Join it with /game join."),
    "resume": L_("A moderator can resume it with /mod resume."),
    "choose_film": L_("An admin can choose one with /admin film."),
    "enable_character": L_("An admin can enable one with /admin character."),
    "leave_first": L_("Use /game leave first to switch."),
    "pick_character": L_("Pick a character with /game join."),
    "film_option": L_("Leave out the film option, or ask an admin to change it with /admin film."),
    "act_first": L_("Play a turn with /act first."),
    "who_plays": L_("/status shows who plays whom."),
    "play_on": L_("Play on with /act."),
    "list_games": L_("/games lists them."),
    "propose_next": L_("Propose an action with /vote propose to open the next one."),
    "propose_by_vote": L_("Propose an action with /vote propose and vote on the round's message."),
    "act_directly": L_("Act with /act. An admin can turn voting on with /vote mode."),
    "filter_remove": L_("Remove one with /admin filter remove first."),
    "filter_shows_it": L_("/admin filter list shows it."),
    "filter_terms": L_("/admin filter list shows the terms."),
    "cancel_or_wait": L_("Cancel it with /mod cancel, or wait for its post."),
    "set_log_channel": L_("Tell a moderator directly; an admin can set one with /admin log-channel."),
}
