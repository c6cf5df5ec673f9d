"""The one place that touches accelerate's private names: `AcceleratorState._reset_state` and
`GradientState._reset_state`. tests/training/test_accelerate_adapter.py checks they still forget a
run's state and fails naming the installed version; tests/training/test_engine.py pins the version
range they were checked on."""

from __future__ import annotations

from accelerate.state import AcceleratorState, GradientState

CHECKED_VERSIONS = ("1.10", "1.15")  # accelerate minor versions the private names were read in


def reset_accelerator_state() -> None:
    """Forgets the process-wide Accelerator state, so that one process can run several trainings
    with different settings (mixed precision, accumulation) one after the other: the CLI runs one,
    the tests run many."""
    AcceleratorState._reset_state(reset_partial_state=False)
    GradientState._reset_state()
