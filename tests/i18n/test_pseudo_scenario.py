"""The pseudo-locale run (issue #23, item 8): the real bot on the fake Discord, with a preview
worker, plays its main scenarios with every catalog string rendered as ⟦Ţĥîš...·⟧; then every text it
showed anyone is read back from the fake's recorded requests, and any word that did not pass
through the catalogs fails the test, listed with the request and field it appeared in.

The pseudo catalog is built from a fresh template of the code (`animegamer.i18n_cli.template()`,
written to a temporary i18n directory): a string added to the code since the committed .pot was
last extracted is still checked. The shipped i18n/locales is never written.

What is legitimately not catalog text, and is allowed outside ⟦ ⟧ or as a value inside one:
numbers and punctuation, emoji, Discord markup (<t:..>, <#..>, <@..>, </..:..>), URLs, file names;
slash commands as typed (/game start, /history count:5) and `code` written in a catalog message;
the players' own text and the names of the scenario's members, roles, channels and server; film
titles and character names (every locale of game/films.toml); the films' English suggestions (the
terms the model knows; not in an autocomplete's list, which shows them in the member's language);
languages' own names (CLDR autonyms); the model's instruction labels (the English instruction is
shown as the model got it); what the pseudo-locale formats with English CLDR data (relative times,
durations, "and"/"or" in lists).
"""

from __future__ import annotations

import re
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import babel
import discord
import pytest
from discord import app_commands
from sqlalchemy import func, select

from db.models import PrivacyRequest, Turn
from game.catalogue import packaged_films
from i18n import locales
from i18n.pseudo import OPEN, pseudo
from testkit.fake_discord.interactions import DEFERRED_CHANNEL_MESSAGE
from testkit.queue import wait_until
from testkit.waits import wait_for
from tests.bot.helpers import command, edits_idle, modlog_idle, say
from tests.i18n.helpers import current_template, pseudo_catalogs
from tests.i18n.visible import BACKTICKS, Leftover, Shown, leftovers, phrases_pattern, shown_texts

FILMS_TOML = Path(__file__).resolve().parents[2] / "game" / "films.toml"
SCENARIO_SECONDS = 60


@pytest.fixture(scope="module")
def fresh_template():
    return current_template()


@pytest.fixture
def pseudo_catalog_dir(tmp_path: Path, fresh_template) -> Iterator[Path]:
    with pseudo_catalogs(tmp_path, fresh_template) as root:
        yield root


@pytest.fixture
def pseudo_settings(qsettings):
    return qsettings.model_copy(update={"pseudo_locale": True})


# --- what is allowed outside the catalogs


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _strings(v)


def film_names() -> set[str]:
    """Film ids and titles, character ids and names, in every locale the films file gives them."""
    out: set[str] = set()
    with FILMS_TOML.open("rb") as f:
        data = tomllib.load(f)
    for film_id, film in (data.get("films") or {}).items():
        out.add(film_id)
        for key, value in film.items():
            if "title" in key or "name" in key or key in ("characters", "local"):
                out.update(_strings(value))
    for film in packaged_films().values():
        out.add(film.title)
        out.update(c.name for c in film.characters)
        out.update(c.id for c in film.characters)
        for _locale, names in film.local:
            out.update(n for n in (names.title, *(n for _cid, n in names.characters)) if n)
    for title in list(out):  # "Kiki's Delivery Service (Qiqi's Delivery Service)": either part shown
        out.update(part.strip(" )") for part in title.split("(") if part.strip(" )"))
    return out


def film_vocabulary() -> set[str]:
    """The films' English suggestions (motions, adverbs, backgrounds, times): the terms the model
    knows, sent as they are. Allowed where the bot quotes what to type; an autocomplete shows them in
    the member's language, so they are not allowed in its suggestions."""
    out: set[str] = set()
    for film in packaged_films().values():
        out.update(film.motions, film.adverbs, film.backgrounds, film.times)
    return out


def world_names(w) -> set[str]:
    g = w.guild
    out = {g.name, w.server.bot_user.username}
    for m in g.members.values():
        out.update(n for n in (m.user.username, m.user.global_name, m.nick) if n)
    out.update(r.name.lstrip("@") for r in g.roles.values())
    out.update(c.name for c in g.channels.values())
    return out


