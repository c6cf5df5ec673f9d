"""Fixtures: tiny random stand-ins for the released files, written in the released layouts.

See testkit/tiny/mllm.py for how the tokenizer (LlamaTokenizer over a hand-made Mistral-like
BPE vocabulary padded to 32000 ids, plus the 284 AnimeGamer tokens at 32000..32283), the Mistral
directory (hidden 64, 2 layers, 4 heads) and the agent checkpoint (peft-wrapped, released key
names, every trained tensor random) are built. They are built once per test session.
"""

from __future__ import annotations

import pytest
import torch

from inference.mllm.instruction import InstructionEncoder
from inference.mllm.loading import load_mllm
from inference.mllm.prompt import PromptBuilder
from testkit.tiny import mllm as tiny

torch.set_num_threads(2)


@pytest.fixture(scope="session")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny-animegamer")
    paths = tiny.build_all(d)
    paths["state_dict"] = torch.load(paths["agent"], weights_only=True)
    return paths


@pytest.fixture(scope="session")
def loaded(files):
    return load_mllm(files["mistral"], files["tokenizer"], files["agent"], device="cpu")


@pytest.fixture(scope="session")
def tokenizer(loaded):
    return loaded.tokenizer


@pytest.fixture(scope="session")
def encoder(loaded):
    return InstructionEncoder(loaded.tokenizer, loaded.special)


@pytest.fixture(scope="session")
def make_builder(encoder, loaded):
    return lambda window=0: PromptBuilder(encoder, loaded.special, history_window=window)
