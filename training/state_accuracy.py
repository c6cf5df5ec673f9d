"""What a phase-(b) MLLM predicts for the turns of a training set's games, by the worker's own
prompt and predictor (inference.mllm), each turn after its game's earlier turns as history
(teacher-forced: their annotated values and their clips' representations), beside what the games
annotate: the four values motion level, social, entertainment, stamina.

Scoring is the evaluation's (evaluation.metrics.state_scores: ACC-S over the three state changes);
callers above both packages (scripts/train_tiny.py, the tests) score these pairs with it, so the
rule lives in one place."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from inference.mllm.instruction import InstructionEncoder
from inference.mllm.model import PredictModel
from inference.mllm.predict import MLLMPredictor
from inference.mllm.prompt import HistoryItem, PromptBuilder

from .mllm_recipe import Turn

Values = tuple[int, int, int, int]  # motion level, social, entertainment, stamina


@torch.no_grad()
def predicted_values(mllm: PredictModel, special, tokenizer, games: Sequence[Sequence[Turn]],
                     representation: Callable[[Turn], np.ndarray], history_window: int = 2) -> list[tuple[Values, Values]]:
    """(predicted, annotated) values of every turn of `games`, in order."""
    builder = PromptBuilder(InstructionEncoder(tokenizer, special), special, history_window=history_window)
    predictor = MLLMPredictor(mllm, special)
    pairs: list[tuple[Values, Values]] = []
    for game in games:
        history: list[HistoryItem] = []
        for turn in game:
            out = predictor.predict(builder.build(turn.instruction, history))
            pairs.append((tuple(out.values), turn.values))  # type: ignore[arg-type]
            history.append(HistoryItem(turn.instruction, turn.values, representation(turn)))
    return pairs
