"""Issue #23's "Done when", with the shipped Japanese catalog (i18n/locales/ja, not a test catalog):
a member whose Discord client is in Japanese sees /act and its options, every answer and button in
Japanese, while the server's turn posts follow the server's language.

The real bot runs on the fake Discord with a preview worker (the fixtures of tests/bot). In an
English server (guild locale en-US) alice's client is Japanese (`locale="ja"` on each of her
interactions): the synced /act is Japanese for her, her answers, autocomplete choices and button
labels are Japanese (checked for kana/kanji, against the Japanese catalog's msgstr and for the
absence of every English msgid of the catalog), the one-time note on the English-trained model is
said once; the turns' public posts stay English. After `/admin language language:ja` the posts are
Japanese; in a server whose Discord language is Japanese they are Japanese without it. A German
member gets German, an Italian one (no catalog) English.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from typing import Any

from babel.messages.catalog import Catalog

from bot.answers.notices import english_note_text
from game.catalogue import packaged_films
from game.states import STATE_NAMES, state_label
from i18n import _, catalogs, pgettext, use_locale
from testkit.fake_discord import interactions as it
from tests.i18n.visible import Shown, shown_texts

SCENARIO_SECONDS = 60
JAPANESE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]")  # kana and kanji
PLACEHOLDER = re.compile(r"%\(\w+\)s")
LATIN_WORD = re.compile(r"[A-Za-z]+")
STATUS_ROUTES = ("/channels/{channel_id}/messages", "/channels/{channel_id}/messages/{message_id}")

# The texts alice types by hand (not suggestions): they reach the post as typed.
FREE_MOTION, FREE_MOTION_2 = "空を飛ぶ", "屋根の上で踊る"

# The English public texts, and the labels that must not show once the posts are in Japanese
ENGLISH_POST = re.compile(r"\b(?:Turn|Author|Motion scope|Stamina|Social|Entertainment|queued|Queue position|"
                          r"Cancel|Regenerate|Preview clip|started a game|plays)\b")


# --- the catalogs, as shipped


_CATALOGS: dict[str, Catalog] = {}


def catalog(locale: str) -> Catalog:
    if locale not in _CATALOGS:
        _CATALOGS[locale] = catalogs.read(locale)
    return _CATALOGS[locale]


def fragments(text: str) -> list[str]:
    """A message's literal parts between its placeholders (`%%` as shown)."""
    return [p.replace("%%", "%").strip() for p in PLACEHOLDER.split(text) if p.strip()]


def english_sentences() -> list[str]:
    """Every English source text of the catalog long enough to be a phrase (two words or more, 8
    letters or more): none of them may appear in what a Japanese member reads."""
    out: set[str] = set()
    for m in catalog("ja"):
        if not m.id:
            continue
        for msgid in (m.id if isinstance(m.id, list | tuple) else [m.id]):
            for part in fragments(msgid):
                if len(LATIN_WORD.findall(part)) >= 2 and sum(map(len, LATIN_WORD.findall(part))) >= 8:
                    out.add(part)
    return sorted(out, key=len, reverse=True)


def translation(locale: str, msgid: str, context: str | None = None) -> str:
    """The catalog's msgstr of `msgid` (a plural's first form); fails when it is missing or English."""
    m = catalog(locale).get(msgid, context=context)
    assert m is not None and m.string, f"{msgid!r} is not in the {locale} catalog"
    msgstr = m.string if isinstance(m.string, str) else str(m.string[0])
    assert msgstr and msgstr != msgid, f"{msgid!r} is left in English in the {locale} catalog"
    return msgstr


def assert_translated(locale: str, text: str, msgid: str, context: str | None = None) -> None:
    """`text` is the catalog's translation of `msgid` (every literal part of the msgstr is in it,
    none of the English msgid's wordy parts), and the catalog does translate it."""
    msgstr = translation(locale, msgid, context)
    missing = [p for p in fragments(msgstr) if p not in text]
    assert not missing, f"{text!r} is not the {locale} text {msgstr!r} of {msgid!r} (missing {missing})"
    english = [p for p in fragments(msgid) if len(LATIN_WORD.findall(p)) >= 2 and p not in msgstr and p in text]
    assert not english, f"{text!r} holds the English {english} of {msgid!r}"


def in_japanese(texts: Iterable[Shown], english: list[str]) -> list[str]:
    """The texts a Japanese member was shown that are not Japanese: no kana/kanji, or an English
    source text in them (each with the request and field it came from)."""
    bad = []
    for s in texts:
        found = [e for e in english if e in s.text]
        if not JAPANESE.search(s.text) or found:
            bad.append(f"{s.request} {s.field}: {s.text!r}" + (f" (English: {found[:3]})" if found else ""))
    return bad


