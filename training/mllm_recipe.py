"""Phase (b): the AnimeGamer MLLM learns to play the film.

Mistral-7B-Instruct-v0.1 (loaded by the worker's own loader, inference.mllm.loading), wrapped as
the release wrapped it (`wrap_released`: vocabulary grown to 32,284, the released LoRA r=32 on
q/k/v/o/gate/up/down, the three norms as trained copies), plus the embeddings and the head and
both resamplers trained. A sample is a game's first k turns (k = 1..5, each game prefix one
sample, so 1- to 5-turn games weigh the same): the earlier turns are history (their clips'
representations fed through the input resampler, their states as tokens), the k-th turn's 226
query tokens regress its clip's representation (MSE) and its four `<Strength_k>` tokens are
learned by next-token cross-entropy; loss = ce_scale * CE + mse_scale * MSE.

Everything the worker reads is the worker's: the prompt (PromptBuilder.build, plus the state span
from `build_training`), the token ids (inference.mllm.tokens), the 4D mask with the bidirectional
query block and Mistral's window (inference.mllm.mask), left padding as the worker's batches.
The representation is read where the worker reads it (`readout`, inference.mllm.predict).

Targets: phase (a)'s representation encoder (training.encoder.RepresentationEncoder) applied to
each clip's stored T5 and CLIP features (film.features) gives the 226 x 1920 representation the
decoder is conditioned on; it is frozen here and computed per sample on the CPU.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from accelerate import Accelerator
from torch import nn
from torch.utils.data import Dataset

from film.cast import CastError, read_cast
from film.manifest import GAMES, MANIFEST, read_features_index
from inference.mllm.instruction import InstructionEncoder
from inference.mllm.loading import (
    LORA_TARGETS,
    CheckpointError,
    load_agent_checkpoint,
    load_base,
    lora_config,
    wrap_released,
)
from inference.mllm.mask import attention_mask_4d, position_ids
from inference.mllm.model import AnimeGamerMLLM, input_embeddings
from inference.mllm.prompt import NUM_QUERY, TAIL, HistoryItem, PromptBuilder
from inference.mllm.tokens import BASE_VOCAB, UNK_ID, VOCAB_SIZE, SpecialIds
from training.config import ConfigError, RunConfig

log = logging.getLogger(__name__)

STATE_SPAN = 12  # ids after the prompt: <Strength_a></ML><SC>...<Strength_d></ST></TURN>
READOUTS = ("released", "query")
QUANTIZE = ("none", "int8")
AGENT_FILE = "pytorch_model.bin"  # the released agent checkpoint's name (inference.model_paths)


class MLLMDataError(ValueError):
    """A training set phase (b) cannot read (the message names the file and what to run)."""


@dataclass(frozen=True)
class PhaseB:
    """`[phase]` of training/configs/phase_b.toml."""

    base_model: str = ""  # Mistral-7B-Instruct-v0.1 folder (transformers layout)
    tokenizer: str = ""  # the AnimeGamer tokenizer folder
    init_agent: str = ""  # optional: a released agent checkpoint to start from
    encoder: str = ""  # phase (a)'s encoder (its export folder or file, or a released SAT decoder)
    quantize: str = "int8"  # the frozen base's Linear weights: "int8" (torchao) or "none"
    lora_rank: int = 32
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    max_turns: int = 5
    max_turn_tokens: int = 300
    ce_scale: float = 1.0
    mse_scale: float = 1.0
    readout: str = "released"  # where the representation is read: as the worker reads it
    film_id: str = ""
    title: str = ""
    export_dtype: str = "bf16"  # the agent checkpoint's tensors: "bf16" (as released) or "fp32"

    @classmethod
    def from_table(cls, table: dict[str, Any]) -> PhaseB:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(table) - known)
        if unknown:
            raise ConfigError(f"[phase] of phase (b) has no setting {', '.join(unknown)} (it has: {', '.join(sorted(known))})")
        settings = cls(**table)
        if settings.readout not in READOUTS:
            raise ConfigError(f"phase.readout must be one of {READOUTS}, not {settings.readout!r}")
        if settings.quantize not in QUANTIZE:
            raise ConfigError(f"phase.quantize must be one of {QUANTIZE}, not {settings.quantize!r}")
        if settings.export_dtype not in ("bf16", "fp32"):
            raise ConfigError(f"phase.export_dtype must be bf16 or fp32, not {settings.export_dtype!r}")
        if not 1 <= settings.max_turns <= 5:
            raise ConfigError(f"phase.max_turns must be 1..5 (the paper's games), not {settings.max_turns}")
        return settings


# ---------------------------------------------------------------------------------------------
# The training set: games.jsonl's games, each clip's features from the shards


@dataclass(frozen=True)
class Turn:
    clip: str
    instruction: str
    values: tuple[int, int, int, int]  # motion level, social, entertainment, stamina
    shard: Path


def read_games(folder: Path, split: str, max_turns: int = 5) -> list[list[Turn]]:
    """The games of one split, each a list of turns with its clip's features shard."""
    folder = Path(folder)
    if not folder.is_dir():
        raise MLLMDataError(f"{folder}: no such folder (the training set: animegamer film prepare DIR)")
    if not (folder / MANIFEST).is_file():
        raise MLLMDataError(f"{folder}: no {MANIFEST} (run `animegamer film prepare` first)")
    path = folder / GAMES
    if not path.is_file():
        raise MLLMDataError(f"{path}: missing (accept clips on the review page, or run `animegamer film games DIR`)")
    index = read_features_index(folder)
    games: list[list[Turn]] = []
    no_features: list[str] = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            game = json.loads(line)
            if game["split"] != split:
                continue
            turns = []
            for t in game["turns"][:max_turns]:
                values = (int(t["motion_level"]), int(t["social"]), int(t["entertainment"]), int(t["stamina"]))
                if t["clip"] not in index:
                    no_features.append(t["clip"])
                    continue
                turns.append(Turn(t["clip"], str(t["instruction"]), values, folder / index[t["clip"]]))
        except (KeyError, TypeError, ValueError) as e:
            raise MLLMDataError(f"{path}:{n}: not a game line ({type(e).__name__}: {e}); run `animegamer film games DIR`") from None
        if turns:
            games.append(turns)
    if no_features:
        raise MLLMDataError(f"{folder}: {len(no_features)} clip(s) of the games have no features, e.g. {no_features[:3]} "
                            "(run `animegamer film features DIR`: it computes only what is missing)")
    for shard in sorted({t.shard for g in games for t in g}):
        if not shard.is_file():
            raise MLLMDataError(f"{shard}: a features shard the index names is missing")
    return games


