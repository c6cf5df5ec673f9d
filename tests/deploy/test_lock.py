"""The locked requirements (requirements/*.txt, written by scripts/lock.sh) against pyproject.toml:
each lock satisfies the requirements of its extras, the locks agree with each other, none of them
pulls torch or CUDA libraries (requirements/torch.txt installs torch first), and procrastinate is
locked at the version whose schema migrations/versions vendors. Run `bash scripts/lock.sh` when
one of these fails after a change to pyproject.toml."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
REQS = ROOT / "requirements"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
LOCKS = {"bot.txt": (), "models.txt": ("models",), "test.txt": ("models", "test")}
# The environments the locks serve: CI and scripts/setup.sh (3.11), the worker image (Ubuntu 24.04: 3.12).
ENVIRONMENTS = [
    {"python_version": v, "python_full_version": f"{v}.0", "sys_platform": "linux", "platform_system": "Linux",
     "platform_machine": "x86_64", "implementation_name": "cpython", "platform_python_implementation": "CPython",
     "os_name": "posix", "extra": ""}
    for v in ("3.11", "3.12")
]


def pins(name: str, env: dict) -> dict[str, Version]:
    """The lock's `name==version` lines whose markers hold in `env`."""
    found = {}
    for line in (REQS / name).read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9._-]+)==([^\s;]+)\s*(?:;\s*(.+))?$", line)
        if m and (m[3] is None or Marker(m[3]).evaluate(env)):
            found[canonicalize_name(m[1])] = Version(m[2])
    return found


def requirements(extras) -> list[Requirement]:
    lines = list(PROJECT["dependencies"])
    for extra in extras:
        lines += PROJECT["optional-dependencies"][extra]
    return [Requirement(line) for line in lines]


@pytest.mark.parametrize("env", ENVIRONMENTS, ids=lambda e: e["python_version"])
@pytest.mark.parametrize("lock", LOCKS)
def test_lock_satisfies_pyproject(lock, env):
    locked = pins(lock, env)
    for req in requirements(LOCKS[lock]):
        name = canonicalize_name(req.name)
        if name == "torch" or (req.marker and not req.marker.evaluate(env)):
            continue
        assert name in locked, f"{lock} lacks {req}: run `bash scripts/lock.sh`"
        assert req.specifier.contains(locked[name], prereleases=True), f"{lock}: {name}=={locked[name]} does not satisfy {req}"


@pytest.mark.parametrize("lock", ["bot.txt", "models.txt"])
def test_locks_agree_with_the_test_lock(lock):
    env = ENVIRONMENTS[0]
    full, part = pins("test.txt", env), pins(lock, env)
    assert {n: v for n, v in part.items() if full.get(n) != v} == {}


@pytest.mark.parametrize("lock", LOCKS)
def test_no_torch_or_cuda_in_the_locks(lock):
    names = re.findall(r"^([A-Za-z0-9._-]+)==", (REQS / lock).read_text(), re.M)
    # torch itself and its CUDA runtime; torchao is a library on top of it (one wheel for CPU and GPU)
    assert [n for n in names if re.match(r"(torch$|torch-|triton|nvidia-|cuda-)", n)] == []


def test_torch_metadata_matches_the_pin():
    """scripts/lock.sh resolves torch's dependencies from requirements/uv.toml: same version."""
    pinned = re.search(r"^torch==(\S+)$", (REQS / "torch.txt").read_text(), re.M)[1]
    config = tomllib.loads((REQS / "uv.toml").read_text())
    assert [m["version"] for m in config["dependency-metadata"] if m["name"] == "torch"] == [pinned]


def test_procrastinate_is_the_vendored_schemas_version():
    (schema,) = (ROOT / "migrations" / "versions").glob("procrastinate-*-schema.sql")
    vendored = Version(re.match(r"procrastinate-(.+)-schema\.sql", schema.name)[1])
    for lock in LOCKS:
        assert pins(lock, ENVIRONMENTS[0])["procrastinate"] == vendored
    (req,) = [r for r in requirements(()) if r.name == "procrastinate"]
    # pyproject.toml admits patch releases of that minor version only
    assert req.specifier.contains(vendored)
    assert not req.specifier.contains(f"{vendored.major}.{vendored.minor + 1}.0")
    assert not req.specifier.contains(f"{vendored.major}.{vendored.minor - 1}.99")