def language_names() -> set[str]:
    """Languages' own names (日本語, Français, English) as Babel's CLDR data writes them: /admin
    shows a language by its autonym, which is not translated."""
    out: set[str] = set()
    for tag in {*(loc.value for loc in discord.Locale), *locales.shipped()}:
        try:
            lang = babel.Locale.parse(locales.babel_locale(tag).replace("-", "_"))
        except (ValueError, babel.UnknownLocaleError):
            continue
        name = lang.get_display_name(lang) or ""
        out.update({name, name[:1].upper() + name[1:]} if name else set())
    return out


def literal_code(template) -> frozenset[str]:
    """The `code` spans written in the catalog's messages themselves (`/game start`): the
    pseudo-locale keeps them as written. A span filled by a placeholder is checked like any value."""
    out: set[str] = set()
    for m in template:
        for text in (m.id if isinstance(m.id, list | tuple) else [m.id]):
            out.update(c for c in BACKTICKS.findall(text or "") if "%(" not in c)
    return frozenset(out)


def command_syntax(bot) -> re.Pattern[str]:
    """Slash commands as typed: `/game start`, and an option given in one (`count:5`, `motion:walk`;
    a name, a colon and the value with no space, so that a sentence's "Film: ..." is not taken)."""
    from i18n.pseudo import pseudo_name

    # As typed in English and as the pseudo-locale's Discord shows them (/help writes the names
    # the member's client shows: the pseudo command and option names).
    names, options = set(), set()
    for c in bot.tree.walk_commands():
        names.add(f"/{c.qualified_name}")
        names.add("/" + " ".join(pseudo_name(part) for part in c.qualified_name.split()))
        if isinstance(c, app_commands.Command):
            options.update(p.display_name for p in c.parameters)
            options.update(pseudo_name(p.display_name) for p in c.parameters)
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    option_names = "|".join(re.escape(n) for n in sorted(options, key=len, reverse=True))
    return re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)|(?<![\w-])(?:{option_names}):(?=\S)")


# --- the scenario


class Typed:
    """Every option value the scenario typed: the players' own text, allowed wherever it is echoed."""

    def __init__(self) -> None:
        self.values: set[str] = set()

    def __call__(self, options: dict[str, Any]) -> dict[str, Any]:
        for v in options.values():
            if isinstance(v, str):
                self.values.add(v)
                self.values.update(p.strip() for p in v.split(",") if p.strip())
        return options


async def _answer(h, timeout: float = 15.0) -> None:
    """Wait for the answer to a command, whatever it says: direct, or deferred then followed up."""
    if (await h.wait_response(timeout=5)).type == DEFERRED_CHANNEL_MESSAGE:
        await h.wait_followup(timeout=timeout)


async def _followup(h, timeout: float = 15.0) -> None:
    await h.wait_followup(timeout=timeout)


def _custom_ids(w, prefix: str, channel=None) -> list[tuple[Any, str]]:
    return [(m, cid) for m in w.server.channel_messages(channel or w.games) for cid in m.custom_ids if cid.startswith(prefix)]


async def _turns(sessions) -> int:
    async with sessions() as s:
        return (await s.scalar(select(func.count()).select_from(Turn))) or 0


async def _posted(sessions, n: int) -> bool:
    """At least n turns are posted."""
    async with sessions() as s:
        return (await s.scalar(select(func.count()).select_from(Turn).where(Turn.posted_at.is_not(None))) or 0) >= n