class _Shards:
    """Tensors by key from safetensors shards, each opened once, lazily (workers open their own)."""

    def __init__(self) -> None:
        self._open: dict[Path, Any] = {}

    def get(self, shard: Path, key: str) -> torch.Tensor:
        from safetensors import safe_open

        if shard not in self._open:
            self._open[shard] = safe_open(str(shard), framework="pt")
        try:
            return self._open[shard].get_tensor(key)
        except Exception as e:  # safetensors raises its own error type for a missing key
            raise MLLMDataError(f"{shard}: has no tensor {key!r} ({e}); run `animegamer film features DIR` again") from None

    def __getstate__(self) -> dict[str, Any]:
        return {"_open": {}}


class GamePrefixes(Dataset):
    """One sample per (game, k): the game's first k turns, the k-th one predicted."""

    def __init__(self, games: list[list[Turn]], encoder: nn.Module) -> None:
        self.games = games
        self.items = [(g, k) for g, turns in enumerate(games) for k in range(1, len(turns) + 1)]
        self.encoder = encoder.eval().requires_grad_(False)
        self.shards = _Shards()

    def __len__(self) -> int:
        return len(self.items)

    @torch.no_grad()
    def representation(self, turn: Turn) -> torch.Tensor:
        text = self.shards.get(turn.shard, f"{turn.clip}/text").float()[None]
        image = self.shards.get(turn.shard, f"{turn.clip}/image").float()[None]
        return self.encoder(text, image)[0].float()

    def __getitem__(self, i: int) -> dict[str, Any]:
        g, k = self.items[i]
        turns = self.games[g][:k]
        return {"turns": turns, "reps": torch.stack([self.representation(t) for t in turns])}


