"""Autocomplete in the member's language on the fake Discord: films and characters by their local
names (game/films.toml `local`), matched by any name; the suggestions translated; the values the
ids and English the game and the model use."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from babel.messages.catalog import Catalog

from i18n import locales
from testkit.fake_discord import interactions as it
from tests.bot.helpers import say, setup_game
from tests.i18n.helpers import catalogs_in, write_catalog


@pytest.fixture
def ja_catalog(tmp_path: Path) -> Iterator[Path]:
    """A ja catalog translating two suggestions (a temporary LOCALES_DIR: the shipped one is
    never written)."""
    root = tmp_path / "locales"
    root.mkdir()
    po = Catalog(locale="ja", domain=locales.DOMAIN)
    po.add("fly on broomstick", "ほうきで飛ぶ", context="motion")
    po.add("sky", "空", context="background")
    with catalogs_in(root):
        write_catalog(root, "ja", po)
        yield root


async def choices(w, member, command: str, options: dict, focused: str, locale: str = "ja") -> list[dict]:
    """An autocomplete request from a member whose Discord is in `locale`."""
    data = w.server._command_data(w.guild, command, dict(options), focused=focused, require_synced=True)
    h = await w.server._push_interaction(it.AUTOCOMPLETE, w.guild, w.games, member, data, locale=locale)
    return (await h.wait_response(timeout=5)).choices


async def test_films_and_characters_in_the_member_s_language(world, start_bot, ja_catalog):
    w = world
    await start_bot()

    # Films: every title in Japanese, the id as the value; found by a Japanese or an English title.
    assert await choices(w, w.erin, "admin film", {"film": ""}, "film") == [
        {"name": "魔女の宅急便", "value": "qiqi"}, {"name": "崖の上のポニョ", "value": "ponyo"}]
    assert await choices(w, w.erin, "admin film", {"film": "崖"}, "film") == [{"name": "崖の上のポニョ", "value": "ponyo"}]
    assert await choices(w, w.erin, "admin film", {"film": "pon"}, "film") == [{"name": "崖の上のポニョ", "value": "ponyo"}]
    assert await choices(w, w.erin, "admin film", {"film": "Kiki la"}, "film") == [{"name": "魔女の宅急便", "value": "qiqi"}]
    # Another language sees its own; English the English titles.
    assert (await choices(w, w.erin, "admin film", {"film": "pon"}, "film", locale="fr"))[0]["name"] == "Ponyo sur la falaise"
    assert (await choices(w, w.erin, "admin film", {"film": "pon"}, "film", locale="en-US"))[0]["name"] == "Ponyo on the Cliff by the Sea"

    await setup_game(w)  # Qiqi's film here; alice plays qiqi
    # /admin character: Japanese names, ids as values; a Japanese name typed finds its character.
    cast = await choices(w, w.erin, "admin character", {"character": ""}, "character")
    assert cast == [{"name": n, "value": v} for n, v in
                    [("キキ", "qiqi"), ("ジジ", "jiji"), ("トンボ", "tombo"), ("おソノ", "osono"), ("ウルスラ", "ursula")]]
    assert await choices(w, w.erin, "admin character", {"character": "ジ"}, "character") == [{"name": "ジジ", "value": "jiji"}]
    assert await choices(w, w.erin, "admin character", {"character": "tom"}, "character") == [{"name": "トンボ", "value": "tombo"}]

    # /game join: who plays whom, in Japanese names; matched by any name (Korean, Russian, English).
    join = await choices(w, w.bob, "game join", {"character": ""}, "character")
    assert join[0]["value"] == "qiqi" and join[0]["name"].startswith("キキ") and "alice" in join[0]["name"]
    assert await choices(w, w.bob, "game join", {"character": "지지"}, "character") == [{"name": "ジジ", "value": "jiji"}]
    assert await choices(w, w.bob, "game join", {"character": "Урс"}, "character") == [{"name": "ウルスラ", "value": "ursula"}]
    assert "You play Jiji" in await say(w, w.bob, "game join", {"character": "ジジ"})  # typed by hand

    # /act's `with`: Japanese names shown, the English names the instruction uses as the value.
    assert await choices(w, w.alice, "act", {"motion": "x", "with": "ジジ、ト"}, "with") == [
        {"name": "ジジ, トンボ", "value": "Jiji, Tombo"}]
    assert await choices(w, w.alice, "act", {"motion": "x", "with": "Jiji, トン"}, "with") == [
        {"name": "ジジ, トンボ", "value": "Jiji, Tombo"}]

    # The suggestions: translated where the catalog has them, the English term as the value.
    motions = await choices(w, w.alice, "act", {"motion": ""}, "motion")
    assert motions[0] == {"name": "ほうきで飛ぶ", "value": "fly on broomstick"}
    assert {"name": "walk", "value": "walk"} in motions  # not translated: English
    assert await choices(w, w.alice, "act", {"motion": "ほうき"}, "motion") == [{"name": "ほうきで飛ぶ", "value": "fly on broomstick"}]
    assert (await choices(w, w.alice, "act", {"motion": "fly"}, "motion"))[0]["value"] == "fly on broomstick"  # English typed
    assert await choices(w, w.alice, "act", {"motion": "x", "background": "空"}, "background") == [{"name": "空", "value": "sky"}]
