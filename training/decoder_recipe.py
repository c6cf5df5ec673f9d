"""What the decoder phases (a) and (c) share: the DiT to train (its LoRA and its trainable parts
by name), the v-prediction loss and the memory plan's shape facts; the training set
(training.decoder_data) and the export to the folder the worker loads (training.decoder_export).

The DiT is `AnimeGamerTransformer3DModel`, loaded from a converted decoder folder (the released
decoder after `animegamer convert-decoder`, or an earlier export), from CogVideoX-2B's own
diffusers weights (the paper's start), or built from a config with random weights. Its parts, by the released names:
- `flow_embed` = `ofs_embedding` (linear_1, linear_2); trained fresh, its last layer starts at zero
  so the motion scope first adds nothing to the time embedding;
- the adaLN modulations = each block's `norm1.linear` and `norm2.linear` (SAT's
  `adaLN_modulations.N`, split by the converter); the final layer's `norm_out.linear` belongs to
  SAT's final-layer mixin, not the adaLN one, and stays frozen;
- the LoRA of rank 64 on attention: peft's LoRA on `to_q`, `to_k`, `to_v` and `to_out.0` (the SAT
  LoRA on `query_key_value` in three partitions and on `dense`), scale alpha / r = 1/64 as released.
No VAE, T5 or CLIP is loaded: latents and features come from the film pipeline's shards.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from inference.decoder.transformer import ANIMEGAMER_2B_CONFIG, AnimeGamerTransformer3DModel

from .decoder_data import DecoderDataError
from .diffusion import NoiseSchedule, drop_masks, sample_timesteps, v_loss

__all__ = ["DecoderTrainee", "Draws", "add_lora", "cast_frozen", "decoder_counts", "decoder_shape", "diffusion_loss",
           "dit_config_of", "draws", "half_dtype", "load_transformer", "unwrapped", "video_tokens"]

log = logging.getLogger(__name__)

LORA_TARGETS = ("to_q", "to_k", "to_v", "to_out.0")


# ---------------------------------------------------------------------------------------------
# ---------------------------------------------------------------------------------------------
# The DiT


# The stock CogVideoX config keys that fix the DiT's weights' shapes (the rest is AnimeGamer's).
STOCK_ARCHITECTURE = ("num_attention_heads", "attention_head_dim", "in_channels", "out_channels", "time_embed_dim",
                      "num_layers", "patch_size", "norm_eps", "activation_fn", "attention_bias", "flip_sin_to_cos",
                      "freq_shift", "timestep_activation_fn", "norm_elementwise_affine", "patch_bias")
STOCK_DROPPED = ("patch_embed.text_proj.",)  # T5 -> DiT width: the representation enters unprojected


def transformer_class(folder: Path) -> str | None:
    """The diffusers class a transformer folder holds (None: no transformer config there)."""
    path = folder / "config.json"
    return json.loads(path.read_text(encoding="utf-8")).get("_class_name") if path.is_file() else None


def fresh_flow_embed(model: AnimeGamerTransformer3DModel) -> None:
    """The motion-scope embedding trained fresh starts at zero output (its last layer zero)."""
    nn.init.zeros_(model.ofs_embedding.linear_2.weight)
    nn.init.zeros_(model.ofs_embedding.linear_2.bias)


def from_stock(folder: Path, config: Mapping[str, Any]) -> AnimeGamerTransformer3DModel:
    """CogVideoX-2B's own transformer (diffusers' CogVideoXTransformer3DModel, as THUDM/CogVideoX-2b
    ships it), the paper's starting point: its weights in the AnimeGamer DiT, minus the T5 text
    projection; the motion-scope embedding fresh."""
    from inference.decoder.diffusers_api import CogVideoXTransformer3DModel

    stock = CogVideoXTransformer3DModel.from_pretrained(str(folder), torch_dtype=torch.float32)
    cfg = dict(stock.config)
    if cfg.get("use_rotary_positional_embeddings") or cfg.get("use_learned_positional_embeddings"):
        raise DecoderDataError(f"{folder}: a CogVideoX with rotary or learned positions (5B-style); the "
                               "AnimeGamer decoder is CogVideoX-2B's sin-cos DiT")
    arch = {k: cfg[k] for k in STOCK_ARCHITECTURE if k in cfg}
    width = arch["num_attention_heads"] * arch["attention_head_dim"]
    model = AnimeGamerTransformer3DModel(**{**config, **arch, "ofs_embed_dim": arch["time_embed_dim"],
                                            "text_embed_dim": width})
    fresh_flow_embed(model)
    weights = {k: v for k, v in stock.state_dict().items() if not k.startswith(STOCK_DROPPED)}
    del stock
    missing, unexpected = model.load_state_dict(weights, strict=False)
    left = [k for k in missing if not k.startswith("ofs_embedding.") and k != "uncond_embedding"]
    if left or unexpected:
        raise DecoderDataError(f"{folder}: the CogVideoX weights do not fit the AnimeGamer DiT "
                               f"(missing {left[:5]}, unexpected {unexpected[:5]})")
    return model


def load_transformer(decoder: str | Path | None, config: Mapping[str, Any] = ANIMEGAMER_2B_CONFIG) -> AnimeGamerTransformer3DModel:
    """The DiT to train, float32, from `decoder`:
    - a converted decoder folder (`transformer/` of AnimeGamerTransformer3DModel): as it is;
    - CogVideoX-2B's diffusers folder (the model folder with `transformer/`, or that subfolder):
      its weights, the text projection dropped, the motion-scope embedding fresh;
    - nothing: `config` with random weights and a fresh motion-scope embedding."""
    if not decoder:
        model = AnimeGamerTransformer3DModel(**config)
        fresh_flow_embed(model)
        return model
    folder = Path(decoder)
    sub = folder / "transformer"
    kind = transformer_class(sub) or transformer_class(folder)
    where = sub if transformer_class(sub) else folder
    if kind == "AnimeGamerTransformer3DModel":
        return AnimeGamerTransformer3DModel.from_pretrained(str(where), torch_dtype=torch.float32)
    if kind == "CogVideoXTransformer3DModel":
        return from_stock(where, config)
    raise DecoderDataError(f"{folder}: neither a converted AnimeGamer decoder folder nor CogVideoX-2B's diffusers "
                           "folder (convert the released decoder with `animegamer convert-decoder`)")


def add_lora(transformer: AnimeGamerTransformer3DModel, rank: int, alpha: int) -> None:
    """peft's LoRA on the attention projections (B starts at zero: the DiT's outputs are unchanged)."""
    from peft import LoraConfig

    transformer.add_adapter(LoraConfig(r=rank, lora_alpha=alpha, init_lora_weights=True,
                                       target_modules=list(LORA_TARGETS)))


def part_of(name: str) -> str | None:
    """Which trainable part a DiT parameter belongs to (None: the frozen base)."""
    if "lora_" in name:
        return "lora"
    if name.startswith("ofs_embedding."):
        return "flow_embed"
    if name.startswith("transformer_blocks.") and (".norm1.linear." in name or ".norm2.linear." in name):
        return "adaln"
    return None


class DecoderTrainee(nn.Module):
    """The DiT (with its LoRA) and, in phase (a), the representation encoder: every trainable
    parameter of a decoder phase, and the forward pass the loss runs through."""

    def __init__(self, transformer: AnimeGamerTransformer3DModel, encoder: nn.Module | None = None):
        super().__init__()
        self.transformer = transformer
        self.encoder = encoder

    def named_part_parameters(self) -> Iterator[tuple[str, str, nn.Parameter]]:
        """(part, name, parameter) of every trainable candidate: encoder parts by module name."""
        for name, p in self.transformer.named_parameters():
            part = part_of(name)
            if part is not None:
                yield part, f"transformer.{name}", p
        if self.encoder is not None:
            for name, p in self.encoder.named_parameters():
                yield name.split(".")[0], f"encoder.{name}", p

    def set_trainable(self, parts: Iterable[str]) -> list[nn.Parameter]:
        """requires_grad on exactly these parts (the rest frozen); returns their parameters."""
        parts = set(parts)
        self.requires_grad_(False)
        chosen = []
        for part, _, p in self.named_part_parameters():
            if part in parts:
                p.requires_grad_(True)
                chosen.append(p)
        return chosen

    def forward(self, noisy: torch.Tensor, timestep: torch.Tensor, flow: torch.Tensor,
                rep: torch.Tensor | None = None, text: torch.Tensor | None = None,
                image: torch.Tensor | None = None) -> torch.Tensor:
        if rep is not None:
            context = rep
        elif self.encoder is not None and text is not None and image is not None:
            context = self.encoder(text, image)
        else:
            raise ValueError("give a representation, or text and image features to an encoder")
        return self.transformer.predict_v(noisy, context, timestep, flow)


def half_dtype(run: Any) -> torch.dtype | None:
    """The run's mixed-precision dtype (None: full precision)."""
    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(run.mixed_precision)


