"""What names a model folder in a stage's outputs, so a rerun knows whether they came from it.

The configs (JSON) whole, and each weight file's name, size and first and last 64 KiB: two
checkpoints of one architecture differ there (a safetensors header lists every tensor's offsets,
and the data starts right after), while hashing gigabytes would cost minutes at every run. The
folder's path is left out, so a moved models folder is the same model.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".model")
EDGE = 64 * 1024


def model_identity(folder: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        if path.suffix in (".json", ".jinja") and path.stat().st_size < 1 << 20:
            h.update(b"file\0" + rel.encode() + b"\0" + path.read_bytes())
        elif path.suffix in WEIGHT_SUFFIXES:
            size = path.stat().st_size
            h.update(f"weights\0{rel}\0{size}\0".encode())
            with path.open("rb") as f:
                h.update(f.read(EDGE))
                f.seek(max(0, size - EDGE))
                h.update(f.read(EDGE))
    return h.hexdigest()[:24]
