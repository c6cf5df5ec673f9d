"""Reading and checking a films file (game/films.toml, an operator's ANIMEGAMER_FILMS): every
problem named with the file, the film and the field; pure on the parsed tables (`parse_films`), so
it is also what `animegamer films check` runs."""

from __future__ import annotations

import dataclasses
import re
import tomllib
import unicodedata
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

from babel import Locale, UnknownLocaleError

from game.film import (
    CHARACTER_ID_RE,
    FILM_ID_RE,
    FOLDER_RE,
    HUB_REPO_RE,
    LOCAL_NAME_MAX,
    NAME_MAX,
    NAME_SEPARATORS,
    PACKAGED,
    Character,
    Film,
    LocalNames,
    fold,
    locale_key,
)
from game.sanitize import InputRefused, sanitize_field
from game.toml_files import read_toml
from i18n import locales
from settings.limits import FIELD_MAX, SUGGESTION_FIELD


class CatalogueError(ValueError):
    """A films file that cannot be used; each line names the file, the film and the field."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


REQUIRED = ("title", "mllm_checkpoint", "decoder_checkpoint", "characters")
SUGGESTION_FIELDS = tuple(SUGGESTION_FIELD)  # motions, adverbs, backgrounds, times
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
    """A suggestion list (`where`: motions, adverbs, backgrounds, times): each term within its /act
    field's cap, as Discord's autocomplete offers it for that field."""
    if not isinstance(v, list):
        raise _Problem(where, "must be a list of strings")
    cap = FIELD_MAX[SUGGESTION_FIELD[where]]
    out: list[str] = []
    for i, s in enumerate(v):
        text = _model_safe(s, f"{where}[{i}]", cap)
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
