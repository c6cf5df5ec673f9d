#!/usr/bin/env bash
# Create .venv with the project and everything its tests need.
# torch is installed first, pinned, so the project's looser range is already satisfied and pip
# does not fetch a multi-GB CUDA build on a CPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
VENV=${VENV:-.venv}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q "torch==${TORCH_VERSION:-2.13.0}"
"$VENV/bin/python" -m pip install -q -e '.[models,test]'
echo "ready: $VENV"
