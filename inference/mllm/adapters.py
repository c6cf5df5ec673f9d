"""Several films on one Mistral-7B: each film's agent checkpoint as a named peft adapter.

A film's checkpoint is the released model object: Mistral with a LoRA (r=32 on the attention and
MLP projections), fully trained norms, embeddings and lm_head, plus its input/output projections.
Merging the LoRA (the single-film path, `loading.load_mllm`) folds all of that into the base
weights, so a second film could not share them. Here the base stays as loaded from the Mistral
directory and each film becomes an adapter named by the film id: its LoRA factors, and its own
copies of the norms, the embeddings and lm_head as peft `modules_to_save`; its projections are
plain modules kept per film. `use(film)` switches the active adapter (peft `set_adapter`); a
batch is always one film.

Key accounting is the single-film one (`loading.load_state_into`), applied per film to a view of
the shared model under the released names: the adapter's tensors appear as `...lora_A.default...`,
`...modules_to_save.default...`, `...embed_tokens.weight` and `lm_head.weight`, as in the release.
Frozen base weights that a checkpoint carries (the release saved them) are not copied onto the
shared base but compared with it: a checkpoint trained on another base is an error, because it
could not give the outputs it gives alone; differences of rounding only (a base saved in another
dtype) are logged, and the Mistral directory's weights are used.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import torch
from peft import LoraConfig, get_peft_model
from peft.utils import ModulesToSaveWrapper
from torch import nn

from .loading import (
    MODULES_TO_SAVE,
    CheckpointError,
    LoadReport,
    cast_keeping_fp32_buffers,
    load_base,
    load_state_into,
    lora_config,
)
from .model import REP_DIM, Projection, body_forward, input_embeddings
from .tokens import VOCAB_SIZE, SpecialIds

if TYPE_CHECKING:
    from peft import PeftModel
    from transformers import MistralForCausalLM

log = logging.getLogger(__name__)

# Per film, besides the released norms: the embeddings and lm_head, which the release trained
# fully (the added AnimeGamer tokens) and so differ between films.
FILM_MODULES_TO_SAVE = (*MODULES_TO_SAVE, "embed_tokens", "lm_head")
WHOLE_MODULES = ("embed_tokens", "lm_head")  # released as plain weights, not under modules_to_save


def film_lora_config() -> LoraConfig:
    """The released LoRA, with the embeddings and lm_head kept per adapter too."""
    return lora_config(FILM_MODULES_TO_SAVE)


# A base tensor of a checkpoint may differ from the Mistral directory's by rounding (saved in
# another dtype); beyond this relative difference it is another base.
BASE_TOLERANCE = 1e-2


class _MustEqual:
    """Stands for a shared base tensor in a film's view: `copy_` compares instead of writing,
    recording (name, largest difference relative to the tensor's largest value) when not equal."""

    def __init__(self, tensor: torch.Tensor, name: str, mismatches: list[tuple[str, float]]):
        self.tensor, self.name, self.mismatches = tensor, name, mismatches
        self.shape = tensor.shape

    def copy_(self, src: torch.Tensor) -> None:
        src = src.to(device=self.tensor.device, dtype=self.tensor.dtype)
        if not torch.equal(self.tensor, src):
            diff = (self.tensor.float() - src.float()).abs().max().item()
            scale = self.tensor.float().abs().max().item() or 1.0
            self.mismatches.append((self.name, diff / scale))


class MultiFilmMLLM(nn.Module):
    """One Mistral body, one peft adapter and one pair of projections per film."""

    def __init__(self, llm: MistralForCausalLM, films: list[str], rep_dim: int = REP_DIM):
        super().__init__()
        if not films:
            raise ValueError("at least one film")
        llm.resize_token_embeddings(VOCAB_SIZE, mean_resizing=False)
        self.llm: PeftModel = get_peft_model(llm, film_lora_config(), adapter_name=films[0])
        for film in films[1:]:
            self.llm.add_adapter(film, film_lora_config())
        hidden = self.causal_lm.config.hidden_size
        self.projections = nn.ModuleDict(
            {f: nn.ModuleDict({"input": Projection(rep_dim, hidden), "output": Projection(hidden, rep_dim)}) for f in films}
        )
        self.films = tuple(films)
        self.rep_dim = rep_dim
        self.active: str | None = None
        self.lock = threading.RLock()  # held while a film's batch runs: the adapter must not change
        self.freed_bytes = self._drop_unused_originals()

    def _drop_unused_originals(self) -> int:
        """peft keeps the base's embeddings and lm_head beside each adapter's copies. Every film
        brings its own (the release trained them fully), so the base's are never used: free them
        (0.53 GB at 7B in bf16). Returns the bytes freed."""
        freed = 0
        for name, module in self.llm.named_modules():
            if isinstance(module, ModulesToSaveWrapper) and name.rsplit(".", 1)[-1] in WHOLE_MODULES:
                original = module.original_module
                for pname, p in list(original.named_parameters(recurse=False)):
                    freed += p.numel() * p.element_size()
                    setattr(original, pname, nn.Parameter(p.new_empty(0), requires_grad=False))
        return freed

    @property
    def causal_lm(self) -> MistralForCausalLM:
        # peft types the wrapped model as nn.Module; it is the Mistral given to __init__.
        return cast("MistralForCausalLM", self.llm.get_base_model())

    @property
    def config(self):
        return self.causal_lm.config

    def use(self, film: str) -> float:
        """Make `film`'s adapter the active one; returns the seconds the switch took."""
        if film not in self.projections:
            raise KeyError(f"film {film!r} is not loaded here (loaded: {', '.join(self.films)})")
        if self.active == film:
            return 0.0
        import time

        t0 = time.perf_counter()
        self.llm.set_adapter(film)
        self.active = film
        return time.perf_counter() - t0

    def projection(self, film: str, side: str) -> Projection:
        """`film`'s "input" or "output" projection (ModuleDict indexing is typed as any nn.Module)."""
        return cast(Projection, cast(nn.ModuleDict, self.projections[film])[side])

    def view(self, film: str) -> FilmModel:
        return FilmModel(self, film)

    # -- loading ---------------------------------------------------------------------------

    def released_view(self, film: str, mismatches: list[tuple[str, float]]) -> dict[str, object]:
        """The model's tensors for `film` under the released checkpoint's names (see the module
        docstring); shared base tensors are _MustEqual stand-ins."""
        sd = self.state_dict(keep_vars=False)
        out: dict[str, object] = {}
        others = [f for f in self.films if f != film]
        mine = re.compile(rf"\.(lora_A|lora_B|modules_to_save)\.{re.escape(film)}\.")
        alternatives = "|".join(map(re.escape, others))
        theirs = re.compile(rf"\.(lora_A|lora_B|modules_to_save)\.({alternatives})\.") if others else None
        for key, tensor in sd.items():
            if key.startswith("projections."):
                _, f, side, rest = key.split(".", 3)
                if f == film:
                    out[f"{side}_resampler.{rest}"] = tensor
                continue
            if theirs is not None and theirs.search(key):
                continue
            whole = next((m for m in WHOLE_MODULES if f".{m}." in key), None)
            if whole is not None:
                if ".original_module." in key:
                    continue  # the resized Mistral rows, which no adapter uses
                out[mine.sub(".", key)] = tensor  # ...embed_tokens.modules_to_save.<film>.weight -> ...embed_tokens.weight
                continue
            if mine.search(key):
                out[mine.sub(lambda m: f".{m.group(1)}.default.", key)] = tensor
                continue
            out[key] = _MustEqual(tensor, key, mismatches)  # frozen base (base_layer, original_module, the rest)
        return out

    def load_film(self, film: str, path: str | os.PathLike) -> LoadReport:
        mismatches: list[tuple[str, float]] = []
        what = f"hidden size {self.config.hidden_size}, {self.config.num_hidden_layers} layers; film {film!r}"
        report = load_state_into(self.released_view(film, mismatches), path, what)
        other = [f"{k} ({d:.2g})" for k, d in mismatches if d > BASE_TOLERANCE]
        if other:
            few = ", ".join(other[:3]) + (f" (+{len(other) - 3} more)" if len(other) > 3 else "")
            raise CheckpointError(
                f"{report.path} (film {film!r}) carries base weights that differ from the Mistral directory's "
                f"(relative difference), e.g. {few}: it was trained on another base, so it cannot share one "
                "with other films; serve it from a worker of its own"
            )
        if mismatches:
            log.warning("film %s: %d base tensors of %s differ from the Mistral directory's by rounding (at most %.2g "
                        "relative); the shared base is used", film, len(mismatches), report.path, max(d for _, d in mismatches))
        return report


class FilmModel:
    """One film's face of a MultiFilmMLLM, with the interface MLLMPredictor uses
    (embed, transformer, logits, the two projections). The caller activates the film first."""

    def __init__(self, shared: MultiFilmMLLM, film: str):
        self.shared, self.film = shared, film
        self.input_resampler = shared.projection(film, "input")
        self.output_resampler = shared.projection(film, "output")
        self.rep_dim = shared.rep_dim

    @property
    def config(self):
        return self.shared.config

    @property
    def device(self) -> torch.device:
        return next(self.input_resampler.parameters()).device  # proj[0].weight

    @property
    def dtype(self) -> torch.dtype:
        return next(self.input_resampler.parameters()).dtype  # proj[0].weight

    def _check(self) -> None:
        if self.shared.active != self.film:  # a batch of the wrong film would be silently wrong
            raise RuntimeError(f"film {self.film!r} is not the active adapter ({self.shared.active!r})")

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        self._check()
        return input_embeddings(self.shared.causal_lm)(input_ids)

    def transformer(self, inputs_embeds, attention_mask, position_ids, cache) -> torch.Tensor:
        self._check()
        return body_forward(self.shared.causal_lm, inputs_embeds, attention_mask, position_ids, cache)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        self._check()
        return self.shared.causal_lm.lm_head(hidden)


@dataclass
class LoadedFilms:
    model: MultiFilmMLLM
    tokenizer: object
    special: SpecialIds
    reports: dict[str, LoadReport]


def load_films(
    mistral_dir: str | os.PathLike,
    tokenizer_dir: str | os.PathLike,
    agents: Mapping[str, str | os.PathLike],
    device=None,
    dtype=None,
    attn_implementation: str = "sdpa",
    rep_dim: int = REP_DIM,
) -> LoadedFilms:
    """Mistral once, then every film's agent checkpoint as its adapter (film id -> checkpoint)."""
    base = load_base(mistral_dir, tokenizer_dir, list(agents.values()), device, dtype, attn_implementation)
    tokenizer, special, dev, dt = base.tokenizer, base.special, base.device, base.dtype
    model = cast_keeping_fp32_buffers(MultiFilmMLLM(base.llm, list(agents), rep_dim), dev, dt)  # rotary inv_freq stays fp32
    reports = {}
    for film, path in agents.items():
        reports[film] = model.load_film(film, path)
        log.info("film %s: %s", film, reports[film].summary())
    model.use(next(iter(agents)))
    model.eval().requires_grad_(False)
    return LoadedFilms(model, tokenizer, special, reports)