# ---------------------------------------------------------------------------------------------
# The model


class MLLMTrainee(nn.Module):
    """The AnimeGamer MLLM and its training forward: losses from a collated batch (so DDP's
    hooks see one forward)."""

    def __init__(self, mllm: AnimeGamerMLLM, readout: str, ce_scale: float, mse_scale: float) -> None:
        super().__init__()
        self.mllm = mllm
        self.readout, self.ce_scale, self.mse_scale = readout, ce_scale, mse_scale

    def forward(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        mllm = self.mllm
        ids, pad, length = batch["input_ids"], batch["pad"], batch["input_ids"].shape[1]
        embeds = mllm.embed(ids)
        if batch["history_reps"].shape[0]:  # earlier turns' slots: their clips' representations
            projected = mllm.input_resampler(batch["history_reps"].to(embeds.dtype))
            slots = torch.zeros_like(embeds)
            slots[batch["slot_rows"], batch["slot_cols"]] = projected.reshape(-1, projected.shape[-1])
            embeds = torch.where(batch["slot_mask"][..., None], slots, embeds)
        prompt_end = length - STATE_SPAN
        block = (prompt_end - TAIL - NUM_QUERY, prompt_end - TAIL)
        window = getattr(mllm.config, "sliding_window", None)
        mask = attention_mask_4d(pad, 0, length, length, embeds.dtype, block, window)
        hidden = mllm.transformer(embeds, mask, position_ids(pad, 0, length), None)
        stop = prompt_end if self.readout == "released" else prompt_end - TAIL
        predicted = mllm.output_resampler(hidden[:, stop - NUM_QUERY : stop])
        mse = F.mse_loss(predicted.float(), batch["target"].float())
        # The logits that choose each <Strength_k> come from the position before it.
        before = torch.tensor([prompt_end + 3 * k - 1 for k in range(4)], device=hidden.device)
        logits = mllm.logits(hidden[:, before]).float()
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch["state_targets"].reshape(-1))
        loss = self.ce_scale * ce + self.mse_scale * mse
        return {"loss": loss, "ce": ce.detach(), "mse": mse.detach()}


def mark_trainable(mllm: AnimeGamerMLLM) -> None:
    """What the release trained: peft's LoRA factors and norm copies (already trainable), the
    embeddings and the head (the added tokens' rows live there) and both resamplers."""
    mllm.causal_lm.get_input_embeddings().requires_grad_(True)
    mllm.causal_lm.lm_head.requires_grad_(True)
    mllm.input_resampler.requires_grad_(True)
    mllm.output_resampler.requires_grad_(True)


def quantize_frozen_base(llm: nn.Module) -> int:
    """int8 weights (torchao) for the decoder layers' Linear layers before the LoRA wraps them;
    the embeddings and the head stay in full precision as they are trained."""
    from inference.mllm.quantize import quantize_linears

    return sum(quantize_linears(layer, "int8") for layer in llm.model.layers)  # type: ignore[union-attr]


# ---------------------------------------------------------------------------------------------
# The recipe


