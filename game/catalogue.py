"""The film and character catalogue, as data.

The released films are described in `game/films.toml`, shipped with the package; an operator
adds films (a custom-trained checkpoint) or overrides fields of shipped ones (a renamed cast,
another checkpoint folder) in a file of the same form named by the `films` setting
(`ANIMEGAMER_FILMS`). Each film names its checkpoints and its playable characters; the motions
and backgrounds are suggestions for autocomplete, players may type anything else.

I/O: the game's rules do no I/O except here, where the catalogue is read once per process: the
packaged file through importlib.resources and the operator's file given its path (the commands
call `load_checked_settings()` at start, which loads and validates both). Validation works on
the parsed tables (`parse_films`), so it is pure and is what `animegamer films check` runs.

A film may name itself and its characters per locale (`[films.<id>.local.<locale>]`): players
see the names of their language (`Film.title_in`, `Film.character_name_in`) and may type any of
them (`Film.character`, `find_film`); the instruction always carries the English names the model
was trained on (docs/films.md, "Local names").

`FILMS` is a read-only mapping onto the process's active catalogue, loaded on first use when a
command did not load it explicitly.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
import unicodedata
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from babel import Locale, UnknownLocaleError

from game.errors import FilmWithdrawn, UnknownFilm
from game.operator_rules import RulesFileError, load_rules, use_rules
from game.sanitize import InputRefused, sanitize_field
from game.toml_files import read_toml
from i18n import current_locale, locales
from i18n.locales import _ALIASES  # zh_HK -> zh_TW...: the same families for names as for catalogs
from settings import Settings, SettingsError, load_settings

PACKAGED = "game/films.toml"  # how the shipped file is named in messages
FILM_ID_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")  # stored on sessions; names the queue film.<id>
CHARACTER_ID_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
FOLDER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")  # a plain folder name, no path
HUB_REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
NAME_MAX = 40
SUGGESTION_MAX = 80  # the instruction's per-field cap (game.instruction.FIELD_MAX)
LOCAL_NAME_MAX = 100  # a local title or name is shown as a Discord choice's name (at most 100)
NAME_SEPARATORS = ",;，、；"  # split a list of names (/act with); no name may hold one


def fold(text: str) -> str:
    """How names typed by players are compared: NFKC (full-width letters), case-folded, inner
    whitespace collapsed."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def locale_key(tag: object) -> str:
    """A locale tag written the catalogs' way: `pt-br` / `pt_BR` / discord.Locale('pt-BR') -> `pt_BR`,
    `zh-hant-tw` -> `zh_Hant_TW` (language lowercase, script title-case, region uppercase)."""
    raw = str(getattr(tag, "value", tag) or "").strip()
    parts = [p for p in raw.replace("-", "_").split("_") if p]
    if not parts:
        return ""
    return "_".join([parts[0].lower(), *(p.title() if len(p) == 4 else p.upper() if p.isalpha() else p for p in parts[1:])])


def _candidates(tag: object) -> list[str]:
    """The local tables that may serve a locale, most specific first: the tag and its shorter
    forms (`es_419`, `es`), each followed by the catalog it stands for (`zh_HK` -> `zh_TW`, as
    i18n.locales maps them, whether or not that catalog is shipped yet), then the catalog the
    tag resolves to."""
    out: list[str] = []
    for key in (locale_key(tag), locales.resolve(tag)):
        parts = key.split("_") if key else []
        for n in range(len(parts), 0, -1):
            name = "_".join(parts[:n])
            for found in (name, _ALIASES.get(name)):
                if found and found not in out:
                    out.append(found)
    return out


@dataclass(frozen=True)
class Character:
    id: str  # stable key stored in the database
    name: str  # how the model was trained to read the name in the instruction


@dataclass(frozen=True)
class LocalNames:
    """A film's names in one locale (films.toml `[films.<id>.local.<locale>]`): shown to players
    whose language it is and matched when typed; the model always gets the English names."""

    title: str | None = None
    characters: tuple[tuple[str, str], ...] = ()  # (character id, name), in the cast's order

    def character(self, character_id: str) -> str | None:
        return next((n for cid, n in self.characters if cid == character_id), None)


