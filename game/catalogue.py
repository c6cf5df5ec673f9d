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

from collections.abc import Iterator, Mapping

from game.errors import FilmWithdrawn, UnknownFilm

# The data types and the files' reader live in their own modules; the names callers take from
# the catalogue are re-exported here.
from game.film import NAME_SEPARATORS, PACKAGED, Character, Film, fold  # noqa: F401
from game.films_file import (  # noqa: F401
    CatalogueError,
    load_catalogue,
    packaged_films,
    parse_films,
    read_films_file,
)
from game.operator_rules import RulesFileError, load_rules, use_rules
from settings import Settings, SettingsError, load_settings


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
