"""Prediction of a turn: the 226 x 1920 representation and the four state values.

Defaults and what they reproduce (docs/models.md lists how they differ from the released demo):

- `readout="released"` (default): the representation is the output projection of the hidden
  states at the last 226 positions of the prompt, which ends in `</frame></img><ML>`, so it is the
  query block shifted by three tokens. This is what the released `generate_bi` returns, the only
  inference path the release ships, and the released decoder was fine-tuned on the MLLM's
  predictions (training phase (c) of the paper), so the shipped decoder weights were most likely
  tuned on this readout. `readout="query"` reads the 226 query tokens themselves, as the MLLM's
  training loss did.
- `state_pass="training"` (default): the four values are decoded on top of the representation
  pass, whose query block is bidirectional, as in training (`bilateral_attention: True`); one
  prefill serves both outputs. `state_pass="released_causal"` reproduces the released demo, whose
  state text pass ran the whole prompt with a plain causal mask: then only the prefix before the
  query block is shared (it is causal in both passes) and the block and tail run a second time.
- Values are chosen by argmax over the 11 `<Strength_k>` ids at the four free positions; the fixed
  tokens of `<ML>v</ML><SC>v</SC><ET>v</ET><ST>v</ST>` are fed, not generated, three per step.
  Nothing is parsed from text (the release split decoded text and mapped failures to zeros).

Batches are left-padded so that every row's query block and tail sit at the same columns.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from transformers import DynamicCache

from .mask import attention_mask_4d, position_ids
from .model import PredictModel
from .prompt import NUM_QUERY, TAIL, TurnPrompt
from .tokens import UNK_ID, SpecialIds

READOUTS = ("released", "query")
STATE_PASSES = ("training", "released_causal")


@dataclass(frozen=True)
class PredictOptions:
    readout: str = "released"
    state_pass: str = "training"
    use_cache: bool = True  # False recomputes the whole sequence at every state step (for checks)

    def __post_init__(self) -> None:
        if self.readout not in READOUTS:
            raise ValueError(f"readout must be one of {READOUTS}, got {self.readout!r}")
        if self.state_pass not in STATE_PASSES:
            raise ValueError(f"state_pass must be one of {STATE_PASSES}, got {self.state_pass!r}")


@dataclass
class TurnOutput:
    representation: np.ndarray  # (226, rep_dim) float32
    values: tuple[int, int, int, int]  # motion level, social, entertainment, stamina
    state_logits: np.ndarray  # (4, 11) float32: logits of <Strength_-5>..<Strength_5> per value
    timings: dict[str, float] = field(default_factory=dict)  # seconds, for the whole batch


class MLLMPredictor:
    def __init__(self, model: PredictModel, special: SpecialIds, options: PredictOptions | None = None):
        self.model = model
        self.ids = special
        self.options = options or PredictOptions()
        self.sliding_window = getattr(model.config, "sliding_window", None)
        self._strength = torch.tensor(special.strength, device=model.device)

    def predict(self, prompt: TurnPrompt, options: PredictOptions | None = None) -> TurnOutput:
        return self.predict_batch([prompt], options)[0]

    @torch.inference_mode()
    def predict_batch(self, prompts: Sequence[TurnPrompt], options: PredictOptions | None = None) -> list[TurnOutput]:
        if not prompts:
            return []
        reps_t, chosen, logits_t, timings = self.forward(prompts, options)
        reps = reps_t.float().cpu().numpy()
        values = (chosen - 5).tolist()  # index 0..10 -> -5..5
        state_logits = logits_t.cpu().numpy()
        return [
            TurnOutput(reps[b], tuple(values[b]), state_logits[b], dict(timings)) for b in range(len(prompts))
        ]

    def forward(self, prompts: Sequence[TurnPrompt], options: PredictOptions | None = None):
        """The batch's outputs as tensors on the model's device: representations (B, 226, rep_dim),
        chosen strength indices (B, 4), their logits (B, 4, 11); and the stage timings. All of the
        model's work, and nothing that reads values back (inference.memory traces it on fake tensors)."""
        opt = options or self.options
        t0 = self._now()
        batch = _Batch.build(self.model, prompts)
        if opt.use_cache:
            rep_hidden, logits, cache = self._prefill_cached(batch, opt)
        else:
            rep_hidden, logits, cache = self._prefill_full(batch, opt)
        reps = self.model.output_resampler(rep_hidden)
        t1 = self._now()
        chosen, state_logits = self._decode_states(batch, opt, logits, cache)
        t2 = self._now()
        return reps, chosen, state_logits, {"prefill": t1 - t0, "states": t2 - t1}

    # -- passes -----------------------------------------------------------------------------

    def _forward(self, batch: _Batch, start: int, embeds, block, cache):
        stop = start + embeds.shape[1]
        mask = attention_mask_4d(batch.pad, start, stop, stop, embeds.dtype, block, self.sliding_window)
        return self.model.transformer(embeds, mask, position_ids(batch.pad, start, stop), cache)

    def _readout(self, hidden: torch.Tensor, offset: int, length: int, readout: str) -> torch.Tensor:
        """Slice the representation positions out of hidden states that start at column `offset`."""
        stop = length if readout == "released" else length - TAIL
        return hidden[:, stop - NUM_QUERY - offset : stop - offset]

    def _prefill_cached(self, batch: _Batch, opt: PredictOptions):
        L, block = batch.length, batch.block
        cache = DynamicCache()
        if opt.state_pass == "training":
            h = self._forward(batch, 0, batch.embeds, block, cache)
            return self._readout(h, 0, L, opt.readout), self.model.logits(h[:, -1]), cache
        # released_causal: share the causal prefix, then run block + tail once per mask.
        p = block[0]
        self._forward(batch, 0, batch.embeds[:, :p], None, cache)
        rep_cache = copy.deepcopy(cache)
        h_rep = self._forward(batch, p, batch.embeds[:, p:], block, rep_cache)
        del rep_cache
        h_txt = self._forward(batch, p, batch.embeds[:, p:], None, cache)
        return self._readout(h_rep, p, L, opt.readout), self.model.logits(h_txt[:, -1]), cache

    def _prefill_full(self, batch: _Batch, opt: PredictOptions):
        h = self._forward(batch, 0, batch.embeds, batch.block, None)
        rep = self._readout(h, 0, batch.length, opt.readout)
        if opt.state_pass == "released_causal":
            h = self._forward(batch, 0, batch.embeds, None, None)
        return rep, self.model.logits(h[:, -1]), None

    def _decode_states(self, batch: _Batch, opt: PredictOptions, logits, cache):
        s = self.ids
        chosen, all_logits = [], []
        embeds, cols = batch.embeds, batch.length
        for k in range(4):
            sl = logits[:, self._strength].float()
            pick = sl.argmax(dim=-1)
            chosen.append(pick)
            all_logits.append(sl)
            if k == 3:
                break
            # Fixed grammar: the value, its closing tag and the next span's opening tag.
            close_tag = torch.full_like(pick, s.state_close[k])
            next_open = torch.full_like(pick, s.state_open[k + 1])
            fed = torch.stack([self._strength[pick], close_tag, next_open], dim=1)
            new = self.model.embed(fed)
            if cache is not None:  # the new tokens are after the block: plain causal rows
                h = self._forward(batch, cols, new, None, cache)
            else:
                embeds = torch.cat([embeds, new], dim=1)
                block = batch.block if opt.state_pass == "training" else None
                h = self._forward(batch, 0, embeds, block, None)
            cols += fed.shape[1]
            logits = self.model.logits(h[:, -1])
        return torch.stack(chosen, dim=1), torch.stack(all_logits, dim=1)

    def _now(self) -> float:
        if self.model.device.type == "cuda" and torch.cuda.is_available():  # (fake CUDA tensors: nothing to wait for)
            torch.cuda.synchronize(self.model.device)
        return time.perf_counter()


