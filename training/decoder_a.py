"""Phase (a): the representation encoder and the decoder, trained to reconstruct the film's clips.

The DiT is conditioned on the encoder's representation of the clip (its T5 motion text and its
first frame's CLIP tokens, 226 x 1920) and the clip's motion scope, and learns the v-prediction
of the clip's VAE latents (training.diffusion), with text and image each dropped 5 % of the time
for classifier-free guidance. Two stages in one run, as released:
- warm-up (`encoder_warmup_steps`, 10k): `flow_embed`, `text_proj`, `ip_proj` and the two mix norms;
- joint (the rest of `run.max_steps`, 80k): adds the adaLN modulations and the LoRA of rank 64.
The stage follows from the step, so a resumed run is in the stage it left. Parameters of the
joint stage exist from the start (LoRA B is zero: they change nothing) and are frozen during the
warm-up: their gradients stay None, so the optimizer neither moves them nor builds their state
until the joint stage. The released `mix_proj` (joint stage) exists only for image widths other
than CLIP's 768, which neither the converter nor this encoder supports: there is none to train.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator

from film.encoders import T5_TOKENS
from inference.decoder.diffusers_api import dit_config
from inference.decoder.transformer import ANIMEGAMER_2B_CONFIG
from inference.decoder.uncond import UNCOND_IP_TOKENS, UNCOND_TEXT_TOKENS

from .config import RunConfig
from .decoder_data import ClipFeatures, DecoderDataError, clip_items, collate, phase_settings
from .decoder_export import export_decoder, sample_clip
from .decoder_recipe import (
    LORA_TARGETS,
    DecoderTrainee,
    add_lora,
    cast_frozen,
    decoder_counts,
    decoder_shape,
    diffusion_loss,
    dit_config_of,
    draws,
    half_dtype,
    load_transformer,
    unwrapped,
    video_tokens,
)
from .diffusion import IMAGE_DROP, TEXT_DROP, NoiseSchedule, drop_features
from .encoder import CLIP_WIDTH, ENCODER_FILE, T5_WIDTH, RepresentationEncoder

log = logging.getLogger(__name__)

WARMUP_PARTS = ("flow_embed", "text_proj", "ip_proj", "txt_mix_layer_norm", "ip_mix_layer_norm")
JOINT_PARTS = (*WARMUP_PARTS, "adaln", "lora")


@dataclass
class PhaseA:
    decoder: str = ""  # a converted decoder folder or CogVideoX-2B's diffusers folder; "" = random 2B DiT
    encoder: str = ""  # the released SAT decoder checkpoint or an encoder.safetensors; "" = the decoder folder's, else fresh
    vae: str = ""  # the VAE folder exported with the decoder; "" = the decoder folder's vae/
    encoder_warmup_steps: int = 10000
    lora_rank: int = 64
    lora_alpha: int = 1  # the released SAT LoRA's scale alpha / r = 1/64
    text_drop: float = TEXT_DROP
    image_drop: float = IMAGE_DROP
    export_dtype: str = "fp16"  # as `convert-decoder` writes the released decoder
    sample_steps: int = 50  # sampler steps of the clip `sample` decodes at a checkpoint (0: none)


def load_encoder(settings: PhaseA, text_dim: int, image_dim: int, width: int, image_tokens: int) -> RepresentationEncoder:
    source = settings.encoder or (str(Path(settings.decoder) / ENCODER_FILE)
                                  if settings.decoder and (Path(settings.decoder) / ENCODER_FILE).is_file() else "")
    if not source:
        if settings.decoder:
            log.warning("phase (a): a fresh encoder for a trained DiT, whose conditioning it has never seen; "
                        "set phase.encoder to the released SAT decoder checkpoint to start from its encoder")
        return RepresentationEncoder(text_dim, image_dim, width, image_tokens=image_tokens)
    encoder = RepresentationEncoder.load(source)
    got = encoder.dims
    want = {"text_dim": text_dim, "image_dim": image_dim, "width": width, "image_tokens": image_tokens}
    wrong = {k: (got[k], v) for k, v in want.items() if got[k] != v}
    if wrong:
        raise DecoderDataError(f"{source}: the encoder does not fit the features and the DiT "
                               f"(setting: encoder's, needed): {wrong}")
    return encoder


class PhaseARecipe:
    name = "a"
    find_unused_parameters = True  # the joint stage's parameters get no gradient during the warm-up

    def __init__(self, data: Path, settings: PhaseA, run: RunConfig, config: dict[str, Any] | None = None):
        self.data = Path(data)
        self.settings = settings
        self.run = run
        self.config = config or ANIMEGAMER_2B_CONFIG  # for a fresh DiT (tests give a tiny one)
        self.train_items, self.heldout_items = clip_items(self.data)
        if not self.train_items:
            raise DecoderDataError(f"{self.data}: every accepted clip is held out: nothing to train on")
        self.schedule = NoiseSchedule.released()

    def stage(self, step: int) -> str:
        return "warmup" if step < self.settings.encoder_warmup_steps else "joint"

    def build_model(self, accelerator: Accelerator) -> torch.nn.Module:
        s = self.settings
        if not s.decoder:
            log.warning("phase (a): the DiT starts from random weights (phase.decoder is empty): set it to a "
                        "converted decoder folder or CogVideoX-2B's to train a playable film")
        transformer = load_transformer(s.decoder, self.config)
        sample = ClipFeatures(self.train_items[:1])[0]
        dit = dit_config(transformer)
        image_tokens = int(sample["image"].shape[0])
        if UNCOND_TEXT_TOKENS + image_tokens != dit.max_text_seq_length:
            raise DecoderDataError(f"the image features have {image_tokens} tokens: with {UNCOND_TEXT_TOKENS} text "
                                   f"tokens that is not the DiT's {dit.max_text_seq_length} conditioning tokens")
        width = dit.text_embed_dim  # = the DiT width (the representation enters unprojected)
        encoder = load_encoder(s, int(sample["text"].shape[-1]), int(sample["image"].shape[-1]), width, image_tokens)
        add_lora(transformer, s.lora_rank, s.lora_alpha)
        model = DecoderTrainee(transformer, encoder)
        model.set_trainable(JOINT_PARTS)
        half = half_dtype(self.run)
        if half is not None:
            cast_frozen(model, half)
        if self.run.gradient_checkpointing:
            transformer.enable_gradient_checkpointing()
        return model.train()

    def param_groups(self, model: torch.nn.Module) -> list[dict]:
        m = unwrapped(model)
        return [{"params": [p for _, _, p in m.named_part_parameters()]}]

    def dataset(self) -> ClipFeatures:
        return ClipFeatures(self.train_items)

    def val_dataset(self) -> ClipFeatures:
        return ClipFeatures(self.heldout_items)

    def collate(self, items: list) -> dict[str, torch.Tensor]:
        return collate(items)

    def loss(self, model: torch.nn.Module, batch: dict[str, torch.Tensor], step: int) -> dict[str, torch.Tensor]:
        m = unwrapped(model)
        m.set_trainable(WARMUP_PARTS if self.stage(step) == "warmup" else JOINT_PARTS)
        latents, text, image = batch["latents"], batch["text"], batch["image"]
        drawn = draws(batch["index"], step, self.run.seed, latents, self.settings.text_drop, self.settings.image_drop)
        if m.training:  # held-out losses score the full condition
            text, image = drop_features(text, image, drawn.drop_text, drawn.drop_image)
        return {"loss": diffusion_loss(model, self.schedule, latents, batch["flow"], drawn, text=text, image=image)}

    def sample(self, model: torch.nn.Module, out: Path, step: int) -> Path | None:
        """A clip of the first held-out game's first clip, decoded with the DiT and encoder as
        trained so far (phase.sample_steps sampler steps): `out/samples/step-N.mp4`."""
        if not self.heldout_items or self.settings.sample_steps < 1:
            return None
        m = unwrapped(model)
        assert m.encoder is not None
        item = ClipFeatures(self.heldout_items[:1])[0]
        device = next(m.parameters()).device
        with torch.no_grad():
            rep = m.encoder(item["text"][None].to(device), item["image"][None].to(device))[0]
        return sample_clip(m.transformer, self.settings.decoder or None, self.settings.vae or None, rep,
                           float(item["flow"]), Path(out) / "samples" / f"step-{step:07d}.mp4",
                           steps=self.settings.sample_steps, autocast=half_dtype(self.run))

    def export(self, model: torch.nn.Module, out: Path, accelerator: Accelerator) -> list[Path]:
        m = unwrapped(model)
        if not accelerator.is_main_process:
            return []
        assert m.encoder is not None
        encoder: RepresentationEncoder = m.encoder  # type: ignore[assignment]
        folder = export_decoder(m.transformer, out, uncond=encoder.uncond_embedding(), base=self.settings.decoder or None,
                                vae=self.settings.vae or None, dtype=self.settings.export_dtype)
        # Beside the decoder: phase (b) regresses its representations, phase (c) reads history with it.
        encoder_file = encoder.save(folder / ENCODER_FILE)
        return [folder, encoder_file]


def make(data: Path, phase: dict[str, Any], run: RunConfig) -> PhaseARecipe:
    """The recipe `training/configs/phase_a.toml` names."""
    return PhaseARecipe(data, phase_settings(PhaseA, phase, "a"), run)


def describe_phase_a(config: dict[str, Any] | None = None, lora_rank: int = 64) -> dict[str, Any]:
    """Shape facts, counted on the meta device (no weights): parameters frozen and trainable in
    each stage, tokens per sample."""
    config = config or ANIMEGAMER_2B_CONFIG
    key = json.dumps(dict(config), sort_keys=True)
    warm_trainable, warm_frozen, _ = decoder_counts(key, lora_rank, True, WARMUP_PARTS)
    trainable, frozen, _ = decoder_counts(key, lora_rank, True, JOINT_PARTS)
    return {
        "phase": "a", "trainable_warmup": warm_trainable, "frozen_warmup": warm_frozen,
        "trainable": trainable, "frozen": frozen,
        "video_tokens": video_tokens(config), "condition_tokens": config["max_text_seq_length"],
    }


def phase_shape(run: RunConfig, phase: dict[str, Any]) -> Any:
    """Phase (a)'s PhaseShape (training.memory) in its joint stage (the larger one): the DiT of
    `phase.decoder` (else CogVideoX-2B's shape), the encoder, T5 and CLIP features in bf16."""
    s = phase_settings(PhaseA, phase, "a")
    config = dit_config_of(s.decoder)
    features = 2 * (T5_TOKENS * T5_WIDTH + UNCOND_IP_TOKENS * CLIP_WIDTH)  # bf16, as film.features stores them
    shape = decoder_shape("a", run, config, s.lora_rank, True, JOINT_PARTS, features)
    # each LoRA's A output; the encoder keeps its inputs cast to fp32 (2x the stored bf16), the
    # condition drop's copies live through the forward; the largest trainable tensor is the encoder's
    # T5 projection
    return dataclasses.replace(shape, lora_outputs=len(LORA_TARGETS) * s.lora_rank,
                               sample_bytes=shape.sample_bytes + 2 * features, forward_bytes=features,
                               largest_trainable=T5_WIDTH * int(config["text_embed_dim"]))
