"""What the memory modes and speed presets cost in quality and time: `animegamer eval`'s own code run
once per mode and preset on the same games, then compared (evaluation.report.compare: each
difference from the first run with its bootstrap interval over games).

    PYTHONPATH=. .venv/bin/python bench/eval_modes.py --tiny --out /tmp/eval-modes
    PYTHONPATH=. .venv/bin/python bench/eval_modes.py --film qiqi --games G.jsonl --references R --out O

`--tiny` builds everything it needs (tiny random MLLM and decoder in the released layouts, a tiny
random CLIP, reference images and a small games file), so it runs on a CPU in minutes; its figures
say the code runs in every mode, not what the released weights score. Without it, the models dir is
the settings' (ANIMEGAMER_MODELS_DIR) and the CLIP the evaluation's default or `--clip`.
A mode or preset the machine cannot run (int4 kernels, FP8 on a GPU before Ada) is listed with why.
"""

from __future__ import annotations

import _paths  # noqa: F401  (first: keeps bench/queue.py from shadowing the stdlib)

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

MODES = ("resident", "low_vram", "offload", "offload_int4")
PRESETS = ("exact", "fast", "fastest")

TINY_GAMES = [
    {"id": "a", "character": "qiqi", "turns": [
        {"instruction": "Character: Qiqi; Motion: quickly fly on broomstick; Background: night sky.",
         "motion_level": 4, "social": 0, "entertainment": 1, "stamina": -1},
        {"instruction": "Character: Qiqi; Motion: slowly walk; Background: day town.",
         "motion_level": 2, "social": 1, "entertainment": 0, "stamina": 1}]},
    {"id": "b", "character": "jiji", "turns": [
        {"instruction": "Character: Jiji; Motion: sit on railing; Background: evening street.",
         "motion_level": 1, "social": 0, "entertainment": 0, "stamina": 1},
        {"instruction": "Character: Jiji; Motion: run; Background: grass.",
         "motion_level": 3, "social": 0, "entertainment": 1, "stamina": -1}]}
]


def _tiny(root: Path) -> dict:
    """Tiny random models, CLIP, references and games under `root`."""
    import numpy as np

    from game.catalogue import FILMS
    from inference.decoder.latent_preview import LatentRGB
    from inference.model_paths import film_paths
    from testkit.evaluation_set import write_games, write_references
    from testkit.tiny.clip import build_clip
    from testkit.tiny.decoder import TINY_TRANSFORMER_CONFIG
    from testkit.tiny.encoders import build_vae
    from testkit.tiny.models_dir import build_models_dir

    models = build_models_dir(root / "models", {"qiqi": (1, 0)})
    decoder = film_paths(models, FILMS["qiqi"]).decoder
    # Clips at the real 480x720: the tiled VAE of the low-memory modes cuts the real tiles (diffusers'
    # tiling gives wrong sizes on the tiny decoder's 32x48 frames). The VAE's channels stay tiny.
    build_vae(decoder)
    (decoder / "decoder.json").write_text(json.dumps({"num_latent_frames": 5, "fps": 8, "height": 480, "width": 720}))
    # In-progress previews are never asked for by an evaluation: a zero map spares fitting one at each load.
    channels = TINY_TRANSFORMER_CONFIG["in_channels"]
    LatentRGB(np.zeros((channels, 3), np.float32), np.zeros(3, np.float32)).save(str(decoder))
    return {"models": models, "games": write_games(root / "games.jsonl", TINY_GAMES),
            "references": write_references(root / "refs"), "clip": build_clip(root / "clip")}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tiny", action="store_true", help="tiny random models built here (CPU)")
    p.add_argument("--film", default="qiqi")
    p.add_argument("--games", type=Path)
    p.add_argument("--references", type=Path)
    p.add_argument("--clip", type=Path)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--presets", default="exact")
    p.add_argument("--steps", type=int, help="decoder steps (default: the settings'; --tiny: 2)")
    args = p.parse_args(argv)

    import torch

    from evaluation.evaluate import Options, evaluate
    from evaluation.report import compare, compare_markdown, write_compare
    from game.catalogue import load_checked_settings
    from inference.backend import BackendError
    from inference.backends import BackendUnavailable

    torch.manual_seed(0)
    inputs = _tiny(Path(tempfile.mkdtemp(prefix="eval-modes-"))) if args.tiny else {
        "models": None, "games": args.games, "references": args.references, "clip": args.clip}
    if inputs["games"] is None:
        p.error("--games FILE (or --tiny)")
    runs, skipped = [], []
    for mode in args.modes.split(","):
        for preset in args.presets.split(","):
            overrides: dict = {"memory_mode": mode, "decoder_speed": preset}
            if inputs["models"] is not None:
                overrides.update(models_dir=inputs["models"], device="cpu", dtype="float32", decoder_steps=2)
            if args.steps:
                overrides["decoder_steps"] = args.steps
            settings = load_checked_settings(**overrides)
            out = args.out / f"{mode}-{preset}"
            t0 = time.perf_counter()
            try:
                evaluate(settings, Options(film=args.film, games=inputs["games"], out=out, backend="animegamer",
                                           references=inputs["references"], clip=inputs["clip"], progress=False))
            except (BackendUnavailable, BackendError, RuntimeError, NotImplementedError) as e:
                skipped.append((mode, preset, str(e).splitlines()[0][:200]))
                print(f"{mode} {preset}: skipped ({skipped[-1][2]})", file=sys.stderr)
                continue
            print(f"{mode} {preset}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
            runs.append(out)
    if len(runs) >= 2:
        result = compare(runs)
        write_compare(args.out / "compare", result)
        print(compare_markdown(result))
    for mode, preset, why in skipped:
        print(f"- {mode} {preset}: not run ({why})")
    (args.out / "skipped.json").write_text(json.dumps(skipped, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
