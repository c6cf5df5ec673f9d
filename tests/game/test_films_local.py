"""Films in their local names (game/films.toml `[films.<id>.local.<locale>]`): shown per locale,
matched by any name, the model's English names untouched, and `animegamer films check`'s checks."""

from __future__ import annotations

import pytest

from game.catalogue import (
    FILMS,
    CatalogueError,
    find_film,
    load_catalogue,
    packaged_films,
    use_films,
)
from game.instruction import build_instruction
from i18n import context, use_locale

LOCALES = ("ja", "zh_CN", "zh_TW", "ko", "pt_BR", "es", "fr", "de", "ru")


@pytest.fixture(autouse=True)
def _fresh_catalogue():
    use_films(None)
    yield
    use_films(None)


def test_the_packaged_films_have_their_names_in_every_shipped_language():
    films = packaged_films()
    for film in films.values():
        codes = {code for code, _ in film.local}
        assert set(LOCALES) <= codes, film.id
        for code in LOCALES:
            assert film.title_in(code) != film.title, (film.id, code)
    qiqi, ponyo = films["qiqi"], films["ponyo"]
    assert qiqi.title_in("ja") == "魔女の宅急便" and ponyo.title_in("ja") == "崖の上のポニョ"
    assert [qiqi.character_name_in(c.id, "ja") for c in qiqi.characters] == ["キキ", "ジジ", "トンボ", "おソノ", "ウルスラ"]
    assert qiqi.title_in("zh_CN") == "魔女宅急便" and ponyo.title_in("zh_CN") == "悬崖上的金鱼姬"
    assert ponyo.title_in("zh_TW") == "崖上的波妞" and ponyo.character_name_in("ponyo", "zh_TW") == "波妞"
    assert qiqi.title_in("ko") == "마녀 배달부 키키" and ponyo.character_name_in("sosuke", "ko") == "소스케"
    assert qiqi.title_in("fr") == "Kiki la petite sorcière" and qiqi.character_name_in("qiqi", "fr") == "Kiki"
    assert qiqi.character_name_in("jiji", "fr") == "Jiji"  # not given: the English name
    assert qiqi.title_in("ru") == "Ведьмина служба доставки" and ponyo.character_name_in("ponyo", "ru") == "Поньо"
    # The model's names stay English.
    assert [c.name for c in qiqi.characters] == ["Qiqi", "Jiji", "Tombo", "Osono", "Ursula"]


def test_a_member_s_locale_finds_its_names_or_its_language_s_or_english():
    qiqi = packaged_films()["qiqi"]
    assert qiqi.title_in("es-419") == "Kiki: entregas a domicilio"  # Latin America's own table
    assert qiqi.title_in("es-ES") == qiqi.title_in("es") == "Nicky, la aprendiz de bruja"
    assert qiqi.character_name_in("qiqi", "es-419") == "Kiki"
    assert qiqi.title_in("pt-BR") == "O Serviço de Entregas da Kiki"
    assert qiqi.character_name_in("ursula", "zh-HK") == "烏蘇拉"  # Hong Kong reads zh_TW's names
    assert qiqi.character_name_in("ursula", "zh") == "乌露丝拉"
    for english in ("en-US", "en-GB", "it", "qps", "", None):
        assert qiqi.title_in(english or "en") == qiqi.title
    assert qiqi.character_name_in("gone", "ja") == "gone"  # a withdrawn character: its id
    with use_locale("en"):
        assert qiqi.title_in() == qiqi.title
    token = context._current.set("ja")  # as adopt() sets it once a ja catalog ships
    try:  # the default locale is the current one
        assert qiqi.title_in() == "魔女の宅急便" and qiqi.character_name_in("qiqi") == "キキ"
    finally:
        context._current.reset(token)


def test_a_character_is_found_by_any_of_its_names():
    films = packaged_films()
    qiqi, ponyo = films["qiqi"], films["ponyo"]
    for key in ("qiqi", "Qiqi", "Kiki", "キキ", "琪琪", "키키", "Кики", " ｋｉｋｉ ", "KIKI"):
        c = qiqi.character(key)
        assert c is not None and c.id == "qiqi", key
    assert ponyo.character("宗介") == ponyo.character("sosuke") and ponyo.character("フジモト") == ponyo.character("fujimoto") is not None
    assert qiqi.character("ポニョ") is None and qiqi.character("") is None
    assert qiqi.names_of("jiji")[0] == "Jiji" and set(qiqi.names_of("jiji")) == {"Jiji", "ジジ", "吉吉", "지지", "Дзидзи"}


def test_the_instruction_keeps_the_english_names():
    qiqi = packaged_films()["qiqi"]
    ins = build_instruction(qiqi, ["キキ", "ジジ"], "fly on broomstick", "sky")
    assert ins.text == "Character: Qiqi, Jiji; Motion: fly on broomstick; Background: sky."
    assert ins.character_ids == ("qiqi", "jiji")


def test_a_film_is_found_by_any_title():
    use_films(packaged_films())
    assert find_film("ponyo") is FILMS["ponyo"]
    assert find_film("崖の上のポニョ") is FILMS["ponyo"]
    assert find_film("kiki la petite sorcière") is FILMS["qiqi"]
    assert find_film("Kiki's Delivery Service (Qiqi's Delivery Service)") is FILMS["qiqi"]
    assert find_film("Totoro") is None


