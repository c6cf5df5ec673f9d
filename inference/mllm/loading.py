"""Load the AnimeGamer MLLM from what a user downloads.

Inputs: the Mistral-7B-Instruct-v0.1 directory (transformers format), the AnimeGamer tokenizer
directory, and a film's agent checkpoint (`pytorch_model.bin` or `.safetensors`), which is the
state dict of the released model object: `llm` = peft's wrapper around MistralForCausalLM,
`input_resampler`, `output_resampler`. Steps: load Mistral, resize its embeddings to 32284, wrap
it with the released LoRA config, load the checkpoint with an exact account of its keys, merge.

Key accounting:
- every checkpoint key must land on a model key of the same shape, after the explicit renames in
  `KEY_VARIANTS`; anything else is an error that lists the keys (a checkpoint of another model, a
  film file of another layout, or a truncated/corrupted file never loads silently);
- model keys the checkpoint may leave out are the frozen base weights (`base_layer`, which come
  from the Mistral directory) and peft's frozen copies of the fully trained norms
  (`original_module`); they are listed in the report. Any other missing key (LoRA factors, trained
  norms, embeddings, lm_head, projections) is an error.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import torch
from peft import LoraConfig, get_peft_model

from .model import REP_DIM, AnimeGamerMLLM
from .tokens import VOCAB_SIZE, SpecialIds, verify

if TYPE_CHECKING:
    from transformers import MistralForCausalLM

log = logging.getLogger(__name__)

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
# "norm" also matches the per-layer norms by suffix; listing all three names is what the release did.
MODULES_TO_SAVE = ("input_layernorm", "post_attention_layernorm", "norm")


def lora_config(modules_to_save: tuple[str, ...] = MODULES_TO_SAVE, r: int = 32, alpha: int = 32,
                dropout: float = 0.05) -> LoraConfig:
    """The released LoRA (MLLM/configs/clm_models/mistral-7b.yaml); a multi-film model keeps more
    modules per adapter (inference.mllm.adapters); training may change the rank (training/)."""
    return LoraConfig(
        r=r,
        lora_alpha=alpha,
        lora_dropout=dropout,
        target_modules=list(LORA_TARGETS),
        modules_to_save=list(modules_to_save),
        task_type="CAUSAL_LM",
    )


def wrap_released(llm: MistralForCausalLM, rep_dim: int = REP_DIM, config: LoraConfig | None = None) -> AnimeGamerMLLM:
    """Resize a MistralForCausalLM to the AnimeGamer vocabulary and wrap it like the release
    (`config`: the released LoRA unless training asks for another rank)."""
    # The new rows are overwritten by the checkpoint, so skip transformers' mean/covariance init.
    llm.resize_token_embeddings(VOCAB_SIZE, mean_resizing=False)
    return AnimeGamerMLLM(get_peft_model(llm, config or lora_config()), rep_dim)


class CheckpointError(ValueError):
    pass


# Known renames from other writers of the same model; each is explicit (regex, replacement, why).
KEY_VARIANTS: tuple[tuple[str, str, str], ...] = (
    (r"^module\.", "", "DeepSpeed/DDP wrapper prefix"),
    (
        rf"^(llm\.base_model\.model\..*\.(?:{'|'.join(LORA_TARGETS)}))\.weight$",
        r"\1.base_layer.weight",
        "peft < 0.7 kept the frozen base weight on the LoRA layer itself",
    ),
)
# Keys that older transformers saved but that hold no weights (recomputed buffers).
IGNORED_KEYS = (re.compile(r"\.rotary_emb\.inv_freq$"),)
# Model keys a checkpoint may omit (see the module docstring).
OPTIONAL_MODEL_KEYS = (re.compile(r"\.base_layer\.weight$"), re.compile(r"\.original_module\."))


@dataclass
class LoadReport:
    path: str
    loaded: int = 0
    renamed: dict[str, int] = field(default_factory=dict)  # reason -> number of keys
    ignored: list[str] = field(default_factory=list)  # checkpoint keys with no weights
    leftovers: list[str] = field(default_factory=list)  # optional model keys not in the checkpoint

    def summary(self) -> str:
        parts = [f"{self.loaded} tensors loaded from {self.path}"]
        parts += [f"{n} renamed ({why})" for why, n in self.renamed.items()]
        if self.ignored:
            parts.append(f"{len(self.ignored)} ignored buffers")
        if self.leftovers:
            kinds = sorted({"base_layer" if ".base_layer." in k else "original_module" for k in self.leftovers})
            parts.append(f"{len(self.leftovers)} optional model keys kept from Mistral ({', '.join(kinds)})")
        return "; ".join(parts)


class _Source:
    """Lazy access to a checkpoint's tensors: names, shapes, then one tensor at a time."""

    def __init__(self, path: str | os.PathLike):
        self.path = str(path)
        try:
            if self.path.endswith(".safetensors"):
                from safetensors import safe_open

                self._st = safe_open(self.path, framework="pt", device="cpu")
                self.names = list(self._st.keys())
                self.shape = lambda k: tuple(self._st.get_slice(k).get_shape())
                self.get: Callable[[str], torch.Tensor] = self._st.get_tensor
            else:
                try:  # mmap: a 15 GB file is paged in tensor by tensor, not read whole
                    sd = torch.load(self.path, map_location="cpu", mmap=True, weights_only=True)
                except RuntimeError as e:
                    if "mmap" not in str(e):  # only the legacy (pre-zip) format cannot be mapped
                        raise
                    sd = torch.load(self.path, map_location="cpu", weights_only=True)
                if isinstance(sd, dict) and set(sd) == {"module"}:  # DeepSpeed's {'module': state_dict}
                    sd = sd["module"]
                if not isinstance(sd, dict) or not all(isinstance(v, torch.Tensor) for v in sd.values()):
                    raise CheckpointError(f"{self.path} does not hold a state dict of tensors")
                self.names = list(sd)
                self.shape = lambda k: tuple(sd[k].shape)
                self.get = sd.__getitem__
        except CheckpointError:
            raise
        except Exception as e:  # truncated zip, bad header, not a checkpoint at all
            raise CheckpointError(f"cannot read the agent checkpoint {self.path}: {type(e).__name__}: {e}") from e


