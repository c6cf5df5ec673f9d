"""The AnimeGamer decoder DiT: diffusers' CogVideoX-2B transformer plus AnimeGamer's additions.

What differs from the stock `CogVideoXTransformer3DModel` (each handled below):
- Motion scope ("flow") embedding: the released model embeds the motion scope with the same
  sinusoid as the timestep (width 1920, cos first) and runs it through Linear(1920->512), SiLU,
  Linear(512->512); the result is added to the time embedding. diffusers' `ofs_embedding` sits at
  exactly that place but is built ofs_embed_dim->ofs_embed_dim (512->512 on a 512-wide sinusoid),
  so the parent is built without it and we build `ofs_proj`/`ofs_embedding` as 1920-wide
  sinusoid -> 512 -> 512.
- Conditioning: the 226 "text" tokens are the MLLM representation, already 1920 wide, so the
  patch embedding's `text_proj` is the identity (diffusers' patch embedding has no switch for it,
  so its 1920x1920 Linear is built and dropped at once). The unconditional branch is a constant 226x1920
  tensor computed from the checkpoint's own projections at conversion time (see uncond.py); it is
  stored here as the persistent buffer `uncond_embedding` so it travels with the weights.
- Norm eps: SAT's final-layer `norm_final` uses eps 1e-6; diffusers builds `norm_out.norm` with
  `norm_eps` (1e-5, right for every other norm). We set it from `final_norm_eps`.
- Attention goes through diffusers' attention dispatcher, so `set_attention_backend()` (flash,
  cuDNN, sage, ...) works; the stock CogVideoX processor calls SDPA directly. It also reads the
  fused q/k/v projection when `diffusers_api.fuse_qkv` made one.
Everything taken from diffusers comes through `diffusers_api`, which names what is internal.
"""

from __future__ import annotations

from typing import Any, cast

import torch
from torch import nn

from .diffusers_api import (
    Attention,
    CogVideoXTransformer3DModel,
    DispatcherProcessor,
    TimestepEmbedding,
    Timesteps,
    compiled_blocks,
    qkv,
    register_to_config,
    set_processor,
)

# The released decoder (configs/cogvideox_2b.yaml, network_config): CogVideoX-2B with 5 latent frames.
ANIMEGAMER_2B_CONFIG: dict[str, Any] = {
    "num_attention_heads": 30,
    "attention_head_dim": 64,
    "in_channels": 16,
    "out_channels": 16,
    "time_embed_dim": 512,
    "ofs_embed_dim": 512,  # flow_embed output width (= time_embed_dim; the two are summed)
    "text_embed_dim": 1920,  # the representation is already DiT-wide: no projection
    "num_layers": 30,
    "sample_width": 90,
    "sample_height": 60,
    "sample_frames": 17,  # 5 latent frames
    "patch_size": 2,
    "temporal_compression_ratio": 4,
    "max_text_seq_length": 226,
    "norm_eps": 1e-5,
    "final_norm_eps": 1e-6,
    "spatial_interpolation_scale": 1.875,
    "temporal_interpolation_scale": 1.0,
}


