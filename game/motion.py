"""Motion level (predicted by the MLLM) to motion scope (the decoder's flow conditioning)."""

from __future__ import annotations

from collections.abc import Mapping

# The released batch script's mapping. (The released demo app reads the social value instead
# of the motion level and maps differently; that is a defect we do not copy.)
DEFAULT_MOTION_SCOPE: Mapping[int, float] = {1: 0.5, 2: 2.5, 3: 10.0, 4: 15.0}
DEFAULT_OTHERWISE = 40.0


def motion_scope(
    level: int,
    mapping: Mapping[int, float] | None = None,
    otherwise: float | None = None,
) -> float:
    """None for either part means the released batch script's value."""
    table = DEFAULT_MOTION_SCOPE if mapping is None else mapping
    return float(table.get(int(level), DEFAULT_OTHERWISE if otherwise is None else otherwise))
