"""What applies in one channel: its film and playable cast, the bot's roles, the limits, the
content rules and the language of public posts. A value computed from stored settings
(db.guilds.channel_config reads them); its rules (building a turn's instruction, the content
check, the name posts show) need no database, so they are here, one copy for every layer."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from game import vocabulary
from game.catalogue import Film
from game.content_errors import ContentRefused
from game.content_rules import NEUTRAL_NAME, RuleSet, check_all
from game.instruction import Instruction, build_instruction
from settings import Settings


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

    def name_to_show(self, name: str, extra_rules: Sequence[RuleSet] = ()) -> str:
        """A member's display name as posts store and show it: a neutral stand-in when a content
        rule set refuses it (the turn goes ahead; a name is not the member's instruction)."""
        return NEUTRAL_NAME if check_all((name,), (*self.content_rules, *extra_rules)) else name
