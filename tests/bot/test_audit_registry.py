"""bot.parts.audit's registry: every audited action reads as a sentence from its stored codes and
values, each variant chosen by what the entry holds; an unknown action still reads."""

from __future__ import annotations

import pytest

from bot.parts.audit import ACTIONS, describe, title_of
from db.models import AuditLog

WHO = "<@3> (dave)"
CASES = [
    ("set_film", "qiqi", {"scope": "channel"}, "set the film to Kiki's Delivery Service (Qiqi's Delivery Service) in this channel"),
    ("set_film", "qiqi", {"scope": "server"}, "set the film to Kiki's Delivery Service (Qiqi's Delivery Service)"),
    ("enable_character", "nope", {}, "made nope playable"),
    ("disable_character", "nope", {}, "made nope unplayable"),
    ("set_limits", None, {"cooldown": 30, "backlog": 2, "max_length": 1}, "set the limits (cooldown 30 s, backlog 2, length 1 character)"),
    ("set_limits", None, {}, "set the limits (unchanged)"),
    ("add_admin_role", "77", {"role": "Ops"}, "gave the bot's admin rights to <@&77> (Ops)"),
    ("add_moderator_role", "77", {"role": "Ops"}, "gave the bot's moderator rights to <@&77> (Ops)"),
    ("remove_admin_role", "77", {"role": "Ops"}, "took the bot's admin rights from <@&77> (Ops)"),
    ("remove_moderator_role", "77", {"role": "Ops"}, "took the bot's moderator rights from <@&77> (Ops)"),
    ("pause", "session 5", {"reason": "lunch"}, "paused the game (lunch)"),
    ("pause", "session 5", {}, "paused the game"),
    ("resume", "session 5", {}, "resumed the game"),
    ("reset", "session 5", {"cancelled": 1}, "reset the game (1 waiting turn cancelled)"),
    ("reset", "session 5", {"cancelled": 3}, "reset the game (3 waiting turns cancelled)"),
    ("cancel_turn", "4", {"reason": "spoilers"}, "cancelled turn #4 (spoilers)"),
    ("cancel_turn", "4", {}, "cancelled turn #4"),
    ("regenerate_turn", "4", {}, "regenerated turn #4"),
    ("kick", "99", {"player": "alice"}, "removed <@99> (alice) from the game"),
    ("instruction_refused", "/act", {"rule_set": "this server's filter"}, "had an instruction refused by this server's filter in /act"),
    ("reason_refused", "/mod pause", {"rule_set": "the operator's rules"}, "had a reason refused by the operator's rules in /mod pause"),
    ("name_refused", "/game join", {"rule_set": "this server's AutoMod rule Words"},
     "had a text refused by this server's AutoMod rule Words in /game join"),
    # As stored since revision 0015: the rule set's code, an AutoMod rule's name apart.
    ("instruction_refused", "/act", {"rule_set": "server_filter"}, "had an instruction refused by this server's filter in /act"),
    ("reason_refused", "/mod pause", {"rule_set": "operator"}, "had a reason refused by the operator's rules in /mod pause"),
    ("name_refused", "/game join", {"rule_set": "automod", "rule": "Words"},
     "had a text refused by this server's AutoMod rule Words in /game join"),
    ("name_refused", "/game join", {"rule_set": "automod", "rule": "without a name"},
     "had a text refused by this server's AutoMod rule without a name in /game join"),
    ("filter_add", "dragon", {}, "added dragon to this server's filter"),
    ("filter_remove", "dragon", {}, "removed dragon from this server's filter"),
    ("remove_shot", "4", {"by": "author", "reason": "x"}, "removed turn #4 (their own)"),
    ("remove_shot", "4", {"by": "moderator", "reason": "spoilers"}, "removed turn #4 (spoilers)"),
    ("remove_shot", "4", {"by": "moderator"}, "removed turn #4"),
    ("report_shot", "4", {"author_id": "99", "author": "alice"}, "reported turn #4 by <@99> (alice)"),
    ("log_channel", "55", {}, "set the moderation log to <#55>"),
    ("log_channel", None, {}, "turned the moderation log off"),
    ("vote_mode", "on", {"round_seconds": 60}, "turned vote mode on (60 s rounds)"),
    ("vote_mode", "on", {}, "turned vote mode on"),
    ("vote_mode", "off", {}, "turned vote mode off"),
    ("previews", "on", {}, "turned previews of clips being made on"),
    ("previews", "off", {}, "turned previews of clips being made off"),
    ("set_language", "auto", {"channel": "55"}, "made the public posts in <#55> follow the server's language"),
    ("set_language", "auto", {}, "made the public posts follow Discord's server language"),
    ("set_language", "fr", {"channel": "55"}, "set the language of the public posts in <#55> to French"),
    ("set_language", "fr", {}, "set the language of the public posts to French"),
    ("teleport", "moon", {}, ": teleport (moon)"),
    ("teleport", None, {}, ": teleport"),
]


@pytest.mark.parametrize(("action", "target", "details", "said"), CASES)
def test_each_action_reads_as_its_sentence(action, target, details, said):
    entry = AuditLog(guild_id=1, actor_id=3, actor_name="dave", action=action, target=target, details=details)
    assert describe(entry) == f"{WHO}{'' if said.startswith(':') else ' '}{said}"


def test_every_registered_action_is_tried_and_titled():
    tried = {action for action, *_ in CASES}
    assert set(ACTIONS) <= tried
    assert title_of("remove_shot")[0] == "Shot removed"
    assert title_of("name_refused")[0] == "Instruction refused"
    assert title_of("teleport")[0] == "Action: teleport"