@dataclass(frozen=True)
class Film:
    id: str
    title: str
    mllm_checkpoint: str  # folder under <models>/animegamer/, e.g. MLLM-Qiqi
    decoder_checkpoint: str  # folder under <models>/animegamer/, e.g. VDM_Decoder-Qiqi
    characters: tuple[Character, ...]
    hub_repo: str | None = None  # where `models download` fetches both folders; None: copied by hand
    motions: tuple[str, ...] = field(default=())
    adverbs: tuple[str, ...] = field(default=())
    backgrounds: tuple[str, ...] = field(default=())
    times: tuple[str, ...] = field(default=())
    local: tuple[tuple[str, LocalNames], ...] = field(default=())  # (locale, names), sorted by locale
    source: str = field(default=PACKAGED, compare=False)  # the file that defined (or last overrode) it

    def character(self, key: str) -> Character | None:
        """Find a character by id, English name or any local name (case, width and spacing do not
        matter)."""
        k = fold(key)
        if not k:
            return None
        for c in self.characters:
            if fold(c.id) == k or fold(c.name) == k:
                return c
        for _locale, names in self.local:
            for cid, name in names.characters:
                if fold(name) == k:
                    return next((c for c in self.characters if c.id == cid), None)
        return None

    def local_names(self, locale: object = None) -> list[LocalNames]:
        """The local tables that serve `locale` (default: the current one), most specific first:
        its own, then its language's (`es_419` -> `es`, `zh_HK` -> `zh_TW`); empty where none."""
        tables = dict(self.local)
        return [tables[k] for k in _candidates(current_locale() if locale is None else locale) if k in tables]

    def title_in(self, locale: object = None) -> str:
        """The title players of `locale` (default: the current one) know, else the English one."""
        return next((n.title for n in self.local_names(locale) if n.title), self.title)

    def character_name_in(self, character_id: str, locale: object = None) -> str:
        """A character's name in `locale` (default: the current one), else its English name (the
        id for a character the film no longer has)."""
        for names in self.local_names(locale):
            local = names.character(character_id)
            if local:
                return local
        c = next((c for c in self.characters if c.id == character_id), None)
        return c.name if c is not None else character_id

    def titles(self) -> tuple[str, ...]:
        """Every title of the film: the English one, then each locale's."""
        return tuple(dict.fromkeys([self.title, *(n.title for _loc, n in self.local if n.title)]))

    def names_of(self, character_id: str) -> tuple[str, ...]:
        """Every name of a character: the English one, then each locale's."""
        english = [c.name for c in self.characters if c.id == character_id]
        local = [n.character(character_id) for _loc, n in self.local]
        return tuple(dict.fromkeys([*english, *(n for n in local if n)]))

    def matches(self, key: str) -> bool:
        """Whether `key` is the film's id or one of its titles (see find_film)."""
        k = fold(key)
        return bool(k) and (fold(self.id) == k or any(fold(t) == k for t in self.titles()))


# ------------------------------------------------------------------------------------------
# Validation (pure: parsed TOML tables in, films or an error naming file, film and field out)


class CatalogueError(ValueError):
    """A films file that cannot be used; each line names the file, the film and the field."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


REQUIRED = ("title", "mllm_checkpoint", "decoder_checkpoint", "characters")
SUGGESTION_FIELDS = ("motions", "adverbs", "backgrounds", "times")
KNOWN_FIELDS = (*REQUIRED, "hub_repo", *SUGGESTION_FIELDS, "local", "enabled")
LOCAL_FIELDS = ("title", "characters")


class _Problem(Exception):
    def __init__(self, where: str, what: str):
        self.where, self.what = where, what


def _text(v, where: str, max_len: int = 200) -> str:
    if not isinstance(v, str) or not v.strip():
        raise _Problem(where, "must be a non-empty string")
    if len(v) > max_len:
        raise _Problem(where, f"is too long ({len(v)} characters; at most {max_len})")
    return v.strip()


def _matching(v, where: str, pattern: re.Pattern, what: str) -> str:
    if not isinstance(v, str) or not pattern.match(v):
        raise _Problem(where, f"must be {what}, got {v!r}")
    return v


def _model_safe(v, where: str, max_len: int) -> str:
    """Text that goes into the instruction unchanged: the game's sanitiser must leave it as it is."""
    text = _text(v, where, max_len)
    try:
        clean = sanitize_field(text, where, max_len).text
    except InputRefused as e:
        raise _Problem(where, e.reason) from None
    if clean != text:
        raise _Problem(where, f"{text!r} holds characters the instruction cannot carry (it would read {clean!r})")
    return text


