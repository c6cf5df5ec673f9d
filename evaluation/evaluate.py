"""One evaluation, end to end: check the input, play the games (evaluation.play), score every turn
(evaluation.metrics), write the report (evaluation.report). Each stage keeps its work on disk, so
running the same command again continues where a stopped one ended.

The backend plays first and is closed before the metric models load, so the turns' peak GPU memory
is the backend's alone."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluation.cast import players as cast_players
from evaluation.errors import EvalInputError
from evaluation.games_file import EvalGame, read_games
from evaluation.metrics import Scorers, not_measured, score_turn
from evaluation.play import play_games
from evaluation.report import build_report, write_report
from evaluation.run_dir import file_sha256, metrics_path, open_run
from evaluation.scorers import ClipScorer, DreamSimScorer
from film.atomic import read_json, write_json
from game.catalogue import FILMS
from inference.backend import Backend
from settings import Settings


@dataclass(frozen=True)
class Options:
    film: str
    games: Path
    out: Path
    backend: str = "preview"
    references: Path | None = None
    split: str = "heldout"
    seed: int = 0
    clip: Path | None = None  # None: <models dir>/evaluation/clip
    dreamsim: Path | None = None  # None: <models dir>/evaluation/dreamsim
    progress: bool = True
    sheets: bool = True


def _memory_mode(settings: Settings, backend: str) -> str:
    if backend == "preview":
        return "-"  # no model: the memory mode and preset change nothing
    if settings.memory_mode != "auto":
        return settings.memory_mode
    from inference.memory.choose_mode import resolve

    return resolve(settings, 1).mode  # what make_backend will pick (the plan is cached on disk)


def run_config(settings: Settings, o: Options, games: list[EvalGame]) -> dict[str, Any]:
    model = o.backend != "preview"
    return {
        "film": o.film, "games_file": str(o.games.resolve()), "games_sha256": file_sha256(o.games), "split": o.split,
        "backend": o.backend, "memory_mode": _memory_mode(settings, o.backend),
        "preset": settings.decoder_speed if model else "-", "seed": o.seed,
        "history_window": settings.history_window, "decoder_steps": settings.decoder_steps if model else "-",
        "games": [g.id for g in games],
        "models_dir": str(settings.model_root) if model else "-",  # said, not checked: a moved folder is the same model
    }


def _score(out: Path, games: list[EvalGame], records: list[list[dict]], players, scorers: Scorers,
           progress: bool) -> list[list[dict]]:
    """Every turn's scores; a turn scored before with the same metric models is read back."""
    from tqdm import tqdm

    identity = scorers.identity()
    bar = tqdm(total=sum(len(g.turns) for g in games), unit="turn", desc="metrics", disable=not progress,
               dynamic_ncols=True)
    scores = []
    try:
        for game, recs in zip(games, records, strict=True):
            row = []
            for turn, rec in zip(game.turns, recs, strict=True):
                path = metrics_path(out, game.id, turn.index)
                cached = read_json(path)
                if cached is None or cached.get("models") != identity:
                    cached = {**score_turn(out / rec["clip"], rec, turn, players[turn.character].reference, scorers),
                              "models": identity}
                    write_json(path, cached)
                row.append(cached)
                bar.update(1)
            scores.append(row)
    finally:
        bar.close()
    return scores


def evaluate(settings: Settings, o: Options, backend: Backend | None = None) -> dict[str, Any]:
    """Play, score and report; returns report.json's content. `backend`: one already built (tests);
    by default the worker's, from the settings (make_backend)."""
    if o.film not in FILMS:
        raise EvalInputError(f"--film {o.film}: no such film (known: {', '.join(sorted(FILMS)) or 'none'}; "
                             "`animegamer films list`)")
    games = read_games(o.games, o.split)
    players = cast_players(FILMS[o.film], games, o.games, o.references)
    config = open_run(o.out, run_config(settings, o, games))
    if backend is None:
        from inference.backends import make_backend

        backend = make_backend(settings, o.backend, films=[o.film])
    try:
        records = play_games(o.out, o.film, games, players, backend, seed=o.seed,
                             history_window=settings.history_window, progress=o.progress)
    finally:
        close = getattr(backend, "close", None)
        if callable(close):
            close()
    root = settings.model_root / "evaluation"
    scorers = Scorers(ClipScorer.load(o.clip or root / "clip"), DreamSimScorer.load(o.dreamsim or root / "dreamsim"))
    scores = _score(o.out, games, records, players, scorers, o.progress)
    report = build_report(config, games, records, scores, not_measured(scorers, [r for g in records for r in g]))
    write_report(o.out, report, o.sheets)
    return report
