"""The torch internals inference/torch_adapter.py relies on are still there and behave as the memory
plan reads them.

Each assertion names the installed version, so an upgrade fails here, loudly, rather than in a
prediction that quietly stops counting: check the adapter against the new release, then move
its NEWEST."""

from __future__ import annotations

import inspect

import torch

from inference import torch_adapter as adapter

VERSION = torch.__version__
WHY = f"torch {VERSION} is installed; inference/torch_adapter.py was written for {adapter.OLDEST} to {adapter.NEWEST}"


def test_installed_version_is_a_supported_one():
    adapter.check_version()  # raises with a message naming the versions


def test_a_version_outside_the_range_is_refused(monkeypatch):
    monkeypatch.setattr(adapter, "installed_version", lambda: "2.99.0+cpu")
    try:
        adapter.check_version()
    except RuntimeError as e:
        assert "torch 2.99.0+cpu is installed" in str(e) and adapter.NEWEST in str(e)
    else:
        raise AssertionError("torch 2.99 was accepted")


def test_a_dispatch_mode_sees_each_operator_and_its_output():
    seen: list[tuple[str, object]] = []

    class Watch(adapter.TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            seen.append((str(func), out))
            return out

    x = torch.ones(3)
    with Watch():
        y = x + 1
        values, indices = torch.sort(y)
    assert [name for name, _out in seen] == ["aten.add.Tensor", "aten.sort.default"], f"{WHY}: {seen}"
    assert seen[0][1] is y, f"{WHY}: __torch_dispatch__ no longer returns the operator's own output"
    assert list(inspect.signature(Watch.__torch_dispatch__).parameters) == ["self", "func", "types", "args", "kwargs"], WHY


def test_tree_leaves_flattens_an_operators_nested_output():
    a, b, c = torch.zeros(1), torch.zeros(2), torch.zeros(3)
    assert adapter.tree_leaves((a, [b, (c, None)])) == [a, b, c, None], f"{WHY}: tree_leaves changed"


def test_a_quantised_weight_is_a_wrapper_subclass_with_inner_tensors():
    """torchao's int8 weight (what the low-VRAM modes hold) is a traceable wrapper subclass whose
    `__tensor_flatten__` names the tensors holding its memory; a plain tensor is not one."""
    from inference.mllm.quantize import quantize_linears

    layer = torch.nn.Linear(64, 32, bias=False).to(torch.bfloat16)
    quantize_linears(layer, "int8")
    assert not adapter.is_traceable_wrapper_subclass(torch.zeros(2)), WHY
    assert adapter.is_traceable_wrapper_subclass(layer.weight), f"{WHY}: int8 weights are no longer a wrapper subclass"
    names, _meta = layer.weight.__tensor_flatten__()  # type: ignore[attr-defined]  # the subclass protocol
    assert all(isinstance(getattr(layer.weight, n), torch.Tensor) for n in names), f"{WHY}: {names}"
