"""Refusals of what people type: text the sanitiser refused, text a content rule set refused, and
the terms of a server's own filter (game.content_rules). GameErrors (game.errors), shown the same
way."""

from __future__ import annotations

from game.content_rules import rule_set_code, rule_set_label
from game.errors import GameError
from game.sanitize import field_label
from game.texts import Later, catalog_text
from i18n import L_, Lazy
from i18n.translate import Ln_


class TextRefused(GameError):
    """Player text the sanitiser refused (game.sanitize.InputRefused), worded for the player."""

    code = "text_refused"

    def __init__(self, field_name: str, reason: str | Lazy) -> None:
        # TRANSLATORS: %(field)s names what the player typed ("motion", "list of characters"); %(reason)s is
        # why it was refused, worded to follow it ("is too long (31 characters; at most 30)").
        super().__init__(L_("Your %(field)s was refused: %(reason)s. Please change it and try again.",
                            field=Later(field_label, field_name), reason=reason), field=field_name, reason=reason)


class ContentRefused(GameError):
    """Text a content rule set refused: `rule_set` names it ("the operator's rules", "this
    server's filter", "this server's AutoMod rule <name>"); `what` is the text's role."""

    code = "content_refused"

    def __init__(self, what: str, rule_set: str | Lazy, term: str, text: str) -> None:
        self.what, self.rule_set, self.term, self.text = what, rule_set, term, text
        # The rule set as stored (a code, an AutoMod rule's name apart); the term and the text are
        # left out: the refusal does not show which term matched.
        code, rule = rule_set_code(rule_set) if isinstance(rule_set, str) else (str(rule_set), None)
        # TRANSLATORS: %(what)s names what the player typed ("instruction", "reason"); %(rules)s names the
        # rule set that refused it ("the operator's rules", "this server's filter").
        super().__init__(L_("Your %(what)s was refused by %(rules)s. Please rephrase it and try again.",
                            what=Later(field_label, what), rules=rule_set_label(rule_set)),
                         what=what, rule_set=code, rule=rule)


class FilterTermRefused(GameError):
    code = "filter_term_refused"

    def __init__(self, term: str, reason: str | Lazy) -> None:
        # TRANSLATORS: %(term)s is a filter term as typed, quoted; %(reason)s says what is wrong with it,
        # worded to follow it ("is too long (61 characters; at most 60)").
        super().__init__(L_("The term %(term)s %(reason)s.", term=repr(term), reason=catalog_text(reason)),
                         term=term, reason=catalog_text(reason))


class FilterFull(GameError):
    code = "filter_full"
    hint = "filter_remove"

    def __init__(self, cap: int) -> None:
        super().__init__(Ln_("This server's filter already holds %(n)s term, the most it can.",
                             "This server's filter already holds %(n)s terms, the most it can.", cap), n=cap)


class FilterTermExists(GameError):
    code = "filter_term_exists"
    hint = "filter_shows_it"

    def __init__(self, term: str) -> None:
        super().__init__(L_("%(term)s is already in this server's filter.", term=repr(term)), term=term)


class FilterTermUnknown(GameError):
    code = "filter_term_unknown"
    hint = "filter_terms"

    def __init__(self, term: str) -> None:
        super().__init__(L_("%(term)s is not in this server's filter.",
                            term=repr(term)), term=term)
