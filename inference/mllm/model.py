"""The AnimeGamer MLLM: Mistral (with LoRA, merged or not) plus two plain projections.

Attribute names follow the released agent checkpoint: `llm` (a peft model until the LoRA is
merged, then the plain MistralForCausalLM), `input_resampler.proj` and `output_resampler.proj`
(each Linear, GELU, Linear: 1920 -> hidden -> hidden and hidden -> 1920 -> 1920).
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Protocol, cast

import torch
from torch import nn

if TYPE_CHECKING:
    from transformers import MistralForCausalLM

REP_DIM = 1920  # width of the decoder's conditioning tokens

# Mistral-7B-Instruct-v0.1's shapes, the vocabulary resized to AnimeGamer's 32284 (MistralConfig
# fields): what the released agent checkpoints load into, and what the memory plan traces.
MISTRAL_7B_SHAPE = dict(
    vocab_size=32284, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
    num_attention_heads=32, num_key_value_heads=8, sliding_window=4096, max_position_embeddings=32768,
    rope_theta=10000.0, tie_word_embeddings=False, bos_token_id=1, eos_token_id=2,
)


class Projection(nn.Module):
    def __init__(self, in_dim: int, out_dim: int):
        super().__init__()
        self.proj = nn.Sequential(nn.Linear(in_dim, out_dim), nn.GELU(), nn.Linear(out_dim, out_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x)


class PredictModel(Protocol):
    """What MLLMPredictor uses of a model: an AnimeGamerMLLM, or one film's view of a
    MultiFilmMLLM (inference.mllm.adapters.FilmModel)."""

    @property
    def config(self) -> Any: ...

    @property
    def device(self) -> torch.device: ...

    @property
    def input_resampler(self) -> nn.Module: ...

    @property
    def output_resampler(self) -> nn.Module: ...

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor: ...

    def transformer(self, inputs_embeds, attention_mask, position_ids, cache) -> torch.Tensor: ...

    def logits(self, hidden: torch.Tensor) -> torch.Tensor: ...


class AnimeGamerMLLM(nn.Module):
    def __init__(self, llm: nn.Module, rep_dim: int = REP_DIM):
        super().__init__()
        self.llm = llm
        hidden = self.causal_lm.config.hidden_size
        self.input_resampler = Projection(rep_dim, hidden)
        self.output_resampler = Projection(hidden, rep_dim)
        self.rep_dim = rep_dim

    @property
    def causal_lm(self) -> MistralForCausalLM:
        """The MistralForCausalLM (inside the peft wrapper while the LoRA is unmerged)."""
        get_base = getattr(self.llm, "get_base_model", None)
        # `llm` is held as an nn.Module (peft wrapper or plain model); what it wraps is Mistral.
        return cast("MistralForCausalLM", get_base() if get_base is not None else self.llm)

    @property
    def config(self):
        return self.causal_lm.config

    @property
    def dtype(self) -> torch.dtype:
        return input_embeddings(self.causal_lm).weight.dtype

    @property
    def device(self) -> torch.device:
        return input_embeddings(self.causal_lm).weight.device

    def merge_lora(self) -> None:
        """Fold the LoRA deltas and the trained norm copies into plain Mistral weights."""
        merge_and_unload = getattr(self.llm, "merge_and_unload", None)  # a peft model's; a merged one has none
        if merge_and_unload is not None:
            self.llm = merge_and_unload()

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        return input_embeddings(self.causal_lm)(input_ids)

    def transformer(self, inputs_embeds, attention_mask, position_ids, cache) -> torch.Tensor:
        """Last hidden states (after the final norm) of the Mistral body; `cache` grows in place."""
        return body_forward(self.causal_lm, inputs_embeds, attention_mask, position_ids, cache)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.causal_lm.lm_head(hidden)


def input_embeddings(causal_lm: MistralForCausalLM) -> nn.Embedding:
    # transformers types get_input_embeddings() as any nn.Module; Mistral's is an nn.Embedding.
    return cast(nn.Embedding, causal_lm.get_input_embeddings())


def body_forward(causal_lm: MistralForCausalLM, inputs_embeds, attention_mask, position_ids, cache) -> torch.Tensor:
    """Last hidden states (after the final norm) of a Mistral body; `cache` grows in place."""
    body = causal_lm.model
    kwargs = {_cache_kwarg(body): cache}
    out = body(
        inputs_embeds=inputs_embeds,
        attention_mask=attention_mask,
        position_ids=position_ids,
        use_cache=cache is not None,
        **kwargs,
    )
    return out.last_hidden_state


def _cache_kwarg(body: nn.Module) -> str:
    # transformers 5.x names the argument `cache`; 4.x called it `past_key_values`.
    params = inspect.signature(body.forward).parameters
    return "cache" if "cache" in params else "past_key_values"
