"""GPU cards as data, and a turn's seconds on each: an estimate from FLOPs, tensor rate and PCIe.

Every figure here is an estimate until `bench/gpu.sh` measures a card. A turn's seconds are

    FLOPs of the turn / (the card's dense fp16/bf16 tensor rate x UTILISATION)
    + (offload modes) the weight bytes moved per turn / the card's host link rate

with the FLOPs counted as the benchmarks count them: the DiT's linears and attention analytically
(12 D^2 per token per block, 4 S^2 D for attention; x2 guidance branches x steps), the MLLM's
prefill as 2 x weights x tokens plus attention, and the VAE decode by torch's FlopCounterMode on
the meta device. The transfer is counted without overlap (an upper bound). Weight-only int8/int4
dequantisation is not counted: the MLLM is under 1 % of a turn's FLOPs.

GeForce cards run fp16 tensor matmuls with fp32 accumulation (PyTorch's default) at half their
headline fp16 rate: their rate below is the fp32-accumulate one.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

UTILISATION = 0.45  # assumed share of the dense tensor rate a turn's kernels reach (DiT linears + flash attention)


@dataclass(frozen=True)
class Card:
    name: str
    model: str  # as in the CUDA device name
    memory_gb: float  # as sold (10^9 bytes)
    tflops: float  # dense fp16/bf16 tensor TFLOP/s (GeForce: with fp32 accumulation)
    link: str  # host link
    link_gbps: float  # host -> device GB/s reached in practice


# Published dense rates (vendors' datasheets / architecture whitepapers). Host links: PCIe 4.0 x16
# ~25 GB/s in practice, 4.0 x8 ~12, 5.0 x16 ~50 (SXM boards reach the host over PCIe 5.0 x16 too).
CARDS = (
    Card("RTX 3060 12 GB", "RTX 3060", 12, 25.6, "PCIe 4.0 x16", 25.0),
    Card("RTX 4060 Ti 16 GB", "RTX 4060 Ti", 16, 44.1, "PCIe 4.0 x8", 12.0),
    Card("RTX 4070 12 GB", "RTX 4070", 12, 58.3, "PCIe 4.0 x16", 25.0),
    Card("RTX 4080 16 GB", "RTX 4080", 16, 97.5, "PCIe 4.0 x16", 25.0),
    Card("RTX 4090 24 GB", "RTX 4090", 24, 165.2, "PCIe 4.0 x16", 25.0),
    Card("L4 24 GB", "L4", 24, 121.0, "PCIe 4.0 x16", 25.0),
    Card("A10 24 GB", "A10", 24, 125.0, "PCIe 4.0 x16", 25.0),
    Card("A100 40 GB", "A100", 40, 312.0, "PCIe 4.0 x16", 25.0),
    Card("A100 80 GB", "A100", 80, 312.0, "PCIe 4.0 x16", 25.0),
    Card("H100 80 GB (SXM)", "H100", 80, 989.0, "PCIe 5.0 x16", 50.0),
    Card("H200 141 GB", "H200", 141, 989.0, "PCIe 5.0 x16", 50.0),
)


def dit_flops(dit: dict, latent_shape: tuple[int, int, int, int], steps: int, sessions: int = 1) -> float:
    """The denoise: linears and attention over the joint sequence, x2 guidance branches x steps."""
    d = dit["num_attention_heads"] * dit["attention_head_dim"]
    t, _, h, w = latent_shape
    p = dit["patch_size"]
    s = dit["max_text_seq_length"] + t * (h // p) * (w // p)
    per_block = 2 * 12 * d * d * s + 4 * s * s * d
    return float(per_block * dit["num_layers"] * 2 * steps * sessions)


def mllm_flops(mllm: dict, tokens: int, sessions: int = 1) -> float:
    """The prefill: 2 x decoder-layer weights per token, plus attention."""
    h, i, n = mllm["hidden_size"], mllm["intermediate_size"], mllm["num_hidden_layers"]
    kv = mllm["num_key_value_heads"] * (h // mllm["num_attention_heads"])
    weights = n * (2 * h * h + 2 * h * kv + 3 * h * i)
    return float((2 * weights * tokens + 4 * n * tokens * tokens * h) * sessions)


@functools.cache
def _vae_flops_cached(vae_items: tuple, height: int, width: int, latent: tuple[int, int, int, int]) -> float:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from inference.decoder.diffusers_api import AutoencoderKLCogVideoX
    from inference.decoder.vae import decode_latents

    config: dict[str, Any] = {k: list(v) if isinstance(v, tuple) else v for k, v in vae_items}
    with torch.device("meta"):
        vae = AutoencoderKLCogVideoX(**config)
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        decode_latents(vae, torch.empty((1, *latent), device="meta"))
    return float(counter.get_total_flops())


def vae_flops(vae: dict, size: dict[str, int], latent_shape: tuple[int, int, int, int]) -> float:
    """One clip's VAE decode, untiled (tiles overlap: a tiled decode does somewhat more)."""
    from .cache import cached_number

    items = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in vae.items()))
    return cached_number("vae-flops", {"vae": items, "size": size, "latent": latent_shape},
                         lambda: _vae_flops_cached(items, size["height"], size["width"], tuple(latent_shape)))