def _characters(v, where: str) -> tuple[Character, ...]:
    if not isinstance(v, list) or not v:
        raise _Problem(where, "must be a non-empty list of { id = ..., name = ... } tables")
    out, ids, names = [], set(), set()
    for i, c in enumerate(v):
        at = f"{where}[{i}]"
        if not isinstance(c, dict):
            raise _Problem(at, "must be a table { id = ..., name = ... }")
        extra = sorted(set(c) - {"id", "name"})
        if extra:
            raise _Problem(f"{at}.{extra[0]}", "unknown field (a character has only id and name)")
        cid = _matching(c.get("id"), f"{at}.id", CHARACTER_ID_RE, "lowercase letters, digits, '-' or '_'")
        name = _model_safe(c.get("name"), f"{at}.name", NAME_MAX)
        if "," in name or ";" in name:
            raise _Problem(f"{at}.name", "must not contain ',' or ';' (they separate the instruction's parts)")
        if cid in ids:
            raise _Problem(f"{at}.id", f"{cid!r} appears twice")
        if name.casefold() in names:
            raise _Problem(f"{at}.name", f"{name!r} appears twice")
        ids.add(cid)
        names.add(name.casefold())
        out.append(Character(cid, name))
    return tuple(out)


def _suggestions(v, where: str) -> tuple[str, ...]:
    if not isinstance(v, list):
        raise _Problem(where, "must be a list of strings")
    out: list[str] = []
    for i, s in enumerate(v):
        text = _model_safe(s, f"{where}[{i}]", SUGGESTION_MAX)
        if text not in out:
            out.append(text)
    return tuple(out)


def _locale_code(code: str, where: str) -> str:
    """A local table's locale: a shipped catalog's name, or any locale CLDR (Babel) knows, written
    the catalogs' way (`pt_BR`, `zh_TW`, `es_419`)."""
    if code in locales.shipped():
        return code
    if locale_key(code) != code:
        raise _Problem(where, f"write the locale {locale_key(code)!r} (language, then _REGION: ja, zh_TW, pt_BR, es_419)")
    try:
        Locale.parse(code)
    except (ValueError, TypeError, UnknownLocaleError):
        raise _Problem(where, f"{code!r} is not a locale (a catalog's name such as ja, zh_TW, pt_BR, or a CLDR locale)") from None
    return code


def _local_name(v, where: str, *, separators: bool = False) -> str:
    text = _text(v, where, LOCAL_NAME_MAX)
    if any(unicodedata.category(ch) == "Cc" for ch in text):
        raise _Problem(where, "must not contain control characters")
    if separators and any(ch in NAME_SEPARATORS for ch in text):
        raise _Problem(where, f"must not contain any of {' '.join(NAME_SEPARATORS)} (they separate names in /act's `with`)")
    return text