@dataclass
class _Batch:
    embeds: torch.Tensor  # (B, L, hidden), history slots already replaced
    pad: torch.Tensor  # (B,) left padding per row
    length: int
    block: tuple[int, int]  # columns of the current query block (the same in every row)

    @classmethod
    def build(cls, model: PredictModel, prompts: Sequence[TurnPrompt]) -> _Batch:
        device = model.device
        L = max(len(p) for p in prompts)
        pads = [L - len(p) for p in prompts]
        ids = torch.full((len(prompts), L), UNK_ID, dtype=torch.long)
        for b, p in enumerate(prompts):
            if p.query_end + TAIL != len(p):
                raise ValueError("prompt does not end with the current turn's query block and tail")
            ids[b, pads[b] :] = torch.tensor(p.input_ids)
        embeds = model.embed(ids.to(device))
        reps = [r for p in prompts for r in p.history_reps]
        if reps:
            stacked = torch.from_numpy(np.stack([np.asarray(r, dtype=np.float32) for r in reps]))
            projected = model.input_resampler(stacked.to(device=device, dtype=embeds.dtype))
            k = 0
            for b, p in enumerate(prompts):
                for start in p.history_starts:
                    c = pads[b] + start
                    embeds[b, c : c + NUM_QUERY] = projected[k]
                    k += 1
        block = (L - TAIL - NUM_QUERY, L - TAIL)
        return cls(embeds, torch.tensor(pads, device=device), L, block)
