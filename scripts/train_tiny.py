#!/usr/bin/env python
"""Train a tiny film end to end on a CPU in a few minutes: the whole path from a prepared
training set to a film the worker plays, with tiny random models, on any machine.

    python scripts/train_tiny.py PREPARED_DIR --out DIR --models MODELS_DIR --films FILMS_FILE

PREPARED_DIR is `animegamer film prepare`'s folder, reviewed (accepted clips with their fields:
animegamer film review) and with its games (animegamer film games). The script then
1. builds tiny random models under DIR/tiny-models (the same builders the tests use: a
   CogVideoX-shaped VAE, DiT, T5 and CLIP) and a tiny Mistral and AnimeGamer tokenizer in
   MODELS_DIR where the worker looks (kept when they are already the tiny ones);
2. runs `animegamer film features` with the tiny VAE, T5 and CLIP (skipped for clips that have
   features already; refused if they came from other models);
3. runs `animegamer train a`, `b` and `c` with small settings (DIR/a, DIR/b, DIR/c; --steps);
4. measures the phase-(b) MLLM's state predictions on the training games before and after
   training (ACC-S as the evaluation scores it), into DIR/b/state_accuracy.json and the model card;
5. runs `animegamer train install DIR/b DIR/c --models MODELS_DIR --films FILMS_FILE`.
Then `ANIMEGAMER_MODELS_DIR=MODELS_DIR ANIMEGAMER_FILMS=FILMS_FILE ANIMEGAMER_BACKEND=animegamer
ANIMEGAMER_DEVICE=cpu ANIMEGAMER_DECODER_STEPS=2 animegamer play` plays it (docs/films-training.md,
"Try the whole path on a CPU"). The models are random: the clips are noise; the path is real.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# The tests' tiny builders, imported here and nowhere else in this script.
from testkit.tiny import mllm as tiny_mllm  # noqa: E402
from testkit.tiny.decoder import TINY_SIZE, TINY_TRANSFORMER_CONFIG  # noqa: E402
from testkit.tiny.encoders import build_clip, build_t5, build_vae  # noqa: E402

STEPS = {"a": 16, "b": 30, "c": 8}


def tiny_models(root: Path, models: Path) -> dict[str, Path]:
    """The decoder base (DiT + VAE, decoder.json at the tiny play size), T5, CLIP; Mistral and the
    tokenizer in the models folder's own places (inference.model_paths)."""
    import torch

    from inference.decoder.transformer import AnimeGamerTransformer3DModel
    from inference.model_paths import MISTRAL_DIR, TOKENIZER_DIR

    out = {"decoder": root / "decoder", "t5": root / "t5", "clip": root / "clip",
           "mistral": models / MISTRAL_DIR, "tokenizer": models / TOKENIZER_DIR}
    if not (out["decoder"] / "decoder.json").is_file():
        build_vae(out["decoder"])  # 480x720 samples: it encodes the prepared clips as they are
        torch.manual_seed(0)
        AnimeGamerTransformer3DModel(**TINY_TRANSFORMER_CONFIG).save_pretrained(str(out["decoder"] / "transformer"))
        # Played at the tiny size (4 x 6 latents): the sin-cos DiT takes any size; a turn then
        # decodes in seconds, where 480x720 would take minutes through even this VAE.
        (out["decoder"] / "decoder.json").write_text(json.dumps({"format": "animegamer-decoder", "version": 1,
                                                                 "dtype": "fp32", "num_latent_frames": 5, "fps": 8,
                                                                 **TINY_SIZE}), encoding="utf-8")
    if not (out["t5"] / "text_encoder").is_dir():
        build_t5(out["t5"])
    if not (out["clip"] / "config.json").is_file():
        build_clip(out["clip"], image_size=56, patch_size=4)  # 196 tokens, as ViT-B/16 at 224 px
    config = out["mistral"] / "config.json"
    if config.is_file():
        hidden = json.loads(config.read_text(encoding="utf-8")).get("hidden_size")
        if hidden != tiny_mllm.tiny_config().hidden_size:
            raise SystemExit(f"train_tiny: {out['mistral']} holds another Mistral (hidden size {hidden}): give a "
                             "models folder of its own (--models)")
    else:
        tiny_mllm.build_mistral(out["mistral"])
    if not (out["tokenizer"] / "tokenizer_config.json").is_file():
        tiny_mllm.build_tokenizer(out["tokenizer"])
    return out