def _local(v, where: str) -> tuple[tuple[str, LocalNames], ...]:
    """[films.<id>.local.<locale>] tables: `title` and `characters = { <character id> = name }`.
    The ids are checked against the cast in parse_films (an override may change the cast)."""
    if not isinstance(v, dict):
        raise _Problem(where, "must be tables [films.<id>.local.<locale>]")
    out = []
    for code, table in v.items():
        at = f"{where}.{code}"
        _locale_code(code, at)
        if not isinstance(table, dict):
            raise _Problem(at, "must be a table with title and/or characters")
        extra = sorted(set(table) - set(LOCAL_FIELDS))
        if extra:
            raise _Problem(f"{at}.{extra[0]}", f"unknown field (a local table has {' and '.join(LOCAL_FIELDS)})")
        title = _local_name(table["title"], f"{at}.title") if "title" in table else None
        chars = table.get("characters", {})
        if not isinstance(chars, dict):
            raise _Problem(f"{at}.characters", "must be a table { <character id> = \"name\", ... }")
        names = tuple((cid, _local_name(n, f"{at}.characters.{cid}", separators=True)) for cid, n in chars.items())
        out.append((code, LocalNames(title, names)))
    return tuple(sorted(out))


def _merge_local(base: tuple[tuple[str, LocalNames], ...], written: tuple[tuple[str, LocalNames], ...],
                 cast: tuple[Character, ...]) -> tuple[tuple[str, LocalNames], ...]:
    """An override's local names laid over the film's, name by name; names of characters the
    cast no longer has are dropped; each locale's names in the cast's order."""
    order = [c.id for c in cast]
    merged: dict[str, tuple[str | None, dict[str, str]]] = {}
    for code, names in (*base, *written):
        title, chars = merged.get(code, (None, {}))
        merged[code] = (names.title or title, {**chars, **dict(names.characters)})
    out = []
    for code, (title, chars) in sorted(merged.items()):
        kept = tuple((cid, chars[cid]) for cid in order if cid in chars)
        if title or kept:
            out.append((code, LocalNames(title, kept)))
    return tuple(out)


def _local_problems(written: tuple[tuple[str, LocalNames], ...], merged: tuple[tuple[str, LocalNames], ...],
                    cast: tuple[Character, ...]) -> list[tuple[str, str]]:
    """(where, what) for local names of unknown characters, and for a name (an id, an English or
    a local name, in any locale) that would find two different characters."""
    ids = {c.id for c in cast}
    out = []
    for code, names in written:
        for cid, _name in names.characters:
            if cid not in ids:
                out.append((f"local.{code}.characters.{cid}", f"unknown character (the cast: {', '.join(c.id for c in cast)})"))
    owner: dict[str, tuple[str, str]] = {}  # fold(name) -> (character id, which of its names)
    for c in cast:
        for key, which in ((c.name, "English name"), (c.id, "id")):
            owner.setdefault(fold(key), (c.id, which))
    mine = {(code, cid) for code, names in written for cid, _ in names.characters}
    entries = [(code, cid, name) for code, names in merged for cid, name in names.characters if cid in ids]
    entries.sort(key=lambda e: (e[0], e[1]) in mine)  # the names this file writes are the ones reported
    for code, cid, name in entries:
        other, which = owner.setdefault(fold(name), (cid, f"{code} name"))
        if other != cid:
            out.append((f"local.{code}.characters.{cid}", f"{name!r} already names character {other!r} (its {which}): a name must find one character"))
    return out


_FIELD_CHECKS = {
    "title": lambda v, w: _text(v, w),
    "mllm_checkpoint": lambda v, w: _matching(v, w, FOLDER_RE, "a folder name (letters, digits, '.', '-', '_')"),
    "decoder_checkpoint": lambda v, w: _matching(v, w, FOLDER_RE, "a folder name (letters, digits, '.', '-', '_')"),
    "hub_repo": lambda v, w: _matching(v, w, HUB_REPO_RE, "a hub repository 'owner/name'"),
    "characters": _characters,
    **{name: _suggestions for name in SUGGESTION_FIELDS},
    "local": _local,
}


