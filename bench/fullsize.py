"""A whole turn at the released sizes on this CPU, each stage measured and held against the memory plan.

    .venv/bin/python bench/fullsize.py                    # low_vram (int8 MLLM), 2 steps; ~20 min
    .venv/bin/python bench/fullsize.py --modes resident,low_vram --out bench-fullsize.md
    .venv/bin/python bench/fullsize.py --steps 50         # the released step count (hours on a CPU)
    .venv/bin/python bench/fullsize.py --tiny             # the same code on the tests' tiny configs

Random weights at the released architectures (Mistral-7B with the AnimeGamer vocabulary and
projections, the 2B DiT, the CogVideoX VAE; nothing downloaded), loaded as a worker holds them and
run through the real AnimeGamerBackend: the MLLM prefill and states at the history window's
prompt, N denoise steps, the VAE decode to 17x480x720 and the MP4. On a CPU the decoder runs in
bf16 where a GPU runs fp16 (a CPU with AMX or AVX-512 BF16 has fast bf16 kernels and slow fp16 ones; the sizes are equal).

Per stage it prints the seconds, the RSS high-water mark (reset between stages through
/proc/self/clear_refs), the live tensor bytes counted at the dispatcher (inference.memory.live)
and the largest single tensor, and beside them what inference.memory.plan predicts for the same
shapes, dtypes and mode on the CPU: predicted / measured. Before each mode, the plan's peak is
checked against the memory this machine has; a mode or stage that would not fit is not run but
reported with its numbers and what would make it fit. Nothing is asserted: tests/bench runs --tiny.

Modes: `low_vram` (int8 MLLM weights, VAE tiled; the whole turn to the MP4), `resident` (bf16
MLLM, untiled VAE; stages run while they fit), and the stage-offload modes `offload` (int8 MLLM)
and `offload_int4` (int4 MLLM), VAE tiled, one stage's weights on the device at a time
(inference.memory.offload). resident runs first when asked for: the int8 weights are made from its
bf16 ones. In the offload modes the "measured" figure is what a GPU would hold in each stage: the
weights the offload has on the device in that stage plus the stage's live activations (the live
tensors above all the weights), against the plan's prediction for the same mode.

This module is the command and the run; the models it builds are bench/fullsize_models.py's, the
table bench/fullsize_report.py's, the RSS readings bench/host_memory.py's.
"""

from __future__ import annotations

import _paths  # noqa: F401  (first: keeps bench/queue.py from shadowing the stdlib)

import argparse
import gc
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from fullsize_models import fast_dtype, quantized_mllm, random_decoder
from fullsize_report import ModeRun, StageRow, environment, table
from host_memory import available, reset_rss_hwm, rss_hwm

from contracts.turn import HistoryTurn, TurnRequest
from game.states import Prediction
from inference.backends.animegamer import AnimeGamerBackend, AnimeGamerSettings
from inference.decoder.pipeline import AnimeGamerDecoder, prepare
from inference.decoder.transformer import ANIMEGAMER_2B_CONFIG
from inference.decoder.vae import COGVIDEOX_VAE_CONFIG
from inference.memory.live import GiB, LiveBytes
from inference.memory.offload import transfer_seconds
from inference.memory.plan import OFFLOAD_MODES, QUANTIZE, VAE_TILES, Precision, Shapes, compose, trace
from inference.mllm.instruction import InstructionEncoder
from inference.mllm.loading import LoadedMLLM, LoadReport
from inference.mllm.model import MISTRAL_7B_SHAPE
from inference.mllm.quantize import quantize_weights
from inference.mllm.tokens import SPECIAL, verify
from testkit.tiny import mllm as tiny_mllm
from testkit.tiny.decoder import TINY_SIZE, TINY_TRANSFORMER_CONFIG, TINY_VAE_CONFIG

INSTRUCTIONS = (
    "Character: Qiqi; Motion: quickly fly on the broomstick; Background: night sky.",
    "Character: Jiji; Motion: slowly walk; Background: morning street.",
)
HISTORY = 2  # the default ANIMEGAMER_HISTORY_WINDOW
STAGES = ("mllm", "denoise", "vae", "mp4")
MODES = ("resident", "low_vram", "offload", "offload_int4")


# -- one turn, stage by stage -------------------------------------------------------------------


