"""The AnimeGamer MLLM: Mistral (with LoRA, merged or not) plus two plain projections.

Attribute names follow the released agent checkpoint: `llm` (a peft model until the LoRA is
merged, then the plain MistralForCausalLM), `input_resampler.proj` and `output_resampler.proj`
(each Linear, GELU, Linear: 1920 -> hidden -> hidden and hidden -> 1920 -> 1920).
"""

from __future__ import annotations

import inspect

import torch
from torch import nn

REP_DIM = 1920  # width of the decoder's conditioning tokens


class Projection(nn.Module):
    def __init__(self, in_dim: int, out_dim: int):
        super().__init__()
        self.proj = nn.Sequential(nn.Linear(in_dim, out_dim), nn.GELU(), nn.Linear(out_dim, out_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x)


class AnimeGamerMLLM(nn.Module):
    def __init__(self, llm: nn.Module, rep_dim: int = REP_DIM):
        super().__init__()
        self.llm = llm
        hidden = self.causal_lm.config.hidden_size
        self.input_resampler = Projection(rep_dim, hidden)
        self.output_resampler = Projection(hidden, rep_dim)
        self.rep_dim = rep_dim

    @property
    def causal_lm(self) -> nn.Module:
        """The MistralForCausalLM (inside the peft wrapper while the LoRA is unmerged)."""
        get_base = getattr(self.llm, "get_base_model", None)
        return get_base() if get_base is not None else self.llm

    @property
    def config(self):
        return self.causal_lm.config

    @property
    def dtype(self) -> torch.dtype:
        return self.causal_lm.get_input_embeddings().weight.dtype

    @property
    def device(self) -> torch.device:
        return self.causal_lm.get_input_embeddings().weight.device

    def merge_lora(self) -> None:
        """Fold the LoRA deltas and the trained norm copies into plain Mistral weights."""
        if hasattr(self.llm, "merge_and_unload"):
            self.llm = self.llm.merge_and_unload()

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.causal_lm.get_input_embeddings()(input_ids)

    def transformer(self, inputs_embeds, attention_mask, position_ids, cache) -> torch.Tensor:
        """Last hidden states (after the final norm) of the Mistral body; `cache` grows in place."""
        body = self.causal_lm.model
        kwargs = {_cache_kwarg(body): cache}
        out = body(
            inputs_embeds=inputs_embeds,
            attention_mask=attention_mask,
            position_ids=position_ids,
            use_cache=cache is not None,
            **kwargs,
        )
        return out.last_hidden_state

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.causal_lm.lm_head(hidden)


def _cache_kwarg(body: nn.Module) -> str:
    # transformers 5.x names the argument `cache`; 4.x called it `past_key_values`.
    params = inspect.signature(body.forward).parameters
    return "cache" if "cache" in params else "past_key_values"
