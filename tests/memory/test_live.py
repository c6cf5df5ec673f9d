"""inference.memory.live: live tensor bytes counted at the dispatcher, on real tensors."""

from __future__ import annotations

import torch

from inference.memory.live import LiveBytes, cuda_block, cuda_segment, plain_tensors


def test_counts_each_storage_once_and_frees_it():
    w = torch.zeros(256, 256)
    flat = w.view(-1)
    with LiveBytes("cpu") as live:
        assert live.adopt([w, flat]) == 256 * 256 * 4  # a view shares its storage
        with live.stage("work") as stage:
            x = torch.ones(128, 256)
            y = x @ w  # x, y and w alive: the peak
            del x
            z = y.relu()
            v = z.view(-1)  # no new storage
        assert stage.peak == 256 * 256 * 4 + 2 * 128 * 256 * 4
        assert stage.largest == 128 * 256 * 4 and stage.largest_shape == (128, 256)
        del y, z, v
        assert live.live == 256 * 256 * 4
    assert live.peak("work") is stage


def test_other_devices_are_not_counted():
    with LiveBytes("cuda") as live:
        torch.ones(1000)
        assert live.live == 0


def test_cuda_allocator_rounding():
    assert cuda_block(1) == 512 and cuda_block(513) == 1024
    assert cuda_segment(1024) == 1024  # small blocks: 512-byte rounding only
    assert cuda_segment(3 * 2**20 + 1) == 4 * 2**20  # large: 2 MiB
    with LiveBytes("cpu", cuda_rounding=True) as live:
        torch.ones(3)  # 12 bytes -> one 512-byte block
        a = torch.ones(3)
        assert live.live == 512
        del a


def test_int8_weights_are_counted_through_their_inner_tensors():
    """torchao's int8 weights are a tensor subclass: its int8 data and scales hold the memory."""
    from inference.mllm.quantize import quantize_weights

    class Holder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.causal_lm = torch.nn.Sequential(torch.nn.Linear(256, 512, bias=False)).to(torch.bfloat16)

    m = Holder()
    quantize_weights(m, "int8")
    weight = m.causal_lm[0].weight
    inner = list(plain_tensors(weight))
    assert {t.dtype for t in inner} >= {torch.int8}
    with LiveBytes("cpu") as live:
        counted = live.adopt([weight])
    assert 256 * 512 <= counted < 256 * 512 * 2  # int8 values plus per-row scales, not bf16