def quoted(path: Path | str) -> str:
    return json.dumps(str(path))


def run_settings(steps: int, lr: float) -> list[str]:
    """Small CPU settings for every phase: full precision, plain AdamW, no accumulation."""
    return [f"run.max_steps={steps}", f"run.lr={lr}", "run.warmup_steps=0", 'run.schedule="constant_with_warmup"',
            'run.mixed_precision="no"',
            'run.optimizer="adamw"', "run.batch_size=2", "run.grad_accum=1", "run.gradient_checkpointing=false",
            f"run.save_every={steps}", f"run.validate_every={steps}", "run.log_every=1", "run.seed=0"]


def phase_sets(out: Path, files: dict[str, Path], film_id: str, title: str, steps: dict[str, int]) -> dict[str, list[str]]:
    decoder_a = out / "a" / "export" / "decoder"
    agent = out / "b" / "export" / f"MLLM-{film_id}" / "pytorch_model.bin"
    film = [f"phase.film_id={quoted(film_id)}", f"phase.title={quoted(title)}"]
    return {
        "a": [*run_settings(steps["a"], 1e-3), f"phase.decoder={quoted(files['decoder'])}",
              f"phase.encoder_warmup_steps={max(1, steps['a'] // 4)}", "phase.lora_rank=8", "phase.lora_alpha=8",
              'phase.export_dtype="fp32"', "phase.sample_steps=2"],
        "b": [*run_settings(steps["b"], 5e-3), f"phase.base_model={quoted(files['mistral'])}",
              f"phase.tokenizer={quoted(files['tokenizer'])}", f"phase.encoder={quoted(decoder_a)}",
              'phase.quantize="none"', "phase.lora_dropout=0.0", 'phase.export_dtype="fp32"', *film],
        "c": [*run_settings(steps["c"], 1e-3), f"phase.decoder={quoted(decoder_a)}",
              f"phase.mistral={quoted(files['mistral'])}", f"phase.tokenizer={quoted(files['tokenizer'])}",
              f"phase.agent={quoted(agent)}", f"phase.predictions={quoted(out / 'c-predictions')}",
              "phase.lora_rank=8", "phase.lora_alpha=8", 'phase.export_dtype="fp32"', "phase.sample_steps=2", *film],
    }


def state_accuracy(data: Path, sets: list[str], agent: Path, files: dict[str, Path]) -> dict[str, float]:
    """ACC-S (social, entertainment, stamina: evaluation.metrics.state_scores) and the accuracy of
    all four values (with the motion level) on the training games: the phase-(b) model as training
    starts (the engine's seed, the same build) and as exported (through the worker's loader)."""
    import numpy as np
    from accelerate import Accelerator
    from accelerate.utils import set_seed

    from evaluation.metrics import state_scores
    from inference.mllm.loading import load_mllm
    from training.config import default_config_path, load_config
    from training.state_accuracy import predicted_values

    config = load_config(default_config_path("b"), sets)
    recipe = config.make_recipe(data)
    games = recipe.train_games
    prefixes = recipe.dataset()

    def rep(turn):
        return prefixes.representation(turn).numpy().astype(np.float32)

    set_seed(config.run.seed)  # as the engine, before it builds the model
    untrained = recipe.build_model(Accelerator(cpu=True)).mllm.eval()
    loaded = load_mllm(files["mistral"], files["tokenizer"], agent, device="cpu", dtype="float32",
                       rep_dim=int(recipe.encoder.dims["width"]))
    scores = {}
    for name, model in (("before", untrained), ("after", loaded.model)):
        pairs = predicted_values(model, loaded.special, loaded.tokenizer, games, rep)
        scores[f"acc_s_{name}"] = float(np.mean([state_scores(p[1:], a[1:])[0] for p, a in pairs]))
        scores[f"acc_4_{name}"] = float(np.mean([np.mean(np.equal(p, a)) for p, a in pairs]))
    scores["turns"] = float(len(pairs))
    return scores


