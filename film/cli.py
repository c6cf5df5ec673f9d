"""`animegamer film`: prepare a film's videos into clips, review them, compute training
features, rebuild the games (docs/films-training.md)."""

from __future__ import annotations

import argparse
import errno
import sys
from pathlib import Path

from film.cast import CastError


def _fail(command: str, text: str, status: int = 1) -> int:
    print(f"animegamer film {command}: {text}", file=sys.stderr)
    return status


def _guarded(command: str, run) -> int:
    """Every failure as one line naming the file, never a traceback; finished work stays on disk."""
    from film.captioner_errors import CaptionerError
    from film.frames import VideoError
    from film.prepare import PrepareError

    try:
        return int(run() or 0)
    except (CastError, PrepareError, VideoError, CaptionerError) as e:
        return _fail(command, str(e), 2)
    except KeyboardInterrupt:
        return _fail(command, "interrupted; what was finished is kept: run the same command again to continue", 130)
    except OSError as e:
        where = f"{e.filename}: " if e.filename else ""
        if e.errno == errno.ENOSPC:
            return _fail(command, f"{where}the disk is full; what was finished is kept: free some space and run the "
                                  "same command again to continue")
        return _fail(command, f"{where}{e.strerror or e}")


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"{text} is not a fraction from 0 to below 1")
    return value


def _film_id(text: str) -> str:
    from game.film import FILM_ID_RE

    if not FILM_ID_RE.match(text):
        raise argparse.ArgumentTypeError(f"{text!r}: a film id is 1-32 lowercase letters, digits, '-' or '_'")
    return text


def _prepare(args) -> int:
    from film.caption import default_captioner
    from film.prepare import prepare

    # No --captioner: the ANIMEGAMER_CAPTIONER setting's folder, if any; "none" captions nothing.
    captioner = args.captioner if args.captioner is not None else default_captioner()
    return _guarded("prepare", lambda: prepare(
        [Path(v) for v in args.videos], Path(args.out), Path(args.characters), film=args.film,
        captioner=captioner, heldout=args.heldout, detector=args.detector, progress=not args.no_progress))


def _review(args) -> int:
    from film.review import serve

    return _guarded("review", lambda: serve(Path(args.folder), args.host, args.port, args.token))


def _features(args) -> int:
    from film.features import compute

    return _guarded("features", lambda: compute(Path(args.folder), vae=Path(args.vae), t5=Path(args.t5),
                                                clip=Path(args.clip), batch=args.batch, progress=not args.no_progress))


def _games(args) -> int:
    def run() -> int:
        from film.cast import read_cast
        from film.games import SETTINGS, games_for
        from film.manifest import read_manifest, read_review, with_review

        folder = Path(args.folder)
        if not (folder / "manifest.jsonl").is_file():
            return _fail("games", f"{folder}: no manifest.jsonl (run `animegamer film prepare` first)", 2)
        read_cast(folder)
        clips = with_review(read_manifest(folder), read_review(folder))
        summary = games_for(folder, clips, args.heldout)
        if args.heldout is not None:
            from film.atomic import read_json, write_json

            settings = read_json(folder / SETTINGS) or {}
            write_json(folder / SETTINGS, {**settings, "heldout": args.heldout})
        print(f"{folder / 'games.jsonl'}: {summary.train} training and {summary.heldout} held-out game(s), "
              f"{summary.turns} turn(s)")
        if summary.incomplete:
            print(f"{len(summary.incomplete)} accepted clip(s) lack a field a turn needs: {', '.join(summary.incomplete)}",
                  file=sys.stderr)
        return 0

    return _guarded("games", run)


def register(sub) -> None:
    p = sub.add_parser("film", help="bring a film: its videos to a reviewed training set (docs/films-training.md)")
    fsub = p.add_subparsers(dest="film_command", required=True)

    pr = fsub.add_parser("prepare", help="cut the videos into clips, measure their motion, caption them")
    pr.add_argument("videos", nargs="+", metavar="VIDEO", help="the film's video files")
    pr.add_argument("--out", required=True, metavar="DIR", help="the training set's folder (resumed if it exists)")
    pr.add_argument("--characters", required=True, metavar="FILE", help="the cast: TOML with a reference image each")
    pr.add_argument("--film", type=_film_id, metavar="ID", help="the catalogue id of the film the set is for (recorded)")
    pr.add_argument("--captioner", metavar="none|MODEL_DIR", default=None,
                    help="a local vision-language model folder (default: ANIMEGAMER_CAPTIONER); none, or no "
                         "folder set: nothing is captioned and every clip needs review")
    pr.add_argument("--heldout", type=_fraction, default=0.1, metavar="F",
                    help="share of the shots held out for evaluation (default 0.1)")
    pr.add_argument("--detector", choices=("content", "adaptive"), default="content",
                    help="PySceneDetect's detector (default content: threshold 27, min 15 frames)")
    pr.add_argument("--no-progress", action="store_true", help="no progress bars")
    pr.set_defaults(func=_prepare)

    rv = fsub.add_parser("review", help="serve the review page for a prepared folder")
    rv.add_argument("folder", metavar="DIR")
    rv.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    rv.add_argument("--port", type=int, default=8090, help="port (default 8090)")
    rv.add_argument("--token", default=None, help="required to serve beyond the loopback")
    rv.set_defaults(func=_review)

    ft = fsub.add_parser("features", help="compute the VAE latents and the CLIP and T5 features for training")
    ft.add_argument("folder", metavar="DIR")
    ft.add_argument("--vae", required=True, metavar="P", help="the CogVideoX VAE folder")
    ft.add_argument("--t5", required=True, metavar="P", help="the T5 encoder folder")
    ft.add_argument("--clip", required=True, metavar="P", help="the CLIP image encoder folder")
    ft.add_argument("--batch", type=int, default=1, metavar="N", help="clips per batch (default 1)")
    ft.add_argument("--no-progress", action="store_true", help="no progress bars")
    ft.set_defaults(func=_features)

    gm = fsub.add_parser("games", help="rebuild games.jsonl from the manifest and the review")
    gm.add_argument("folder", metavar="DIR")
    gm.add_argument("--heldout", type=_fraction, default=None, metavar="F",
                    help="share of the shots held out (default: the one the folder was prepared with)")
    gm.set_defaults(func=_games)
