"""Refusals are lazy catalog messages: built in one place (a service, in whatever locale is current
there), rendered in the locale current where they are shown, with their placeholders filled and
the plural form chosen by the count.

The catalogs are written for each test into a temporary directory (i18n.locales.LOCALES_DIR
patched): the template from the strings marked in the files below, extracted the way
`animegamer i18n extract` does, a Japanese catalog translating a few of them, a Polish one (three
plural forms) and the pseudo-locale built from the template.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_file
from babel.messages.pofile import write_po

from animegamer.i18n_cli import KEYWORDS, ROOT
from bot.parts.hints import BOT_HINTS
from game import content_errors, errors, session_errors, shot_errors, stored_reasons, turn_errors
from game.sanitize import InputRefused, sanitize_field
from game.states import describe
from game.texts import size_text
from i18n import L_, locales, use_locale
from i18n.pseudo import CLOSE, OPEN
from play.errors import PAGE_HINTS
from tests.i18n.helpers import catalogs_in

SOURCES = ("bot/parts/hints.py", "game/errors.py", "game/session_errors.py", "game/turn_errors.py", "game/content_errors.py",
           "game/stored_reasons.py", "game/texts.py", "game/shot_errors.py", "game/sanitize.py", "game/instruction.py", "game/states.py",
           "db/sessions.py", "service/voting.py", "service/configs.py", "db/bounds.py", "db/removal.py", "db/privacy.py")

JA = {
    "%(character)s is already played by %(player)s. Pick another character.":
        "%(character)sは%(player)sが使っています。別のキャラクターを選んでください。",
    "another player": "別のプレイヤー",
    ("This game already has %(n)s turn waiting. Try again when it has finished.",
     "This game already has %(n)s turns waiting. Try again when one has finished."):
        ("このゲームには待機中のターンが%(n)s件あります。終わってからもう一度どうぞ。",),
    "Slow down: you can act again in %(wait)s.": "少し待ってください。%(wait)s後にまた行動できます。",
    "Unknown film %(film)s. Choose %(films)s.": "映画%(film)sはありません。%(films)sから選んでください。",
    "Your %(field)s was refused: %(reason)s. Please change it and try again.":
        "%(field)sは受け付けられません：%(reason)s。変更してもう一度どうぞ。",
    "is empty; please type something": "空です。何か入力してください",
    "This game is paused (%(reason)s).": "このゲームは一時停止中です（%(reason)s）。",
    "A moderator can resume it with /mod resume.": "モデレーターが /mod resume で再開できます。",
    "idle": "放置",
    "removed": "削除済み",
    "privacy: its author deleted their data": "プライバシー：投稿者がデータを削除しました",
    "The game was paused; this round is void and no turn was played.":
        "ゲームが一時停止されたため、このラウンドは無効となり、ターンは行われませんでした。",
    ("Option %(number)s won with %(n)s vote: it is turn #%(seq)s.",
     "Option %(number)s won with %(n)s votes: it is turn #%(seq)s."):
        ("案%(number)sが%(n)s票で選ばれました。ターン #%(seq)s になります。",),
    "film withdrawn": "映画の提供終了",
    "the game was reset": "ゲームはリセットされました",
    "cancelled by %(name)s": "%(name)sが取り消し",
    "cancelled by %(name)s: %(reason)s": "%(name)sが取り消し：%(reason)s",
    "%(field)s: %(reason)s": "%(field)s：%(reason)s",
    "The latest turn is still %(status)s; wait for it to finish before regenerating it.":
        "最新のターンはまだ%(status)sです。終わるまで待ってから作り直してください。",
}
JA_CONTEXT = {("field", "motion"): "動き", ("turn status", "queued"): "待機中", ("character state", "Stamina"): "体力"}

PL_PLURALS = {
    ("This round already has %(n)s proposal. Vote for it, or wait for the next round.",
     "This round already has %(n)s proposals. Vote for one of them, or wait for the next round."):
        ("PL-ONE %(n)s", "PL-FEW %(n)s", "PL-MANY %(n)s"),
}


def _template() -> Catalog:
    pot = Catalog(project="animegamer-discord", domain=locales.DOMAIN, fuzzy=False)
    for name in SOURCES:
        for lineno, message, _comments, context in extract_from_file(
                "python", ROOT / name, keywords=KEYWORDS, comment_tags=("TRANSLATORS:",), strip_comment_tags=True):
            if message:
                first = message if isinstance(message, str) else message[0]
                pot.add(message, None, [(name, lineno)], context=context,
                        flags=("python-format",) if "%(" in first else ())
    return pot


def _write(root: Path, locale: str, strings: dict, contexts: dict | None = None) -> None:
    po = Catalog(locale=locale, domain=locales.DOMAIN, fuzzy=False)
    for msgid, text in strings.items():
        po.add(msgid, text)
    for (context, msgid), text in (contexts or {}).items():
        po.add(msgid, text, context=context)
    path = root / locale / "LC_MESSAGES" / f"{locales.DOMAIN}.po"
    path.parent.mkdir(parents=True)
    with path.open("wb") as f:
        write_po(f, po)


@pytest.fixture
def catalogs_here(tmp_path: Path) -> Iterator[Catalog]:
    root = tmp_path / "locales"
    root.mkdir()
    pot = _template()
    with (root / f"{locales.DOMAIN}.pot").open("wb") as f:
        write_po(f, pot)
    _write(root, "ja", JA, JA_CONTEXT)
    _write(root, "pl", PL_PLURALS)
    with catalogs_in(root):
        yield pot


def test_the_refusals_are_extracted(catalogs_here: Catalog):
    ids = {m.id if isinstance(m.id, str) else m.id[0] for m in catalogs_here if m.id}
    assert "No game is running in this channel." in ids
    assert "This game already has %(n)s turn waiting. Try again when it has finished." in ids
    assert "Turn #%(seq)s was already removed. Nothing else to do." in ids  # shot_errors
    assert "is empty; please type something" in ids  # sanitize: a reason shown to players
    assert "idle" in ids and "deleted member" in ids  # stored in English, translated where shown
    assert "Nobody proposed an action: no turn this round." in ids
    assert catalogs_here.get("motion", context="field") is not None
    assert catalogs_here.get("queued", context="turn status") is not None


def test_a_refusal_built_in_english_renders_in_the_locale_where_it_is_shown(catalogs_here):
    e = session_errors.CharacterTaken("Kiki", "alice")  # raised by a service: no locale of its own
    assert e.message == "Kiki is already played by alice. Pick another character."
    with use_locale("ja"):
        assert e.message == "Kikiはaliceが使っています。別のキャラクターを選んでください。"
        assert str(e) == e.message
    assert e.message.startswith("Kiki is already")  # and in English again outside
    # A placeholder that is itself a catalog message renders in the locale shown too.
    with use_locale("ja"):
        assert session_errors.CharacterTaken("Kiki", L_("another player")).message.startswith("Kikiは別のプレイヤーが")


def test_placeholders_locale_formatting_and_lists(catalogs_here):
    wait = turn_errors.Cooldown(26.2)
    assert wait.message == "Slow down: you can act again in 27 seconds."
    with use_locale("ja"):
        assert wait.message == "少し待ってください。27 秒後にまた行動できます。"
    assert turn_errors.Cooldown(600).message.endswith("again in 10 minutes.")
    assert errors.ExportCooldown(59.5).message.endswith("export again in 60 seconds.")

    films = errors.UnknownFilm("totoro", ["ponyo", "qiqi"])
    assert films.message == "Unknown film 'totoro'. Choose ponyo or qiqi."
    with use_locale("ja"):
        assert films.message == "映画'totoro'はありません。ponyoまたはqiqiから選んでください。"

    assert "(8.0 MB)" in errors.ExportTooLarge(8 * 1024 * 1024).message
    assert size_text(750 * 1024) == "750 KB"
    unusable = shot_errors.LogChannelUnusable("<#1>", ["Send Messages", "Embed Links"])
    assert unusable.message.startswith("I cannot post in <#1>: I need Send Messages and Embed Links there. Give me those")
    assert "Give me that permission" in shot_errors.LogChannelUnusable("<#1>", ["Embed Links"]).message


def test_plural_forms_are_chosen_by_the_count(catalogs_here):
    assert turn_errors.BacklogFull(1).message == "This game already has 1 turn waiting. Try again when it has finished."
    assert turn_errors.BacklogFull(3).message == "This game already has 3 turns waiting. Try again when one has finished."
    assert content_errors.FilterFull(1000).message.startswith("This server's filter already holds 1,000 terms")
    with use_locale("ja"):  # one form in Japanese
        assert turn_errors.BacklogFull(1).message.startswith("このゲームには待機中のターンが1件")
        assert turn_errors.BacklogFull(3).message.startswith("このゲームには待機中のターンが3件")
    with use_locale("pl"):  # three: 1, 2-4, 5+ (and 22-24 again the second)
        assert [turn_errors.RoundFull(n).message for n in (1, 2, 5, 22)] == ["PL-ONE 1", "PL-FEW 2", "PL-MANY 5", "PL-FEW 22"]
    with use_locale(locales.PSEUDO):
        one, many = turn_errors.BacklogFull(1).message, turn_errors.BacklogFull(3).message
    assert one.startswith(OPEN) and many.startswith(OPEN) and "ţûŕñ ŵàîţîñĝ" in one and "ţûŕñš ŵàîţîñĝ" in many


def test_player_text_refusals_translate_field_reason_and_status(catalogs_here):
    with pytest.raises(InputRefused) as refused:
        sanitize_field("   ", "motion", 80)
    e = refused.value
    assert (e.field_name, e.reason, str(e)) == ("motion", "is empty; please type something", "motion: is empty; please type something")
    shown = content_errors.TextRefused(e.field_name, e.lazy_reason)
    assert shown.message == "Your motion was refused: is empty; please type something. Please change it and try again."
    with use_locale("ja"):
        assert str(e) == "動き：空です。何か入力してください"
        assert shown.message == "動きは受け付けられません：空です。何か入力してください。変更してもう一度どうぞ。"
        assert turn_errors.TurnNotFinished("queued").message.startswith("最新のターンはまだ待機中です")
        assert describe("stamina", 60, 70) == "体力 ███████░░░ 70 (+10)"
    with pytest.raises(InputRefused) as long:
        sanitize_field("x" * 1234, "time_of_day", 30)
    assert str(long.value) == "time of day: is too long (1,234 characters; at most 30)"
    assert sanitize_field("a\u200bb<TURN>", "motion", 80).notes == (
        "removed 1 invisible or control character", "removed 1 reserved model token")


def test_stored_codes_are_rendered_where_shown_and_peoples_words_are_not(catalogs_here):
    """A pause or cancel is stored as a code with a moderator's words and name apart
    (game.stored_reasons): each reader sees the code in their language, the words as typed."""
    idle = session_errors.SessionPaused(stored_reasons.IDLE)
    typed = session_errors.SessionPaused(stored_reasons.MODERATOR_WORDS, "too loud tonight")
    assert idle.params == {"reason": "idle"} and typed.params == {"reason": "moderator_words", "note": "too loud tonight"}
    assert idle.message == "This game is paused (idle)." and typed.message == "This game is paused (too loud tonight)."
    assert session_errors.SessionPaused().message == "This game is paused."
    reset = stored_reasons.cancel_reason(stored_reasons.RESET)
    by_mod = stored_reasons.cancel_reason(stored_reasons.CANCELLED_BY_MODERATOR, "dave", "spoilers")
    unnamed = stored_reasons.cancel_reason(stored_reasons.CANCELLED_BY_MODERATOR)
    own = stored_reasons.cancel_reason(stored_reasons.CANCELLED_BY_AUTHOR, "alice")
    assert [str(r) for r in (reset, by_mod, unnamed, own)] == [
        "the game was reset", "cancelled by dave: spoilers", "cancelled by a moderator", "cancelled by alice"]
    with use_locale("ja"):
        assert [str(r) for r in (reset, by_mod, own)] == ["ゲームはリセットされました", "daveが取り消し：spoilers", "aliceが取り消し"]
        assert stored_reasons.pause_text(stored_reasons.FILM_WITHDRAWN) == "映画の提供終了"
        assert idle.message == "このゲームは一時停止中です（放置）。"
        # the bot's hint after it, joined as Japanese joins sentences (no space after 。)
        assert idle.shown(BOT_HINTS) == "このゲームは一時停止中です（放置）。モデレーターが /mod resume で再開できます。"
        assert "（too loud tonight）" in typed.message
    with use_locale(locales.PSEUDO):
        assert "too loud tonight" in typed.message and typed.message.startswith(OPEN)


def test_vote_outcomes_are_stored_as_codes_and_shown_per_locale(catalogs_here):
    """A round keeps how it ended as a code (game.stored_reasons); a winner's line is worded from
    the round, in the reader's language."""
    from service import voting as votes

    def view(status, outcome, votes_, winner=None, turn_seq=None):
        options = [votes.Option(n, SimpleNamespace(), v) for n, v in enumerate(votes_, 1)]  # type: ignore[arg-type]
        rnd = SimpleNamespace(status=status, outcome=outcome)
        return votes.RoundView(round=rnd, options=options, voters=0, players=0, players_voted=0,  # type: ignore[arg-type]
                               winner=None if winner is None else options[winner - 1], turn_seq=turn_seq)

    won = view("closed", stored_reasons.ROUND_WON, [1, 1], 1, 7)
    assert won.outcome_text() == "Option 1 won with 1 vote, the earliest of 2 tied options: it is turn #7."
    alone = view("closed", stored_reasons.ROUND_WON, [3, 1], 1, 2)
    assert alone.outcome_text() == "Option 1 won with 3 votes: it is turn #2."
    void = view("void", stored_reasons.VOIDED_PAUSE, [])
    assert void.outcome_text() == "The game was paused; this round is void and no turn was played."
    assert view("void", stored_reasons.VOIDED_END, []).outcome_text() == \
        "The game was reset or ended; this round is void and no turn was played."
    assert view("void", stored_reasons.VOIDED_MODE, []).outcome_text() == \
        "Voting was turned off in this channel; this round is void."
    assert view("closed", stored_reasons.NO_PROPOSALS, []).outcome_text() == "Nobody proposed an action: no turn this round."
    with use_locale("ja"):
        assert void.outcome_text() == "ゲームが一時停止されたため、このラウンドは無効となり、ターンは行われませんでした。"
        assert alone.outcome_text() == "案1が3票で選ばれました。ターン #2 になります。"
    with use_locale(locales.PSEUDO):
        assert void.outcome_text().startswith(OPEN) and won.outcome_text().startswith(OPEN)
    assert view("open", None, []).outcome_text() == ""


