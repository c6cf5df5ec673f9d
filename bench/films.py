"""One worker serving two films against two workers, one film each: memory and time.

Each configuration runs in its own process (so its memory is its own), built the way the worker
builds it (`make_backend(settings, "animegamer", films=...)` over a models directory in the
released layout), and plays the same turns: the two films interleaved, each turn carrying its
session's earlier turns as history. Printed per configuration: load time, memory (CPU: peak RSS
and the models' tensor bytes; GPU: peak allocated), and per turn the MLLM time, the decode time,
the adapter switch and the decoder move (one-worker case). Nothing is asserted.

    # CPU, tiny random models written to a temp dir (same code path as the real models):
    python bench/films.py tiny --turns 4 --decoder-budget-gb 0.0006   # room for one tiny decoder

    # Random weights, no files: Mistral-7B and CogVideoX-2B shapes on a GPU (`--size tiny` on a CPU)
    python bench/films.py random --size 7b --turns 6 --steps 50
    #   --decoder-budget-gb 4   as below

    # GPU, the real checkpoints (after `animegamer models download qiqi` and `... ponyo`):
    python bench/films.py gpu --models-dir /models --turns 6 --steps 50
    #   --decoder-budget-gb 4   keeps one decoder on the GPU: every switch of film moves one
"""

from __future__ import annotations

import _paths  # noqa: F401  (first: keeps bench/queue.py from shadowing the stdlib)

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FILMS = ("qiqi", "ponyo")
INSTRUCTIONS = {
    "qiqi": ["Character: Qiqi; Motion: quickly fly on broomstick; Background: night sky.",
             "Character: Jiji; Motion: slowly walk; Background: morning street."],
    "ponyo": ["Character: Ponyo; Motion: happily swim; Background: day sea.",
              "Character: Sosuke; Motion: quickly run; Background: evening harbor."],
}


# ------------------------------------------------------------------------------------------
# Tiny models in the released layout


def build_tiny(root: Path) -> None:
    from testkit.tiny.models_dir import build_models_dir

    build_models_dir(root, {film: (10 + i, i) for i, film in enumerate(FILMS)})


# ------------------------------------------------------------------------------------------
# One configuration (a child process)


def _tensor_bytes(modules) -> int:
    seen, total = set(), 0
    for m in modules:
        for t in [*m.parameters(), *m.buffers()]:
            if t.data_ptr() not in seen:
                seen.add(t.data_ptr())
                total += t.numel() * t.element_size()
    return total


