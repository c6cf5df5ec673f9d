"""`animegamer eval`: score a film, memory mode and preset on the paper's Table 1 metrics, or compare
finished evaluations (docs/evaluation.md)."""

from __future__ import annotations

import errno
import sys
from pathlib import Path

MODES = ("auto", "resident", "low_vram", "offload", "offload_int4")
PRESETS = ("exact", "fast", "fastest")
SPLITS = ("heldout", "train", "all")


def _fail(text: str, status: int = 2) -> int:
    print(f"animegamer eval: {text}", file=sys.stderr)
    return status


def _compare(args) -> int:
    from evaluation.report import compare, compare_markdown, write_compare

    if len(args.compare) < 2:
        return _fail("--compare needs two evaluation folders or more (the first is the baseline)")
    result = compare([Path(d) for d in args.compare], seed=args.seed)
    print(compare_markdown(result))
    if args.out:
        write_compare(Path(args.out), result)
        print(f"written: {Path(args.out) / 'report.md'}")
    return 0


def _evaluate(args) -> int:
    from evaluation.evaluate import Options, evaluate
    from game.catalogue import load_checked_settings

    missing = [flag for flag, value in (("--film", args.film), ("--games", args.games), ("--out", args.out)) if not value]
    if missing:
        return _fail(f"{', '.join(missing)} needed (or --compare DIR DIR... to compare finished evaluations)")
    overrides = {k: v for k, v in (("memory_mode", args.memory_mode), ("decoder_speed", args.preset),
                                   ("decoder_steps", args.steps)) if v is not None}
    settings = load_checked_settings(**overrides)
    options = Options(
        film=args.film, games=Path(args.games), out=Path(args.out), backend=args.backend or settings.backend,
        references=Path(args.references) if args.references else None, split=args.split, seed=args.seed,
        clip=Path(args.clip) if args.clip else None, dreamsim=Path(args.dreamsim) if args.dreamsim else None,
        progress=not args.no_progress,
    )
    report = evaluate(settings, options)
    s = report["summary"]
    print(f"{len(report['games'])} games scored; report: {options.out / 'report.md'}")
    for key, label in report["labels"].items():
        value = s[key]["value"]
        print(f"  {label}: {report['not_measured'].get(key, 'not measured') if value is None else f'{value:.4f}'}")
    return 0


def _run(args) -> int:
    """Bad input as one line naming the file and line, never a traceback; finished turns stay on disk."""
    from evaluation.errors import EvalInputError
    from film.frames import VideoError
    from inference.backend import BackendError
    from inference.backends import BackendUnavailable

    try:
        return _compare(args) if args.compare else _evaluate(args)
    except (EvalInputError, BackendUnavailable, BackendError, VideoError) as e:
        return _fail(str(e))
    except KeyboardInterrupt:
        return _fail("interrupted; the finished turns are kept: run the same command again to continue", 130)
    except OSError as e:
        where = f"{e.filename}: " if e.filename else ""
        if e.errno == errno.ENOSPC:
            return _fail(f"{where}the disk is full; the finished turns are kept: free some space and run the same "
                         "command again to continue", 1)
        return _fail(f"{where}{e.strerror or e}", 1)


def register(sub) -> None:
    p = sub.add_parser(
        "eval", help="score a film on the paper's metrics (CLIP-I, DreamSim, CLIP-T, motion, states, speed), or "
                     "compare evaluations",
        description="Play each game of a games file through the worker's backend and score every turn on the paper's "
                    "Table 1 metrics; or compare finished evaluations with bootstrap intervals (docs/evaluation.md).")
    p.add_argument("--film", help="the film's id in the catalogue (animegamer films list)")
    p.add_argument("--games", metavar="FILE", help="games.jsonl of the film pipeline, or a hand-written file of that form")
    p.add_argument("--out", metavar="DIR", help="the evaluation's folder (continued when it holds the same run); "
                                                "with --compare: where the comparison is written")
    p.add_argument("--backend", choices=("animegamer", "preview"), help="default: the settings' backend")
    p.add_argument("--memory-mode", choices=MODES, help="default: the settings' (ANIMEGAMER_MEMORY_MODE)")
    p.add_argument("--preset", choices=PRESETS, help="decoder speed preset (default: ANIMEGAMER_DECODER_SPEED)")
    p.add_argument("--steps", type=int, help="decoder steps (default: ANIMEGAMER_DECODER_STEPS)")
    p.add_argument("--seed", type=int, default=0, help="fixes every turn's seed (and the bootstrap's); default 0")
    p.add_argument("--split", choices=SPLITS, default="heldout", help="which games of the file to play (default heldout)")
    p.add_argument("--references", metavar="DIR", help="reference images <character id>.png (default: the games "
                                                        "file's film folder, its cast.json)")
    p.add_argument("--clip", metavar="DIR", help="CLIP model folder (default: <models dir>/evaluation/clip)")
    p.add_argument("--dreamsim", metavar="DIR", help="DreamSim model folder (default: <models dir>/evaluation/dreamsim)")
    p.add_argument("--compare", nargs="+", metavar="DIR", help="compare finished evaluations, the first as baseline")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_run)

