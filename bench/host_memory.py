"""This process's memory on Linux, for the CPU benchmarks: its RSS high-water mark (and a reset of
it, to measure one stage at a time) and how much more it may take before the machine runs out."""

from __future__ import annotations

from pathlib import Path


def rss_hwm() -> int:
    """The process's resident-set high-water mark (VmHWM), bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def reset_rss_hwm() -> bool:
    """Restart the high-water mark from the current RSS (Linux: write 5 to clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def available() -> int:
    """Bytes this process may still take: MemAvailable (and the cgroup's limit, if lower)."""
    avail = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                avail = int(line.split()[1]) * 1024
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = int(Path("/sys/fs/cgroup/memory.current").read_text())
        if limit != "max":
            avail = min(avail, int(limit) - used)
    except (OSError, ValueError):
        pass
    return avail
