"""Play each game through a worker backend, turn by turn, as a channel would play it: the request
carries the last `history_window` turns of this game (the model's own predictions and
representations) and the character's states after the earlier turns, and the seed is fixed by
(run seed, game, turn). Every clip, representation and prediction is kept (evaluation.run_dir);
a run stopped at any point continues at its first unfinished turn with the same history, so it
ends as an uninterrupted one would."""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from contracts.turn import HistoryTurn, TurnRequest
from evaluation.cast import Player
from evaluation.games_file import EvalGame, EvalTurn
from evaluation.run_dir import clip_path, load_array, record_path, rep_path, save_array
from film.atomic import read_json, write_bytes, write_json
from game import states as rules
from game.states import Prediction
from inference.backend import Backend


def turn_seed(seed: int, game: str, index: int) -> int:
    """A turn's seed: fixed by the run's seed, the game and the turn, whatever else ran before."""
    return int.from_bytes(hashlib.sha256(f"{seed}/{game}/{index}".encode()).digest()[:4], "big") & 0x7FFFFFFF


@contextmanager
def gpu_peak() -> Iterator[dict]:
    """The peak of torch.cuda.max_memory_allocated over the block (bytes), or None when nothing
    ran on a GPU (no torch imported, no CUDA, or CUDA never initialised)."""
    found: dict = {"bytes": None}
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.reset_peak_memory_stats()
    yield found
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        found["bytes"] = int(torch.cuda.max_memory_allocated())


@dataclass(frozen=True)
class PlayedTurn:
    record: dict
    history: HistoryTurn


def _request(film: str, game: EvalGame, turn: EvalTurn, player: Player, seed: int, states: dict[str, rules.CharacterState],
             history: list[HistoryTurn], window: int) -> TurnRequest:
    return TurnRequest(
        turn_id=turn.index + 1, session_id=game.line, film_id=film, instruction=turn.instruction,
        characters=(player.name,), motion=turn.motion, adverb=turn.adverb, background=turn.background,
        time_of_day=turn.time, seed=seed,
        states_before={player.name: states.get(player.id, rules.CharacterState())},
        history=tuple(history[-window:]) if window > 0 else (),
    )


def _load_done(out: Path, game: EvalGame, index: int) -> PlayedTurn | None:
    record = read_json(record_path(out, game.id, index))
    if record is None:
        return None
    rep = rep_path(out, game.id, index)
    prediction = Prediction.from_sequence(record["predicted"])
    return PlayedTurn(record, HistoryTurn(record["instruction"], prediction, load_array(rep) if rep.is_file() else None))


def _play_turn(out: Path, film: str, game: EvalGame, turn: EvalTurn, player: Player, backend: Backend, seed: int,
               states: dict[str, rules.CharacterState], history: list[HistoryTurn], window: int) -> PlayedTurn:
    request = _request(film, game, turn, player, seed, states, history, window)
    with gpu_peak() as peak:
        t0 = time.perf_counter()
        result = backend.generate(request, lambda _f, _s: None)
        seconds = time.perf_counter() - t0
    if result.mp4 is None:
        raise RuntimeError(f"the {backend.name} backend made no clip for game {game.id}, turn {turn.index + 1}")
    write_bytes(clip_path(out, game.id, turn.index), result.mp4)
    if result.representation is not None:
        save_array(rep_path(out, game.id, turn.index), result.representation)
    record = {
        "game": game.id, "turn": turn.index + 1, "seed": seed, "character": player.id, "instruction": turn.instruction,
        "predicted": list(result.prediction.as_tuple()), "motion_scope": result.motion_scope,
        "states_before": states.get(player.id, rules.CharacterState()).as_dict(),
        "seconds": seconds, "peak_gpu_bytes": peak["bytes"], "timings": result.timings, "is_preview": result.is_preview,
        "clip": str(clip_path(out, game.id, turn.index).relative_to(out)),
    }
    write_json(record_path(out, game.id, turn.index), record)  # last: the turn is finished
    rep = None if result.representation is None else load_array(rep_path(out, game.id, turn.index))
    return PlayedTurn(record, HistoryTurn(turn.instruction, result.prediction, rep))


def pending(out: Path, games: list[EvalGame]) -> int:
    """Turns without a record yet."""
    return sum(not record_path(out, g.id, t.index).is_file() for g in games for t in g.turns)


def play_games(out: Path, film: str, games: list[EvalGame], players: dict[str, Player], backend: Backend, *,
               seed: int, history_window: int, progress: bool = True) -> list[list[dict]]:
    """Every turn's record, per game in order; turns already recorded in `out` are read, not played.
    The backend is loaded only when a turn is left to play."""
    from tqdm import tqdm

    total = sum(len(g.turns) for g in games)
    left = pending(out, games)
    if left:
        backend.load()
    bar = tqdm(total=total, initial=total - left, unit="turn", desc="eval", disable=not progress, dynamic_ncols=True)
    played: list[list[dict]] = []
    try:
        for game in games:
            bar.set_description(f"eval {game.id}")
            states: dict[str, rules.CharacterState] = {}
            history: list[HistoryTurn] = []
            records: list[dict] = []
            for turn in game.turns:
                player = players[turn.character]
                done = _load_done(out, game, turn.index)
                if done is None:
                    done = _play_turn(out, film, game, turn, player, backend, turn_seed(seed, game.id, turn.index),
                                      states, history, history_window)
                    bar.update(1)
                states[player.id] = rules.apply(states.get(player.id, rules.CharacterState()),
                                                done.history.prediction)
                history.append(done.history)
                records.append(done.record)
            played.append(records)
    finally:
        bar.close()
    return played