def random_backend(films: list[str], size: str, device: str, steps: int, budget_gb: float | None):
    """The worker's backends over random weights built in memory (no files): Mistral-7B and
    CogVideoX-2B shapes (size "7b"), or the tiny test shapes (size "tiny", for a CPU)."""
    import torch
    from diffusers import AutoencoderKLCogVideoX
    from transformers import MistralForCausalLM

    from inference.backends.animegamer import AnimeGamerBackend, AnimeGamerSettings
    from inference.backends.multifilm import MultiFilmBackend
    from inference.decoder.pipeline import AnimeGamerDecoder
    from inference.decoder.transformer import AnimeGamerTransformer3DModel
    from inference.mllm.adapters import LoadedFilms, MultiFilmMLLM
    from inference.mllm.instruction import InstructionEncoder
    from inference.mllm.loading import default_device_dtype, wrap_released
    from inference.mllm.predict import MLLMPredictor
    from inference.mllm.prompt import PromptBuilder
    from inference.mllm.tokens import SPECIAL
    from testkit.tiny import mllm as tiny
    from testkit.tiny.decoder import TINY_SIZE, TINY_TRANSFORMER_CONFIG, TINY_VAE_CONFIG

    dev, dt = default_device_dtype(device)
    if size == "7b":
        from transformers import MistralConfig

        from inference.decoder.transformer import ANIMEGAMER_2B_CONFIG
        from inference.decoder.vae import COGVIDEOX_VAE_CONFIG

        cfg = MistralConfig(vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                            num_attention_heads=32, num_key_value_heads=8, sliding_window=4096,
                            max_position_embeddings=32768, tie_word_embeddings=False, attn_implementation="sdpa")
        dit_cfg, vae_cfg, frame, rep_dim, dit_dt = ANIMEGAMER_2B_CONFIG, COGVIDEOX_VAE_CONFIG, {}, 1920, torch.float16
    else:
        cfg = tiny.tiny_config(attn_implementation="sdpa")
        dit_cfg, vae_cfg, frame, rep_dim, dit_dt = TINY_TRANSFORMER_CONFIG, TINY_VAE_CONFIG, TINY_SIZE, TINY_TRANSFORMER_CONFIG["text_embed_dim"], dt
    if dev.type == "cpu":
        dit_dt = torch.float32
    tmp = tempfile.mkdtemp(prefix="bench-films-tok-")
    tok = tiny.build_tokenizer(Path(tmp) / "tok")  # the 284 AnimeGamer ids are what matters here

    def decoder(seed: int, on) -> AnimeGamerDecoder:
        torch.manual_seed(seed)
        with torch.device(on):
            d = AnimeGamerDecoder(AnimeGamerTransformer3DModel(**dit_cfg).to(dit_dt), AutoencoderKLCogVideoX(**vae_cfg).to(dit_dt),
                                  steps=steps, **frame)
        d.transformer.uncond_embedding.normal_()
        return d

    ag = AnimeGamerSettings("-", "-", "-", device=str(dev), history_window=2, rep_dim=rep_dim, max_batch=1)
    with torch.device(dev):
        llm = MistralForCausalLM(cfg).to(dt)
    if len(films) == 1:  # as a one-film worker: the LoRA merged away
        model = wrap_released(llm, rep_dim).to(device=dev, dtype=dt)
        model.merge_lora()
        backend = AnimeGamerBackend(ag, decoder=decoder(0, dev))
        backend._mllm = (MLLMPredictor(model.eval().requires_grad_(False), SPECIAL),
                         PromptBuilder(InstructionEncoder(tok, SPECIAL), SPECIAL, 2))
        return backend
    model = MultiFilmMLLM(llm, films, rep_dim).to(device=dev, dtype=dt).eval().requires_grad_(False)
    model.use(films[0])
    loaded = LoadedFilms(model, tok, SPECIAL, {})
    budget = None if budget_gb is None else int(budget_gb * 2**30)
    backend = MultiFilmBackend(ag, {f: "-" for f in films}, decoders={f: decoder(i, "cpu") for i, f in enumerate(films)},
                               decoder_budget_bytes=budget, loaded=loaded)
    backend.load()
    return backend


