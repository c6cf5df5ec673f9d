"""What the decoder phases (a) and (c) share: the training set's clips and their precomputed
features, the DiT to train (its LoRA and its trainable parts by name), the v-prediction loss,
and the export to the folder the worker loads.

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

import copy
import functools
import json
import logging
import shutil
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import Dataset

from film.games import GAMES
from film.manifest import read_features_index
from game.motion import motion_scope
from inference.decoder.convert import DECODER_SETTINGS
from inference.decoder.latent_preview import FILE_NAME as PREVIEW_FILE
from inference.decoder.transformer import ANIMEGAMER_2B_CONFIG, AnimeGamerTransformer3DModel

from .diffusion import NoiseSchedule, drop_masks, sample_timesteps, v_loss

log = logging.getLogger(__name__)

LORA_TARGETS = ("to_q", "to_k", "to_v", "to_out.0")
DECODER_DIR = "decoder"  # under the export folder: what `load_decoder` reads
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


class DecoderDataError(ValueError):
    """A training folder the decoder phases cannot train on (the message names the file)."""


# ---------------------------------------------------------------------------------------------
# Config


def phase_settings(cls: type, table: Mapping[str, Any], phase: str) -> Any:
    """A phase's `[phase]` table as its dataclass; an unknown key is refused, never ignored."""
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(table) - set(known))
    if unknown:
        raise DecoderDataError(f"[phase] of phase ({phase}) has no setting {', '.join(unknown)} "
                               f"(it has: {', '.join(known)})")
    return cls(**dict(table))


# ---------------------------------------------------------------------------------------------
# The training set


@dataclass(frozen=True)
class ClipItem:
    id: str
    shard: Path  # the safetensors file holding `<id>/latents`, `<id>/image`, `<id>/text`
    motion_level: int

    @property
    def flow(self) -> float:
        """The motion scope the decoder is conditioned on: the game's level -> flow table."""
        return motion_scope(self.motion_level)


def heldout_clip_ids(folder: Path) -> set[str]:
    """The clips of the held-out games (film.games' split by shot): never trained on."""
    path = folder / GAMES
    if not path.is_file():
        return set()
    ids: set[str] = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            game = json.loads(line)
            if game.get("split") == "heldout":
                ids.update(t["clip"] for t in game["turns"])
    return ids


def clip_items(folder: Path) -> tuple[list[ClipItem], list[ClipItem]]:
    """(train, held out) accepted clips with features, in id order: the clips `film features`
    computes (film.features' own rule: a cast member and a motion); the others are said once."""
    from film.features import FeaturesError, accepted_clips

    folder = Path(folder)
    try:
        clips, _, left_out = accepted_clips(folder)
    except FeaturesError as e:
        raise DecoderDataError(str(e)) from None
    if left_out:
        log.warning("%s: %d accepted clip(s) lack a character or a motion and have no features, e.g. %s",
                    folder, len(left_out), left_out[:3])
    index = read_features_index(folder)
    missing = [c.id for c in clips if c.id not in index]
    if clips and len(missing) == len(clips):
        raise DecoderDataError(f"{folder}: no clip has features (run `animegamer film features DIR` first)")
    if missing:
        raise DecoderDataError(f"{folder}: {len(missing)} accepted clip(s) have no features, e.g. {missing[:3]} "
                               "(run `animegamer film features DIR` again: it computes only what is missing)")
    for rel in sorted(set(index[c.id] for c in clips)):
        if not (folder / rel).is_file():
            raise DecoderDataError(f"{folder / rel}: a features shard the index names is missing")
    held = heldout_clip_ids(folder)
    items = [ClipItem(c.id, folder / index[c.id], c.motion_level) for c in clips]
    return [i for i in items if i.id not in held], [i for i in items if i.id in held]


class ShardReader:
    """Tensors by key from safetensors shards, each opened once (lazily: nothing read up front)."""

    def __init__(self) -> None:
        self._open: dict[Path, Any] = {}

    def get(self, shard: Path, key: str) -> torch.Tensor:
        from safetensors import safe_open

        handle = self._open.get(shard)
        if handle is None:
            handle = self._open[shard] = safe_open(str(shard), framework="pt")
        try:
            return handle.get_tensor(key)
        except Exception as e:  # safetensors raises its own error type for a missing key
            raise DecoderDataError(f"{shard}: has no tensor {key!r} ({e})") from None

    def __getstate__(self) -> dict[str, Any]:  # DataLoader workers open their own handles
        return {"_open": {}}


class ClipFeatures(Dataset):
    """Phase (a)'s samples: a clip's latents, its T5 text and CLIP image features, its flow."""

    def __init__(self, items: list[ClipItem]):
        self.items = items
        self.reader = ShardReader()

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> dict[str, Any]:
        item = self.items[i]
        return {
            "latents": self.reader.get(item.shard, f"{item.id}/latents"),
            "text": self.reader.get(item.shard, f"{item.id}/text"),
            "image": self.reader.get(item.shard, f"{item.id}/image"),
            "flow": torch.tensor(item.flow, dtype=torch.float32),
            "index": torch.tensor(i),
        }


