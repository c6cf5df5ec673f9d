"""`animegamer films list` and `animegamer films check FILE`: the film catalogue as the program
sees it (game/films.toml plus the operator's ANIMEGAMER_FILMS file)."""

from __future__ import annotations

import sys

from game.catalogue import FILMS, PACKAGED, CatalogueError, load_checked_settings, read_films_file


def _list(args) -> int:
    settings = load_checked_settings()  # loads and checks the operator's file too
    print(f"film catalogue: {PACKAGED}" + (f" + {settings.films}" if settings.films else " (no ANIMEGAMER_FILMS file)"))
    for film in FILMS.values():
        default = " (default)" if film.id == settings.default_film else ""
        print(f"\n{film.id}{default}: {film.title}   [{film.source}]")
        print(f"  checkpoints  {film.mllm_checkpoint}, {film.decoder_checkpoint}"
              + (f"  (hub: {film.hub_repo})" if film.hub_repo else "  (not on the hub: copied by hand)"))
        print("  characters   " + ", ".join(c.name if c.name == c.id.capitalize() else f"{c.name} [{c.id}]" for c in film.characters))
        for label in ("motions", "adverbs", "backgrounds", "times"):
            values = getattr(film, label)
            print(f"  {label:12} {', '.join(values) if values else '-'}")
        for code, _names in film.local:
            cast = ", ".join(film.character_name_in(c.id, code) for c in film.characters)
            print(f"  {'local ' + code:12} {film.title_in(code)}: {cast}")
    return 0


def _check(args) -> int:
    try:
        films = read_films_file(args.file)
    except CatalogueError as e:
        print(f"animegamer films check: {len(e.problems)} problem(s):", file=sys.stderr)
        for p in e.problems:
            print(f"  {p}", file=sys.stderr)
        return 1
    print(f"{args.file}: valid; the catalogue with it: {', '.join(films)}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("films", help="the film catalogue: list it, check an operator's films file")
    fsub = p.add_subparsers(dest="films_command", required=True)
    ls = fsub.add_parser("list", help="the films this installation offers (packaged + ANIMEGAMER_FILMS)")
    ls.set_defaults(func=_list)
    ck = fsub.add_parser("check", help="validate a films file (TOML) against the packaged catalogue")
    ck.add_argument("file", help="path to the films file")
    ck.set_defaults(func=_check)