def test_an_operator_adds_and_changes_local_names_name_by_name(tmp_path):
    path = tmp_path / "films.toml"
    path.write_text(
        '[films.qiqi.local.ja]\ncharacters = { jiji = "黒猫ジジ" }\n\n'
        '[films.qiqi.local.it]\ntitle = "Kiki - Consegne a domicilio"\ncharacters = { qiqi = "Kiki" }\n\n'
        '[films.ponyo]\ncharacters = [{ id = "ponyo", name = "Ponyo" }, { id = "sosuke", name = "Sosuke" }]\n'
    )
    films = load_catalogue(path)
    qiqi, ponyo = films["qiqi"], films["ponyo"]
    assert qiqi.character_name_in("jiji", "ja") == "黒猫ジジ"  # changed
    assert qiqi.title_in("ja") == "魔女の宅急便" and qiqi.character_name_in("qiqi", "ja") == "キキ"  # kept
    assert qiqi.title_in("it-IT") == "Kiki - Consegne a domicilio"  # a locale without a catalog
    assert ponyo.character_name_in("sosuke", "ja") == "宗介"
    assert ponyo.character("リサ") is None  # Lisa left the cast: her local names went with her


@pytest.mark.parametrize(
    "table, where",
    [
        ('[films.qiqi.local.xx]\ntitle = "X"', "film 'qiqi': local.xx: 'xx' is not a locale"),
        ('[films.qiqi.local.pt-BR]\ntitle = "X"', "film 'qiqi': local.pt-BR: write the locale 'pt_BR'"),
        ('[films.qiqi.local.JA]\ntitle = "X"', "film 'qiqi': local.JA: write the locale 'ja'"),
        ('[films.qiqi.local.ja]\ncharacters = { kiki = "キキ" }', "film 'qiqi': local.ja.characters.kiki: unknown character"),
        ('[films.qiqi.local.ja]\ntitle = ""', "film 'qiqi': local.ja.title: must be a non-empty string"),
        ('[films.qiqi.local.ja]\ntitle = "  "', "film 'qiqi': local.ja.title: must be a non-empty string"),
        ('[films.qiqi.local.ja]\ncharacters = { jiji = "" }', "film 'qiqi': local.ja.characters.jiji: must be a non-empty string"),
        (f'[films.qiqi.local.ja]\ntitle = "{"魔" * 101}"', "film 'qiqi': local.ja.title: is too long (101 characters; at most 100)"),
        (f'[films.qiqi.local.ja]\ncharacters = {{ qiqi = "{"キ" * 101}" }}', "film 'qiqi': local.ja.characters.qiqi: is too long"),
        ('[films.qiqi.local.ja]\ncharacters = { qiqi = "キキ、ジジ" }', "film 'qiqi': local.ja.characters.qiqi: must not contain"),
        ('[films.qiqi.local.ja]\ntitle = "a\\u0007b"', "film 'qiqi': local.ja.title: must not contain control characters"),
        ('[films.qiqi.local.ja]\nname = "x"', "film 'qiqi': local.ja.name: unknown field"),
        ('[films.qiqi.local.ja]\ncharacters = ["キキ"]', "film 'qiqi': local.ja.characters: must be a table"),
        ('[films.qiqi]\nlocal = "ja"', "film 'qiqi': local: must be tables"),
        # One name, two characters: within a locale, across locales, or another's English name or id.
        ('[films.qiqi.local.ja]\ncharacters = { qiqi = "キキ", jiji = "キキ" }', "film 'qiqi': local.ja.characters.jiji: 'キキ' already names character 'qiqi' (its ja name)"),
        ('[films.qiqi.local.it]\ncharacters = { tombo = "キキ" }', "film 'qiqi': local.it.characters.tombo: 'キキ' already names character 'qiqi' (its ja name)"),
        ('[films.qiqi.local.it]\ncharacters = { tombo = "Jiji" }', "film 'qiqi': local.it.characters.tombo: 'Jiji' already names character 'jiji' (its English name)"),
        ('[films.qiqi.local.it]\ncharacters = { tombo = "ursula" }', "film 'qiqi': local.it.characters.tombo: 'ursula' already names character 'ursula'"),
        ('[films.m]\ntitle = "M"\nmllm_checkpoint = "M"\ndecoder_checkpoint = "D"\n'
         'characters = [{ id = "hero", name = "Ashitaka" }, { id = "wolf", name = "Moro" }]\n[films.m.local.it]\ncharacters = { wolf = "Hero" }',
         "film 'm': local.it.characters.wolf: 'Hero' already names character 'hero' (its id)"),
        # A local title that is another film's.
        ('[films.qiqi.local.it]\ntitle = "Ponyo on the Cliff by the Sea"', "film 'qiqi': local.it.title: 'Ponyo on the Cliff by the Sea' already names film 'ponyo'"),
        ('[films.qiqi.local.ja]\ntitle = "崖の上のポニョ"', "film 'qiqi': local.ja.title: '崖の上のポニョ' already names film 'ponyo'"),
    ],
)
def test_films_check_names_each_problem(tmp_path, table, where):
    path = tmp_path / "ops.toml"
    path.write_text(table)
    with pytest.raises(CatalogueError) as e:
        load_catalogue(path)
    assert f"{path}: {where}" in str(e.value)


def test_the_same_name_for_one_character_in_several_locales_is_fine(tmp_path):
    path = tmp_path / "ops.toml"
    path.write_text('[films.qiqi.local.it]\ntitle = "魔女宅急便"\ncharacters = { qiqi = "キキ", jiji = "Jiji" }\n')
    assert load_catalogue(path)["qiqi"].character_name_in("qiqi", "it") == "キキ"