# --- driving the fake Discord from a client in a given language


class Client:
    """Interactions from members whose Discord is in a given language; remembers every token, so
    that all the bot answered on them (callbacks, follow-ups, edits) can be read back."""

    def __init__(self, w) -> None:
        self.w = w
        self.tokens: dict[int, set[str]] = {}  # member id -> interaction tokens

    def _keep(self, member, h) -> Any:
        self.tokens.setdefault(member.id, set()).add(h.token)
        return h

    async def slash(self, member, name: str, options: dict | None = None, *, locale: str, guild=None, channel=None):
        w = self.w
        h = await w.server.slash(guild or w.guild, channel or w.games, member, name, options or {}, locale=locale)
        return self._keep(member, h)

    async def say(self, member, name: str, options: dict | None = None, *, locale: str, guild=None, channel=None) -> str:
        """A command's ephemeral answer (direct, or deferred then followed up)."""
        h = await self.slash(member, name, options, locale=locale, guild=guild, channel=channel)
        first = await h.wait_response(timeout=5)
        if first.type == it.CHANNEL_MESSAGE:
            assert first.ephemeral, f"{name}: {first.data}"
            return first.content or ""
        assert first.type == it.DEFERRED_CHANNEL_MESSAGE, first
        m = await h.wait_followup(timeout=15)
        assert m.ephemeral, f"{name}: answers to a single member are ephemeral"
        return m.content or ""

    async def embed(self, member, name: str, *, locale: str) -> dict:
        h = await self.slash(member, name, locale=locale)
        await h.wait_response(timeout=5)
        m = await h.wait_followup(timeout=15)
        assert m.ephemeral and m.embeds, m
        return m.embeds[0]

    async def choices(self, member, name: str, options: dict, focused: str, *, locale: str) -> list[dict]:
        w = self.w
        data = w.server._command_data(w.guild, name, dict(options), focused=focused, require_synced=True)
        h = await w.server._push_interaction(it.AUTOCOMPLETE, w.guild, w.games, member, data, locale=locale)
        self._keep(member, h)
        return (await h.wait_response(timeout=5)).choices

    async def click(self, message, member, custom_id: str, *, locale: str):
        w = self.w
        data = {"custom_id": custom_id, "component_type": 2}
        h = await w.server._push_interaction(it.MESSAGE_COMPONENT, w.guild, w.games, member, data, message=message,
                                             locale=locale)
        return self._keep(member, h)

    def seen_by(self, member) -> list[Shown]:
        """Every text the bot answered this member on their interactions."""
        mine = self.tokens.get(member.id, set())
        return shown_texts(r for r in self.w.server.requests if r.params.get("token") in mine)


def labels(components: list[dict]) -> list[str]:
    return [c["label"] for row in components for c in row.get("components", [row]) if c.get("label")]


def regen_posts(server, channel) -> list:
    return [m for m in server.channel_messages(channel) if any(c.startswith("ag:regen:") for c in m.custom_ids)]


def turn_posts(server, channel) -> list:
    """The channel's turn posts: each carries its clip, and a Regenerate button unless it is a
    take that was generated again (its button is removed then)."""
    return [m for m in server.channel_messages(channel)
            if any(c.startswith("ag:regen:") for c in m.custom_ids)
            or any(f.endswith(".mp4") for e in m.edits for f in e["files"])]


async def posts(server, channel, n: int) -> list:
    """The channel's turn posts once there are n of them."""
    def enough() -> list | None:
        found = turn_posts(server, channel)
        return found if len(found) >= n else None

    return await server.wait_until(enough, 30, f"{n} turn posts in #{channel.name}")


def status_bodies(server, channel) -> list[dict]:
    """Every queued status message the bot sent to the channel (a POST with a Cancel button)."""
    return [r.json for r in server.requests_to("POST", "/channels/{channel_id}/messages")
            if r.params.get("channel_id") == str(channel.id) and "ag:cancel:" in str((r.json or {}).get("components"))]


def data(text: str, names: Iterable[str]) -> bool:
    """A value a post shows as it is, in any language: the model's English instruction (as the
    model received it), a member's name, a number."""
    return text.startswith("Character: ") or text in names or text.replace(".", "").isdigit()


def public_texts(server, channel, since: int = 0) -> list[Shown]:
    """What the bot posted or edited in the channel (its public messages), from request `since` on."""
    return shown_texts(r for r in server.requests[since:]
                       if r.route in STATUS_ROUTES and r.params.get("channel_id") == str(channel.id))