def cast_frozen(model: nn.Module, dtype: torch.dtype) -> None:
    """Frozen weights in the mixed-precision dtype (half the memory), trainable ones in float32
    (what the optimizer updates)."""
    for p in model.parameters():
        p.data = p.data.to(torch.float32 if p.requires_grad else dtype)


@dataclass(frozen=True)
class Draws:
    """A batch's randomness: timestep, noise and condition drops of each sample."""

    t: torch.Tensor  # (B,) DDPM indices
    noise: torch.Tensor  # like the latents, float32
    drop_text: torch.Tensor  # (B,) bool
    drop_image: torch.Tensor  # (B,) bool


def draws(index: torch.Tensor, step: int, seed: int, latents: torch.Tensor, text_p: float, image_p: float) -> Draws:
    """Each sample's draws from a generator seeded by (run seed, step, dataset index) alone, so
    they do not depend on which process or micro-batch the sample lands in: two processes and one
    see the same noise for the same global batch, and a resumed run the same as an uninterrupted one."""
    ts, noises, dts, dis = [], [], [], []
    for i in index.tolist():
        g = torch.Generator().manual_seed((int(seed) * 1_000_003 + int(step)) * 1_000_033 + int(i))
        ts.append(sample_timesteps(1, "cpu", g))
        noises.append(torch.randn(latents.shape[1:], generator=g))
        dt, di = drop_masks(1, "cpu", text_p, image_p, g)
        dts.append(dt)
        dis.append(di)
    device = latents.device
    return Draws(torch.cat(ts).to(device), torch.stack(noises).to(device), torch.cat(dts).to(device),
                 torch.cat(dis).to(device))


