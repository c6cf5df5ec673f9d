"""4D attention masks for left-padded batches: causal, with one bidirectional query block per row.

The current turn's 226 query tokens attend to each other in both directions; everything else is
causal (as the released `generate_bi` pass and training with `bilateral_attention`). The mask is
additive float (0 where allowed, dtype min elsewhere): transformers passes a 4D mask through as-is,
and a float mask means the same in eager and sdpa attention (a boolean one only in sdpa).

Columns are batch columns: row b holds `pad[b]` padding columns, then its tokens. Padding keys are
never attended; a padding query attends only to itself, so no softmax row is empty (no NaN).
"""

from __future__ import annotations

import torch


def position_ids(pad: torch.Tensor, start: int, stop: int) -> torch.Tensor:
    """(B, stop-start) positions of columns start..stop; padding columns get 0."""
    cols = torch.arange(start, stop, device=pad.device)
    return (cols[None, :] - pad[:, None]).clamp(min=0)


def attention_mask_4d(
    pad: torch.Tensor,
    q_start: int,
    q_stop: int,
    kv_len: int,
    dtype: torch.dtype,
    block: tuple[int, int] | None = None,
    sliding_window: int | None = None,
) -> torch.Tensor:
    """Mask of shape (B, 1, q_stop - q_start, kv_len) for queries at columns q_start..q_stop.

    `block` = (start, stop) columns of the bidirectional query block (the same in every row: left
    padding and the fixed `</frame></img><ML>` tail align it), or None for a purely causal mask.
    """
    device = pad.device
    i = torch.arange(q_start, q_stop, device=device)[None, :, None]  # query column
    j = torch.arange(kv_len, device=device)[None, None, :]  # key column
    p = pad[:, None, None]
    allowed = (j <= i) & (j >= p)
    if sliding_window is not None:  # Mistral's window: key visible while q - k < window
        allowed &= (i - j) < sliding_window
    if block is not None:
        b0, b1 = block
        allowed |= (i >= b0) & (i < b1) & (j >= b0) & (j < b1)
    allowed = torch.where(i < p, j == i, allowed)  # padding query: itself only
    zero = torch.zeros((), dtype=dtype, device=device)
    neg = torch.full((), torch.finfo(dtype).min, dtype=dtype, device=device)
    return torch.where(allowed, zero, neg)[:, None]