def _rename(key: str, model_keys, report: LoadReport) -> str | None:
    """The model key a checkpoint key loads into (None: ignored); unknown keys come back as they are."""
    if any(p.search(key) for p in IGNORED_KEYS):
        report.ignored.append(key)
        return None
    if key in model_keys:
        return key
    name, reasons = key, []
    for pattern, repl, why in KEY_VARIANTS:
        new = re.sub(pattern, repl, name)
        if new != name:
            name, reasons = new, reasons + [why]
    if name not in model_keys:
        return key
    for why in reasons:
        report.renamed[why] = report.renamed.get(why, 0) + 1
    return name


def load_agent_checkpoint(model: AnimeGamerMLLM, path: str | os.PathLike) -> LoadReport:
    """Copy a released agent checkpoint into the (unmerged) model; raise CheckpointError if it does not fit."""
    what = f"hidden size {model.config.hidden_size}, {model.config.num_hidden_layers} layers"
    return load_state_into(model.state_dict(), path, what)


def load_state_into(target, path: str | os.PathLike, what: str) -> LoadReport:
    """The accounting and copy of load_agent_checkpoint into `target` (released key -> tensor),
    which inference.mllm.adapters builds per film on a model shared by several films."""
    src = _Source(path)
    report = LoadReport(src.path)
    plan: list[tuple[str, str]] = []
    covered: set[str] = set()
    unexpected, wrong_shape = [], []
    for key in src.names:
        name = _rename(key, target, report)
        if name is None:
            continue
        if name not in target:
            unexpected.append(key)
        elif name in covered:
            unexpected.append(f"{key} (a second source for {name})")
        elif src.shape(key) != tuple(target[name].shape):
            wrong_shape.append(f"{key}: checkpoint {src.shape(key)} vs model {tuple(target[name].shape)}")
        else:
            plan.append((key, name))
            covered.add(name)
    missing = [k for k in target if k not in covered]
    required = [k for k in missing if not any(p.search(k) for p in OPTIONAL_MODEL_KEYS)]
    problems = []
    if unexpected:
        problems.append(f"{len(unexpected)} unexpected keys, e.g. {_few(unexpected)}")
    if wrong_shape:
        problems.append(f"{len(wrong_shape)} keys with the wrong shape, e.g. {_few(wrong_shape)}")
    if required:
        problems.append(f"{len(required)} required keys missing, e.g. {_few(required)}")
    if problems:
        raise CheckpointError(
            f"{src.path} is not an AnimeGamer agent checkpoint for this base model ({what}): "
            + "; ".join(problems)
        )
    with torch.no_grad():
        for key, name in plan:
            target[name].copy_(src.get(key))
    report.loaded = len(plan)
    report.leftovers = [k for k in missing if k not in required]
    return report


def _few(keys: list[str], n: int = 5) -> str:
    return ", ".join(keys[:n]) + (f" (+{len(keys) - n} more)" if len(keys) > n else "")


def default_device_dtype(device=None, dtype=None) -> tuple[torch.device, torch.dtype]:
    """bf16 on GPU, float32 on CPU, unless told otherwise."""
    dev = torch.device(device) if device is not None else torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if dtype is None:
        dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    elif isinstance(dtype, str):
        dtype = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16,
                 "float16": torch.float16, "fp32": torch.float32, "float32": torch.float32}[dtype]
    return dev, dtype