def diffusion_loss(model: nn.Module, schedule: NoiseSchedule, latents: torch.Tensor, flow: torch.Tensor,
                   drawn: Draws, **condition: torch.Tensor) -> torch.Tensor:
    """The v-prediction L2 loss on clean latents (B, T, C, h, w) at the drawn timesteps and noise."""
    x0 = latents.float()
    v_pred = model(schedule.add_noise(x0, drawn.noise, drawn.t), drawn.t, flow.float(), **condition)
    return v_loss(v_pred, schedule.v_target(x0, drawn.noise, drawn.t))


def unwrapped(model: nn.Module) -> DecoderTrainee:
    inner = getattr(model, "module", model)  # DDP and friends keep the model in .module
    if not isinstance(inner, DecoderTrainee):
        raise TypeError(f"expected the decoder trainee, got {type(inner).__name__}")
    return inner



# ---------------------------------------------------------------------------------------------
# Shape facts for the memory plan


def video_tokens(config: Mapping[str, Any] = ANIMEGAMER_2B_CONFIG) -> int:
    """Patches per clip: 5 latent frames x 60 x 90 / patch 2^2 = 6750 at full size."""
    frames = (config["sample_frames"] - 1) // config["temporal_compression_ratio"] + 1
    p = config["patch_size"]
    return frames * (config["sample_height"] // p) * (config["sample_width"] // p)


def parameter_counts(model: nn.Module) -> dict[str, int]:
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    return {"trainable": trainable, "frozen": total - trainable}


def dit_config_of(decoder: str | Path | None) -> dict[str, Any]:
    """The DiT's config a run will train: a converted decoder folder's own, else the 2B one."""
    if decoder:
        path = Path(decoder) / "transformer" / "config.json"
        if path.is_file() and transformer_class(path.parent) == "AnimeGamerTransformer3DModel":
            stored = json.loads(path.read_text(encoding="utf-8"))
            return {k: stored[k] for k in ANIMEGAMER_2B_CONFIG if k in stored}
    return dict(ANIMEGAMER_2B_CONFIG)


@functools.lru_cache(maxsize=16)
def decoder_counts(config_json: str, lora_rank: int, encoder: bool, parts: tuple[str, ...]) -> tuple[int, int, int]:
    """(trainable, frozen, buffer bytes) of a decoder trainee built on the meta device."""
    config = json.loads(config_json)
    width = config["num_attention_heads"] * config["attention_head_dim"]
    with torch.device("meta"):
        transformer = load_transformer(None, config)
        add_lora(transformer, lora_rank, 1)
        from .encoder import RepresentationEncoder

        model = DecoderTrainee(transformer, RepresentationEncoder(width=width) if encoder else None)
    model.set_trainable(parts)
    counts = parameter_counts(model)
    buffers = sum(b.numel() * b.element_size() for b in model.buffers())
    return counts["trainable"], counts["frozen"], buffers


def decoder_shape(phase: str, run: Any, config: Mapping[str, Any], lora_rank: int, encoder: bool,
                  parts: Sequence[str], condition_bytes: int) -> Any:
    """The memory model's PhaseShape (training.memory) of a decoder phase. Frozen weights sit in
    the mixed-precision dtype (cast_frozen); peft's LoRA has no dropout here, so it keeps no copy
    of its inputs beyond what the base linear saves (lora_inputs 0)."""
    from .memory import PhaseShape

    trainable, frozen, buffers = decoder_counts(json.dumps(dict(config), sort_keys=True), lora_rank, encoder, tuple(parts))
    half = run.mixed_precision in ("bf16", "fp16")
    width = config["num_attention_heads"] * config["attention_head_dim"]
    latents = video_latent_numel(config)
    return PhaseShape(
        phase=phase, frozen=frozen, trainable=trainable, tokens=video_tokens(config) + config["max_text_seq_length"],
        width=width, layers=config["num_layers"], ffn=4 * width, frozen_dtype="bf16" if half else "fp32",
        compute_bytes=2 if half else 4, lora_inputs=0, fixed_bytes=buffers,
        # the batch as stored (bf16) and the fp32 latents, noise, noisy latents and v target
        sample_bytes=2 * latents + condition_bytes + 4 * 4 * latents,
    )


def video_latent_numel(config: Mapping[str, Any]) -> int:
    frames = (config["sample_frames"] - 1) // config["temporal_compression_ratio"] + 1
    return frames * config["in_channels"] * config["sample_height"] * config["sample_width"]