class StageMeter:
    """Follows the backend's progress labels: each stage gets its live-bytes peak and its RSS mark."""

    LABELS = {"mllm": "mllm", "decode": "denoise", "vae": "vae", "encode": "mp4"}

    def __init__(self, counter: LiveBytes, offload=None):
        self.counter = counter
        self.offload = offload  # a StageOffload: the weights on the device at each stage's end
        self.base = counter.live  # every weight (adopted before the turn)
        self.device_weights: dict[str, int] = {}
        self.current: str | None = None
        self.rss: dict[str, int] = {}
        self.seconds: dict[str, float] = {}
        self._since = 0.0

    def __call__(self, fraction: float, label: str) -> None:
        stage = self.LABELS.get(label.split()[0])
        if stage and stage != self.current:
            self.switch(stage)
        elif label == "done":
            self.switch(None)

    def switch(self, stage: str | None) -> None:
        now = time.perf_counter()
        if self.current is not None:
            self.rss[self.current] = rss_hwm()
            self.seconds[self.current] = now - self._since
            if self.offload is not None:
                self.device_weights[self.current] = self.offload.device_bytes()
            self.counter.end()
        self.current, self._since = stage, now
        if stage is not None:
            reset_rss_hwm()
            self.counter.begin(stage)


class FullSize:
    def __init__(self, tiny: bool, steps: int, tmp: str, dtype: torch.dtype = torch.float32,
                 vae_tiles: tuple[int, int] | None = None):
        self.tiny = tiny
        self.steps = steps
        self.dtype = dtype
        self.dit_cfg = dict(TINY_TRANSFORMER_CONFIG if tiny else ANIMEGAMER_2B_CONFIG)
        self.vae_cfg = dict(TINY_VAE_CONFIG if tiny else COGVIDEOX_VAE_CONFIG)
        self.size = dict(TINY_SIZE if tiny else {"height": 480, "width": 720})
        self.mllm_shape = {} if tiny else dict(MISTRAL_7B_SHAPE)
        # low_vram's VAE tiles: diffusers' default (240x360 at full size) unless asked; at the tiny
        # size one tile covers the frame (diffusers' default tiles would not cover it evenly).
        self.vae_tiles = vae_tiles or ((self.size["height"], self.size["width"]) if tiny else None)
        self.rep_dim = self.dit_cfg["text_embed_dim"]
        self.tokenizer = tiny_mllm.build_tokenizer(Path(tmp) / "tokenizer")
        verify(self.tokenizer)
        self.shapes = Shapes(tiny_mllm.tiny_config(vocab_size=32284, **self.mllm_shape).to_dict() if tiny
                             else dict(MISTRAL_7B_SHAPE), self.dit_cfg, self.vae_cfg, self.size,
                             rep_dim=self.rep_dim, history=HISTORY)
        self.mllm = None
        self.mllm_quantized: str | None = None
        self.decoder: AnimeGamerDecoder | None = None

    # -- models (random weights, as a worker holds them) --

    def build_mllm(self) -> float:
        """The MLLM in the run's dtype, whole (the resident mode)."""
        t = time.perf_counter()
        self.mllm = tiny_mllm.random_mllm("cpu", self.dtype, rep_dim=self.rep_dim, **self.mllm_shape)
        return time.perf_counter() - t

    def build_mllm_quantized(self, how: str = "int8") -> float:
        """The MLLM as low_vram / offload (int8) or offload_int4 (int4) holds it, quantised layer by
        layer as it is built (fullsize_models.quantized_mllm)."""
        t = time.perf_counter()
        self.mllm = quantized_mllm(self.mllm_shape, self.rep_dim, self.dtype, how)
        self.mllm_quantized = how
        return time.perf_counter() - t

    def build_decoder(self) -> float:
        t = time.perf_counter()
        self.decoder = random_decoder(self.dit_cfg, self.vae_cfg, self.size, self.steps, self.dtype)
        return time.perf_counter() - t

    def backend(self, offload: bool = False) -> AnimeGamerBackend:
        # max_batch=1: the turn runs in this thread, where the dispatch count sees it
        s = AnimeGamerSettings("-", "-", "-", history_window=HISTORY, rep_dim=self.rep_dim, max_batch=1,
                               offload=offload, device="cpu")
        loaded = LoadedMLLM(self.mllm, self.tokenizer, SPECIAL, LoadReport("random weights"))
        backend = AnimeGamerBackend(s, decoder=self.decoder, loaded_mllm=loaded)
        backend.load()
        return backend

    def request(self) -> TurnRequest:
        rng = np.random.default_rng(0)
        history = tuple(
            HistoryTurn(INSTRUCTIONS[k % 2], Prediction.from_sequence(rng.integers(-5, 6, 4)),
                        rng.standard_normal((226, self.rep_dim)).astype(np.float32))
            for k in range(HISTORY)
        )
        return TurnRequest(turn_id=1, session_id=1, film_id="qiqi", instruction=INSTRUCTIONS[0], characters=("Qiqi",),
                           motion="fly", adverb="quickly", background="sky", time_of_day="night", seed=7,
                           history=history)

    def encoder(self) -> InstructionEncoder:
        return InstructionEncoder(self.tokenizer, SPECIAL)

    # -- the prediction for this run --

    def weight_bytes(self) -> int:
        """Bytes of every weight this process holds (the offload modes keep them all in host memory)."""
        assert self.mllm is not None and self.decoder is not None
        return LiveBytes("cpu").adopt([*self.mllm.parameters(), *self.mllm.buffers(),
                                       *self.decoder.transformer.parameters(), *self.decoder.transformer.buffers(),
                                       *self.decoder.vae.parameters(), *self.decoder.vae.buffers()])

    def tiles(self, mode: str) -> tuple[int, int] | None:
        """The VAE's tiles in a tiled mode: --vae-tiles, else diffusers' default (low_vram) or the
        plan's largest (the offload modes; on a GPU the plan picks the largest that fits the card)."""
        if mode == "resident":
            return None
        return self.vae_tiles or (VAE_TILES[0] if mode in OFFLOAD_MODES else None)

    def predict(self, mode: str) -> dict[str, int]:
        """Predicted peak bytes per stage of this CPU run (same shapes, dtypes, mode, steps): live
        tensors, or in the offload modes what the device holds."""
        precision = Precision(mllm_dtype=self.dtype, decoder_dtype=self.dtype, quantize=QUANTIZE.get(mode),
                              low_vram=mode != "resident", vae_tiles=self.tiles(mode))
        t = trace(self.shapes, precision, 1, device="cpu", encoder=self.encoder(), steps=self.steps)
        stages = compose(mode, 1, t, self.tiles(mode)).devices["gpu0"]
        return {name: s.allocated for name, s in stages.items()}

    # -- a run --

    def run(self, mode: str, baseline_rss: int) -> ModeRun:
        assert self.mllm is not None and self.decoder is not None
        run = ModeRun(mode)
        predicted = self.predict(mode)
        prepare(self.decoder, "cpu", low_vram=mode != "resident")
        if (tiles := self.tiles(mode)) is not None:
            self.decoder.vae.enable_tiling(tile_sample_min_height=tiles[0], tile_sample_min_width=tiles[1])
        offload = mode in OFFLOAD_MODES
        # What would not fit: the plan's peak per stage, above what the process holds besides tensors.
        weights = self.weight_bytes() if offload else predicted["weights"]
        room = available() + weights  # the weights are already in memory
        over = {s: p for s, p in predicted.items() if s in STAGES and p > room * 0.95}
        counter = LiveBytes("cpu")
        backend = self.backend(offload)
        counter.adopt([*self.mllm.parameters(), *self.mllm.buffers(),
                       *self.decoder.transformer.parameters(), *self.decoder.transformer.buffers(),
                       *self.decoder.vae.parameters(), *self.decoder.vae.buffers()])
        meter = StageMeter(counter, backend.offload)
        request = self.request()
        result = None
        timings: dict[str, float] = {}
        with counter, torch.inference_mode():
            if not over:
                try:
                    result = backend.generate(request, meter)
                    timings = dict(result.timings)
                    run.mp4_bytes = len(result.mp4 or b"")
                except Exception as e:  # noqa: BLE001  (the stages measured so far are still reported)
                    run.note = f"{mode}: stopped in its {meter.current} stage: {type(e).__name__}: {e}"
                meter.switch(None)
            else:
                # Run the stages that fit, in order, through the same code; stop before the first that does not.
                run.note = self.advice(mode, over, room)
                meter.switch("mllm")
                (_, rep), = backend.predict([request])
                if "denoise" not in over:
                    from inference.decoder.sampler import SeededNoise

                    meter.switch("denoise")
                    self.decoder.sample_latents(torch.from_numpy(rep[None]), [10.0],
                                                SeededNoise([7], self.decoder.latent_shape, "cpu"))
                meter.switch(None)
        backend.close()
        seconds = meter.seconds  # wall time between the backend's progress labels
        for name in STAGES:
            row = StageRow(name, predicted=predicted.get(name, 0))
            ran = [s for s in counter.stages if s.name == name]
            if ran:
                peak = counter.peak(name)
                row.seconds = seconds.get(name, float("nan"))
                row.rss = meter.rss.get(name, 0)
                row.live = peak.peak
                if name in meter.device_weights:  # offload: the device's weights + the live activations
                    row.live = meter.device_weights[name] + peak.peak - meter.base
                    row.note = f"device weights {meter.device_weights[name] / GiB:.2f} GiB"
                row.largest = f"{peak.largest / 2**20:.0f} MiB {list(peak.largest_shape)} {peak.largest_dtype.replace('torch.', '')}"
            elif name in over:
                row.note = f"not run: predicted {predicted[name] / GiB:.1f} GiB > {room * 0.95 / GiB:.1f} GiB this machine can give"
            else:
                row.note = "not run (an earlier stage did not fit)"
            run.rows.append(row)
        if offload and backend.offload is not None:
            moved = backend.offload.moved_bytes
            run.note = (run.note + "; " if run.note else "") + (f"{mode}: {moved / 1e9:.2f} GB host -> device in the turn's cycle: "
                        + ", ".join(f"{s:.2f} s at {bus}" for bus, s in transfer_seconds(moved).items()))
        if "mllm_prefill" in timings:
            run.rows[0].note = (run.rows[0].note + "; " if run.rows[0].note else "") + (f"prefill {timings.get('mllm_prefill', float('nan')):.1f} s + "
                                f"states {timings.get('mllm_states', float('nan')):.1f} s")
        return run

    def advice(self, mode: str, over: dict[str, int], room: int) -> str:
        parts = []
        if "vae" in over:
            parts.append("the VAE decode fits tiled (ANIMEGAMER_MEMORY_MODE=low_vram tiles it: see that row)")
        if over.keys() & {"weights", "mllm", "denoise"}:
            parts.append("int8 MLLM weights (low_vram) halve the MLLM's")
        need = max(over.values())
        return (f"{mode} ({str(self.dtype).replace('torch.', '')}): predicted {need / GiB:.1f} GiB at {', '.join(over)}, this machine can give "
                f"{room / GiB:.1f} GiB; " + "; ".join(parts))