class MLLMRecipe:
    name = "b"
    find_unused_parameters = True  # a batch without history leaves the input resampler unused

    def __init__(self, data: Path, settings: PhaseB, run: RunConfig) -> None:
        self.data, self.settings, self.run = Path(data), settings, run
        self.train_games = read_games(self.data, "train", settings.max_turns)
        if not self.train_games:
            raise MLLMDataError(f"{self.data / GAMES}: no training games (every game is held out, or no clip "
                                "was accepted: animegamer film review DIR)")
        self.heldout_games = read_games(self.data, "heldout", settings.max_turns)
        for option, value in (("base_model", settings.base_model), ("tokenizer", settings.tokenizer),
                              ("encoder", settings.encoder)):
            if not value:
                raise ConfigError(f"phase (b) needs phase.{option} (--set phase.{option}=PATH)")
            if not Path(value).exists():
                raise ConfigError(f"phase.{option} = {value}: no such file or folder")
        from training.encoder import RepresentationEncoder

        self.encoder = RepresentationEncoder.load(settings.encoder)
        self.builder: PromptBuilder | None = None
        self.special: SpecialIds | None = None

    # -- model -------------------------------------------------------------------------------

    def build_model(self, accelerator: Accelerator) -> nn.Module:
        s = self.settings
        device = accelerator.device
        # bf16 base on a GPU under bf16 mixed precision (the trained parts are cast to fp32 below);
        # fp32 elsewhere (a CPU, or fp16 autocast, which needs fp32 masters).
        dtype = torch.bfloat16 if (device.type == "cuda" and self.run.mixed_precision == "bf16") else torch.float32
        checkpoints = [s.init_agent] if s.init_agent else []
        base = load_base(s.base_model, s.tokenizer, checkpoints, device=device, dtype=dtype, attn_implementation="sdpa")
        self.special = base.special
        self.builder = PromptBuilder(InstructionEncoder(base.tokenizer, base.special), base.special,
                                     history_window=s.max_turns - 1)
        llm = base.llm
        vocab = input_embeddings(llm).weight.shape[0]
        if vocab not in (BASE_VOCAB, VOCAB_SIZE):
            raise ConfigError(f"phase.base_model = {s.base_model}: its vocabulary has {vocab} tokens; AnimeGamer grows "
                              f"Mistral-7B-Instruct-v0.1's {BASE_VOCAB} to {VOCAB_SIZE} (is it another model?)")
        if s.quantize == "int8":
            quantize_frozen_base(llm)
        if self.run.gradient_checkpointing:
            llm.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        mllm = wrap_released(llm, int(self.encoder.dims["width"]), lora_config(r=s.lora_rank, alpha=s.lora_alpha, dropout=s.lora_dropout))
        mllm.input_resampler.to(device)
        mllm.output_resampler.to(device)
        if s.init_agent:
            try:
                report = load_agent_checkpoint(mllm, s.init_agent)
            except CheckpointError as e:
                raise ConfigError(f"phase.init_agent: {e}") from None
            log.info("phase (b) starts from %s", report.summary())
        mark_trainable(mllm)
        for p in mllm.parameters():  # fp32 masters for what is trained
            if p.requires_grad and p.dtype != torch.float32:
                p.data = p.data.float()
        return MLLMTrainee(mllm, s.readout, s.ce_scale, s.mse_scale)

    def param_groups(self, model: nn.Module) -> list[dict]:
        return [{"params": [p for p in model.parameters() if p.requires_grad]}]

    # -- data --------------------------------------------------------------------------------

    def dataset(self) -> Dataset:
        return GamePrefixes(self.train_games, self.encoder)

    def val_dataset(self) -> Dataset | None:
        return GamePrefixes(self.heldout_games, self.encoder) if self.heldout_games else None

    def collate(self, items: list[dict[str, Any]]) -> dict[str, Any]:
        """Left-padded rows (as the worker's batches): every row's query block, tail and state
        span at the same columns."""
        if self.builder is None:
            raise RuntimeError("build_model first: the prompt builder needs the tokenizer")
        rows, history, targets, state = [], [], [], []
        for item in items:
            turns, reps = item["turns"], item["reps"]
            past = [HistoryItem(t.instruction, t.values, np.zeros((NUM_QUERY, 1), np.float32)) for t in turns[:-1]]
            turn = self.builder.build_training(turns[-1].instruction, past, turns[-1].values)
            too_long = [t.clip for t in turns if len(self.builder.encoder.encode(t.instruction)) > self.settings.max_turn_tokens]
            if too_long:
                raise MLLMDataError(f"instruction of clip {too_long[0]} is longer than max_turn_tokens")
            rows.append((turn.input_ids, turn.prompt.history_starts))
            history.append(reps[:-1])
            targets.append(reps[-1])
            state.append(turn.state_targets)
        length = max(len(ids) for ids, _ in rows)
        ids = torch.full((len(rows), length), UNK_ID, dtype=torch.long)
        pad = torch.tensor([length - len(r) for r, _ in rows])
        slot_mask = torch.zeros((len(rows), length), dtype=torch.bool)
        slot_rows, slot_cols = [], []
        for b, (row, starts) in enumerate(rows):
            ids[b, int(pad[b]):] = torch.tensor(row)
            for start in starts:
                cols = torch.arange(NUM_QUERY) + int(pad[b]) + start
                slot_mask[b, cols] = True
                slot_rows.append(torch.full((NUM_QUERY,), b))
                slot_cols.append(cols)
        width = targets[0].shape[-1]
        return {
            "input_ids": ids, "pad": pad, "slot_mask": slot_mask,
            "slot_rows": torch.cat(slot_rows) if slot_rows else torch.zeros(0, dtype=torch.long),
            "slot_cols": torch.cat(slot_cols) if slot_cols else torch.zeros(0, dtype=torch.long),
            "history_reps": torch.cat(history) if any(len(h) for h in history) else torch.zeros(0, NUM_QUERY, width),
            "target": torch.stack(targets), "state_targets": torch.tensor(state, dtype=torch.long),
        }

    def loss(self, model: nn.Module, batch: Any, step: int) -> dict[str, torch.Tensor]:
        device = next(p for p in model.parameters()).device
        return model({k: v.to(device) for k, v in batch.items()})

    # -- output ------------------------------------------------------------------------------

    def export(self, model: nn.Module, out: Path, accelerator: Accelerator) -> list[Path]:
        from training.export import save_agent_checkpoint

        mllm = model.mllm if isinstance(model, MLLMTrainee) else model
        folder = Path(out) / agent_folder(self.film_id)
        if not accelerator.is_main_process:
            return [folder / AGENT_FILE]
        dtype = torch.bfloat16 if self.settings.export_dtype == "bf16" else torch.float32
        return [save_agent_checkpoint(mllm, folder / AGENT_FILE, dtype)]  # type: ignore[arg-type]

    @property
    def film_id(self) -> str:
        return self.settings.film_id or film_id_of(self.data)

    def describe(self) -> dict[str, Any]:
        turns = sum(len(g) for g in self.train_games)
        return {"training set": str(self.data), "training games": len(self.train_games),
                "training samples (game prefixes)": sum(len(g) for g in self.train_games), "turns": turns,
                "held-out games": len(self.heldout_games), "base model": self.settings.base_model,
                "encoder (targets)": self.settings.encoder, "film id": self.film_id}

    def cast(self) -> list[dict[str, str]]:
        try:
            return [{"id": m.id, "name": m.name} for m in read_cast(self.data).members]
        except CastError as e:
            raise MLLMDataError(str(e)) from None