def test_removal_reasons_are_codes_and_a_removers_words_stay_as_typed(catalogs_here):
    privacy = stored_reasons.removal_reason(stored_reasons.PRIVACY_DELETED)
    plain = stored_reasons.removal_reason(stored_reasons.REMOVED)
    typed = stored_reasons.removal_reason(stored_reasons.REMOVER_WORDS, "spoilers **here**")
    assert [str(r) for r in (privacy, plain, typed)] == [
        "privacy: its author deleted their data", "removed", "spoilers **here**"]
    with use_locale("ja"):
        assert [str(r) for r in (privacy, plain, typed)] == [
            "プライバシー：投稿者がデータを削除しました", "削除済み", "spoilers **here**"]
    assert stored_reasons.removal_reason(None) is None


def _samples() -> list[errors.GameError]:
    """One of each refusal, with player-typed values in it."""
    return [
        session_errors.NoSession(), session_errors.SessionExists(), session_errors.SessionPaused(), session_errors.SessionPaused("moderator_words", "PLAYER_REASON"),
        errors.NoFilm(), errors.UnknownFilm("PLAYER_FILM", ["ponyo"]), errors.UnknownFilm("PLAYER_FILM", []),
        errors.FilmWithdrawn("ponyo"), session_errors.UnknownCharacter("PLAYER_NAME", ["Kiki"]),
        session_errors.UnknownCharacter("PLAYER_NAME", []), session_errors.CharacterTaken("Kiki", "PLAYER_NAME"),
        session_errors.AlreadyJoined("Kiki"), session_errors.NotJoined(), turn_errors.BacklogFull(2), turn_errors.Cooldown(3), turn_errors.TurnNotFound(4),
        turn_errors.ServerQuota(30, 600), turn_errors.MemberQuota(1, 59),
        turn_errors.TurnNotCancellable("running"), turn_errors.TurnNotFinished("queued"),
        errors.ServiceDown(), errors.ServiceDown("the generation queue"), errors.GuildOnly(), errors.FilmFixed("Ponyo"),
        errors.MissingRights("admin"), errors.MissingRights("moderator"), turn_errors.NotTurnAuthor("PLAYER_NAME", "cancel"),
        turn_errors.NotTurnAuthor("PLAYER_NAME", "regenerate"), turn_errors.NoTurnToRegenerate(), turn_errors.NotLatestTurn(1, 2),
        content_errors.TextRefused("characters", "PLAYER_REASON"), errors.NothingToExport(), errors.ExportTooLarge(10_000),
        errors.ExportCooldown(5), session_errors.PlayerNotInGame("PLAYER_NAME"), session_errors.GameEnded(),
        errors.InternalError("abcd1234"), errors.OutOfRange("server id"), errors.OutOfRange("turn number"),
        session_errors.UnknownGame(3, 2), session_errors.UnknownGame(1, 0), turn_errors.VoteModeOn(), turn_errors.VoteModeOff(), turn_errors.NoOpenRound(),
        turn_errors.AlreadyProposed(1), turn_errors.RoundFull(20), turn_errors.UnknownProposal(),
        content_errors.ContentRefused("instruction", "the operator's rules", "x", "x"), content_errors.FilterTermRefused("PLAYER_TERM", "is bad"),
        content_errors.FilterFull(1000), content_errors.FilterTermExists("PLAYER_TERM"), content_errors.FilterTermUnknown("PLAYER_TERM"),
        shot_errors.NotAShot(), shot_errors.ShotNotFinished(1, "running"), shot_errors.ShotAlreadyRemoved(1),
        shot_errors.NotShotAuthor("PLAYER_NAME"), shot_errors.NoLogChannel(),
        shot_errors.LogChannelUnusable("<#1>", ["Embed Links"]), shot_errors.ReportCooldown(9),
    ]