def parse_films(data: Mapping, source: str, base: Mapping[str, Film] | None = None) -> dict[str, Film]:
    """The films of one parsed file laid over `base`: a table whose id is in `base` overrides the
    fields it sets, a new id must set every required field, `enabled = false` withdraws a film.
    Raises CatalogueError listing every problem as `<source>: film '<id>': <field>: <what>`."""
    films = dict(base or {})
    problems: list[str] = []
    extra = sorted(set(data) - {"films"})
    if extra:
        problems.append(f"{source}: {extra[0]}: unknown top-level key (a films file holds [films.<id>] tables)")
    tables = data.get("films", {})
    if not isinstance(tables, dict):
        problems.append(f"{source}: films: must be tables [films.<id>]")
        tables = {}

    def problem(fid: str, where: str, what: str) -> None:
        problems.append(f"{source}: film {fid!r}: {where}: {what}")

    for fid, table in tables.items():
        if not FILM_ID_RE.match(fid):
            problem(fid, "id", "must be lowercase letters, digits, '-' or '_' (at most 32), starting with a letter or digit")
            continue
        if not isinstance(table, dict):
            problem(fid, "id", "must be a table [films.<id>]")
            continue
        values, ok = {}, True
        for key, v in table.items():
            if key not in KNOWN_FIELDS:
                problem(fid, key, f"unknown field (known: {', '.join(KNOWN_FIELDS)})")
                ok = False
                continue
            if key == "enabled":
                if not isinstance(v, bool):
                    problem(fid, key, "must be true or false")
                    ok = False
                continue
            try:
                values[key] = _FIELD_CHECKS[key](v, key)
            except _Problem as p:
                problem(fid, p.where, p.what)
                ok = False
        if not ok:
            continue
        if table.get("enabled") is False:
            films.pop(fid, None)
            continue
        if fid not in films:
            missing = [k for k in REQUIRED if k not in values]
            if missing:
                for k in missing:
                    problem(fid, k, "missing (required for a film that is not in the packaged catalogue)")
                continue
        cast = values.get("characters") or films[fid].characters
        written = values.pop("local", ())
        local = _merge_local(films[fid].local if fid in films else (), written, cast)
        bad = _local_problems(written, local, cast)
        for where, what in bad:
            problem(fid, where, what)
        if bad:
            continue
        if fid in films:
            films[fid] = dataclasses.replace(films[fid], **values, local=local, source=source)
        else:
            films[fid] = Film(id=fid, **values, local=local, source=source)
    for fid, where, what in _title_clashes(films, source):
        problem(fid, where, what)
    if problems:
        raise CatalogueError(problems)
    return films


def _title_clashes(films: Mapping[str, Film], source: str) -> list[tuple[str, str, str]]:
    """A local title that is another film's id or title (English or local) would make a film
    typed by its title ambiguous: (film, where, what) for those of the films `source` defines."""
    owner: dict[str, str] = {}
    for f in films.values():
        for key in (f.id, f.title):
            owner.setdefault(fold(key), f.id)
    out = []
    for f in sorted(films.values(), key=lambda f: f.source == source):  # others' titles first: they stand
        for code, names in f.local:
            if not names.title:
                continue
            other = owner.setdefault(fold(names.title), f.id)
            if other != f.id and f.source == source:
                out.append((f.id, f"local.{code}.title", f"{names.title!r} already names film {other!r}: a title must find one film"))
    return out


def read_films_file(path: str | Path, base: Mapping[str, Film] | None = None) -> dict[str, Film]:
    """One operator file laid over `base` (default: the packaged catalogue)."""
    path = Path(path)
    data = read_toml(path, "films file", CatalogueError)
    return parse_films(data, str(path), packaged_films() if base is None else base)


def packaged_films() -> dict[str, Film]:
    text = resources.files("game").joinpath("films.toml").read_text(encoding="utf-8")
    return parse_films(tomllib.loads(text), PACKAGED)


def load_catalogue(operator_file: str | Path | None) -> dict[str, Film]:
    """The packaged films with the operator's file (if any) laid over them."""
    return read_films_file(operator_file) if operator_file else packaged_films()


# ------------------------------------------------------------------------------------------
# The process's active catalogue


class _ActiveFilms(Mapping[str, Film]):
    """Read-only view of the active catalogue (loaded from the settings on first use)."""

    def __init__(self) -> None:
        self._films: dict[str, Film] | None = None

    def _current(self) -> dict[str, Film]:
        if self._films is None:
            self._films = load_catalogue(load_settings().films)
        return self._films

    def __getitem__(self, key: str) -> Film:
        return self._current()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._current())

    def __len__(self) -> int:
        return len(self._current())

    def __repr__(self) -> str:
        return f"FILMS({', '.join(self._current())})"


