"""A film and its characters as data (what game/films.toml and an operator's films file describe):
ids, checkpoints, the cast, the suggestions, and the names each has per locale.
`game.films_file` reads and checks the files; `game.catalogue` holds the films a process plays."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from i18n import current_locale, locales
from i18n.locales import _ALIASES  # zh_HK -> zh_TW...: the same families for names as for catalogs

PACKAGED = "game/films.toml"  # how the shipped file is named in messages
FILM_ID_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")  # stored on sessions; names the queue film.<id>
CHARACTER_ID_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
FOLDER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")  # a plain folder name, no path
HUB_REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
NAME_MAX = 40
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
