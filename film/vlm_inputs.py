"""A chat with images -> a vision-language model's inputs, and its output ids -> text.

transformers' `AutoProcessor` does both for any family, but in transformers 5 the Qwen-VL and
InternVL processors also build a video processor, which needs torchvision. When it is missing, a
Qwen-VL folder (Qwen2-VL, Qwen2.5-VL) runs through its image processor and tokenizer, doing what
`Qwen2VLProcessor` does for images: the chat template writes one `<|image_pad|>` per image, each
widened to the image's merged patch count (grid t*h*w / merge_size^2). Other families need
torchvision (`pip install torchvision`, the build matching torch).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from PIL import Image

from film.captioner_errors import CaptionerError

QWEN_VL_TYPES = ("qwen2_vl", "qwen2_5_vl")
QWEN_IMAGE_TOKEN = "<|image_pad|>"


@dataclass
class ProcessorInputs:
    """The model's own processor (any family)."""

    processor: Any

    def encode(self, chat: list[dict[str, Any]], images: list[Image.Image]) -> Any:
        del images  # the chat's image items carry them
        return self.processor.apply_chat_template(chat, add_generation_prompt=True, tokenize=True,
                                                  return_dict=True, return_tensors="pt")

    def decode(self, ids: torch.Tensor) -> str:
        return self.processor.decode(ids, skip_special_tokens=True)


@dataclass
class QwenImageInputs:
    """Qwen-VL's image path without the processor class (no torchvision)."""

    tokenizer: Any
    image_processor: Any
    chat_template: str

    def encode(self, chat: list[dict[str, Any]], images: list[Image.Image]) -> Any:
        from transformers import BatchFeature

        text = self.tokenizer.apply_chat_template(chat, chat_template=self.chat_template, tokenize=False,
                                                  add_generation_prompt=True)
        pixels = self.image_processor(images=images, return_tensors="pt")
        parts = text.split(QWEN_IMAGE_TOKEN)
        if len(parts) - 1 != len(images):
            raise ValueError(f"the chat template wrote {len(parts) - 1} image slots for {len(images)} images")
        merge = self.image_processor.merge_size ** 2
        counts = [int(g.prod()) // merge for g in pixels["image_grid_thw"]]
        text = parts[0] + "".join(QWEN_IMAGE_TOKEN * n + rest for n, rest in zip(counts, parts[1:], strict=True))
        ids = self.tokenizer(text, return_tensors="pt", add_special_tokens=False)
        return BatchFeature({**ids, **pixels})

    def decode(self, ids: torch.Tensor) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)


def _chat_template(folder: Path, tokenizer: Any) -> str | None:
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.chat_template
    for name in ("chat_template.jinja", "chat_template.json"):
        path = folder / name
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            return json.loads(text)["chat_template"] if name.endswith(".json") else text
    return None


def load_inputs(folder: Path) -> ProcessorInputs | QwenImageInputs:
    from transformers import AutoImageProcessor, AutoProcessor, AutoTokenizer


    try:
        return ProcessorInputs(AutoProcessor.from_pretrained(str(folder)))
    except ImportError as e:
        if "torchvision" not in str(e).casefold():
            raise CaptionerError(f"captioner {folder}: its processor needs a missing library: {e}") from None
        model_type = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("model_type")
        if model_type not in QWEN_VL_TYPES:
            raise CaptionerError(f"captioner {folder}: a {model_type} processor needs torchvision "
                                 "(install the torchvision build matching torch)") from None
    except (OSError, ValueError, KeyError) as e:
        raise CaptionerError(f"captioner {folder}: no processor transformers can load: {e}") from None
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    template = _chat_template(folder, tokenizer)
    if template is None:
        raise CaptionerError(f"captioner {folder}: no chat template (chat_template.jinja, chat_template.json "
                             "or tokenizer_config.json)")
    return QwenImageInputs(tokenizer, AutoImageProcessor.from_pretrained(str(folder)), template)
