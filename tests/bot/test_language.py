"""/admin language, and who reads which language: public posts (announcements, vote rounds and
their buttons) in the server's or the channel's language, answers in the member's.

The catalogs are a temporary i18n/locales: the template extracted from the code as it is now (the
pseudo-locale `qps` is built from it, so a text that bypassed the catalogs shows outside ⟦ ⟧) and a
small French catalog, so that /admin language has a shipped language besides English to offer."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from babel.messages.catalog import Catalog
from babel.messages.pofile import write_po

from db.models import ChannelSettings, GuildSettings
from i18n import locales
from i18n.pseudo import CLOSE, OPEN
from tests.bot.helpers import answer, audit_actions, field, say
from tests.i18n.helpers import catalogs_in

RIGHTS = "You need the Manage Server permission or the bot's admin role"

FRENCH = {
    "%(name)s started a game of %(film)s. Pick a character with /game join.":
        "%(name)s a lancé une partie de %(film)s. Choisissez un personnage avec /game join.",
    "%(name)s plays %(character)s.": "%(name)s joue %(character)s.",
    "You play %(character)s. Make a move with /act.": "Vous jouez %(character)s. Jouez un tour avec /act.",
    "This server's public posts are now in %(language)s.": "Les messages publics de ce serveur sont désormais en %(language)s.",
}


@pytest.fixture(scope="module")
def french(tmp_path_factory):
    """i18n/locales in a temporary folder (the shared messages.pot is the lead's to regenerate):
    the code's template and a French catalog; the real folder is back afterwards."""
    from animegamer.i18n_cli import template

    folder = tmp_path_factory.mktemp("locales")
    with ThreadPoolExecutor(1) as pool:  # template() runs the command tree in an event loop of its own
        pot = pool.submit(template).result()
    with (folder / "messages.pot").open("wb") as f:
        write_po(f, pot)
    fr = Catalog(locale="fr", domain=locales.DOMAIN)
    for msgid, text in FRENCH.items():
        fr.add(msgid, text, flags=("python-format",))
    (folder / "fr" / "LC_MESSAGES").mkdir(parents=True)
    with (folder / "fr" / "LC_MESSAGES" / "messages.po").open("wb") as f:
        write_po(f, fr)
    with catalogs_in(folder):
        assert locales.shipped() == ("en", "fr")
        yield folder


async def _settings(sessions, guild_id: int, channel_id: int) -> tuple[str | None, str | None]:
    async with sessions() as s:
        g = await s.get(GuildSettings, guild_id)
        c = await s.get(ChannelSettings, channel_id)
    return (g.language if g else None), (c.language if c else None)


async def _said(w, member, name: str, options: dict | None = None, *, channel=None, locale: str = "en-US") -> str:
    """A command's ephemeral answer, run from a client in `locale`."""
    h = await w.server.slash(w.guild, channel or w.games, member, name, options or {}, locale=locale)
    text, _embeds, ephemeral = await answer(h)
    assert ephemeral
    return text


def _last_post(w, channel=None) -> str:
    return w.server.channel_messages(channel or w.games)[-1].content or ""


async def test_admin_language_sets_and_clears_the_servers_and_a_channels_language(world, start_bot, sessions, french):
    w = world
    await start_bot()
    # Every shipped language by its own name, and Discord's
    command = next(o for o in w.server.command("admin")["options"] if o["name"] == "language")
    choices = next(o for o in command["options"] if o["name"] == "language")["choices"]
    assert [(c["name"], c["value"]) for c in choices] == [
        ("Automatic (Discord's server language)", "auto"), ("English", "en"), ("Français", "fr")]

    # Admins only, like every /admin command
    for member in (w.carol, w.dave):
        assert RIGHTS in await say(w, member, "admin language", {"language": "fr"})
    assert await _settings(sessions, w.guild.id, w.games.id) == (None, None)

    # The server's language: answered in the admin's language, naming the new one in its own
    assert await say(w, w.erin, "admin language", {"language": "fr"}) == "This server's public posts are now in Français."
    assert await _settings(sessions, w.guild.id, w.games.id) == ("fr", None)
    # A French admin reads the answer in French
    said = await _said(w, w.erin, "admin language", {"language": "fr"}, locale="fr")
    assert said == "Les messages publics de ce serveur sont désormais en Français."

    # One channel of its own
    said = await say(w, w.erin, "admin language", {"language": "en", "channel": w.games2})
    assert said == f"Public posts in <#{w.games2.id}> are now in English."
    assert await _settings(sessions, w.guild.id, w.games2.id) == ("fr", "en")

    # /admin show says which applies where, and why
    h = await w.server.slash(w.guild, w.games, w.erin, "admin show", {})
    _text, embeds, _ = await answer(h)
    assert field(embeds[0], "Public posts' language") == "Français (this server's choice)"
    h = await w.server.slash(w.guild, w.games2, w.erin, "admin show", {})
    _text, embeds, _ = await answer(h)
    assert field(embeds[0], "Public posts' language") == "English (this channel's choice)"

    # Public posts follow it; each member's answer stays in their own language
    await say(w, w.erin, "admin film", {"film": "qiqi"})
    await say(w, w.alice, "game start")
    assert _last_post(w) == "alice a lancé une partie de Kiki la petite sorcière. Choisissez un personnage avec /game join."
    assert await say(w, w.alice, "game join", {"character": "qiqi"}) == "You play Qiqi. Make a move with /act."
    assert _last_post(w) == "alice joue Kiki."  # the film's French names (game/films.toml)
    assert await _said(w, w.bob, "game join", {"character": "jiji"}, locale="fr") == "Vous jouez Jiji. Jouez un tour avec /act."
    assert _last_post(w) == "bob joue Jiji."
    await say(w, w.carol, "game start", channel=w.games2)  # the channel's own choice: English
    assert _last_post(w, w.games2).startswith("carol started a game of ")

    # Cleared: the channel follows the server again, the server Discord's language (English here)
    said = await say(w, w.erin, "admin language", {"language": "auto", "channel": w.games2})
    assert said == f"Public posts in <#{w.games2.id}> now follow the server's language, currently Français."
    assert await _settings(sessions, w.guild.id, w.games2.id) == ("fr", None)
    await say(w, w.carol, "game join", {"character": "qiqi"}, channel=w.games2)
    assert _last_post(w, w.games2) == "carol joue Kiki."
    said = await say(w, w.erin, "admin language", {"language": "auto"})
    assert said == "This server's public posts now follow Discord's server language, currently English."
    assert await _settings(sessions, w.guild.id, w.games.id) == (None, None)
    await say(w, w.dave, "game join", {"character": "osono"})
    assert _last_post(w) == "dave plays Osono."
    h = await w.server.slash(w.guild, w.games, w.erin, "admin show", {})
    _text, embeds, _ = await answer(h)
    assert field(embeds[0], "Public posts' language") == "English (automatic: Discord's server language)"

    assert [a for a in await audit_actions(sessions) if a[0] == "set_language"] == [("set_language", "erin")] * 5
    assert w.server.unhandled == []


def _pseudo(text: str) -> bool:
    return OPEN in text and CLOSE in text


async def test_public_posts_in_the_servers_language_answers_in_the_members(world, start_bot, french):
    """A server whose Discord language is the pseudo-locale: what the channel sees is rendered in
    it (between ⟦ ⟧), what an English member is answered is not, and a member whose client is in
    the pseudo-locale is answered in it."""
    w = world
    w.guild.locale = "qps"  # before the bot connects: its GUILD_CREATE and every interaction carry it
    await start_bot()
    await say(w, w.erin, "admin film", {"film": "qiqi"})

    started = await say(w, w.alice, "game start")
    assert not _pseudo(started) and started.startswith("The game of ")
    assert _pseudo(_last_post(w)) and "alice" in _last_post(w)
    joined = await say(w, w.alice, "game join", {"character": "qiqi"})
    assert joined == "You play Qiqi. Make a move with /act."
    assert _pseudo(_last_post(w)) and "alice" in _last_post(w) and "Qiqi" in _last_post(w)
    assert _pseudo(await _said(w, w.bob, "game join", {"character": "jiji"}, locale="qps"))

    assert await say(w, w.dave, "mod pause", {"reason": "tea"}) == "The game is paused."
    assert _pseudo(_last_post(w)) and "tea" in _last_post(w)
    await say(w, w.dave, "mod resume")

    # A vote round: its message and its buttons' labels in the server's language, a voter's answer in theirs
    assert await say(w, w.erin, "vote mode", {"enabled": True}) == "Vote mode is on (120 s rounds)."
    assert _pseudo(_last_post(w))
    proposed = await say(w, w.alice, "vote propose", {"motion": "walk", "background": "town"})
    assert proposed.startswith("Your proposal is option 1: ") and not _pseudo(proposed)

    def round_message():
        found = [m for m in w.server.channel_messages(w.games) if m.embeds and m.custom_ids]
        return found[-1] if found else None

    m = await w.server.wait_until(round_message, timeout=10, what="the round's message")
    embed = m.embeds[0]
    assert _pseudo(embed["title"]) and _pseudo(embed["description"]) and _pseudo(embed["footer"]["text"])
    assert all(_pseudo(c["label"]) for c in m.iter_components() if c.get("custom_id", "").startswith("ag:vote:"))
    h = await w.server.click(m, w.bob, m.custom_ids[0])
    voted = (await h.wait_followup(timeout=10)).content
    assert voted.startswith("You voted for option 1.")
    assert w.server.unhandled == []


def _outside_catalog(text: str, data: tuple[str, ...]) -> list[str]:
    """Words of a pseudo-locale text that no catalog message rendered: what is left once the
    rendered messages (⟦…⟧), code spans, Discord markup and the data shown (names, titles) are taken out."""
    import re

    while re.search(r"⟦[^⟦⟧]*⟧", text):  # innermost first: a rendered message may hold another
        text = re.sub(r"⟦[^⟦⟧]*⟧", " ", text)
    for pattern in (r"`[^`]*`", r"<[^<>\s]+>"):
        text = re.sub(pattern, " ", text)
    for value in sorted(data, key=len, reverse=True):
        text = text.replace(value, " ")
    return re.findall(r"[A-Za-z]{3,}", text)


def _texts(content: str, embeds: list[dict]) -> list[str]:
    out = [content]
    for e in embeds:
        out += [e.get("title", ""), e.get("description", ""), e.get("footer", {}).get("text", "")]
        out += [part for f in e.get("fields", []) for part in (f["name"], f["value"])]
    return [t for t in out if t]


async def test_a_members_answers_in_the_pseudo_locale_leave_nothing_outside_the_catalogs(world, start_bot, french):
    """Every answer (texts, embeds) of the commands that only the member sees, to a member whose
    client is in the pseudo-locale: only data (names, titles, ids) is left outside ⟦ ⟧."""
    w = world
    await start_bot()
    await say(w, w.erin, "admin film", {"film": "qiqi"})
    await say(w, w.alice, "game start")
    await say(w, w.alice, "game join", {"character": "qiqi"})
    await say(w, w.alice, "act", {"motion": "walk", "background": "town"})
    await say(w, w.erin, "admin filter add", {"term": "dragon"})
    data = ("Kiki's Delivery Service (Qiqi's Delivery Service)", "AnimeGamer", "Qiqi", "Jiji", "Tombo", "Osono", "Ursula",
            "alice", "erin", "dragon", "walk", "town", "Character", "Motion", "Background", "English", "Discord")
    for member, name, options in (
        (w.carol, "help", {}), (w.erin, "help", {}), (w.carol, "games", {}), (w.carol, "queue", {}),
        (w.alice, "privacy show", {}), (w.alice, "privacy delete", {}), (w.erin, "admin show", {}),
        (w.erin, "admin filter list", {}), (w.erin, "admin limits", {"backlog": 3, "cooldown": 0}),
        (w.erin, "admin character", {"character": "tombo", "enabled": True}),
        (w.erin, "admin role", {"kind": "moderator", "role": w.mod_role}),
        (w.erin, "admin log-channel", {}), (w.erin, "admin language", {"language": "auto"}),
        (w.erin, "admin film", {"film": "qiqi", "scope": "channel"}),
    ):
        h = await w.server.slash(w.guild, w.games, member, name, options, locale="qps")
        content, embeds, ephemeral = await answer(h)
        assert ephemeral
        for text in _texts(content, embeds):
            assert not _outside_catalog(text, data), (name, text)
    assert w.server.unhandled == []