def _refusal_classes(base: type = errors.GameError) -> set[type]:
    """Every refusal class of the game package (the bot's and the page's own are not refusals of
    the game's rules)."""
    found: set[type] = set()
    for c in base.__subclasses__():
        found |= ({c} if c.__module__.startswith("game.") else set()) | _refusal_classes(c)
    return found


def test_every_refusal_has_a_code_and_json_safe_params():
    """A refusal carries its code and its values apart from the message (the play page's error
    JSON, anything that stores a refusal): text, numbers and lists of text only."""
    samples = _samples()
    assert _refusal_classes() <= {type(e) for e in samples}, "a refusal class without a sample here"
    for e in samples:
        assert re.fullmatch(r"[a-z_]+", e.code) and e.code != errors.GameError.code, type(e).__name__
        params = e.params
        assert json.loads(json.dumps(params)) == params, (type(e).__name__, params)
        for value in params.values():
            assert isinstance(value, str | int | float) or (
                isinstance(value, list) and all(isinstance(v, str) for v in value)), (type(e).__name__, value)
    # The values as given, not as the message quotes or words them.
    assert errors.UnknownFilm("PLAYER_FILM", ["ponyo", "qiqi"]).params == {"film": "PLAYER_FILM", "films": ["ponyo", "qiqi"]}
    assert turn_errors.Cooldown(2.5).params == {"seconds_left": 2.5}
    assert turn_errors.TurnNotCancellable("running").params == {"status": "running"}
    assert session_errors.CharacterTaken("Kiki", L_("another player")).params == {"character": "Kiki", "player": "another player"}


