"""The metric models, from local folders: CLIP through transformers (CLIPModel and CLIPProcessor,
any CLIP checkpoint in transformers' layout) and DreamSim through its own package. A model that is
not there is not replaced by anything: its metrics are reported as not measured, with the reason.

Default folders: `<models dir>/evaluation/clip` and `<models dir>/evaluation/dreamsim`
(`--clip DIR`, `--dreamsim DIR` choose others)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

log = logging.getLogger(__name__)

DREAMSIM_MISSING = ("the dreamsim package is not installed (pip install dreamsim; it needs torchvision built for "
                    "this torch)")


@dataclass(frozen=True)
class Unavailable:
    reason: str


def _device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _features(out: Any):
    """transformers 5 returns the projected embeddings as pooler_output of an output object; 4 as a tensor."""
    import torch

    return out if isinstance(out, torch.Tensor) else out.pooler_output


class ClipScorer:
    """Unit-length CLIP embeddings of images and texts; cosine similarity is their dot product."""

    def __init__(self, folder: Path) -> None:
        import torch
        from transformers import CLIPModel, CLIPProcessor

        self.folder = folder
        self.device = _device()
        model: Any = CLIPModel.from_pretrained(str(folder))  # Any: transformers' stubs type the chain loosely
        self.model = model.to(self.device).eval()
        self.processor: Any = CLIPProcessor.from_pretrained(str(folder))
        self.max_tokens = int(model.config.text_config.max_position_embeddings)
        self._torch = torch

    @classmethod
    def load(cls, folder: Path | None) -> ClipScorer | Unavailable:
        if folder is None or not (folder / "config.json").is_file():
            return Unavailable(f"no CLIP model at {folder} (a transformers CLIP folder, e.g. "
                               "openai/clip-vit-large-patch14; --clip DIR)")
        try:
            return cls(folder)
        except (OSError, ValueError, TypeError) as e:  # a folder without weights, tokenizer or image processor
            return Unavailable(f"the CLIP model at {folder} cannot be loaded ({str(e).splitlines()[0]})")

    def images(self, images: list[np.ndarray]) -> np.ndarray:
        with self._torch.inference_mode():
            inputs = self.processor(images=[Image.fromarray(i) for i in images], return_tensors="pt").to(self.device)
            emb = _features(self.model.get_image_features(pixel_values=inputs["pixel_values"])).float()
            return (emb / emb.norm(dim=-1, keepdim=True)).cpu().numpy()

    def texts(self, texts: list[str]) -> np.ndarray:
        with self._torch.inference_mode():
            inputs = self.processor(text=texts, return_tensors="pt", padding=True, truncation=True,
                                    max_length=self.max_tokens).to(self.device)
            emb = _features(self.model.get_text_features(input_ids=inputs["input_ids"],
                                                         attention_mask=inputs["attention_mask"])).float()
            return (emb / emb.norm(dim=-1, keepdim=True)).cpu().numpy()


class DreamSimScorer:
    """DreamSim similarity, 1 - its perceptual distance (so higher is closer, as CLIP-I)."""

    def __init__(self, folder: Path, model: Any, preprocess: Any, device: str) -> None:
        self.folder, self.model, self.preprocess, self.device = folder, model, preprocess, device

    @classmethod
    def load(cls, folder: Path | None) -> DreamSimScorer | Unavailable:
        try:
            from dreamsim import dreamsim  # pyright: ignore[reportMissingImports]  # optional: needs torchvision
        except ImportError:
            return Unavailable(DREAMSIM_MISSING)
        if folder is None or not folder.is_dir() or not any(folder.iterdir()):
            return Unavailable(f"no DreamSim model at {folder} (its checkpoints, as dreamsim(pretrained=True, "
                               "cache_dir=DIR) leaves them; --dreamsim DIR)")
        device = _device()
        model, preprocess = dreamsim(pretrained=True, cache_dir=str(folder), device=device)
        return cls(folder, model, preprocess, device)

    def similarity(self, image: np.ndarray, reference: np.ndarray) -> float:
        import torch

        with torch.inference_mode():
            a = self.preprocess(Image.fromarray(image)).to(self.device)
            b = self.preprocess(Image.fromarray(reference)).to(self.device)
            return 1.0 - float(self.model(a, b))
