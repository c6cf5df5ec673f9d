"""Phase (c): the decoder adapted to the MLLM's predicted representations.

The MLLM (phase (b)'s agent checkpoint) is frozen and never sits beside the DiT: `precompute`
runs the worker's own prediction code (inference.mllm: PromptBuilder, MLLMPredictor, with the
worker's readout) once over every game of the training set, each turn with teacher-forced history
(the earlier turns' instructions, their annotated values and the phase-(a) encoder's
representation of their clips), and writes each clip's predicted 226 x 1920 representation to
safetensors shards (a run stopped midway continues where it stopped; training starts only once
`done.json` says every turn is predicted). Training then reconstructs each clip's latents from that prediction and the
clip's motion scope, as in phase (a) but with the prediction in place of the encoder's output;
a dropped condition takes the unconditional tokens' rows (training.diffusion).

Trained, as released: `flow_embed`, the adaLN modulations and the LoRA of rank 64. The released
phase also trains "the image cross-attention" and `attention_mix`: the released 2B decoder and the
diffusers module have neither (its conversion has no such keys), so there is nothing to train.
"""

from __future__ import annotations

import gc
import json
import logging
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from accelerate import Accelerator
from torch.utils.data import Dataset

from film.cast import CastError, read_cast
from film.features import write_shard
from film.games import GAMES
from film.manifest import write_lines

