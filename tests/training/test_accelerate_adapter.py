"""The accelerate internals training/accelerate_adapter.py relies on still behave as they did in
the checked versions; a failure names the installed accelerate version. (The version range
itself: tests/training/test_engine.py.)"""

from __future__ import annotations

import accelerate
import torch
from accelerate import Accelerator
from accelerate.state import AcceleratorState, GradientState

from training.accelerate_adapter import CHECKED_VERSIONS, reset_accelerator_state

CHANGED = f"accelerate {accelerate.__version__} (the adapter was checked on {', '.join(CHECKED_VERSIONS)}) changed: "


def test_after_a_reset_one_process_runs_a_second_training_with_other_settings():
    reset_accelerator_state()
    try:
        first = Accelerator(cpu=True, mixed_precision="no", gradient_accumulation_steps=2)
        with first.accumulate(torch.nn.Linear(1, 1)):  # the first of two steps: gradients not synced
            assert not first.sync_gradients
        reset_accelerator_state()
        try:
            Accelerator(cpu=True, mixed_precision="bf16", gradient_accumulation_steps=3)
        except ValueError as e:  # "AcceleratorState has already been initialized and cannot be changed"
            raise AssertionError(CHANGED + f"AcceleratorState._reset_state no longer forgets the state: {e}") from e
        assert AcceleratorState().mixed_precision == "bf16", CHANGED + "the mixed precision of the first run stayed"
        state = GradientState()
        assert state.num_steps == 3 and state.sync_gradients, (
            CHANGED + "GradientState._reset_state no longer forgets the first run's accumulation")
    finally:
        reset_accelerator_state()