FILMS = _ActiveFilms()
DEFAULT_FILM = "qiqi"


def use_films(films: Mapping[str, Film] | None) -> None:
    """Make `films` the process's catalogue (None: load it again from the settings on next use)."""
    FILMS._films = dict(films) if films is not None else None


def get_film(film_id: str) -> Film:
    """A film of the catalogue, or UnknownFilm naming the known ones."""
    film = FILMS.get(film_id)
    if film is None:
        raise UnknownFilm(film_id, sorted(FILMS))
    return film


def find_film(key: str) -> Film | None:
    """A film of the catalogue by id, or by any of its titles (English or local; case, width and
    spacing do not matter)."""
    if key in FILMS:
        return FILMS[key]
    return next((f for f in FILMS.values() if f.matches(key)), None)


def session_film(film_id: str) -> Film:
    """The film of an existing game session: FilmWithdrawn (the session waits, paused) when the
    catalogue no longer has it, rather than an error that breaks the command."""
    film = FILMS.get(film_id)
    if film is None:
        raise FilmWithdrawn(film_id)
    return film


def film_selection(values: list[str] | tuple[str, ...] | None) -> list[str] | None:
    """`--film` values as given on a command line: repeatable, comma-separated, `all` for every
    film of the catalogue; None when none were given. Unknown ids raise UnknownFilm."""
    if not values:
        return None
    out: list[str] = []
    for v in values:
        for part in (p.strip() for p in v.split(",")):
            ids = list(FILMS) if part == "all" else [part] if part else []
            for fid in ids:
                get_film(fid)
                if fid not in out:
                    out.append(fid)
    return out or None


def display_film(film_id: str) -> Film:
    """For showing what a session already did (posting a finished turn, naming a character): the
    catalogue's film, or a stand-in titled by the id when the film was withdrawn, so a withdrawn
    film never stops a finished turn from being posted (character ids stand in for names)."""
    film = FILMS.get(film_id)
    if film is not None:
        return film
    return Film(id=film_id, title=f"{film_id} (withdrawn)", mllm_checkpoint="-", decoder_checkpoint="-", characters=())


def suggest(options: tuple[str, ...], typed: str, limit: int = 25) -> list[str]:
    """Autocomplete: entries containing what was typed, prefix matches first (Discord shows <=25)."""
    t = typed.strip().casefold()
    pre = [o for o in options if o.casefold().startswith(t)]
    rest = [o for o in options if t in o.casefold() and o not in pre]
    return (pre + rest)[:limit]


def load_checked_settings(**overrides) -> Settings:
    """The settings, with the film catalogue loaded (the packaged films plus ANIMEGAMER_FILMS), the
    operator's content rules loaded (game.operator_rules, ANIMEGAMER_CONTENT_RULES) and the default
    film checked against it; every command calls this at start, so a bad films or rules file
    stops the program with errors naming the file, the film and the field. (The settings module
    sits below the game's rules, so it cannot know the films itself.)"""
    settings = load_settings(**overrides)
    try:
        films = load_catalogue(settings.films)
    except CatalogueError as e:
        lines = "\n".join(f"  {p}" for p in e.problems)
        raise SettingsError(f"invalid film catalogue (ANIMEGAMER_FILMS):\n{lines}") from None
    use_films(films)
    try:
        use_rules(load_rules(settings.content_rules))
    except RulesFileError as e:
        lines = "\n".join(f"  {p}" for p in e.problems)
        raise SettingsError(f"invalid content rules (ANIMEGAMER_CONTENT_RULES):\n{lines}") from None
    if settings.default_film not in films:
        known = ", ".join(sorted(films))
        raise SettingsError(
            f"invalid settings:\n  ANIMEGAMER_DEFAULT_FILM: unknown film {settings.default_film!r}; known: {known}"
        )
    return settings