def film_id_of(folder: Path) -> str:
    """A films-file id from the training set's folder name (lowercase, [a-z0-9_-], 32 at most)."""
    import re

    text = re.sub(r"[^a-z0-9_-]+", "-", Path(folder).resolve().name.lower()).strip("-_")
    return (text or "film")[:32]


def agent_folder(film_id: str) -> str:
    return f"MLLM-{film_id}"


def make(data: Path, phase: dict[str, Any], run: RunConfig) -> MLLMRecipe:
    return MLLMRecipe(data, PhaseB.from_table(phase), run)


# ---------------------------------------------------------------------------------------------
# Memory (training/memory.py)


def _mistral_config(base_model: str) -> dict[str, Any]:
    """The base's MistralConfig fields: its folder's config.json, or Mistral-7B's shape."""
    from inference.mllm.model import MISTRAL_7B_SHAPE

    path = Path(base_model) / "config.json" if base_model else None
    if path is not None and path.is_file():
        fields = json.loads(path.read_text(encoding="utf-8"))
        return {k: fields[k] for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                                       "num_key_value_heads", "vocab_size") if k in fields}
    return dict(MISTRAL_7B_SHAPE)


def parameter_counts(config: dict[str, Any], rank: int, rep_dim: int) -> tuple[int, int, int]:
    """(frozen, trainable, LoRA input widths per layer) of the phase's model, built on the meta
    device exactly as build_model builds it (no weights; cached: a fit asks several times)."""
    return _parameter_counts(tuple(sorted(config.items())), rank, rep_dim)