async def play_scenario(w, sessions, typed: Typed) -> None:
    # long: the one scenario every command's text goes through, in the order a game plays
    server = w.server

    async def run(member, name: str, options: dict | None = None, channel=None) -> str:
        return await say(w, member, name, typed(options or {}), channel=channel)

    async def suggest(member, name: str, options: dict, focused: str) -> None:
        h = await server.autocomplete(w.guild, w.games, member, name, typed(dict(options)), focused=focused)
        await h.wait_response(timeout=5)

    # Refusals before anything is set up; no permission
    await run(w.alice, "game start")  # no film configured
    await run(w.carol, "admin film", {"film": "qiqi"})  # not an admin
    await run(w.carol, "mod pause")  # not a moderator
    await run(w.alice, "status")  # no game here

    # /admin
    await suggest(w.erin, "admin film", {"film": "ki"}, "film")
    await run(w.erin, "admin film", {"film": "totoro"})  # unknown film
    await run(w.erin, "admin film", {"film": "qiqi"})
    await run(w.erin, "admin log-channel", {"channel": w.games2})
    await run(w.erin, "admin limits", {"backlog": 5, "max_length": 120})
    await run(w.erin, "admin role", {"kind": "moderator", "role": w.mod_role})
    await run(w.erin, "admin language", {"language": "auto"})
    await suggest(w.erin, "admin character", {"character": "u"}, "character")
    await run(w.erin, "admin character", {"character": "tombo", "enabled": False})
    await run(w.erin, "admin character", {"character": "sosuke", "enabled": True})  # not of this film
    await run(w.erin, "admin filter add", {"term": "badword"})
    await _answer((await command(w, w.erin, "admin filter list"))[0])
    await suggest(w.erin, "admin filter remove", {"term": "bad"}, "term")
    await run(w.dave, "admin limits", {"backlog": 1})  # a moderator is no admin
    h, _ = await command(w, w.erin, "admin show")
    await _answer(h)

    # /game
    await run(w.alice, "game start")
    await run(w.bob, "game start")  # already running
    await run(w.alice, "game join", {"character": "qiqi"})
    await suggest(w.bob, "game join", {"character": ""}, "character")
    await run(w.bob, "game join", {"character": "qiqi"})  # taken
    await run(w.bob, "game join", {"character": "totoro"})  # not a character
    await run(w.bob, "game join", {"character": "jiji"})

    # /act: refusals, suggestions, turns
    await run(w.carol, "act", {"motion": "walk", "background": "town"})  # has not joined
    await run(w.alice, "act", {"motion": "<ML><Strength_5></ML>", "background": "sky"})  # special tokens
    await run(w.alice, "act", {"motion": "walk", "background": "\u200b\u202e"})  # nothing left: empty
    # too long: each field within its cap (Discord holds it there), the instruction over the server's 120
    await run(w.alice, "act", {"motion": "x" * 80, "background": "sky", "adverb": "x" * 30})
    await run(w.alice, "act", {"motion": "walk", "background": "sky", "with": "Totoro"})  # unknown character
    await run(w.alice, "act", {"motion": "badword", "background": "sky"})  # the server's filter
    await suggest(w.alice, "act", {"motion": "fly"}, "motion")
    await suggest(w.alice, "act", {"motion": "x", "background": "b"}, "background")
    await suggest(w.alice, "act", {"motion": "x", "adverb": "q"}, "adverb")
    await suggest(w.alice, "act", {"motion": "x", "time": "n"}, "time")
    await suggest(w.alice, "act", {"motion": "x", "with": "Jiji, To"}, "with")
    await run(w.alice, "act", {"motion": "fly on broomstick", "background": "sky", "adverb": "quickly", "time": "night"})
    await run(w.bob, "act", {"motion": "talk", "background": "bakery", "with": "Qiqi"})
    await run(w.bob, "queue")
    await wait_until(lambda: _posted(sessions, 2), 30, 0.1, what="turns #1 and #2 posted")

    # what players read
    for member, name, options in ((w.bob, "status", {}), (w.alice, "history", {"count": 5}), (w.alice, "queue", {}),
                                  (w.alice, "games", {}), (w.carol, "help", {}), (w.alice, "privacy show", {})):
        h, _ = await command(w, member, name, typed(options))
        await _answer(h)

    # Regenerate: refused on a turn that is not the latest, then the latest turn's by its author
    (first, regen), *_, (post, latest) = _custom_ids(w, "ag:regen:")
    await _followup(await server.click(first, w.alice, regen))
    await _followup(await server.click(post, w.bob, latest))
    await server.wait_for_message(w.games, lambda m: any(c.startswith("ag:regen:") for c in m.custom_ids),
                                  after=post, timeout=30)  # the new take

    # a queued turn's Cancel button (or, if the worker was quicker, the answer that it runs already)
    await run(w.alice, "act", {"motion": "run", "background": "street"})
    queued = [(m, cid) for m, cid in _custom_ids(w, "ag:cancel:") if not m.deleted]
    if queued:
        await _followup(await server.click(queued[-1][0], w.alice, queued[-1][1]))
    await run(w.dave, "mod cancel", {"turn": 1})  # posted: not queued

    # /mod: pause (announced, logged), a refusal while paused, resume; a turn that is not there
    await run(w.dave, "mod pause", {"reason": "dinner"})
    await run(w.bob, "act", {"motion": "walk", "background": "town"})  # paused
    await run(w.dave, "mod resume")
    await run(w.dave, "mod cancel", {"turn": 99})
    await run(w.carol, "mod kick", {"player": w.bob})  # no right

    # a vote round: carol proposes, both players vote, the winner becomes a turn and is posted
    await run(w.erin, "vote mode", {"enabled": True, "seconds": 60})
    await run(w.alice, "act", {"motion": "walk", "background": "town"})  # plays by vote
    before = await _turns(sessions)
    await run(w.carol, "vote propose", {"motion": "wave", "background": "town", "with": "Qiqi"})
    await server.wait_until(lambda: _custom_ids(w, "ag:vote:"), timeout=10, what="the round's buttons")
    for member in (w.alice, w.bob):
        (m, vote), *_ = _custom_ids(w, "ag:vote:")
        h = await server.click(m, member, vote)
        await _followup(h)
    await wait_until(lambda: _turns_more(sessions, before), 15, 0.1, what="the round's winning turn")
    await wait_until(lambda: _posted(sessions, 3), 30, 0.1, what="the round's turn posted")
    await run(w.erin, "vote mode", {"enabled": False})

    # the game's clips in one video, then bob leaves
    h, _ = await command(w, w.alice, "export")
    await _answer(h, timeout=30)
    await run(w.bob, "game leave")

    # the message commands on a post: a report (to the log channel), a refusal, a removal
    (post, _), *_ = _custom_ids(w, "ag:regen:")
    await _answer(await server.message_command(post, w.carol, "Report shot"))
    await _answer(await server.message_command(post, w.carol, "Report shot"))  # again at once: wait
    chat = await server.user_message(w.games, w.carol, "nice")
    await _answer(await server.message_command(chat, w.carol, "Report shot"))  # not a shot
    await _answer(await server.message_command(post, w.dave, "Remove shot"))
    await _answer(await server.message_command(post, w.dave, "Report shot"))  # already removed

    # moderators kick and reset; the filter term goes; bob deletes his data (a button only he may use)
    await run(w.dave, "mod kick", {"player": w.alice})
    await run(w.dave, "mod kick", {"player": w.carol})  # not playing
    await run(w.dave, "mod reset")
    await run(w.erin, "admin filter remove", {"term": "badword"})
    h, _ = await command(w, w.bob, "privacy delete")
    ask = await h.wait_original()
    (confirm,) = ask.custom_ids
    await (await server.click(ask, w.carol, confirm)).wait_response()
    await (await server.click(ask, w.bob, confirm)).wait_response()