def test_every_refusal_passes_through_the_catalogs(catalogs_here):
    """In the pseudo-locale every refusal is one catalog message (⟦...⟧ around all of it), the
    values typed by people kept as typed inside it."""
    for e in _samples():
        with use_locale(locales.PSEUDO):
            shown = e.message
        assert shown.startswith(OPEN) and shown.endswith(CLOSE), (type(e).__name__, shown)
        for typed in ("PLAYER_REASON", "PLAYER_FILM", "PLAYER_NAME", "PLAYER_TERM"):
            assert (typed in shown) == (typed in e.message), (type(e).__name__, shown)
        assert e.message.isascii(), e.message  # English outside, as built


def test_no_refusal_names_a_face_and_each_face_says_what_to_do_next():
    """The refusals name neither the bot's commands nor the page's buttons; the bot's hints name
    its commands, the page's its panels, and every hint a refusal asks for has the bot's words."""
    for e in _samples():
        assert "/" not in e.message, (type(e).__name__, e.message)
        if e.hint is not None:
            assert e.hint in BOT_HINTS, (type(e).__name__, e.hint)
            assert "/" in e.shown(BOT_HINTS) and e.shown(BOT_HINTS).startswith(e.message + " ")
            assert "/" not in e.shown(PAGE_HINTS)
    assert session_errors.NoSession().shown(BOT_HINTS) == "No game is running in this channel. Start one with /game start."
    assert session_errors.NoSession().shown(PAGE_HINTS) == "No game is running in this channel. Start one under Setup."
    assert session_errors.UnknownCharacter("x", ["Kiki"]).shown(BOT_HINTS) == "'x' is not a playable character here. Choose Kiki."