@functools.lru_cache(maxsize=8)
def _parameter_counts(config: tuple[tuple[str, Any], ...], rank: int, rep_dim: int) -> tuple[int, int, int]:
    from transformers import MistralConfig, MistralForCausalLM

    with torch.device("meta"):
        llm = MistralForCausalLM(MistralConfig(**{**dict(config), "tie_word_embeddings": False}))
        mllm = wrap_released(llm, rep_dim, lora_config(r=rank))
    mark_trainable(mllm)
    frozen = sum(p.numel() for p in mllm.parameters() if not p.requires_grad)
    trainable = sum(p.numel() for p in mllm.parameters() if p.requires_grad)
    layer = mllm.causal_lm.model.layers[0]
    inputs = sum(m.in_features for n, m in layer.named_modules() if isinstance(m, nn.Linear) and n.endswith("base_layer"))
    return frozen, trainable, inputs


def phase_shape(run: RunConfig, phase: dict[str, Any]) -> Any:
    """Phase (b)'s PhaseShape at its configured sizes: a sample is max_turns turns of
    max_turn_tokens tokens; four positions are scored over the vocabulary."""
    from training.memory import PhaseShape

    s = PhaseB.from_table({k: v for k, v in phase.items() if k in {f.name for f in dataclasses.fields(PhaseB)}})
    config = _mistral_config(s.base_model)
    rep_dim = 1920  # the CogVideoX-2B width, unless phase (a)'s encoder says otherwise
    if s.encoder and Path(s.encoder).exists():
        from training.encoder import RepresentationEncoder

        rep_dim = int(RepresentationEncoder.load(s.encoder).dims["width"])
    frozen, trainable, lora_inputs = parameter_counts(config, s.lora_rank, rep_dim)
    half = run.mixed_precision in ("bf16", "fp16")
    frozen_dtype = "int8" if s.quantize == "int8" else ("bf16" if half else "fp32")
    tokens = s.max_turns * s.max_turn_tokens
    width, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    kv_width = int(config.get("num_key_value_heads", heads)) * (width // heads)
    return PhaseShape(
        phase="b", frozen=frozen, trainable=trainable, tokens=tokens, width=width,
        layers=int(config["num_hidden_layers"]), ffn=int(config["intermediate_size"]), frozen_dtype=frozen_dtype,
        compute_bytes=2 if half else 4, lora_inputs=lora_inputs, logits=4 * VOCAB_SIZE,
        sample_bytes=4 * s.max_turns * NUM_QUERY * rep_dim, kv_width=kv_width, heads=heads,
        lora_outputs=len(LORA_TARGETS) * s.lora_rank, mask=True,
        largest_trainable=VOCAB_SIZE * width,  # the head (and the embeddings): the grown vocabulary x width
        # torchao's int8 linear dequantizes its weight into the matmul, which autograd keeps
        dequantized=(2 * width * width + 2 * width * kv_width + 3 * width * int(config["intermediate_size"]))
        if s.quantize == "int8" else 0,
    )
