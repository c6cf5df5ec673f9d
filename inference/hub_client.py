"""The model hub client: reach the hub, fetch a repository's files, check them.

huggingface_hub resumes partial files and skips complete ones, so rerunning after an interruption
continues where it stopped. After each repository every file is checked against the hub's
metadata: size always, sha256 for LFS files (the weights); a verified file is remembered (size,
mtime) so a rerun does not hash 26 GB again. A file that fails is deleted, so the next run fetches
it afresh. huggingface_hub is imported when used, so the rest of the CLI works without it.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import shutil
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

PROBE_TIMEOUT = 5.0  # seconds for DNS + TCP to the hub: fail fast where there is no route
API_TIMEOUT = 10.0  # seconds for metadata requests (and per-request on downloads)
VERIFIED_FILE = ".animegamer-verified.json"

EXIT_FAILED, EXIT_USAGE, EXIT_NO_HUB = 1, 2, 3


class ModelsError(RuntimeError):
    exit_code = EXIT_FAILED


class HubUnreachable(ModelsError):
    exit_code = EXIT_NO_HUB


@dataclass(frozen=True)
class Fetch:
    what: str
    repo_id: str
    patterns: tuple[str, ...]
    local_dir: Path  # where huggingface_hub writes (keeps its resume metadata there)
    link_from: str | None = None  # repo folder whose files are linked into `target`
    target: Path | None = None



def hub_endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


def probe_hub(endpoint: str, timeout: float = PROBE_TIMEOUT) -> None:
    """DNS and a TCP connect, with a short timeout: a machine with no route fails here in
    seconds instead of inside huggingface_hub's retries. Skipped behind a proxy (the proxy,
    not this machine, resolves and connects)."""
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return
    parts = urlsplit(endpoint)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    advice = ("Download on a machine that can reach it and copy the models directory here "
              "(`animegamer models list` shows the layout), or set HF_ENDPOINT to a reachable mirror.")
    try:
        addrs = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise HubUnreachable(f"cannot reach the model hub {endpoint}: the name {host!r} does not resolve ({e.strerror}). {advice}") from None
    last: OSError | None = None
    deadline = time.monotonic() + timeout
    for family, kind, proto, _, addr in addrs:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        try:
            with socket.socket(family, kind, proto) as s:
                s.settimeout(remaining)
                s.connect(addr)
                return
        except OSError as e:
            last = e
    reason = "timed out" if last is None or isinstance(last, TimeoutError) else (last.strerror or str(last))
    raise HubUnreachable(f"cannot reach the model hub {endpoint}: connecting to {host}:{port} failed ({reason}). {advice}")


def _explain_hub_error(e: Exception, repo_id: str, endpoint: str) -> ModelsError:
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, OfflineModeIsEnabled, RepositoryNotFoundError

    if isinstance(e, OfflineModeIsEnabled):
        return HubUnreachable(f"HF_HUB_OFFLINE is set: cannot download {repo_id}. Unset it, or copy the files by hand.")
    if isinstance(e, GatedRepoError):
        return ModelsError(
            f"{repo_id} is gated: accept its terms at {endpoint}/{repo_id} with your account, then set HF_TOKEN "
            "(a read token), and rerun.")
    if isinstance(e, RepositoryNotFoundError):
        return ModelsError(f"{repo_id} was not found on {endpoint} (or needs a token: set HF_TOKEN).")
    if isinstance(e, HfHubHTTPError):
        return ModelsError(f"the hub answered with an error for {repo_id}: {e}")
    # Network failures: OSError/TimeoutError, or the HTTP client's own (httpx or requests).
    if isinstance(e, OSError) or type(e).__module__.split(".")[0] in ("httpx", "requests", "urllib3"):
        return HubUnreachable(f"cannot reach the model hub {endpoint} for {repo_id}: {type(e).__name__}: {e}")
    return ModelsError(f"downloading {repo_id} failed: {type(e).__name__}: {e}")


# ------------------------------------------------------------------------------------------
# Checksums


@dataclass(frozen=True)
class Expected:
    path: str  # relative to the fetch's local_dir
    size: int | None
    sha256: str | None  # LFS files only


def sha256_of(path: Path, chunk: int = 16 << 20) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def verify_files(local_dir: Path, expected: list[Expected], log=print) -> None:
    """Compare the files with the hub's sizes and sha256; delete and report any that differ."""
    ledger_path = local_dir / VERIFIED_FILE
    try:
        ledger = json.loads(ledger_path.read_text())
    except (OSError, ValueError):
        ledger = {}
    bad = []
    for e in expected:
        f = local_dir / e.path
        if not f.is_file():
            bad.append(f"{e.path}: missing after download")
            continue
        st = f.stat()
        if e.size is not None and st.st_size != e.size:
            bad.append(f"{e.path}: {st.st_size} bytes, the hub says {e.size}")
            f.unlink()
            continue
        if e.sha256 is None:
            continue
        stamp = [st.st_size, st.st_mtime_ns, e.sha256]
        if ledger.get(e.path) == stamp:
            continue
        log(f"  checking sha256 of {e.path} ({st.st_size / 1e9:.2f} GB)")
        got = sha256_of(f)
        if got != e.sha256:
            bad.append(f"{e.path}: sha256 {got[:12]}..., the hub says {e.sha256[:12]}...")
            f.unlink()
            ledger.pop(e.path, None)
            continue
        ledger[e.path] = stamp
    local_dir.mkdir(parents=True, exist_ok=True)
    ledger_path.write_text(json.dumps(ledger, indent=1))
    if bad:
        raise ModelsError("files do not match the hub (deleted; rerun to fetch them again):\n  " + "\n  ".join(bad))