async def _settled(bot, sessions) -> bool:
    """Bob's deletion carried out, and every status board edit, notice and log entry it and the
    scenario's last actions made has reached the fake Discord."""
    async with sessions() as s:
        pending = await s.scalar(select(func.count()).select_from(PrivacyRequest).where(PrivacyRequest.status == "pending"))
    return pending == 0 and edits_idle(bot) and modlog_idle(bot)


async def _turns_more(sessions, before: int) -> bool:
    return await _turns(sessions) > before


async def test_nothing_user_visible_bypasses_the_catalogs(pseudo_catalog_dir, fresh_template, pseudo_settings, world,
                                                          start_bot, start_worker, sessions):
    w = world
    started = time.monotonic()
    bot = await start_bot(settings=pseudo_settings)
    await start_worker(films=["qiqi"])
    typed = Typed()
    await play_scenario(w, sessions, typed)
    await wait_for(lambda: _settled(bot, sessions), timeout=30, what="the bot settled after the scenario")
    took = time.monotonic() - started

    shown = shown_texts(w.server.requests)
    names = world_names(w) | film_names() | language_names()
    vocabulary = film_vocabulary()
    allowed = phrases_pattern(names | typed.values | vocabulary)
    # an autocomplete suggests the films' terms in the member's language: not allowed there as typed
    allowed_in_choices = phrases_pattern(names | (typed.values - vocabulary))
    commands = command_syntax(bot)
    code = literal_code(fresh_template)
    found: list[Leftover] = []
    for s in shown:
        found += leftovers(s, allowed_in_choices if s.autocomplete else allowed, commands, code)
    assert not found, (
        f"{len(found)} user-visible text(s) did not pass through the catalogs (wrap them in _() / L_() / "
        f"ngettext; see docs/i18n.md):\n  " + "\n  ".join(str(x) for x in found)
    )
    # the run did render in the pseudo-locale, and did read back what it showed
    assert len(shown) >= 100, f"only {len(shown)} texts read back: {shown}"
    assert sum(OPEN in s.text for s in shown) >= len(shown) // 2, "the bot did not speak the pseudo-locale"
    assert took < SCENARIO_SECONDS * 1.5, f"the scenario took {took:.0f} s"


# --- the checker itself


P = pseudo