def child(args) -> dict:
    import numpy as np
    import torch

    from contracts.turn import HistoryTurn, TurnRequest
    from inference.backends import make_backend
    from settings import Settings

    films = args.films.split(",")
    cuda = args.device.startswith("cuda")
    t0 = time.perf_counter()
    if args.size:
        backend = random_backend(films, args.size, args.device, args.steps, args.decoder_budget_gb)
    else:
        settings = Settings(
            models_dir=args.models_dir, device=args.device, dtype=args.dtype, decoder_steps=args.steps, history_window=2,
            decoder_gpu_budget_gb=args.decoder_budget_gb, mllm_max_batch=1, _env_file=None,
        )
        backend = make_backend(settings, "animegamer", films=films)
        backend.load()
    if cuda:
        torch.cuda.synchronize()
    load_s = time.perf_counter() - t0
    mllm = getattr(backend, "mllm", None) or backend._mllm[0].model
    decoders = [backend.decoder] if getattr(backend, "decoder", None) is not None else list(backend._decoders.values())
    from inference.decoder.residency import decoder_modules

    per_film = {}
    if len(films) > 1:  # what each film adds to the shared base: its adapter and projections
        for f in films:
            mark = (f".lora_A.{f}.", f".lora_B.{f}.", f".modules_to_save.{f}.", f"projections.{f}.")
            per_film[f] = sum(t.numel() * t.element_size() for k, t in mllm.state_dict().items() if any(m in k for m in mark))
    out = {"films": films, "load_s": load_s, "mllm_per_film_bytes": per_film,
           "mllm_bytes": _tensor_bytes([mllm]), "decoder_bytes": _tensor_bytes([m for d in decoders for m in decoder_modules(d)])}
    history: dict[str, list] = {f: [] for f in films}
    turns: list[dict] = []
    for i in range(args.turns):
        film = films[i % len(films)]
        req = TurnRequest(turn_id=i, session_id=films.index(film) + 1, film_id=film,
                          instruction=INSTRUCTIONS[film][(i // len(films)) % 2], characters=(), motion="", adverb="",
                          background="", time_of_day="", seed=1000 + i, history=tuple(history[film][-2:]))
        t = time.perf_counter()
        res = backend.generate(req, lambda *_: None)
        wall = time.perf_counter() - t
        history[film].append(HistoryTurn(req.instruction, res.prediction, np.asarray(res.representation)))
        turns.append({"film": film, "wall": wall, **{k: res.timings.get(k, 0.0) for k in
                                                    ("mllm", "decode", "decoder_move", "mllm_adapter_switch")}})
    out["turns"] = turns
    out["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if cuda:
        out["gpu_peak_bytes"] = torch.cuda.max_memory_allocated()
    return out


# ------------------------------------------------------------------------------------------
# The comparison


def run_child(args, films: str, turns: int) -> dict:
    cmd = [sys.executable, __file__, "child", "--films", films, "--models-dir", str(args.models_dir), "--device", args.device,
           "--dtype", args.dtype, "--steps", str(args.steps), "--turns", str(turns)]
    if getattr(args, "size", None):
        cmd += ["--size", args.size]
    if args.decoder_budget_gb is not None:
        cmd += ["--decoder-budget-gb", str(args.decoder_budget_gb)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stderr[-4000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def _gb(n: float) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**28 else f"{n / 2**20:.1f} MiB"


def _mean(turns: list[dict], key: str, skip_first: bool = True) -> float:
    vals = [t[key] for t in (turns[len(FILMS):] if skip_first and len(turns) > len(FILMS) else turns)]
    return statistics.mean(vals) if vals else 0.0


def report(one: dict, alone: list[dict], gpu: bool) -> None:
    mem = "gpu_peak_bytes" if gpu else "peak_rss_bytes"
    rows = [("one worker, two films", one), *((f"one worker per film ({a['films'][0]})", a) for a in alone)]
    print(f"{'configuration':34} {'load s':>7} {'MLLM tensors':>13} {'decoders':>10} {'peak ' + ('GPU' if gpu else 'RSS'):>11}"
          f" {'turn s':>7} {'mllm s':>7} {'decode s':>8} {'switch ms':>9} {'move ms':>8}")
    for name, r in rows:
        t = r["turns"]
        print(f"{name:34} {r['load_s']:7.2f} {_gb(r['mllm_bytes']):>13} {_gb(r['decoder_bytes']):>10} {_gb(r[mem]):>11}"
              f" {_mean(t, 'wall'):7.3f} {_mean(t, 'mllm'):7.3f} {_mean(t, 'decode'):8.3f}"
              f" {1000 * _mean(t, 'mllm_adapter_switch'):9.2f} {1000 * _mean(t, 'decoder_move'):8.2f}")
    two_mem = sum(a[mem] for a in alone)
    two_tensors = sum(a["mllm_bytes"] + a["decoder_bytes"] for a in alone)
    print(f"\ntwo workers together: peak {_gb(two_mem)}, model tensors {_gb(two_tensors)}, load {sum(a['load_s'] for a in alone):.2f} s"
          f" (on {'two GPUs' if gpu else 'two processes'})")
    print(f"one worker:           peak {_gb(one[mem])}, model tensors {_gb(one['mllm_bytes'] + one['decoder_bytes'])}, load {one['load_s']:.2f} s"
          f" -> {one[mem] / two_mem:.2f}x the memory of two workers")
    per = one["mllm_per_film_bytes"]
    shared = one["mllm_bytes"] - sum(per.values())
    merged = statistics.mean(a["mllm_bytes"] for a in alone)
    print(f"MLLM: shared base {_gb(shared)} + per film {', '.join(f'{f} {_gb(b)}' for f, b in per.items())}; one film alone (merged) {_gb(merged)}"
          f" -> N films: {_gb(shared)} + N x {_gb(statistics.mean(per.values()))} on one worker vs N x {_gb(merged)} on N workers")
    moves = [t["decoder_move"] for t in one["turns"] if t["decoder_move"] > 0]
    if moves:
        print(f"decoder moves in the one-worker run: {len(moves)} of {len(one['turns'])} turns, {1000 * statistics.mean(moves):.1f} ms each on average")
    print("(turn means leave out each film's first turn: warm-up)")


def seven_b_accounting(films: int = 2) -> None:
    """The MLLM's bytes at Mistral-7B shapes in bf16, counted on meta tensors (nothing allocated)."""
    import torch
    from transformers import MistralConfig, MistralForCausalLM

    from inference.mllm.adapters import MultiFilmMLLM
    from inference.mllm.loading import wrap_released

    cfg = MistralConfig(vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                        num_attention_heads=32, num_key_value_heads=8, sliding_window=4096, tie_word_embeddings=False)
    names = [f"f{i}" for i in range(films)]
    with torch.device("meta"):
        multi = MultiFilmMLLM(MistralForCausalLM(cfg), names, 1920).to(torch.bfloat16)
        single = wrap_released(MistralForCausalLM(cfg), 1920).to(torch.bfloat16)
        single.merge_lora()
    nbytes = lambda sd: sum(t.numel() * t.element_size() for t in sd.values())  # noqa: E731
    sd = multi.state_dict()
    per = nbytes({k: t for k, t in sd.items() if any(f".{m}.f0." in k for m in ("lora_A", "lora_B", "modules_to_save")) or k.startswith("projections.f0.")})
    print(f"Mistral-7B shapes, bf16 (meta tensors): one worker with {films} films {_gb(nbytes(sd))} of MLLM weights "
          f"({_gb(nbytes(sd) - films * per)} shared + {_gb(per)} per film) vs {films} workers x {_gb(nbytes(single.state_dict()))}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="mode", required=True)
    for name in ("tiny", "gpu", "random", "child"):
        s = sub.add_parser(name)
        s.add_argument("--turns", type=int, default=4, help="turns, the films interleaved (default 4)")
        s.add_argument("--steps", type=int, default=4 if name == "tiny" else 50, help="diffusion steps per clip")
        s.add_argument("--decoder-budget-gb", type=float, default=None, help="decoders' GPU budget (default: detected)")
        s.add_argument("--models-dir", type=Path, default=None)
        s.add_argument("--device", default="cpu" if name == "tiny" else "cuda")
        s.add_argument("--dtype", default="float32" if name == "tiny" else "auto", help="auto: bf16 MLLM, fp16 DiT on GPU")
        if name in ("random", "child"):
            s.add_argument("--size", choices=("7b", "tiny"), default="7b" if name == "random" else None,
                           help="random weights of these shapes (7b: Mistral-7B + CogVideoX-2B)")
        if name == "child":
            s.add_argument("--films", required=True)
    args = p.parse_args()
    if args.mode == "child":
        print(json.dumps(child(args)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        if args.mode == "tiny":
            import torch

            torch.set_num_threads(2)
            args.models_dir = Path(tmp) / "models"
            build_tiny(args.models_dir)
        elif args.mode == "gpu" and args.models_dir is None:
            sys.exit("gpu mode needs --models-dir (the directory `animegamer models download` filled)")
        one = run_child(args, ",".join(FILMS), args.turns)
        alone = [run_child(args, film, max(1, args.turns // len(FILMS))) for film in FILMS]
    report(one, alone, gpu=args.device.startswith("cuda"))
    seven_b_accounting()


if __name__ == "__main__":
    main()
