"""The captioner: a vision-language model run locally through transformers.

Any model folder that `AutoProcessor` and `AutoModelForImageTextToText` load and whose chat
template takes images: the Qwen-VL family (Qwen2-VL, Qwen2.5-VL) and InternVL (the
transformers-native `InternVLForConditionalGeneration` checkpoints, "...-hf"). In transformers 5
the processors of both families build a video processor, which needs torchvision; without it a
Qwen-VL folder still runs here through its image processor and tokenizer (film.vlm_inputs), and
an InternVL folder is refused with that reason.

One prompt per clip: a reference image of each cast member with the member's name, then the
clip's 4 stills in order, then the instructions (film.caption_parse's tags). Greedy decoding and a
fixed token budget, so the same model gives the same answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from PIL import Image

from film.caption_parse import TAGS
from film.captioner_errors import CaptionerError
from film.cast import Cast
from film.model_identity import model_identity

MAX_NEW_TOKENS = 160  # nine short fields fit in ~80 tokens; a rambling answer is cut and fails to parse
# A reference image is scaled to fit this square: an operator's 4000 px portrait would otherwise
# cost a Qwen-VL prompt thousands of image tokens (one per 28x28 pixels); a still is 480x720.
REFERENCE_SIDE = 512
PROMPT_VERSION = 1  # part of the captioner's identity: a changed prompt asks every clip again

INSTRUCTIONS = """The images before this text are reference images of the film's characters, each after its name, \
then four frames of one short clip, in order. Describe the clip's main character and what they do. \
Answer with exactly these nine tagged fields, each once, and nothing else:
<S>the character's name, one of: {names}</S>
<MD>the motion: what the character does, a short verb phrase such as "walk along the street"</MD>
<MA>one adverb for how they move, such as "slowly" (empty if none fits)</MA>
<EV>the environment: the background in one or two words, such as "forest"</EV>
<TD>the time of day: morning, day, evening or night (empty if unclear)</TD>
<SC>1 if the character interacts with someone, else 0</SC>
<ET>1 if the character is having fun, else 0</ET>
<ST>-1 if the action tires the character, +1 if it rests them</ST>
<ML>how much motion the clip shows, from 1 (still) to 5 (very fast)</ML>"""


def prompt_text(cast: Cast) -> str:
    assert len(TAGS) == 9  # the instructions list the nine tags
    return INSTRUCTIONS.format(names=", ".join(m.name for m in cast.members))


def messages(stills: list[Path], cast: Cast) -> tuple[list[dict[str, Any]], list[Image.Image]]:
    """The chat (one user turn) and its images in the order the chat shows them."""
    content: list[dict[str, Any]] = []
    images: list[Image.Image] = []
    for member in cast.members:
        content.append({"type": "text", "text": f"{member.name}:"})
        images.append(_rgb(member.reference, REFERENCE_SIDE))
        content.append({"type": "image", "image": images[-1]})
    content.append({"type": "text", "text": "The clip:"})
    for still in stills:
        images.append(_rgb(still))
        content.append({"type": "image", "image": images[-1]})
    content.append({"type": "text", "text": prompt_text(cast)})
    return [{"role": "user", "content": content}], images


def _rgb(path: Path, max_side: int | None = None) -> Image.Image:
    with Image.open(path) as im:
        rgb = im.convert("RGB")
    if max_side is not None:
        rgb.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)  # aspect kept; never enlarged
    return rgb


def identity(folder: Path) -> str:
    """What names this captioner in the stage's files: the model (film.model_identity), the prompt
    and the decoding."""
    return f"{model_identity(folder)}#prompt{PROMPT_VERSION}#greedy{MAX_NEW_TOKENS}"


def pick_device(device: str | None) -> torch.device:
    if device and device != "auto":
        return torch.device(device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@dataclass
class Captioner:
    identity: str
    model: Any  # a transformers image-text-to-text model
    inputs: Any  # film.vlm_inputs.ChatInputs: chat + images -> model inputs, and decoding

    @torch.inference_mode()
    def answer(self, stills: list[Path], cast: Cast) -> str:
        chat, images = messages(stills, cast)
        # floating inputs (pixel values) in the model's dtype, ids as they are
        batch = self.inputs.encode(chat, images).to(self.model.device, dtype=self.model.dtype)
        prompt_len = batch["input_ids"].shape[1]
        out = self.model.generate(**batch, max_new_tokens=MAX_NEW_TOKENS, do_sample=False, num_beams=1)
        return self.inputs.decode(out[0, prompt_len:])


def load_captioner(folder: Path, device: str | None = None) -> Captioner:
    """The model in `folder`, in eval mode (bfloat16 on a GPU, float32 on the CPU)."""
    from transformers import AutoModelForImageTextToText

    from film.vlm_inputs import load_inputs

    if not (folder / "config.json").is_file():
        raise CaptionerError(f"captioner {folder}: not a model folder (no config.json); "
                             "give a Qwen2-VL, Qwen2.5-VL or InternVL folder in transformers' format")
    try:
        json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CaptionerError(f"captioner {folder}: config.json is not JSON: {e}") from None
    dev = pick_device(device)
    inputs = load_inputs(folder)
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    try:
        model = AutoModelForImageTextToText.from_pretrained(str(folder), dtype=dtype)
    except (ValueError, OSError, KeyError) as e:
        raise CaptionerError(f"captioner {folder}: transformers cannot load it as an image-text-to-text model: {e}") from None
    torch.nn.Module.to(model, dev)  # the typed call: transformers declares .to() with its own signature
    model.eval()
    return Captioner(identity(folder), model, inputs)