@dataclass(frozen=True)
class TurnWork:
    """What one turn costs a card, by stage: FLOPs, and the weight bytes an offload mode moves."""

    flops: dict[str, float]  # "mllm", "denoise", "vae"
    moved_bytes: int = 0

    def seconds(self, card: Card, utilisation: float = UTILISATION) -> float:
        compute = sum(self.flops.values()) / (card.tflops * 1e12 * utilisation)
        return compute + self.moved_bytes / (card.link_gbps * 1e9)


def turn_work(prediction, steps: int, shapes=None) -> TurnWork:
    """What one turn of `prediction`'s mode and sessions costs (FLOPs per stage, bytes moved),
    at the released sizes unless `shapes` (inference.memory.plan.Shapes) says otherwise."""
    from .plan import Shapes, prompts

    shapes = shapes or Shapes.full_size()
    n = prediction.sessions
    spatial = 2 ** (len(shapes.vae["block_out_channels"]) - 1)
    latent = (5, shapes.dit["in_channels"], shapes.size["height"] // spatial, shapes.size["width"] // spatial)
    tokens = len(prompts(shapes, 1)[0])
    flops = {"mllm": mllm_flops(shapes.mllm, tokens, n), "denoise": dit_flops(shapes.dit, latent, steps, n),
             "vae": vae_flops(shapes.vae, shapes.size, latent) * n}
    return TurnWork(flops, prediction.moved_bytes)


def estimate_line(work: TurnWork, card: Card, nearest: bool = False) -> str:
    s = work.seconds(card)
    move = f", of which {work.moved_bytes / (card.link_gbps * 1e9):.1f} s moving weights ({card.link})" if work.moved_bytes else ""
    return (f"~{s:.0f} s per turn on an {card.name}{', the nearest listed card,' if nearest else ''} (estimate: "
            f"{card.tflops:g} dense TFLOP/s at {UTILISATION:.0%} utilisation{move})")


def nearest_card(memory_gib: float) -> Card:
    """The listed card closest in memory to a GPU of `memory_gib` (for an estimate on an unlisted one)."""
    from .plan import usable_gib

    return min(CARDS, key=lambda c: (abs(usable_gib(c.memory_gb) - memory_gib), c.tflops))


def card_named(name: str, memory_gib: float | None = None) -> Card | None:
    """The listed card a CUDA device name names (e.g. 'NVIDIA GeForce RTX 4090'), the closest in
    memory where a model comes in two sizes."""
    import re

    from .plan import usable_gib

    found = [c for c in CARDS if re.search(rf"\b{re.escape(c.model)}\b(?! Ti)", name, re.IGNORECASE)
             or (c.model.endswith(" Ti") and re.search(rf"\b{re.escape(c.model)}\b", name, re.IGNORECASE))]
    if not found:
        return None
    return min(found, key=lambda c: abs(usable_gib(c.memory_gb) - memory_gib) if memory_gib else 0)