# ------------------------------------------------------------------------------------------
# Fetching


def _matches(name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatch(name, p) for p in patterns)


def fetch(item: Fetch, endpoint: str, log=print) -> None:
    from huggingface_hub import HfApi, snapshot_download

    api = HfApi(endpoint=endpoint)
    try:
        info = api.model_info(item.repo_id, files_metadata=True, timeout=API_TIMEOUT)
    except Exception as e:  # classified into a clear message
        raise _explain_hub_error(e, item.repo_id, endpoint) from e
    expected = [
        Expected(s.rfilename, s.size, s.lfs.sha256 if s.lfs else None)
        for s in info.siblings or ()
        if _matches(s.rfilename, item.patterns)
    ]
    if not expected:
        raise ModelsError(f"{item.repo_id} has no files matching {', '.join(item.patterns)} (has the release changed?)")
    if info.sha is None:  # the download is pinned to the revision whose metadata is verified
        raise ModelsError(f"{endpoint} gave no revision (sha) for {item.repo_id}: cannot pin the download")
    total = sum(e.size or 0 for e in expected)
    log(f"{item.what}: {len(expected)} files, {total / 1e9:.1f} GB from {item.repo_id}@{info.sha[:10]} -> {item.local_dir}")
    try:
        # Pinned to the revision whose metadata we verify against; resumes partial files.
        snapshot_download(
            item.repo_id, revision=info.sha, local_dir=item.local_dir, allow_patterns=list(item.patterns),
            endpoint=endpoint, etag_timeout=API_TIMEOUT, max_workers=4,
        )
    except Exception as e:
        raise _explain_hub_error(e, item.repo_id, endpoint) from e
    verify_files(item.local_dir, expected, log)
    if item.link_from and item.target:
        _link_tree(item.local_dir / item.link_from, item.target)


def _link_tree(src: Path, dst: Path) -> None:
    """Hard links (no extra space; a copy across file systems)."""
    for f in src.rglob("*"):
        if not f.is_file():
            continue
        out = dst / f.relative_to(src)
        out.parent.mkdir(parents=True, exist_ok=True)
        if out.exists():
            if out.stat().st_ino == f.stat().st_ino:
                continue
            out.unlink()
        try:
            os.link(f, out)
        except OSError:
            shutil.copy2(f, out)