def record_accuracy(run: Path, scores: dict[str, float]) -> None:
    (run / "state_accuracy.json").write_text(json.dumps(scores, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    card = run / "MODEL_CARD.md"
    heading = "\n## State predictions on the training games\n"
    text = (card.read_text(encoding="utf-8") if card.is_file() else "").split(heading)[0]  # a rerun's replaces it
    text += (heading + "\n"
             f"- turns: {int(scores['turns'])}, each after its game's earlier turns (teacher-forced)\n"
             f"- ACC-S (social, entertainment, stamina): {scores['acc_s_before']:.3f} untrained, "
             f"{scores['acc_s_after']:.3f} trained\n"
             f"- all four values (with the motion level): {scores['acc_4_before']:.3f} untrained, "
             f"{scores['acc_4_after']:.3f} trained\n")
    card.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("prepared", type=Path, help="the reviewed training set (animegamer film prepare/review/games)")
    p.add_argument("--out", type=Path, required=True, help="the runs (a, b, c) and the tiny models")
    p.add_argument("--models", type=Path, required=True, help="the models folder the worker reads")
    p.add_argument("--films", type=Path, required=True, help="the films file to add the film to")
    p.add_argument("--film-id", default="", help="default: the prepared folder's name")
    p.add_argument("--title", default="", help="default: the film id")
    p.add_argument("--steps", default=",".join(f"{k}={v}" for k, v in STEPS.items()), help="e.g. a=16,b=30,c=8")
    args = p.parse_args(argv)

    import torch

    from animegamer.cli import main as animegamer
    from film.features import compute
    from training.mllm_recipe import film_id_of

    torch.set_num_threads(max(1, min(4, torch.get_num_threads())))
    steps = {**STEPS, **{k: int(v) for k, _, v in (s.partition("=") for s in args.steps.split(",") if s)}}
    film_id = args.film_id or film_id_of(args.prepared)
    files = tiny_models(args.out / "tiny-models", args.models)
    print(f"train_tiny: features of {args.prepared} with the tiny VAE, T5 and CLIP", flush=True)
    if compute(args.prepared, vae=files["decoder"] / "vae", t5=files["t5"], clip=files["clip"], batch=1,
               progress=False) != 0:
        return 2
    sets = phase_sets(args.out, files, film_id, args.title or film_id, steps)
    for phase in ("a", "b", "c"):
        print(f"train_tiny: phase ({phase}), {steps[phase]} steps", flush=True)
        argv_phase = ["train", phase, "--data", str(args.prepared), "--out", str(args.out / phase), "--no-progress",
                      "--no-fit", *[a for s in sets[phase] for a in ("--set", s)]]
        if (args.out / phase / "checkpoints").is_dir():
            argv_phase.append("--resume")  # a rerun continues (or finds the phase done)
        if animegamer(argv_phase) != 0:
            return 2
        if phase == "b":
            scores = state_accuracy(args.prepared, sets["b"], args.out / "b" / "export" / f"MLLM-{film_id}" /
                                    "pytorch_model.bin", files)
            record_accuracy(args.out / "b", scores)
            print(f"train_tiny: state accuracy on the {int(scores['turns'])} training turns: ACC-S "
                  f"{scores['acc_s_before']:.3f} untrained -> {scores['acc_s_after']:.3f} trained; all four values "
                  f"{scores['acc_4_before']:.3f} -> {scores['acc_4_after']:.3f}", flush=True)
    if animegamer(["train", "install", str(args.out / "b"), str(args.out / "c"), "--models", str(args.models),
                   "--films", str(args.films)]) != 0:
        return 2
    print(f"train_tiny: play it: ANIMEGAMER_MODELS_DIR={args.models} ANIMEGAMER_FILMS={args.films} "
          f"ANIMEGAMER_BACKEND=animegamer ANIMEGAMER_DEVICE=cpu ANIMEGAMER_DECODER_STEPS=2 "
          f"ANIMEGAMER_DEFAULT_FILM={film_id} animegamer play")
    return 0


if __name__ == "__main__":
    sys.exit(main())
