"""Shared fixtures: one tiny random CLIP folder for the module's tests, torch on 1-2 threads."""

from __future__ import annotations

import pytest
import torch

from testkit.tiny.clip import build_clip

torch.set_num_threads(2)


@pytest.fixture(scope="session")
def clip_dir(tmp_path_factory):
    return build_clip(tmp_path_factory.mktemp("clip"))