from .config import RunConfig
from .decoder_data import ClipItem, DecoderDataError, ShardReader, clip_items, collate, phase_settings
from .decoder_export import export_decoder, sample_clip
from .decoder_recipe import (
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
from .diffusion import IMAGE_DROP, TEXT_DROP, NoiseSchedule, drop_representation
from .encoder import ENCODER_FILE, RepresentationEncoder

log = logging.getLogger(__name__)

PARTS = ("flow_embed", "adaln", "lora")
PREDICTIONS_DIR = "phase_c"  # under the training folder
PREDICTIONS_INDEX = "index.json"  # {clip id: shard file relative to the predictions folder}
PREDICTIONS_FORMAT = "animegamer-phase-c-predictions/1"
PREDICTIONS_STARTED = "run.json"  # what made the predictions (MLLM, games, ...): a rerun of the same continues
PREDICTIONS_DONE = "done.json"  # written last: every turn predicted
SHARD_CLIPS = 256


@dataclass
class PhaseC:
    decoder: str = ""  # phase (a)'s exported decoder folder (with its encoder.safetensors)
    vae: str = ""  # "" = the decoder folder's vae/
    predictions: str = ""  # folder of the predicted representations; "" = DATA/phase_c
    lora_rank: int = 64
    lora_alpha: int = 1  # scale 1/64 as the released SAT LoRA
    text_drop: float = TEXT_DROP
    image_drop: float = IMAGE_DROP
    export_dtype: str = "fp16"
    sample_steps: int = 50  # sampler steps of the clip `sample` decodes at a checkpoint (0: none)
    # the MLLM that predicts (precompute only): Mistral, the AnimeGamer tokenizer, phase (b)'s agent
    mistral: str = ""
    tokenizer: str = ""
    agent: str = ""
    encoder: str = ""  # the phase-(a) encoder for the history's representations; "" = the decoder folder's
    history_window: int = 2  # as the worker's default ANIMEGAMER_HISTORY_WINDOW
    readout: str = "released"  # as the worker's default: what the decoder will be given
    predict_batch: int = 8
    # the films-file entry written after this last phase (as phase (b)'s): "" = from the folder's name
    film_id: str = ""
    title: str = ""


# ---------------------------------------------------------------------------------------------
# The MLLM's predictions, computed once


def read_games(folder: Path) -> list[dict[str, Any]]:
    path = Path(folder) / GAMES
    if not path.is_file():
        raise DecoderDataError(f"{folder}: no {GAMES} (run `animegamer film games DIR`)")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def predictions_folder(data: Path, settings: PhaseC) -> Path:
    return Path(settings.predictions) if settings.predictions else Path(data) / PREDICTIONS_DIR


def read_predictions_index(folder: Path) -> dict[str, str]:
    path = folder / PREDICTIONS_INDEX
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def turn_values(turn: dict[str, Any]) -> tuple[int, int, int, int]:
    """A turn's four values as the prompt's state span holds them (motion level, social,
    entertainment, stamina)."""
    return (int(turn["motion_level"]), int(turn["social"]), int(turn["entertainment"]), int(turn["stamina"]))


class EncoderReps:
    """The phase-(a) encoder's representation of a clip (what phase (b) regressed and what a
    teacher-forced game's history holds), float32, computed when a prompt needs it: the whole
    training set's would not fit in memory (0.9 MB a clip)."""

    def __init__(self, encoder_path: str, items: dict[str, ClipItem]):
        self.encoder = RepresentationEncoder.load(encoder_path).eval()
        self.items = items
        self.reader = ShardReader()

    @property
    def width(self) -> int:
        return self.encoder.dims["width"]

    @torch.no_grad()
    def __call__(self, clip: str) -> np.ndarray:
        item = self.items[clip]
        text = self.reader.get(item.shard, f"{clip}/text")[None].float()
        image = self.reader.get(item.shard, f"{clip}/image")[None].float()
        return self.encoder(text, image)[0].numpy()


def precompute(data: Path, settings: PhaseC, device: str | None = None, dtype: str | None = None,
               progress: bool = False, shard_clips: int = SHARD_CLIPS) -> Path:
    """Every game's turns through the MLLM (teacher-forced history: the earlier turns' annotated
    values and encoder representations) -> predicted representations in shards of `shard_clips`
    clips under the predictions folder; returns that folder. Beside the MLLM only the small
    phase-(a) encoder is loaded; both are freed before training builds the DiT.

    Resumable: each shard is written whole (a temporary file renamed) and the index after it, so
    a run stopped anywhere and started again with the same MLLM and games skips the shards already
    written and ends with the same files, byte for byte, as a run never stopped."""
    from inference.mllm.instruction import InstructionEncoder
    from inference.mllm.loading import load_mllm
    from inference.mllm.predict import MLLMPredictor, PredictOptions
    from inference.mllm.prompt import HistoryItem, PromptBuilder

    data = Path(data)
    for name in ("mistral", "tokenizer", "agent"):
        if not getattr(settings, name):
            raise DecoderDataError(f"phase.{name} is not set: phase (c) predicts with the phase-(b) MLLM")
    train, held = clip_items(data)
    items = {i.id: i for i in train + held}
    games = {g["id"]: [t for t in g["turns"] if t["clip"] in items] for g in read_games(data)}
    turns = [(gid, k) for gid, ts in games.items() for k in range(len(ts))]
    if not turns:
        raise DecoderDataError(f"{data / GAMES}: no game turn has a clip with features")
    reps = EncoderReps(settings.encoder or str(Path(settings.decoder) / ENCODER_FILE), items)
    loaded = load_mllm(settings.mistral, settings.tokenizer, settings.agent, device=device, dtype=dtype,
                       rep_dim=reps.width)
    predictor = MLLMPredictor(loaded.model, loaded.special, PredictOptions(readout=settings.readout))
    builder = PromptBuilder(InstructionEncoder(loaded.tokenizer, loaded.special), loaded.special,
                            settings.history_window)
    window = settings.history_window

    def prompt(gid: str, k: int):
        ts = games[gid]
        history = [HistoryItem(t["instruction"], turn_values(t), reps(t["clip"])) for t in ts[max(0, k - window):k]]
        return builder.build(ts[k]["instruction"], history)

    def predicted(shard: list[tuple[str, int]]) -> dict[str, torch.Tensor]:
        tensors = {}
        for b in range(0, len(shard), settings.predict_batch):
            part = shard[b:b + settings.predict_batch]
            for (gid, k), result in zip(part, predictor.predict_batch([prompt(gid, k) for gid, k in part]), strict=True):
                tensors[f"{games[gid][k]['clip']}/predicted"] = torch.from_numpy(result.representation).to(torch.bfloat16)
        return tensors

    agent = Path(settings.agent).stat()  # a retrained agent under the same name is another MLLM
    made_by = {"format": PREDICTIONS_FORMAT, "agent": str(settings.agent), "mistral": str(settings.mistral),
               "agent_file": [agent.st_size, agent.st_mtime_ns],
               "encoder": str(settings.encoder or Path(settings.decoder) / ENCODER_FILE), "history_window": window,
               "readout": settings.readout, "shard_clips": shard_clips,
               "turns": [games[gid][k]["clip"] for gid, k in turns]}
    shards = [turns[i:i + shard_clips] for i in range(0, len(turns), shard_clips)]
    return write_predictions(predictions_folder(data, settings), made_by, shards,
                             lambda shard: [games[gid][k]["clip"] for gid, k in shard], predicted, progress)


def write_predictions(out: Path, made_by: dict[str, Any], shards: list[list[tuple[str, int]]],
                      clips_of: Callable[[list[tuple[str, int]]], list[str]],
                      predicted: Callable[[list[tuple[str, int]]], dict[str, torch.Tensor]], progress: bool) -> Path:
    """Shard n of the turns (`shard-0000n.safetensors`) predicted and written whole, then the index;
    a shard an earlier run of the same MLLM over the same games wrote is kept as it is."""
    index = resumable_index(out, made_by)
    total, kept = sum(map(len, shards)), 0
    for n, shard in enumerate(shards):
        clips, rel = clips_of(shard), f"shard-{n:05d}.safetensors"
        if all(index.get(c) == rel for c in clips) and (out / rel).is_file():
            kept += len(clips)  # written whole by an interrupted run (write_shard renames a finished file)
            continue
        meta = {k: made_by[k] for k in ("format", "agent", "history_window", "readout")}
        write_shard(out / rel, {k: v.contiguous() for k, v in predicted(shard).items()}, {**meta, "clips": clips})
        index.update({c: rel for c in clips})
        write_lines(out / PREDICTIONS_INDEX, [json.dumps(index, sort_keys=True, indent=1)])  # after each shard
        if progress:
            print(f"phase (c) predictions: {len(index)}/{total} clips")
    if progress and kept:
        print(f"phase (c) predictions: {kept} of {total} clips were written by an earlier run and kept")
    write_lines(out / PREDICTIONS_DONE, [json.dumps(made_by, sort_keys=True, indent=1)])
    return out


def resumable_index(out: Path, made_by: dict[str, Any]) -> dict[str, str]:
    """The index of the shards an earlier run of the same MLLM over the same games wrote (it
    continues from them); anything else in the folder (another MLLM's, other games') is removed."""
    path = out / PREDICTIONS_STARTED
    try:
        same = json.loads(path.read_text(encoding="utf-8")) == made_by
    except (OSError, ValueError):
        same = False
    if same:
        return read_predictions_index(out)
    if out.exists():
        shutil.rmtree(out)  # predictions of another MLLM must not mix with these
    write_lines(path, [json.dumps(made_by, sort_keys=True, indent=1)])
    return {}


def precompute_and_free(data: Path, settings: PhaseC, device: str | None = None, progress: bool = False) -> Path:
    """precompute, then the MLLM's memory given back before the DiT is built on the same card."""
    out = precompute(data, settings, device=device, progress=progress)
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return out


# ---------------------------------------------------------------------------------------------
# Training


class PredictedClips(Dataset):
    """Phase (c)'s samples: a clip's latents, the MLLM's predicted representation, its flow."""

    def __init__(self, items: list[ClipItem], predictions: Path, index: dict[str, str]):
        self.items = items
        self.predictions = predictions
        self.index = index
        self.reader = ShardReader()

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> dict[str, Any]:
        item = self.items[i]
        return {
            "latents": self.reader.get(item.shard, f"{item.id}/latents"),
            "rep": self.reader.get(self.predictions / self.index[item.id], f"{item.id}/predicted"),
            "flow": torch.tensor(item.flow, dtype=torch.float32),
            "index": torch.tensor(i),
        }


class PhaseCRecipe:
    name = "c"
    find_unused_parameters = False

    def __init__(self, data: Path, settings: PhaseC, run: RunConfig):
        self.data = Path(data)
        self.settings = settings
        self.run = run
        if not settings.decoder:
            raise DecoderDataError("phase.decoder is not set: phase (c) adapts phase (a)'s exported decoder folder")
        self.train_items, self.heldout_items = clip_items(self.data)
        self.schedule = NoiseSchedule.released()

    def _with_predictions(self, items: Sequence[ClipItem], split: str) -> PredictedClips:
        """The clips the MLLM predicted: those of the games. An accepted clip outside every game
        (a state field left empty) has no turn to predict and is left out, said once."""
        folder = predictions_folder(self.data, self.settings)
        if not (folder / PREDICTIONS_DONE).is_file():
            raise DecoderDataError(f"{folder}: no predictions, or not all of them (phase (c) makes them first: set "
                                   "phase.mistral, phase.tokenizer and phase.agent)")
        index = read_predictions_index(folder)
        kept = [i for i in items if i.id in index]
        if len(kept) < len(items):
            log.warning("phase (c): %d %s clip(s) are in no game (a state field is empty) and are left out, e.g. %s",
                        len(items) - len(kept), split, [i.id for i in items if i.id not in index][:3])
        if split == "training" and not kept:
            raise DecoderDataError(f"{folder}: no training clip has a prediction (predictions of another training set?)")
        return PredictedClips(kept, folder, index)

    def build_model(self, accelerator: Accelerator) -> torch.nn.Module:
        folder = predictions_folder(self.data, self.settings)
        if not (folder / PREDICTIONS_DONE).is_file():  # none yet, or an interrupted run's: continued
            if accelerator.is_main_process:  # the MLLM runs once, before the DiT is built
                precompute_and_free(self.data, self.settings, device=str(accelerator.device), progress=True)
            accelerator.wait_for_everyone()
        transformer = load_transformer(self.settings.decoder)
        add_lora(transformer, self.settings.lora_rank, self.settings.lora_alpha)
        model = DecoderTrainee(transformer)
        model.set_trainable(PARTS)
        half = half_dtype(self.run)
        if half is not None:
            cast_frozen(model, half)
        if self.run.gradient_checkpointing:
            transformer.enable_gradient_checkpointing()
        return model.train()

    def param_groups(self, model: torch.nn.Module) -> list[dict]:
        return [{"params": [p for _, _, p in unwrapped(model).named_part_parameters()]}]

    def dataset(self) -> PredictedClips:
        return self._with_predictions(self.train_items, "training")

    def val_dataset(self) -> PredictedClips:
        return self._with_predictions(self.heldout_items, "held-out")

    def collate(self, items: list) -> dict[str, torch.Tensor]:
        return collate(items)

    def loss(self, model: torch.nn.Module, batch: dict[str, torch.Tensor], step: int) -> dict[str, torch.Tensor]:
        m = unwrapped(model)
        latents, rep = batch["latents"], batch["rep"]
        drawn = draws(batch["index"], step, self.run.seed, latents, self.settings.text_drop, self.settings.image_drop)
        if m.training:
            rep = drop_representation(rep, m.transformer.uncond_embedding, drawn.drop_text, drawn.drop_image)
        return {"loss": diffusion_loss(model, self.schedule, latents, batch["flow"], drawn, rep=rep)}

    def sample(self, model: torch.nn.Module, out: Path, step: int) -> Path | None:
        """A clip of the first held-out game's first clip, decoded from the MLLM's prediction with
        the DiT as trained so far: `out/samples/step-N.mp4`."""
        if not self.heldout_items or self.settings.sample_steps < 1:
            return None
        m = unwrapped(model)
        held = self._with_predictions(self.heldout_items, "held-out")
        if len(held) == 0:
            return None
        item = held[0]
        return sample_clip(m.transformer, self.settings.decoder, self.settings.vae or None, item["rep"],
                           float(item["flow"]), Path(out) / "samples" / f"step-{step:07d}.mp4",
                           steps=self.settings.sample_steps, autocast=half_dtype(self.run))

    def export(self, model: torch.nn.Module, out: Path, accelerator: Accelerator) -> list[Path]:
        m = unwrapped(model)
        if not accelerator.is_main_process:
            return []
        folder = export_decoder(m.transformer, out, uncond=None, base=self.settings.decoder,
                                vae=self.settings.vae or None, dtype=self.settings.export_dtype)
        encoder = Path(self.settings.decoder) / ENCODER_FILE
        if encoder.is_file():  # the film's folder stays whole: phase (a)'s encoder travels with it
            shutil.copy2(encoder, folder / ENCODER_FILE)
        return [folder]


    # -- the films-file entry (training.cli writes it after the export) ------------------------

    @property
    def film_id(self) -> str:
        from .mllm_recipe import film_id_of

        return self.settings.film_id or film_id_of(self.data)

    def cast(self) -> list[dict[str, str]]:
        try:
            return [{"id": m.id, "name": m.name} for m in read_cast(self.data).members]
        except CastError as e:
            raise DecoderDataError(str(e)) from None


def make(data: Path, phase: dict[str, Any], run: RunConfig) -> PhaseCRecipe:
    """The recipe `training/configs/phase_c.toml` names."""
    return PhaseCRecipe(data, phase_settings(PhaseC, phase, "c"), run)


def describe_phase_c(config: dict[str, Any] | None = None, lora_rank: int = 64) -> dict[str, Any]:
    """Shape facts, counted on the meta device (no weights)."""
    from inference.decoder.transformer import ANIMEGAMER_2B_CONFIG

    config = config or ANIMEGAMER_2B_CONFIG
    trainable, frozen, _ = decoder_counts(json.dumps(dict(config), sort_keys=True), lora_rank, False, PARTS)
    return {"phase": "c", "trainable": trainable, "frozen": frozen, "video_tokens": video_tokens(config),
            "condition_tokens": config["max_text_seq_length"]}


def phase_shape(run: RunConfig, phase: dict[str, Any]) -> Any:
    """Phase (c)'s PhaseShape (training.memory): the DiT of `phase.decoder` (else CogVideoX-2B's
    shape) conditioned on the stored predictions (bf16)."""
    s = phase_settings(PhaseC, phase, "c")
    config = dit_config_of(s.decoder)
    width = config["num_attention_heads"] * config["attention_head_dim"]
    return decoder_shape("c", run, config, s.lora_rank, False, PARTS, 2 * config["max_text_seq_length"] * width)
