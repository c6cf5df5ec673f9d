"""Everything the decoder takes from diffusers, in one place.

Public diffusers API is re-exported as is. The few internals the decoder still needs are wrapped
here, each with the version it was checked against; tests/decoder/test_diffusers_api.py fails
naming the installed version when one of them changes:

- `DispatcherProcessor`: `ModelMixin.set_attention_backend()` (public) hands its backend to each
  attention processor by writing the attributes `_attention_backend` (and reads
  `_parallel_config`); a custom processor must carry both names to receive it. It also makes that
  backend the process-wide default of the dispatcher, which would reach every other model's
  processor left without one: ours name "native" (PyTorch SDPA) themselves until set.
- `reset_cache_state()`: diffusers' pipelines reset the cache hooks' per-clip state through
  `CacheMixin._reset_stateful_cache()` at the end of a call; our own sampling loop must too, or
  the next clip would start from the previous clip's cached residuals.
"""

from __future__ import annotations

from contextlib import contextmanager

import diffusers
import torch
from diffusers import AutoencoderKLCogVideoX, CogVideoXDPMScheduler, CogVideoXTransformer3DModel, FirstBlockCacheConfig
from diffusers.configuration_utils import register_to_config
from diffusers.models.attention_dispatch import AttentionBackendName, dispatch_attention_fn
from diffusers.models.attention_processor import Attention
from diffusers.models.embeddings import TimestepEmbedding, Timesteps, get_3d_sincos_pos_embed

CHECKED_VERSION = "0.42.1"  # the diffusers release these wrappers were written against

__all__ = [
    "AutoencoderKLCogVideoX",
    "CHECKED_VERSION",
    "CogVideoXDPMScheduler",
    "CogVideoXTransformer3DModel",
    "DispatcherProcessor",
    "FirstBlockCacheConfig",
    "TimestepEmbedding",
    "Timesteps",
    "cache_context",
    "decode_vae",
    "fuse_qkv",
    "get_3d_sincos_pos_embed",
    "qkv",
    "register_to_config",
    "reset_cache_state",
    "version",
]


def version() -> str:
    return diffusers.__version__


class DispatcherProcessor:
    """Base of an attention processor that receives `set_attention_backend()`'s choice."""

    _attention_backend = None  # written by ModelMixin.set_attention_backend
    _parallel_config = None  # read by it (context parallelism; unused here)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Attention over (B, S, H, D) tensors through diffusers' dispatcher (SDPA, flash, cuDNN, ...)."""
        backend = self._attention_backend or AttentionBackendName.NATIVE  # not another model's choice
        return dispatch_attention_fn(q, k, v, backend=backend, parallel_config=self._parallel_config)


def qkv(attn: Attention, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q, k, v projections of `x`, through the fused projection once `fuse_qkv` made one."""
    if attn.fused_projections:
        return attn.to_qkv(x).chunk(3, dim=-1)
    return attn.to_q(x), attn.to_k(x), attn.to_v(x)


def fuse_qkv(model: torch.nn.Module) -> int:
    """Fuse each self-attention's q/k/v projections into one matmul (public `Attention.fuse_projections`).

    The model's own `fuse_qkv_projections()` would also swap in diffusers' fused CogVideoX
    processor, which calls SDPA directly; this keeps our processor (it reads `to_qkv`, see `qkv`).
    Returns how many attentions were fused."""
    n = 0
    for module in model.modules():
        if isinstance(module, Attention) and not module.fused_projections:
            module.fuse_projections(fuse=True)
            n += 1
    return n


@contextmanager
def cache_context(model, name: str = "guided"):
    """The context diffusers' cache hooks key their state on (public `CacheMixin.cache_context`)."""
    if not getattr(model, "is_cache_enabled", False):
        yield
        return
    with model.cache_context(name):
        yield


def reset_cache_state(model) -> None:
    """Forget the cache hooks' state of the last clip (what pipelines do after each call)."""
    if getattr(model, "is_cache_enabled", False):
        model._reset_stateful_cache()


def decode_vae(vae: AutoencoderKLCogVideoX, z: torch.Tensor) -> torch.Tensor:
    """Latents (B, C, T, h, w), already divided by the scale factor -> video (B, C, F, H, W).

    The public `decode` runs the release's chunks ([0:3], then pairs, carrying the causal
    convolutions' cache) and honours `enable_slicing()`/`enable_tiling()` and offload hooks."""
    return vae.decode(z).sample
