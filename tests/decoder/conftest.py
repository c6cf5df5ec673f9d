from __future__ import annotations

import pytest
import torch
from decoder_sat_reference import make_sat_checkpoint

from inference.decoder.convert import convert_transformer_state_dict
from inference.decoder.transformer import AnimeGamerTransformer3DModel
from testkit.tiny.decoder import TINY_TRANSFORMER_CONFIG

torch.set_num_threads(1)  # tiny tensors; the machine is shared


@pytest.fixture(scope="session")
def cfg() -> dict:
    return dict(TINY_TRANSFORMER_CONFIG)


@pytest.fixture(scope="session")
def sat_sd(cfg) -> dict:
    return make_sat_checkpoint(cfg, seed=0, lora_rank=64)


@pytest.fixture(scope="session")
def converted(cfg, sat_sd):
    return convert_transformer_state_dict(sat_sd, cfg)


@pytest.fixture(scope="session")
def transformer(cfg, converted) -> AnimeGamerTransformer3DModel:
    model = AnimeGamerTransformer3DModel(**cfg)
    model.load_state_dict(converted[0], strict=True)
    return model.eval()
