"""Token-exact prompt of one turn.

Layout (ids, not text):

    BOS
    for each history turn (oldest first, at most `history_window` of them):
        <TURN> instruction <img><frame> [226 representation slots] </frame></img>
        <ML><Strength_a></ML><SC><Strength_b></SC><ET><Strength_c></ET><ST><Strength_d></ST></TURN>
    current turn:
        <TURN> instruction <img><frame> <frame_00000>..<frame_00225> </frame></img> <ML>

History slots hold `<frame_00000>..<frame_00225>` ids, but their embeddings are replaced by that
turn's representation through the input projection. Each history turn carries its own four
values, and `</ST>` once: the released demo wrote the current turn's values and `</ST>` twice
(docs/models.md, "Defaults, and how they differ from the released demo"), which is not the
training format.

`history_window = 0` reproduces the released demo, whose `max_window = 1` breaks out of the
history loop at once; larger windows use the training format (training used 1-5 turns).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from .tokens import SpecialIds


class Encoder(Protocol):
    """What the builder needs of an instruction encoder (inference.mllm.instruction.InstructionEncoder)."""

    def encode(self, text: str) -> list[int]: ...

NUM_QUERY = 226  # representation tokens per turn
TAIL = 3  # </frame></img><ML> after the current turn's query block


@dataclass(frozen=True)
class HistoryItem:
    """One earlier turn as the model reads it."""

    instruction: str
    values: tuple[int, int, int, int]  # motion level, social, entertainment, stamina
    representation: np.ndarray  # (226, rep_dim) float


@dataclass
class TurnPrompt:
    input_ids: list[int]
    query_start: int  # index of <frame_00000> of the current turn (bidirectional block start)
    history_starts: list[int] = field(default_factory=list)  # first slot of each history video span
    history_reps: list[np.ndarray] = field(default_factory=list)

    @property
    def query_end(self) -> int:
        return self.query_start + NUM_QUERY

    def __len__(self) -> int:
        return len(self.input_ids)


@dataclass
class TrainingTurn:
    """A turn as training reads it (phase (b), training/mllm_recipe.py): the worker's prompt for
    the turn, followed by the turn's state span, whose four `<Strength_k>` ids are the targets."""

    prompt: TurnPrompt  # exactly what `build` gives the worker for this turn
    input_ids: list[int]  # prompt ids + `<Strength_a></ML><SC>...<Strength_d></ST></TURN>`
    state_positions: tuple[int, int, int, int]  # indices of the four <Strength_k> ids in input_ids
    state_targets: tuple[int, int, int, int]  # those ids


class PromptBuilder:
    def __init__(self, encoder: Encoder, special: SpecialIds, history_window: int = 0):
        if history_window < 0:
            raise ValueError("history_window must be >= 0")
        self.encoder = encoder
        self.ids = special
        self.history_window = history_window

    def video_span(self) -> list[int]:
        s = self.ids
        return [s.img, s.frame, *(s.frame_token(i) for i in range(NUM_QUERY)), s.frame_end, s.img_end]

    def state_span(self, values: Sequence[int]) -> list[int]:
        s = self.ids
        out: list[int] = []
        for open_id, close_id, v in zip(s.state_open, s.state_close, values, strict=True):
            out += [open_id, s.strength_id(int(v)), close_id]
        return out + [s.turn_end]

    def build(self, instruction: str, history: Sequence[HistoryItem] = ()) -> TurnPrompt:
        s = self.ids
        ids = [s.bos]
        starts: list[int] = []
        reps: list[np.ndarray] = []
        used = list(history)[-self.history_window :] if self.history_window else []
        for item in used:
            if item.representation.shape[0] != NUM_QUERY:
                rows = item.representation.shape[0]
                raise ValueError(f"history representation has {rows} rows, expected {NUM_QUERY}")
            ids += [s.turn, *self.encoder.encode(item.instruction)]
            starts.append(len(ids) + 2)  # after <img><frame>
            reps.append(item.representation)
            ids += self.video_span() + self.state_span(item.values)
        ids += [s.turn, *self.encoder.encode(instruction)]
        query_start = len(ids) + 2
        ids += self.video_span() + [s.state_open[0]]
        return TurnPrompt(ids, query_start, starts, reps)

    def build_training(self, instruction: str, history: Sequence[HistoryItem], values: Sequence[int]) -> TrainingTurn:
        """The worker's prompt (`build`) plus the turn's own state span, as history turns carry it:
        one builder for both, so training reads what inference will."""
        prompt = self.build(instruction, history)
        span = self.state_span(values)[1:]  # the prompt already ends in <ML>
        n = len(prompt)
        positions = (n, n + 3, n + 6, n + 9)  # <Strength_a> ... <Strength_d>
        ids = prompt.input_ids + span
        targets = tuple(ids[i] for i in positions)
        return TrainingTurn(prompt, ids, positions, targets)  # type: ignore[arg-type]