def collate(items: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    return {k: torch.stack([it[k] for it in items]) for k in items[0]}


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
# Export


def merged_transformer(transformer: AnimeGamerTransformer3DModel) -> AnimeGamerTransformer3DModel:
    """A float32 copy on the CPU with the LoRA merged into the base weights and removed (the plain
    AnimeGamerTransformer3DModel the worker loads)."""
    from peft.tuners.tuners_utils import BaseTunerLayer

    plain = copy.deepcopy(transformer)
    nn.Module.to(plain, "cpu", torch.float32)  # ModelMixin.to's stub takes no device
    for name, module in list(plain.named_modules()):
        if isinstance(module, BaseTunerLayer):
            module.merge()
            parent_name, _, child = name.rpartition(".")
            plain.get_submodule(parent_name).register_module(child, module.get_base_layer())
    leftover = [k for k in plain.state_dict() if "lora_" in k or "base_layer" in k]
    if leftover:
        raise RuntimeError(f"LoRA left after the merge: {leftover[:5]}")
    # peft records the adapter on the model; the exported folder holds plain weights.
    for attr in ("_hf_peft_config_loaded", "peft_config"):
        if hasattr(plain, attr):
            delattr(plain, attr)
    return plain


def export_decoder(transformer: AnimeGamerTransformer3DModel, out: Path, *, uncond: torch.Tensor | None,
                   base: str | Path | None, vae: str | Path | None, dtype: str) -> Path:
    """Write `out/decoder/` as `animegamer convert-decoder` does (transformer/, vae/, decoder.json,
    preview_rgb.json when the base has one): `load_decoder` reads it with no other step.
    uncond: the unconditional tokens to store (phase (a): from the trained encoder); None keeps
    the DiT's own."""
    folder = Path(out) / DECODER_DIR
    plain = merged_transformer(transformer)
    if uncond is not None:
        plain.uncond_embedding.copy_(uncond.to(plain.uncond_embedding.dtype))
    base_dir = Path(base) if base else None
    vae_dir = Path(vae) if vae else (base_dir / "vae" if base_dir else None)
    if vae_dir is None or not (vae_dir / "config.json").is_file():
        raise DecoderDataError(f"no VAE folder to export with the decoder ({vae_dir}): set phase.vae to a "
                               "diffusers CogVideoX VAE folder (a converted decoder's vae/)")
    folder.mkdir(parents=True, exist_ok=True)
    nn.Module.to(plain, DTYPES[dtype])
    plain.save_pretrained(str(folder / "transformer"), safe_serialization=True)
    if (folder / "vae").exists():
        shutil.rmtree(folder / "vae")
    shutil.copytree(vae_dir, folder / "vae")
    settings = {"format": "animegamer-decoder", "version": 1, **DECODER_SETTINGS}
    if base_dir and (base_dir / "decoder.json").is_file():
        settings = json.loads((base_dir / "decoder.json").read_text(encoding="utf-8"))
    settings["dtype"] = dtype
    (folder / "decoder.json").write_text(json.dumps(settings, indent=2), encoding="utf-8")
    if base_dir and (base_dir / PREVIEW_FILE).is_file() and vae_dir == base_dir / "vae":
        shutil.copy2(base_dir / PREVIEW_FILE, folder / PREVIEW_FILE)  # the same VAE: the same map
    return folder


def sample_clip(transformer: AnimeGamerTransformer3DModel, base: str | Path | None, vae: str | Path | None,
                rep: torch.Tensor, flow: float, path: Path, *, seed: int = 0, steps: int = 50,
                autocast: torch.dtype | None = None) -> Path:
    """A clip decoded by the worker's own sampler (AnimeGamerDecoder: guidance, the released
    schedule) from one representation with the DiT as it is being trained (its LoRA unmerged),
    written as MP4 to `path`: a look at the film being learned. The VAE is loaded for it alone and
    freed; the DiT goes back to training mode."""
    from inference.decoder.diffusers_api import AutoencoderKLCogVideoX
    from inference.decoder.pipeline import AnimeGamerDecoder
    from inference.mp4 import encode_mp4

    base_dir = Path(base) if base else None
    vae_dir = Path(vae) if vae else (base_dir / "vae" if base_dir else None)
    if vae_dir is None or not (vae_dir / "config.json").is_file():
        raise DecoderDataError(f"no VAE folder to decode a sample with ({vae_dir}): set phase.vae")
    settings = dict(DECODER_SETTINGS)
    if base_dir and (base_dir / "decoder.json").is_file():
        settings.update(json.loads((base_dir / "decoder.json").read_text(encoding="utf-8")))
    device = rep.device if rep.device.type != "meta" else torch.device("cpu")
    vae_model = AutoencoderKLCogVideoX.from_pretrained(str(vae_dir), torch_dtype=torch.float32)
    nn.Module.to(vae_model, device)
    was_training = transformer.training
    decoder = AnimeGamerDecoder(transformer, vae_model, steps=steps, num_latent_frames=settings["num_latent_frames"],
                                height=settings["height"], width=settings["width"], fps=settings["fps"])
    try:
        with torch.autocast(device.type, dtype=autocast, enabled=autocast is not None):
            frames = decoder.decode(rep.detach().float().cpu().numpy(), flow, seed)
    finally:
        transformer.train(was_training)
        del decoder, vae_model
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(encode_mp4(frames, fps=int(settings["fps"])))
    return path


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
