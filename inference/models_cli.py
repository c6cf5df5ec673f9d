"""`animegamer models download FILM` and `animegamer models list`.

Download puts three hub repositories into the layout of inference.model_paths:

    TencentARC/AnimeGamer               MLLM-<Film>/, VDM_Decoder-<Film>/  -> <models>/animegamer/
    mistralai/Mistral-7B-Instruct-v0.1  safetensors, config, tokenizer     -> <models>/mistral-7b-instruct-v0.1/
    THUDM/CogVideoX-2b                  vae/ (diffusers layout)            -> <models>/cogvideox-vae/

then builds the AnimeGamer tokenizer and converts the decoder. huggingface_hub resumes partial
files and skips complete ones, so rerunning after an interruption continues where it stopped.
After each repository every file is checked against the hub's metadata: size always, sha256 for
LFS files (the weights); a verified file is remembered (size, mtime) so a rerun does not hash
26 GB again. A file that fails is deleted, so the next run fetches it afresh.

Only `huggingface_hub` is needed to download; it and the converter are imported when used, so
`models list` works in the slim bot image too.
"""

from __future__ import annotations

import argparse

import fnmatch
import hashlib
import json
import os
import shutil
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from game.catalogue import FILMS, Film, get_film
from inference.model_paths import FilmModelPaths, film_paths

ANIMEGAMER_REPO = "TencentARC/AnimeGamer"
MISTRAL_REPO = "mistralai/Mistral-7B-Instruct-v0.1"
VAE_REPO = "THUDM/CogVideoX-2b"
TOKENIZER_SOURCE = "https://github.com/TencentARC/AnimeGamer (folder animegamer_tokenizer/)"

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


def fetch_plan(models_root: Path, film: Film) -> list[Fetch]:
    paths = film_paths(models_root, film)
    release_dir = paths.agent_dir.parent  # both released folders sit under <models>/animegamer
    return [
        Fetch(
            f"AnimeGamer checkpoints for {film.title}",
            ANIMEGAMER_REPO,
            (f"{paths.agent_dir.name}/*", f"{paths.decoder_sat.name}/*"),
            release_dir,
        ),
        # Safetensors only: the repo also carries the same weights as .bin (another 14 GB).
        Fetch("Mistral-7B-Instruct-v0.1 (base LLM)", MISTRAL_REPO, ("*.json", "*.safetensors", "tokenizer.model"), paths.mistral),
        # The VAE is a subfolder of the CogVideoX-2b repo: fetched into a staging folder (so
        # resuming works) and hard-linked into the layout's cogvideox-vae/.
        Fetch(
            "CogVideoX 3D VAE", VAE_REPO, ("vae/*",), Path(models_root) / ".hub" / VAE_REPO.replace("/", "--"),
            link_from="vae", target=paths.vae,
        ),
    ]


# ------------------------------------------------------------------------------------------
# What is on disk


@dataclass(frozen=True)
class Component:
    name: str
    path: Path
    present: bool
    detail: str
    for_worker: bool  # the worker loads it; otherwise only the conversion reads it


def _size(paths) -> str:
    total = sum(p.stat().st_size for p in paths if p.is_file())
    return f"{total / 1e9:.1f} GB" if total >= 1e8 else f"{total / 1e6:.1f} MB"


def _files(directory: Path, *patterns: str) -> list[Path]:
    return sorted({p for pat in patterns for p in directory.glob(pat)}) if directory.is_dir() else []


def inventory(models_root: Path, film: Film) -> list[Component]:
    """Each model part a film needs, present or not (used by `models list` and `doctor`)."""
    p: FilmModelPaths = film_paths(models_root, film)
    out = []

    weights = _files(p.mistral, "*.safetensors", "pytorch_model*.bin")
    ok = (p.mistral / "config.json").is_file() and bool(weights)
    out.append(Component("base LLM (Mistral-7B-Instruct-v0.1)", p.mistral, ok,
                         _size(weights) if ok else "config.json and weights needed", True))

    ok = (p.tokenizer / "tokenizer_config.json").is_file()
    out.append(Component("AnimeGamer tokenizer", p.tokenizer, ok, "" if ok else "tokenizer_config.json needed", True))

    agent = p.agent_checkpoint()
    out.append(Component(f"MLLM agent (MLLM-{film.model_name})", p.agent_dir, agent is not None,
                         _size([agent]) if agent else "pytorch_model.bin needed", True))

    sat_weights = _sat_weights(p.decoder_sat)
    out.append(Component(f"released decoder (VDM_Decoder-{film.model_name})", p.decoder_sat, sat_weights is not None,
                         _size([sat_weights]) if sat_weights else "latest + <iter>/mp_rank_00_model_states.pt needed", False))

    vae = _files(p.vae, "*.safetensors", "3d-vae.pt")
    ok = bool(vae) and ((p.vae / "config.json").is_file() or (p.vae / "3d-vae.pt").is_file())
    out.append(Component("CogVideoX VAE", p.vae, ok, _size(vae) if ok else "config.json + weights, or 3d-vae.pt needed", False))

    conv = [p.decoder / "decoder.json", p.decoder / "transformer" / "config.json", p.decoder / "vae" / "config.json"]
    conv_weights = _files(p.decoder, "transformer/*.safetensors", "vae/*.safetensors")
    ok = all(f.is_file() for f in conv) and len(conv_weights) >= 2
    out.append(Component("converted decoder", p.decoder, ok,
                         _size(conv_weights) if ok else "run `animegamer models download` (it converts)", True))
    return out


