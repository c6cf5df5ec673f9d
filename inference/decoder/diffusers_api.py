"""Everything the decoder takes from diffusers, in one place.

Public diffusers API is re-exported as is. The few internals the decoder still needs are wrapped
here, each with the version it was checked against; tests/decoder/test_diffusers_api.py fails
naming the installed version when one of them changes:

- `DispatcherProcessor`: `ModelMixin.set_attention_backend()` (public) hands its backend to each
  attention processor by writing the attributes `_attention_backend` (and reads
  `_parallel_config`); a custom processor must carry both names to receive it. It also makes that
  backend the process-wide default of the dispatcher, which would reach every other model's
  processor left without one: ours name "native" (PyTorch SDPA) themselves until set.
- `compiled_blocks()`: `ModelMixin.compile_repeated_blocks()` compiles the blocks whose class
  names the model class lists in its attribute `_repeated_blocks` (the documented way, under a
  private name).
- `reset_cache_state()`: diffusers' pipelines reset the cache hooks' per-clip state through
  `CacheMixin._reset_stateful_cache()` at the end of a call; our own sampling loop must too, or
  the next clip would start from the previous clip's cached residuals.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Protocol, TypeVar, cast

import diffusers
import torch

if TYPE_CHECKING:
    # diffusers' lazy __init__ does not mark its public names as re-exports (no __all__, no `X as
    # X`), so pyright calls `from diffusers import ...` private: it reads them where they are defined.
    from diffusers.hooks.first_block_cache import FirstBlockCacheConfig
    from diffusers.models.attention_processor import AttnProcessor
    from diffusers.models.autoencoders.autoencoder_kl_cogvideox import AutoencoderKLCogVideoX
    from diffusers.models.autoencoders.vae import DecoderOutput
    from diffusers.models.transformers.cogvideox_transformer_3d import CogVideoXTransformer3DModel
    from diffusers.schedulers.scheduling_dpm_cogvideox import CogVideoXDPMScheduler
else:
    from diffusers import (
        AutoencoderKLCogVideoX,
        CogVideoXDPMScheduler,
        CogVideoXTransformer3DModel,
        FirstBlockCacheConfig,
    )
from diffusers.configuration_utils import register_to_config
from diffusers.models.attention_dispatch import AttentionBackendName, dispatch_attention_fn
from diffusers.models.attention_processor import Attention
from diffusers.models.embeddings import TimestepEmbedding, Timesteps, get_3d_sincos_pos_embed

CHECKED_VERSION = "0.42.1"  # the diffusers release these wrappers were written against

__all__ = [
    "Attention",
    "AutoencoderKLCogVideoX",
    "CHECKED_VERSION",
    "CogVideoXDPMScheduler",
    "CogVideoXTransformer3DModel",
    "DispatcherProcessor",
    "FirstBlockCacheConfig",
    "TimestepEmbedding",
    "Timesteps",
    "cache_context",
    "compiled_blocks",
    "decode_vae",
    "dit_config",
    "fuse_qkv",
    "get_3d_sincos_pos_embed",
    "qkv",
    "register_to_config",
    "reset_cache_state",
    "set_processor",
    "to_device",
    "vae_config",
    "version",
]


def version() -> str:
    return diffusers.__version__


# A model's `config` is a FrozenDict whose keys are also attributes (registered at run time), but
# it is typed dict[str, Any]: these name the attributes the decoder reads.
class VaeConfig(Protocol):
    block_out_channels: Sequence[int]
    scaling_factor: float


class DiTConfig(Protocol):
    patch_size: int
    in_channels: int
    max_text_seq_length: int
    text_embed_dim: int


def vae_config(vae: AutoencoderKLCogVideoX) -> VaeConfig:
    return cast(VaeConfig, vae.config)


def dit_config(transformer: CogVideoXTransformer3DModel) -> DiTConfig:
    return cast(DiTConfig, transformer.config)


def to_device(model: torch.nn.Module, device: torch.device | str) -> None:
    """`model.to(device)`. diffusers declares ModelMixin.to through functools.wraps(nn.Module.to),
    which type checkers read as an unbound function; called through nn.Module's type it is the same call."""
    model.to(device)


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
        q, k, v = attn.to_qkv(x).chunk(3, dim=-1)
        return q, k, v
    if attn.to_k is None or attn.to_v is None:  # an only_cross_attention Attention has none: not ours
        raise ValueError("qkv() is for self-attention; this Attention has no key/value projections")
    return attn.to_q(x), attn.to_k(x), attn.to_v(x)


def set_processor(attn: Attention, processor: object) -> None:
    """`attn.set_processor(processor)`: typed to take diffusers' own processor classes (a Union),
    it takes any processor (the documented way to plug in a custom one)."""
    attn.set_processor(cast("AttnProcessor", processor))


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


ModelClass = TypeVar("ModelClass", bound=type)


def compiled_blocks(*class_names: str):
    """Class decorator: the sub-modules, named by class, that `compile_repeated_blocks()` compiles."""

    def mark(cls: ModelClass) -> ModelClass:
        cls._repeated_blocks = class_names
        return cls

    return mark


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
    # Typed `DecoderOutput | Tensor`, but with the default return_dict=True it is a DecoderOutput.
    return cast("DecoderOutput", vae.decode(z)).sample