# Buffers the released code keeps in fp32 whatever the weights' dtype: the rotary embedding's
# inverse frequencies. Rounded to bf16, Mistral's rotation angles (head_dim 128) move by up to
# ~0.9 rad at position 760 and ~2.4 rad at 2,000; the release computes the angles in fp32 and
# rounds only cos/sin, which transformers' rotary forward also does given an fp32 `inv_freq`.
FP32_BUFFERS = re.compile(r"(^|\.)(original_)?inv_freq$")


M = TypeVar("M", bound=torch.nn.Module)


def cast_keeping_fp32_buffers(model: M, device, dtype: torch.dtype) -> M:
    """`model.to(device, dtype)`, except that the buffers named by FP32_BUFFERS stay fp32.

    Their fp32 values are taken before the cast (transformers builds them in fp32), so a model
    whose buffers were already rounded is not silently repaired: the test checks the loader's."""
    kept = {n: b.detach().float().clone() for n, b in model.named_buffers() if FP32_BUFFERS.search(n)}
    model.to(device=device, dtype=dtype)
    for name, value in kept.items():
        owner, _, attr = name.rpartition(".")
        setattr(model.get_submodule(owner), attr, value.to(device))  # re-registers the buffer's tensor
    return model


@dataclass
class BaseModel:
    llm: MistralForCausalLM
    tokenizer: object
    special: SpecialIds
    device: torch.device
    dtype: torch.dtype


def load_base(mistral_dir, tokenizer_dir, checkpoints, device=None, dtype=None, attn_implementation: str = "sdpa") -> BaseModel:
    """Mistral and the AnimeGamer tokenizer (checked against the released ids): what one film and
    several films (inference.mllm.adapters) load alike. Every path is checked before loading."""
    from transformers import AutoTokenizer, MistralForCausalLM

    if attn_implementation not in ("sdpa", "eager"):  # custom 4D masks need one of these
        raise ValueError("attn_implementation must be 'sdpa' or 'eager'")
    for p in (mistral_dir, tokenizer_dir, *checkpoints):
        if not Path(p).exists():
            raise FileNotFoundError(f"{p} does not exist")
    dev, dt = default_device_dtype(device, dtype)
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    special = verify(tokenizer)
    extra: dict[str, Any] = {"device_map": {"": str(dev)}} if dev.type != "cpu" else {}
    llm = MistralForCausalLM.from_pretrained(str(mistral_dir), dtype=dt, attn_implementation=attn_implementation, **extra)
    return BaseModel(llm, tokenizer, special, dev, dt)


@dataclass
class LoadedMLLM:
    model: AnimeGamerMLLM
    tokenizer: object
    special: SpecialIds
    report: LoadReport


def load_mllm(
    mistral_dir: str | os.PathLike,
    tokenizer_dir: str | os.PathLike,
    agent_path: str | os.PathLike,
    device=None,
    dtype=None,
    merge: bool = True,
    attn_implementation: str = "sdpa",
    rep_dim: int = REP_DIM,
    quantize: str | None = None,
    staged: bool = False,
) -> LoadedMLLM:
    """quantize: None, "int8" or "int4" (inference.mllm.quantize), after the merge. staged: for
    stage offload (a card smaller than the bf16 model): loaded in host memory, each decoder layer
    quantised on the device it will run on (int4's packing is the device's) and returned to the host."""
    from .quantize import QUANTIZATIONS

    if quantize is not None and quantize not in QUANTIZATIONS:  # checked before minutes of loading
        raise ValueError(f"quantize must be None or one of {QUANTIZATIONS}, got {quantize!r}")
    runs_on, dt_default = default_device_dtype(device, dtype)
    base = load_base(mistral_dir, tokenizer_dir, [agent_path], "cpu" if staged else device, dtype or dt_default,
                     attn_implementation)
    tokenizer, special, dev, dt = base.tokenizer, base.special, base.device, base.dtype
    model = cast_keeping_fp32_buffers(wrap_released(base.llm, rep_dim), dev, dt)
    report = load_agent_checkpoint(model, agent_path)
    log.info("agent checkpoint: %s", report.summary())
    if merge:
        model.merge_lora()
    model.eval().requires_grad_(False)
    if quantize:
        if not merge:
            raise ValueError("quantise the merged model: the LoRA must be merged first")
        from .quantize import quantize_weights

        n = quantize_staged(model, runs_on) if staged and quantize == "int4" else quantize_weights(model, quantize)
        log.info("MLLM: %d linears quantised (%s)", n, quantize)
    return LoadedMLLM(model, tokenizer, special, report)


def quantize_staged(model: AnimeGamerMLLM, runs_on: torch.device) -> int:
    """int4 one decoder layer at a time on `runs_on` (its packing), each layer back in host memory."""
    from .quantize import quantize_linears

    n = 0
    for layer in model.causal_lm.model.layers:
        layer.to(runs_on)
        n += quantize_linears(layer, "int4")
        layer.to("cpu")
    return n