def _sat_weights(sat_dir: Path) -> Path | None:
    latest = sat_dir / "latest"
    if not latest.is_file():
        return None
    f = sat_dir / latest.read_text().strip() / "mp_rank_00_model_states.pt"
    return f if f.is_file() else None


# ------------------------------------------------------------------------------------------
# Reaching the hub


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
# Download


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


def build_tokenizer(paths: FilmModelPaths, log=print) -> bool:
    """The AnimeGamer tokenizer is not on the hub: built from Mistral's by inference.mllm when
    that code provides a builder; otherwise the manual step is printed. Returns whether it exists."""
    if (paths.tokenizer / "tokenizer_config.json").is_file():
        return True
    try:
        from inference.mllm.tokens import build_released_tokenizer
    except ImportError:
        log(f"AnimeGamer tokenizer: not built here (this version has no builder). Copy the released "
            f"tokenizer from {TOKENIZER_SOURCE} to {paths.tokenizer}.")
        return False
    log(f"AnimeGamer tokenizer: building from Mistral's -> {paths.tokenizer}")
    build_released_tokenizer(paths.mistral, paths.tokenizer)
    return True


def vae_source(vae_dir: Path) -> Path:
    """What the converter gets for the VAE: the SAT 3d-vae.pt when one was put there by hand
    (what the release used), else the diffusers folder fetched from CogVideoX-2b."""
    sat = vae_dir / "3d-vae.pt"
    return sat if sat.is_file() else vae_dir


def convert(paths: FilmModelPaths, log=print) -> None:
    if (paths.decoder / "decoder.json").is_file():
        log(f"decoder: already converted in {paths.decoder}")
        return
    try:
        from inference.decoder.convert import convert_decoder
    except ImportError as e:
        raise ModelsError(
            f"the decoder converter (inference.decoder.convert) cannot be imported ({e}). The download is "
            "complete; convert later by rerunning this command, or skip it with --skip-decoder-convert.") from e
    vae = vae_source(paths.vae)
    log(f"decoder: converting {paths.decoder_sat} (VAE: {vae}) -> {paths.decoder}")
    try:
        convert_decoder(str(paths.decoder_sat), str(vae), str(paths.decoder))
    except ValueError as e:  # the converter's ConversionError
        raise ModelsError(
            f"decoder conversion failed: {e}\nThe download is complete; to convert by hand: "
            f"animegamer convert-decoder {paths.decoder_sat} {vae} {paths.decoder}") from e


def download(models_root: Path, film: Film, skip_convert: bool = False, endpoint: str | None = None, log=print) -> None:
    try:
        import huggingface_hub  # noqa: F401
    except ImportError:
        raise ModelsError("huggingface_hub is not installed: install the project's `models` extra "
                          "(pip install 'animegamer-discord[models]') or use the worker image.") from None
    endpoint = endpoint or hub_endpoint()
    probe_hub(endpoint)
    for item in fetch_plan(models_root, film):
        fetch(item, endpoint, log)
    paths = film_paths(models_root, film)
    build_tokenizer(paths, log)
    if skip_convert:
        log("decoder: conversion skipped (--skip-decoder-convert)")
    else:
        convert(paths, log)


# ------------------------------------------------------------------------------------------
# The subcommands


def _models_root(args) -> Path:
    if args.models_dir:
        return Path(args.models_dir)
    from settings import load_settings

    return load_settings().model_root


def _download(args) -> int:
    try:
        film = get_film(args.film)
    except KeyError as e:
        print(f"animegamer models download: {e.args[0]}", file=sys.stderr)
        return EXIT_USAGE
    root = _models_root(args)
    try:
        download(root, film, skip_convert=args.skip_decoder_convert)
    except ModelsError as e:
        print(f"animegamer models download: {e}", file=sys.stderr)
        return e.exit_code
    print(f"done: {film.id} models in {root}")
    return 0


def _list(args) -> int:
    root = _models_root(args)
    films = [get_film(f) for f in args.film] if args.film else list(FILMS.values())
    print(f"models directory: {root}")
    for film in films:
        print(f"\n{film.id} ({film.title})")
        for c in inventory(root, film):
            mark = "present" if c.present else "MISSING"
            role = "worker" if c.for_worker else "conversion"
            print(f"  {mark:8} {c.name:44} {role:10} {c.path}  {c.detail}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("models", help="download and list model checkpoints")
    msub = p.add_subparsers(dest="models_command", required=True)
    d = msub.add_parser("download", help="fetch a film's checkpoints, Mistral and the VAE from the hub, then convert the decoder")
    d.add_argument("film", choices=sorted(FILMS), help="film id")
    d.add_argument("--skip-decoder-convert", action="store_true", help="only download")
    d.add_argument("--models-dir", help="default: ANIMEGAMER_MODELS_DIR")
    d.set_defaults(func=_download)
    ls = msub.add_parser("list", help="what is present and missing per film")
    ls.add_argument("--film", action="append", choices=sorted(FILMS), help="only this film (repeatable)")
    ls.add_argument("--models-dir", help="default: ANIMEGAMER_MODELS_DIR")
    ls.set_defaults(func=_list)

    cd = sub.add_parser(
        "convert-decoder",
        help="convert a released SAT decoder (LoRA merged) and the 3D VAE to diffusers/safetensors",
        add_help=False,
    )
    cd.add_argument("argv", nargs=argparse.REMAINDER)
    cd.set_defaults(func=_convert_decoder, forward=True)


def _convert_decoder(args) -> int:
    from inference.decoder.convert import convert_decoder_main  # imports torch: only when used

    return convert_decoder_main(args.argv)
