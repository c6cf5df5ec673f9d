#!/usr/bin/env bash
# Create .venv with the project and everything its tests need, at the locked versions
# (requirements/*.txt, refreshed by scripts/lock.sh), plus the system programs the tests use.
# torch is installed first, pinned (requirements/torch.txt), so pip keeps that build and does
# not fetch a multi-GB CUDA build on a CPU machine.
# Environment: PYTHON (default python3.11), VENV (default .venv), SETUP_SYSTEM=0 skips apt,
# TORCH_INDEX_URL: where torch comes from (PyPI's Linux wheels are CUDA builds; a CPU machine
# without a local CPU wheel wants https://download.pytorch.org/whl/cpu).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
VENV=${VENV:-.venv}

# --- system programs: ffmpeg/ffprobe (MP4 checks) and Chromium (the play page's browser tests)
. /etc/os-release 2>/dev/null || ID=unknown
apt_pkgs=() after_venv=()
command -v ffmpeg >/dev/null && command -v ffprobe >/dev/null || apt_pkgs+=(ffmpeg)
# OpenCV's wheel (the film pipeline's optical flow, through scenedetect) links libGL and GLib.
[ -e /usr/lib/x86_64-linux-gnu/libGL.so.1 ] || [ -e /lib/x86_64-linux-gnu/libGL.so.1 ] || apt_pkgs+=(libgl1)
[ -e /usr/lib/x86_64-linux-gnu/libglib-2.0.so.0 ] || [ -e /lib/x86_64-linux-gnu/libglib-2.0.so.0 ] || apt_pkgs+=(libglib2.0-0)
if ! command -v chromium >/dev/null; then
  # Debian packages Chromium; Ubuntu's `chromium` is a snap stub, so there the browser tests use
  # Playwright's own Chromium (downloaded from Playwright's servers, with its system libraries).
  if [ "${ID:-}" = debian ]; then apt_pkgs+=(chromium); else after_venv+=(playwright-chromium); fi
fi
can_apt=0
if [ "${SETUP_SYSTEM:-1}" != 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then can_apt=1; fi
if [ ${#apt_pkgs[@]} -gt 0 ]; then
  if [ $can_apt = 1 ]; then
    echo "setup: apt-get install ${apt_pkgs[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${apt_pkgs[@]}" >/dev/null
  else
    echo "setup: the tests need ${apt_pkgs[*]}; install them with:" >&2
    echo "  sudo apt-get install -y --no-install-recommends ${apt_pkgs[*]}" >&2
  fi
fi

# --- the virtual environment, at the locked versions
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} -r requirements/torch.txt
"$VENV/bin/python" -m pip install -q -c requirements/test.txt -e '.[models,film,test]'

if [ ${#after_venv[@]} -gt 0 ]; then
  if [ $can_apt = 1 ]; then
    echo "setup: playwright install --with-deps chromium"
    "$VENV/bin/python" -m playwright install --with-deps chromium
  else
    echo "setup: the browser tests need Chromium; install it with:" >&2
    echo "  sudo $VENV/bin/python -m playwright install-deps chromium && $VENV/bin/python -m playwright install chromium" >&2
  fi
fi
echo "ready: $VENV"
