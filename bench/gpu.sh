#!/usr/bin/env bash
# A whole AnimeGamer turn on one GPU, measured: both models at full size (random weights, nothing
# downloaded), every speed preset and memory mode, 1/2/4 concurrent sessions. About 8 minutes on
# one H200; writes the Markdown table to bench-gpu.md (or --out FILE). See bench/gpu.py.
#
#   bench/gpu.sh                 # full size, needs a CUDA GPU
#   bench/gpu.sh --tiny          # the same code, tiny configs, CPU, under a minute
#   bench/gpu.sh --only exact,fastest --out /tmp/t.md
#   bench/gpu.sh --train         # training: phases (a) and (b) at full size, steps/s and peak memory
#   bench/gpu.sh --train --tiny  # the same code, tiny configs, CPU, seconds
#
# Packages the GPU machine lacks (diffusers, torchao, ffmpeg-python, imageio-ffmpeg) are installed
# from wheels in .whl/ when that folder exists (bench/gpu_wheels.sh downloads them).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
case " $* " in
  *" --tiny "*) ;;
  *)
    if compgen -G ".whl/*.whl" >/dev/null; then
      "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
      export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
    fi
    ;;
esac
export PYTHONUNBUFFERED=1
exec "$PY" bench/gpu.py "$@"