@pytest.mark.parametrize(("text", "expected", "autocomplete"), [
    (P("This game is paused."), [], False),
    (P("Turn #%(seq)s · %(state)s") % {"seq": 12, "state": P("preview")}, [], False),  # nested: a translated value
    (P("You play %(name)s, %(member)s.") % {"name": "Qiqi", "member": "alice"} + " alice", [], False),  # names
    (P("Use `/game start` now"), [], False),  # kept as written by the pseudo-locale
    (P("This game is paused (%(reason)s).") % {"reason": "idle"}, ["in:(idle)."], False),  # an English value
    ("Turn #1 · " + P("preview"), ["out:Turn"], False),
    (P("Resume with") + " /game start " + P("now"), [], False),
    ("<t:1700000000:R> <#1> <@2> <@&3> </game start:4> https://example.com/a?b=c turn-1.mp4 🎬 42 % —", [], False),
    (P("Slow down: try again in %(time)s") % {"time": "30 seconds"}, [], False),  # English CLDR in the pseudo-locale
    (P("Playable: %(names)s") % {"names": "Qiqi, alice, and Qiqi"}, [], False),
    ("Character: Qiqi; Motion: fly on broomstick; Background: sky.", ["out:sky."], False),
    (P("The title is cut when it is too long and the rest")[:30] + "…", [], False),  # cut: no closing mark
    ("fly on broomstick", [], False),
    ("fly on broomstick", ["out:fly on broomstick"], True),  # an autocomplete suggestion is not typed text
    ("Game start", ["out:Game start"], False),  # a command's name without its slash is a word
    ("キキ", ["out:キキ"], False),
    ("", [], False),
])
def test_the_checker_tells_catalog_text_from_the_rest(text, expected, autocomplete):
    allowed = ("alice", "Qiqi") if autocomplete else ("alice", "Qiqi", "fly on broomstick")
    found = leftovers(Shown("#0 POST /x", "content", text, autocomplete), phrases_pattern(allowed),
                      phrases_pattern({"/game start", "/act"}))
    assert [f"{'in' if x.inside else 'out'}:{' '.join(x.words)}" for x in found] == expected


def test_the_checker_reads_every_visible_field():
    class R:
        def __init__(self, method, route, json):
            self.method, self.route, self.path, self.json = method, route, route, json

    message = {
        "content": "c", "embeds": [{"title": "t", "description": "d", "author": {"name": "a", "icon_url": "u"},
                                    "footer": {"text": "f"}, "fields": [{"name": "fn", "value": "fv"}], "url": "x"}],
        "components": [{"type": 1, "components": [
            {"type": 2, "label": "b", "custom_id": "id"},
            {"type": 3, "placeholder": "p", "options": [{"label": "ol", "description": "od", "value": "v"}]},
        ]}, {"type": 17, "components": [{"type": 10, "content": "td"}]}],
        "allowed_mentions": {"parse": []}, "attachments": [{"id": 0, "filename": "x.mp4", "description": "alt"}],
    }
    requests = [
        R("POST", "/channels/{channel_id}/messages", message),
        R("POST", "/interactions/{interaction_id}/{token}/callback", {"type": 4, "data": {"content": "answer", "flags": 64}}),
        R("POST", "/interactions/{interaction_id}/{token}/callback", {"type": 8, "data": {"choices": [{"name": "choice", "value": "v"}]}}),
        R("POST", "/interactions/{interaction_id}/{token}/callback", {"type": 9, "data": {"title": "modal", "custom_id": "m", "components": [
            {"type": 1, "components": [{"type": 4, "label": "input", "placeholder": "ph", "value": "pre", "custom_id": "i"}]}]}}),
        R("POST", "/interactions/{interaction_id}/{token}/callback", {"type": 5, "data": {"flags": 64}}),
        R("PATCH", "/webhooks/{application_id}/{token}/messages/{message_id}", {"content": "edited"}),
        R("POST", "/webhooks/{application_id}/{token}", {"content": "followup"}),
        R("PUT", "/applications/{application_id}/commands", [{"name": "game"}]),
        R("GET", "/channels/{channel_id}", None),
    ]
    texts = [s.text for s in shown_texts(requests)]
    assert texts == ["c", "t", "d", "a", "f", "fn", "fv", "b", "p", "ol", "od", "td", "alt",
                     "answer", "choice", "modal", "input", "ph", "pre", "edited", "followup"]
    assert [s.autocomplete for s in shown_texts(requests)].count(True) == 1