# --- the scenario


async def test_a_japanese_member_in_an_english_server(world, start_bot, start_worker):
    # long: one member's story across two servers' languages, each step on the last's state
    w, server = world, world.server
    started = time.monotonic()
    assert w.guild.locale == "en-US"
    # A second server whose Discord language is Japanese (Server Primary Language), no /admin language
    jp_guild = server.create_guild("日本のサーバー", locale="ja")
    jp_games, taro = jp_guild.create_text_channel("ゲーム"), jp_guild.create_member("taro")
    await start_bot()
    await start_worker(films=["qiqi"])
    client = Client(w)
    english = english_sentences()
    assert len(english) > 300, "the catalog's English sentences were not read"
    qiqi = packaged_films()["qiqi"]

    # 1. The synced payload: /act and each of its options named and described in Japanese.
    (put,) = [r for r in server.requests if r.method == "PUT" and r.route == "/applications/{application_id}/commands"]
    act = next(c for c in put.json if c["name"] == "act")
    assert act == {k: v for k, v in server.command("act").items() if k in act}  # what the fake stored
    for node, name_context, description_context in (
        (act, "command name", "command description"),
        *((option, "option name", "option description") for option in act["options"]),
    ):
        name, description = node["name_localizations"]["ja"], node["description_localizations"]["ja"]
        assert JAPANESE.search(name) and JAPANESE.search(description), node
        with use_locale("ja"):
            assert name == pgettext(name_context, node["name"]) != node["name"]
            assert description == pgettext(description_context, node["description"]) != node["description"]
    assert [o["name"] for o in act["options"]] == ["motion", "background", "adverb", "time", "with"]

    # 2. alice's client is Japanese, the server English.
    await client.say(w.erin, "admin film", {"film": "qiqi"}, locale="en-US")
    said = await client.say(w.alice, "game start", locale="ja")
    assert_translated("ja", said, "The game of %(film)s has started.")
    assert "魔女の宅急便" in said

    cast = await client.choices(w.alice, "game join", {"character": "キ"}, "character", locale="ja")
    assert {"name": "キキ", "value": "qiqi"} in cast and all(JAPANESE.search(c["name"]) for c in cast), cast
    said = await client.say(w.alice, "game join", {"character": "キキ"}, locale="ja")  # by its Japanese name
    assert_translated("ja", said, "You play %(character)s. Make a move with /act.")
    assert "キキ" in said and f"/{act['name_localizations']['ja']} " in said  # /act as her Discord shows it

    # /act with suggestions chosen from autocomplete: Japanese names, English values
    motions = await client.choices(w.alice, "act", {"motion": ""}, "motion", locale="ja")
    backgrounds = await client.choices(w.alice, "act", {"motion": "x", "background": ""}, "background", locale="ja")
    for choice in (*motions, *backgrounds):
        assert JAPANESE.search(choice["name"]) and not JAPANESE.search(choice["value"]), choice
    fly = next(c for c in motions if c["name"] == "ほうきで飛ぶ")
    sky = next(c for c in backgrounds if c["name"] == "空")
    assert (fly["value"], sky["value"]) == ("fly on broomstick", "sky")
    assert fly["value"] in qiqi.motions and sky["value"] in qiqi.backgrounds
    said = await client.say(w.alice, "act", {"motion": fly["value"], "background": sky["value"]}, locale="ja")
    assert_translated("ja", said, "Turn #%(seq)s is queued (%(position)s).")
    with use_locale("ja"):
        note = english_note_text()  # the one-time note on the English-trained model, in Japanese
    assert JAPANESE.search(note) and note == translation("ja", english_note_text())  # english_note_text(): English here
    assert note not in said  # suggestions only: no note

    # refusals: special tokens, then nothing left once invisible characters are removed
    said = await client.say(w.alice, "act", {"motion": "<ML><Strength_5></ML>", "background": "sky"}, locale="ja")
    assert_translated("ja", said, "Your %(field)s was refused: %(reason)s. Please change it and try again.")
    said = await client.say(w.alice, "act", {"motion": "walk", "background": "\u200b\u202e"}, locale="ja")
    assert_translated("ja", said, "Your %(field)s was refused: %(reason)s. Please change it and try again.")

    # free Japanese text: queued, the note said once (not again on the next free text)
    said = await client.say(w.alice, "act", {"motion": FREE_MOTION, "background": "町"}, locale="ja")
    assert_translated("ja", said, "Turn #%(seq)s is queued (%(position)s).")
    assert said.count(note) == 1, said
    said = await client.say(w.alice, "act", {"motion": FREE_MOTION_2, "background": "町"}, locale="ja")
    assert_translated("ja", said, "Turn #%(seq)s is queued (%(position)s).")
    assert note not in said

    # 3. the turns' public posts (and their status messages) are English: the server's language
    three = await posts(server, w.games, 3)
    for post in three:
        e = post.embeds[0]
        assert re.fullmatch(r"Turn #\d · preview", e["title"]) and e["fields"][0]["name"] == "Author", e
        assert [line.split(" ")[0] for line in e["fields"][-1]["value"].split("\n")] == \
            ["Stamina", "Social", "Entertainment"] and e["fields"][-1]["name"] == "Qiqi"
        assert labels(post.components) == ["Regenerate"]
    queued = status_bodies(server, w.games)
    assert len(queued) == 3 and all(re.fullmatch(r"Turn #\d · queued", b["embeds"][0]["title"]) and
                                    labels(b["components"]) == ["Cancel"] for b in queued), queued
    announced = [m.content for m in server.channel_messages(w.games) if m.content]
    assert announced == ["alice started a game of Kiki's Delivery Service (Qiqi's Delivery Service). "
                         "Pick a character with /game join.", "alice plays Qiqi."]

    # /status, the Regenerate button's answer, /privacy delete's confirmation and its button
    status = await client.embed(w.alice, "status", locale="ja")
    assert status["title"] == "魔女の宅急便" and status["fields"][0]["name"].startswith("キキ")
    with use_locale("ja"):
        ja_states = [state_label(n) for n in STATE_NAMES]
    assert all(JAPANESE.search(label) for label in ja_states)
    assert [line.split(" ")[0] for line in status["fields"][0]["value"].split("\n")] == ja_states
    latest = three[-1]
    h = await client.click(latest, w.alice, next(c for c in latest.custom_ids if c.startswith("ag:regen:")), locale="ja")
    said = (await h.wait_followup(timeout=15)).content or ""
    assert_translated("ja", said, "Turn #%(seq)s is being generated again with a new seed.")
    h = await client.slash(w.alice, "privacy delete", locale="ja")
    confirm = await h.wait_response(timeout=5)
    assert confirm.ephemeral and labels(confirm.components) == [translation("ja", "Delete my data", "button")]
    new_take = (await posts(server, w.games, 4))[-1]  # still English (checked below), before the language changes
    assert new_take.id != latest.id and labels(new_take.components) == ["Regenerate"]
    await server.wait_until(lambda: not server.messages[latest.id].custom_ids, 10, "the old take's button removed")

    seen = client.seen_by(w.alice)
    assert len(seen) >= 30, [s.text for s in seen]
    not_japanese = in_japanese(seen, english)
    assert not not_japanese, "alice (ja) was shown text that is not Japanese:\n  " + "\n  ".join(not_japanese)
    assert sum(note in s.text for s in seen) == 1

    english_guild_posts = public_texts(server, w.games)
    japanese = [f"{s.field}: {s.text!r}" for s in english_guild_posts
                if JAPANESE.search(s.text.replace(FREE_MOTION, "").replace(FREE_MOTION_2, ""))]
    assert not japanese, "the English server's public posts hold Japanese:\n  " + "\n  ".join(japanese)

    # 5. a German member (spot check) and an Italian one (no catalog: English) in the same server
    said = await client.say(w.bob, "game join", {"character": "jiji"}, locale="de")
    assert_translated("de", said, "You play %(character)s. Make a move with /act.")
    assert f"/{act['name_localizations']['de']}." in said
    said = await client.say(w.bob, "act", {"motion": "<ML><Strength_5></ML>", "background": "sky"}, locale="de")
    assert_translated("de", said, "Your %(field)s was refused: %(reason)s. Please change it and try again.")
    fly_de = translation("de", "fly on broomstick", "motion")
    assert (await client.choices(w.bob, "act", {"motion": ""}, "motion", locale="de"))[0] == \
        {"name": fly_de, "value": "fly on broomstick"}
    assert await client.say(w.carol, "game join", {"character": "tombo"}, locale="it") == \
        "You play Tombo. Make a move with /act."
    assert (await client.choices(w.carol, "act", {"motion": "fly"}, "motion", locale="it"))[0] == \
        {"name": "fly on broomstick", "value": "fly on broomstick"}
    carol_status = await client.embed(w.carol, "status", locale="it")
    assert carol_status["title"] == "Kiki's Delivery Service (Qiqi's Delivery Service)"
    assert carol_status["fields"][0]["value"].startswith("Stamina ")
    for s in client.seen_by(w.carol):  # English: no letter outside A-Z
        assert all(ch.isascii() or not ch.isalpha() for ch in s.text), s

    # 4. /admin language ja (by an admin): the next turn's status message and post are Japanese,
    # whoever acts (bob's answer stays German).
    said = await client.say(w.erin, "admin language", {"language": "ja"}, locale="en-US")
    assert said == "This server's public posts are now in 日本語.", said
    since = len(server.requests)
    said = await client.say(w.bob, "act", {"motion": "wave", "background": "town"}, locale="de")
    assert_translated("de", said, "Turn #%(seq)s is queued (%(position)s).")
    post = (await posts(server, w.games, 5))[-1]
    e = post.embeds[0]
    with use_locale("ja"):
        assert e["title"] == _("Turn #%(seq)s · preview", seq=4)  # bob's turn, the channel's fourth
        author, regenerate = _("Author"), pgettext("button", "Regenerate")
    assert JAPANESE.search(e["title"]) and e["fields"][0]["name"] == author and JAPANESE.search(author)
    jiji = next(f for f in e["fields"] if f["name"] == "ジジ")
    assert [line.split(" ")[0] for line in jiji["value"].split("\n")] == ja_states
    assert labels(post.components) == [regenerate] and JAPANESE.search(regenerate)
    assert JAPANESE.search(e["footer"]["text"])
    (queued_ja,) = status_bodies(server, w.games)[-1:]
    assert JAPANESE.search(queued_ja["embeds"][0]["title"]) and labels(queued_ja["components"]) == \
        [translation("ja", "Cancel", "button")]
    left_english = [f"{s.field}: {s.text!r}" for s in public_texts(server, w.games, since)
                    if not data(s.text, ("bob",)) and (ENGLISH_POST.search(s.text) or not JAPANESE.search(s.text))]
    assert not left_english, "the turn's public messages after /admin language ja:\n  " + "\n  ".join(left_english)

    # 4'. a server whose Discord language is Japanese, no /admin language: Japanese posts; taro's
    # own client is English, so are his answers.
    assert await client.say(jp_guild.owner, "admin film", {"film": "qiqi"}, locale="en-US", guild=jp_guild,
                            channel=jp_games)
    said = await client.say(taro, "game start", locale="en-US", guild=jp_guild, channel=jp_games)
    assert said == "The game of Kiki's Delivery Service (Qiqi's Delivery Service) has started."
    await client.say(taro, "game join", {"character": "ursula"}, locale="en-US", guild=jp_guild, channel=jp_games)
    said = await client.say(taro, "act", {"motion": "walk", "background": "forest"}, locale="en-US", guild=jp_guild,
                            channel=jp_games)
    assert said.startswith("Turn #1 is queued"), said
    (post,) = await posts(server, jp_games, 1)
    e = post.embeds[0]
    assert JAPANESE.search(e["title"]) and e["fields"][0]["name"] == author
    assert [line.split(" ")[0] for line in e["fields"][-1]["value"].split("\n")] == ja_states
    assert labels(post.components) == [regenerate]
    left_english = [f"{s.field}: {s.text!r}" for s in public_texts(server, jp_games)
                    if not data(s.text, ("taro",)) and (ENGLISH_POST.search(s.text) or not JAPANESE.search(s.text))]
    assert not left_english, "the Japanese server's public messages:\n  " + "\n  ".join(left_english)

    took = time.monotonic() - started
    assert took < SCENARIO_SECONDS, f"the scenario took {took:.0f} s"


def test_the_checks_tell_japanese_from_english():
    """The checks above fail on an English answer, a half-translated one and a wrong translation."""
    english = english_sentences()
    shown = [Shown("#1", "content", "ターン #1 を受け付けました（次に生成）。"),
             Shown("#2", "content", "Turn #1 is queued (next in the queue)."),
             Shown("#3", "content", "ターン #1 is queued (次に生成)。"),
             Shown("#4", "content", "キキ"),
             Shown("#5", "content", "12")]
    assert [bad.split(" ")[0] for bad in in_japanese(shown, english)] == ["#2", "#3", "#5"]
    assert_translated("ja", "ターン #1 を受け付けました（次に生成）。", "Turn #%(seq)s is queued (%(position)s).")
    for wrong in ("Turn #1 is queued (next in the queue).", "ゲームが始まりました。"):
        try:
            assert_translated("ja", wrong, "Turn #%(seq)s is queued (%(position)s).")
        except AssertionError:
            continue
        raise AssertionError(f"{wrong!r} passed for a Japanese translation")