class AnimeGamerAttnProcessor(DispatcherProcessor):
    """CogVideoX joint attention (text tokens first, no RoPE for the 2B model) via the dispatcher."""

    def __call__(
        self,
        attn,
        hidden_states: torch.Tensor,
        encoder_hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        image_rotary_emb: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if image_rotary_emb is not None or attention_mask is not None:
            raise NotImplementedError("the AnimeGamer decoder uses neither RoPE nor an attention mask")
        text_len = encoder_hidden_states.size(1)
        x = torch.cat([encoder_hidden_states, hidden_states], dim=1)
        b, n, _ = x.shape
        q, k, v = (t.view(b, n, attn.heads, -1) for t in qkv(attn, x))  # dispatcher layout: (B, S, H, D)
        q = attn.norm_q(q)
        k = attn.norm_k(k)
        out = self.attend(q, k, v)
        out = attn.to_out[0](out.reshape(b, n, -1).to(q.dtype))
        return out[:, text_len:], out[:, :text_len]


def _checked_ofs_dim(inner_dim: int, time_embed_dim: int, ofs_embed_dim: int | None, text_embed_dim: int) -> int:
    """The motion-scope embedding's width, checked against the widths it is summed with."""
    if not ofs_embed_dim:
        raise ValueError("the AnimeGamer decoder needs the motion-scope embedding (ofs_embed_dim)")
    if ofs_embed_dim != time_embed_dim:
        raise ValueError("the motion-scope embedding is added to the time embedding: widths must match")
    if text_embed_dim != inner_dim:
        raise ValueError(f"text_embed_dim must equal the DiT width {inner_dim} (no text projection)")
    return ofs_embed_dim


@compiled_blocks("CogVideoXBlock")  # what ModelMixin.compile_repeated_blocks compiles
class AnimeGamerTransformer3DModel(CogVideoXTransformer3DModel):
    """CogVideoX DiT conditioned on an MLLM representation and a motion scope."""

    # The parent's full signature is repeated so that the stored config holds exactly these keys.
    @register_to_config
    def __init__(
        self,
        num_attention_heads: int = 30,
        attention_head_dim: int = 64,
        in_channels: int = 16,
        out_channels: int | None = 16,
        flip_sin_to_cos: bool = True,
        freq_shift: int = 0,
        time_embed_dim: int = 512,
        ofs_embed_dim: int | None = 512,
        text_embed_dim: int = 1920,
        num_layers: int = 30,
        dropout: float = 0.0,
        attention_bias: bool = True,
        sample_width: int = 90,
        sample_height: int = 60,
        sample_frames: int = 17,
        patch_size: int = 2,
        patch_size_t: int | None = None,
        temporal_compression_ratio: int = 4,
        max_text_seq_length: int = 226,
        activation_fn: str = "gelu-approximate",
        timestep_activation_fn: str = "silu",
        norm_elementwise_affine: bool = True,
        norm_eps: float = 1e-5,
        spatial_interpolation_scale: float = 1.875,
        temporal_interpolation_scale: float = 1.0,
        use_rotary_positional_embeddings: bool = False,
        use_learned_positional_embeddings: bool = False,
        patch_bias: bool = True,
        final_norm_eps: float = 1e-6,
    ):
        ofs_dim = _checked_ofs_dim(num_attention_heads * attention_head_dim, time_embed_dim, ofs_embed_dim, text_embed_dim)
        super().__init__(
            num_attention_heads=num_attention_heads,
            attention_head_dim=attention_head_dim,
            in_channels=in_channels,
            out_channels=out_channels,
            flip_sin_to_cos=flip_sin_to_cos,
            freq_shift=freq_shift,
            time_embed_dim=time_embed_dim,
            ofs_embed_dim=None,  # ours differs (below): don't build the parent's only to replace it
            text_embed_dim=text_embed_dim,
            num_layers=num_layers,
            dropout=dropout,
            attention_bias=attention_bias,
            sample_width=sample_width,
            sample_height=sample_height,
            sample_frames=sample_frames,
            patch_size=patch_size,
            patch_size_t=patch_size_t,
            temporal_compression_ratio=temporal_compression_ratio,
            max_text_seq_length=max_text_seq_length,
            activation_fn=activation_fn,
            timestep_activation_fn=timestep_activation_fn,
            norm_elementwise_affine=norm_elementwise_affine,
            norm_eps=norm_eps,
            spatial_interpolation_scale=spatial_interpolation_scale,
            temporal_interpolation_scale=temporal_interpolation_scale,
            use_rotary_positional_embeddings=use_rotary_positional_embeddings,
            use_learned_positional_embeddings=use_learned_positional_embeddings,
            patch_bias=patch_bias,
        )
        self.register_to_config(ofs_embed_dim=ofs_dim)  # the parent's init recorded None
        self._add_animegamer_parts(num_attention_heads * attention_head_dim, ofs_dim, flip_sin_to_cos,
                                   freq_shift, timestep_activation_fn, max_text_seq_length, final_norm_eps)

    def _add_animegamer_parts(self, inner_dim: int, ofs_embed_dim: int, flip_sin_to_cos: bool, freq_shift: int,
                              timestep_activation_fn: str, max_text_seq_length: int, final_norm_eps: float) -> None:
        """What the released model adds to, or changes in, the stock CogVideoX DiT (the module docstring)."""
        # flow_embed: sinusoid as wide as the DiT (like the timestep's), then 1920 -> 512 -> 512.
        self.ofs_proj = Timesteps(inner_dim, flip_sin_to_cos, freq_shift)
        self.ofs_embedding = TimestepEmbedding(inner_dim, ofs_embed_dim, timestep_activation_fn)
        # The representation enters the DiT as is.
        self.patch_embed.register_module("text_proj", nn.Identity())  # replaces the Linear (typed as one)
        self.norm_out.norm.eps = final_norm_eps
        # LN(text_proj(0)) ++ LN(ip_proj(0)) from the checkpoint; filled by the converter.
        self.register_buffer("uncond_embedding", torch.zeros(max_text_seq_length, inner_dim))
        for block in self.transformer_blocks:
            # ModuleList iterates as nn.Module; a CogVideoX block's attn1 is an Attention.
            set_processor(cast(Attention, block.get_submodule("attn1")), AnimeGamerAttnProcessor())

    def keep_position_table_in_weights_dtype(self) -> None:
        """diffusers builds the fixed sin-cos position table in float64 (numpy's), and from_pretrained
        leaves it so (it is a buffer computed at init, not a weight it loads); every forward casts it
        to the activations' dtype. Held in the weights' dtype it gives the same numbers at a quarter
        of the bytes: 100 -> 25 MiB at 480x720 in fp16, which a GPU holds and the stage offload moves
        every turn (and the memory plan counts in the weights' dtype)."""
        table = getattr(self.patch_embed, "pos_embedding", None)
        if isinstance(table, torch.Tensor) and table.is_floating_point() and table.dtype != self.dtype:
            self.patch_embed.pos_embedding = table.to(self.dtype)

    def predict_v(
        self,
        latents: torch.Tensor,
        context: torch.Tensor,
        timestep: torch.Tensor,
        motion_scope: torch.Tensor,
    ) -> torch.Tensor:
        """v-prediction for latents (B, T, C, h, w) given 226-token contexts (B, 226, D).

        `timestep` is the DDPM index (0..999) and `motion_scope` the flow value, one per row.
        """
        dtype = self.dtype
        return self(
            hidden_states=latents.to(dtype),
            encoder_hidden_states=context.to(dtype),
            timestep=timestep,
            ofs=motion_scope,
            return_dict=False,
        )[0]