def tiles_problem(tiles: tuple[int, ...], tiny: bool) -> str | None:
    """Why the VAE would not give whole frames with these tiles (diffusers' tiled decode pads tiles
    that do not fit the frame), found on the meta device in a second rather than after the run."""
    from inference.decoder.vae import decode_latents
    from inference.memory.fake_models import build_decoder

    size = dict(TINY_SIZE if tiny else {"height": 480, "width": 720})
    dit, vae = (TINY_TRANSFORMER_CONFIG, TINY_VAE_CONFIG) if tiny else (ANIMEGAMER_2B_CONFIG, COGVIDEOX_VAE_CONFIG)
    if len(tiles) != 2:
        return f"--vae-tiles takes HxW, got {tiles}"
    dec = build_decoder(torch.float32, dict(dit), dict(vae), size, low_vram=True, tiles=(tiles[0], tiles[1]))
    with torch.no_grad():
        video = decode_latents(dec.vae, torch.empty((1, *dec.latent_shape), device="meta"))
    got = tuple(video.shape[-2:])
    if got != (size["height"], size["width"]):
        return f"--vae-tiles {tiles[0]}x{tiles[1]} gives {got[0]}x{got[1]} frames, not {size['height']}x{size['width']}"
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=2, help="denoise steps (the release uses 50)")
    ap.add_argument("--modes", default="low_vram", help="comma-separated, of: " + ",".join(MODES) + " (run in that order)")
    ap.add_argument("--tiny", action="store_true", help="the tests' tiny configs (seconds)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    ap.add_argument("--dtype", choices=("auto", "bf16", "fp32"), default="auto",
                    help="both models' dtype (auto: bf16 where the CPU has AMX or AVX-512 BF16, else fp32)")
    ap.add_argument("--vae-tiles", default=None, metavar="HxW",
                    help="the tiled modes' VAE tile size (default: 240x360); smaller tiles hold less")
    ap.add_argument("--out", default=None, help="Markdown file for the table")
    args = ap.parse_args(argv)
    tiles = tuple(int(v) for v in args.vae_tiles.lower().split("x")) if args.vae_tiles else None
    if tiles and (why_not := tiles_problem(tiles, args.tiny)):
        ap.error(why_not)
    modes = [m for m in MODES if m in args.modes.split(",")]
    unknown = set(args.modes.split(",")) - set(MODES)
    if unknown or not modes:
        ap.error(f"--modes takes some of {', '.join(MODES)}, got {args.modes!r}")
    if args.steps < 1:
        ap.error("--steps must be at least 1")
    if args.threads:
        torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    env = environment()
    print(env, flush=True)
    runs: list[ModeRun] = []
    dtype, why = fast_dtype() if args.dtype == "auto" else ({"bf16": torch.bfloat16, "fp32": torch.float32}[args.dtype], args.dtype)
    print(f"models in {why}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-fullsize-") as tmp:
        bench = FullSize(args.tiny, args.steps, tmp, dtype, vae_tiles=tiles)  # type: ignore[arg-type]
        for mode in modes:
            predicted = bench.predict(mode)
            need = predicted["weights"]
            if bench.mllm is None and need > available() * 0.95:  # its weights alone do not fit
                run = ModeRun(mode, note=bench.advice(mode, {"weights": need}, available()))
                run.rows = [StageRow(n, predicted=predicted.get(n, 0), note="not run") for n in STAGES]
                runs.append(run)
                print(f"\n[{mode}] not run: {run.note}", flush=True)
                continue
            t = time.perf_counter()
            how = QUANTIZE.get(mode)
            if how and bench.mllm is not None and bench.mllm_quantized not in (None, how):
                bench.mllm = None  # int8 -> int4: built again (the int4 weights come from full precision)
                gc.collect()
            if how and bench.mllm is None:
                print(f"MLLM built as {how} in {bench.build_mllm_quantized(how):.1f} s; RSS {rss_hwm() / GiB:.1f} GiB", flush=True)
            elif how and bench.mllm_quantized is None:
                n = quantize_weights(bench.mllm, how)  # after resident: its weights, quantised in place
                bench.mllm_quantized = how
                gc.collect()
                print(f"MLLM: {n} linears to {how} in {time.perf_counter() - t:.1f} s", flush=True)
            elif bench.mllm is None:
                print(f"MLLM built in {bench.build_mllm():.1f} s; RSS {rss_hwm() / GiB:.1f} GiB", flush=True)
            if bench.decoder is None:
                print(f"decoder built in {bench.build_decoder():.1f} s; RSS {rss_hwm() / GiB:.1f} GiB", flush=True)
            t = time.perf_counter()
            run = bench.run(mode, rss_hwm())
            runs.append(run)
            print(f"\n[{mode}] {time.perf_counter() - t:.0f} s" + (f"; {run.note}" if run.note else ""), flush=True)
            print(table([run], args.steps), flush=True)
    text = (f"# bench/fullsize.py{' --tiny' if args.tiny else ''} --steps {args.steps}\n\n{env}\n\n"
            f"Random weights at {'tiny' if args.tiny else 'the released'} sizes, "
            f"{bench.size['height']}x{bench.size['width']}, 17 frames, history window {HISTORY}, 1 session; "
            f"MLLM and decoder in {why} (int8 MLLM linears in low_vram and offload, int4 in offload_int4"
            + (f", VAE tiles {args.vae_tiles}" if args.vae_tiles else "") + "). Live tensors: the peak of live tensor "
            f"bytes in the stage (weights included), counted at the dispatcher; in the offload modes, the weights on "
            f"the device in that stage plus the stage's live activations (what a GPU would hold); predicted: inference.memory.plan "
            f"for the same run. Total {time.perf_counter() - t0:.0f} s.\n\n{table(runs, args.steps)}\n"
            + "".join(f"\nMP4 ({run.mode}): {run.mp4_bytes} bytes" for run in runs if run.mp4_bytes)
            + "".join(f"\n{run.note}" for run in runs if run.note) + "\n")
    if args.out:
        Path(args.out).write_text(text)
    print("\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
