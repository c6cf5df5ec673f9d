"""Storage format of the MLLM's action representation (226 x 1920).

Stored in bf16 (the model's own precision) as little-endian uint16 bit patterns with a small
header, so it needs only numpy to read or write: workers on other machines and the bot image
(which has no torch) can both handle it. About 0.9 MB per turn.
"""

from __future__ import annotations

import struct

import numpy as np

MAGIC = b"AGR1"
_HEADER = struct.Struct("<4sII")  # magic, rows, cols


def to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bit patterns, rounding to nearest even (NaN kept NaN)."""
    f = np.ascontiguousarray(x, dtype=np.float32)
    u = f.view(np.uint32)
    rounding = ((u >> 16) & 1) + np.uint32(0x7FFF)
    bits = ((u + rounding) >> 16).astype(np.uint16)
    nan = np.isnan(f)
    bits[nan] = np.uint16(0x7FC0)
    return bits


def from_bf16_bits(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def encode(rep: np.ndarray) -> bytes:
    if rep.ndim != 2:
        raise ValueError(f"representation must be 2-D (tokens, width), got shape {rep.shape}")
    rows, cols = rep.shape
    return _HEADER.pack(MAGIC, rows, cols) + to_bf16_bits(rep).astype("<u2").tobytes()


def decode(blob: bytes) -> np.ndarray:
    magic, rows, cols = _HEADER.unpack_from(blob)
    if magic != MAGIC:
        raise ValueError("not a stored representation (bad magic)")
    body = np.frombuffer(blob, dtype="<u2", offset=_HEADER.size)
    if body.size != rows * cols:
        raise ValueError(f"representation blob holds {body.size} values, header says {rows}x{cols}")
    return from_bf16_bits(body.reshape(rows, cols))
