"""`animegamer models download FILM`, `animegamer models list` and `animegamer convert-decoder`.

The work is done by inference.model_download (the plan and its steps), inference.hub_client
(talking to the hub, checksums) and inference.model_inventory (what is on disk); this module
is the command.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from game.catalogue import FILMS, get_film
from game.catalogue import load_checked_settings as load_settings
from game.errors import UnknownFilm
from inference.hub_client import EXIT_USAGE, ModelsError
from inference.model_download import download
from inference.model_inventory import inventory


def _models_root(args) -> Path:
    load_settings()  # the film catalogue, with the operator's films file, checked
    if args.models_dir:
        return Path(args.models_dir)
    return load_settings().model_root


def _download(args) -> int:
    root = _models_root(args)
    try:
        film = get_film(args.film)
    except UnknownFilm as e:
        print(f"animegamer models download: {e.message}", file=sys.stderr)
        return EXIT_USAGE
    try:
        download(root, film, skip_convert=args.skip_decoder_convert)
    except ModelsError as e:
        print(f"animegamer models download: {e}", file=sys.stderr)
        return e.exit_code
    print(f"done: {film.id} models in {root}")
    return 0


def _list(args) -> int:
    root = _models_root(args)
    try:
        films = [get_film(f) for f in args.film] if args.film else list(FILMS.values())
    except UnknownFilm as e:
        print(f"animegamer models list: {e.message}", file=sys.stderr)
        return EXIT_USAGE
    print(f"models directory: {root}")
    for film in films:
        print(f"\n{film.id} ({film.title})")
        for c in inventory(root, film):
            mark = "present" if c.present else "MISSING"
            role = "worker" if c.for_worker else "conversion"
            print(f"  {mark:8} {c.name:44} {role:10} {c.path}  {c.detail}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("models", help="download and list model checkpoints")
    msub = p.add_subparsers(dest="models_command", required=True)
    d = msub.add_parser("download", help="fetch a film's checkpoints, Mistral and the VAE from the hub, then convert the decoder")
    d.add_argument("film", help="film id (`animegamer films list`)")
    d.add_argument("--skip-decoder-convert", action="store_true", help="only download")
    d.add_argument("--models-dir", help="default: ANIMEGAMER_MODELS_DIR")
    d.set_defaults(func=_download)
    ls = msub.add_parser("list", help="what is present and missing per film")
    ls.add_argument("--film", action="append", help="only this film (repeatable)")
    ls.add_argument("--models-dir", help="default: ANIMEGAMER_MODELS_DIR")
    ls.set_defaults(func=_list)

    cd = sub.add_parser(
        "convert-decoder",
        help="convert a released SAT decoder (LoRA merged) and the 3D VAE to diffusers/safetensors",
        add_help=False,
    )
    cd.add_argument("argv", nargs=argparse.REMAINDER)
    cd.set_defaults(func=_convert_decoder, forward=True)


def _convert_decoder(args) -> int:
    from inference.decoder.convert import convert_decoder_main  # imports torch: only when used

    return convert_decoder_main(args.argv)
