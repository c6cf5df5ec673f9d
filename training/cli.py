"""`animegamer train a|b|c|plan|install`: the thin entry. Everything a run does is in its config
(training/configs/phase_<x>.toml, `--set` overrides), its recipe and training/engine.py.

The same command runs under `accelerate launch --config_file training/accelerate/<setup>.yaml
-m animegamer train ...` on one or several GPUs and machines (docs/training.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

PHASES = {"a": "encoder and decoder reconstruction", "b": "the MLLM", "c": "decoder adaptation on the MLLM's predictions"}


def register(sub) -> None:
    p = sub.add_parser("train", help="train a film's models from a prepared training set (docs/training.md)")
    tsub = p.add_subparsers(dest="train_command", required=True)
    for phase, what in PHASES.items():
        t = tsub.add_parser(phase, help=f"phase ({phase}): {what}")
        t.add_argument("--data", required=True, metavar="DIR", help="the training set (animegamer film prepare/features)")
        _config_arguments(t)
        t.add_argument("--max-steps", type=int, metavar="N", help="optimizer steps (overrides run.max_steps)")
        t.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in --out")
        t.add_argument("--out", required=True, metavar="DIR", help="the run's folder: checkpoints, losses, export")
        t.add_argument("--no-fit", action="store_true", help="run the config as given, without the memory check")
        t.add_argument("--no-progress", action="store_true", help="no progress bar")
        t.set_defaults(func=_train, phase=phase)
    pl = tsub.add_parser("plan", help="predicted peak GPU memory of each phase, and what fits each card")
    pl.add_argument("phases", nargs="*", metavar="PHASE", help="a, b, c (default: all)")
    _config_arguments(pl)
    pl.set_defaults(func=_plan)
    ins = tsub.add_parser("install", help="put a trained film where the worker looks and add it to the films file")
    ins.add_argument("runs", nargs="+", metavar="RUN_DIR", help="the run folders: phase (b)'s and the decoder phase's")
    ins.add_argument("--models", metavar="DIR", help="the models directory (default: the settings' models dir)")
    ins.add_argument("--films", metavar="FILE", help="the films file to merge the film into (default: ANIMEGAMER_FILMS, "
                     "else <models>/films.toml)")
    ins.add_argument("--link", action="store_true", help="symlink the exports instead of copying them")
    ins.add_argument("--replace", action="store_true", help="allow overriding a packaged film (qiqi, ponyo)")
    ins.set_defaults(func=_install)


def _config_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="FILE", help="the phase's TOML (default training/configs/phase_<x>.toml)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                   help="override a setting, e.g. run.lr=1e-4 or phase.lora_rank=16 (repeatable)")
    p.add_argument("--gpu-memory", metavar="SIZE", help="the card to fit when no GPU is visible, e.g. 24GiB or 16GB")


def _fail(message: str) -> int:
    print(f"animegamer train: {message}", file=sys.stderr)
    return 2


def _load(phase: str, args: argparse.Namespace):
    from training.config import default_config_path, load_config

    path = Path(args.config) if getattr(args, "config", None) else default_config_path(phase)
    overrides = list(args.overrides)
    if getattr(args, "max_steps", None) is not None:
        overrides.append(f"run.max_steps={args.max_steps}")
    return load_config(path, overrides)


def _fit(phase: str, config, gpu_memory: str | None):
    """The config made to fit the card (or None and a refusal message)."""
    from training.memory import card_gib, fit, shape_function

    card = card_gib(gpu_memory)
    if card is None:
        print("memory: no GPU visible and no --gpu-memory: the config runs as given")
        return config, None
    gib, where = card
    try:
        shape_of = shape_function(phase)
    except LookupError as e:
        print(f"memory: {e}: the config runs as given")
        return config, None
    chosen = fit(shape_of, config.run, config.phase, gib)
    if not chosen.fits:
        return None, f"{where}: phase ({phase}) {chosen.message}"
    print(f"memory: {where}: {chosen.message}")
    config.run, config.phase = chosen.run, chosen.phase
    return config, None


def _train(args: argparse.Namespace) -> int:
    import torch

    from training.config import ConfigError
    from training.engine import TrainingError, train

    phase = args.phase
    data = Path(args.data)
    if not data.is_dir():
        return _fail(f"--data {data}: no such folder (prepare one: animegamer film prepare)")
    try:
        config = _load(phase, args)
        if not args.no_fit:
            fitted, refusal = _fit(phase, config, args.gpu_memory)
            if fitted is None:
                return _fail(refusal or "does not fit")
            config = fitted
        recipe = config.make_recipe(data)
        result = train(recipe, config.run, Path(args.out), resume=args.resume, config_text=config.to_toml(),
                       progress=not args.no_progress)
    except (ConfigError, TrainingError, FileNotFoundError) as e:
        return _fail(str(e))
    except torch.OutOfMemoryError:
        return _fail(f"out of GPU memory in phase ({phase}); what is still free to save: {_savings_left(config)} "
                     f"(see `animegamer train plan {phase}`); the last checkpoint in {args.out} resumes with --resume")
    except ValueError as e:  # the recipes' data errors (MLLMDataError, DecoderDataError, ...) are ValueErrors
        return _fail(str(e))
    print(f"phase ({phase}): {result.steps} steps, last loss {result.losses[-1]['loss']:.4g}" if result.losses else
          f"phase ({phase}): nothing to do (already at step {result.steps})")
    for path in result.exported:
        print(f"  exported {path}")
    _films_entry(phase, recipe, Path(args.out))
    return 0


def _savings_left(config) -> str:
    from training.memory import SAVINGS

    left = []
    for saving in SAVINGS:
        section, _, key = saving.key.partition(".")
        table = config.run.to_dict() if section == "run" else config.phase
        if key in table and table[key] != saving.value:
            left.append(f"--set {saving.key}={saving.value!r}".replace("'", '"'))
    return ", ".join(left) or "none: lower run.batch_size or use several GPUs (training/accelerate/)"


def _films_entry(phase: str, recipe, out: Path) -> None:
    """After phase (b) (or a decoder phase that names its film): the films-file entry, printed."""
    film_id = getattr(recipe, "film_id", None)
    cast = getattr(recipe, "cast", None)
    if not film_id or cast is None:
        return
    from training.export import write_film_entry
    from training.mllm_recipe import agent_folder

    title = getattr(getattr(recipe, "settings", None), "title", "") or film_id
    path = write_film_entry(out, film_id, title, Path(agent_folder(film_id)), Path(f"VDM_Decoder-{film_id}"), cast())
    print(f"films entry written to {path}:\n")
    print(path.read_text(encoding="utf-8"))


def _install(args: argparse.Namespace) -> int:
    from training.install import InstallError, install

    try:
        done = install([Path(r) for r in args.runs], Path(args.models) if args.models else None,
                       Path(args.films) if args.films else None, link=args.link, replace=args.replace)
    except InstallError as e:
        return _fail(str(e))
    how = "linked" if args.link else "copied"
    print(f"film {done.film_id} ({done.title}) installed:\n  MLLM     {how} to {done.mllm}\n  decoder  {how} to {done.decoder}\n"
          f"  films    {done.films_file}")
    if done.setting_line:
        print("add this line to the settings (.env or the environment) so the bot, the play page and the worker offer it:")
        print(done.setting_line)
    print(f"play it: animegamer worker --film {done.film_id}")
    return 0


def _plan(args: argparse.Namespace) -> int:
    from training.config import ConfigError
    from training.memory import card_gib, fit, shape_function, table

    rows = {}
    unknown = [p for p in args.phases if p not in PHASES]
    if unknown:
        return _fail(f"no phase {', '.join(unknown)} (phases: a, b, c)")
    for phase in args.phases or list(PHASES):
        try:
            config = _load(phase, args)
            rows[f"{phase}"] = (shape_function(phase), config.run, config.phase)
        except (ConfigError, LookupError) as e:
            print(f"phase ({phase}): {e}")
    if not rows:
        return _fail("no phase has a memory shape")
    print(table(rows))
    card = card_gib(args.gpu_memory)
    if card is not None:
        gib, where = card
        for phase, (shape_of, run, table_) in rows.items():
            print(f"phase ({phase}) on {where}: {fit(shape_of, run, table_, gib).message}")
    return 0
