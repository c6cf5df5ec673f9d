#!/usr/bin/env bash
# Download, into .whl/ (git-ignored), exactly the wheels that bench/gpu.sh needs on the GPU machine
# and that its image lacks (Python 3.12, torch 2.11 with CUDA 13, transformers 5, peft, accelerate,
# safetensors, tokenizers, sentencepiece, huggingface_hub, numpy, pillow, zipp are there; no network):
#   diffusers          the DiT, the VAE, attention dispatcher, cache hooks (the version tested here)
#   importlib_metadata diffusers' dependency
#   torchao            FP8 linears (fastest) and 8-bit MLLM weights (low_vram); 0.17 is built for torch 2.11
#   ffmpeg-python, future, imageio-ffmpeg   the MP4 encode stage (imageio-ffmpeg ships a static ffmpeg)
# Then carry .whl with the run: bench/gpu.sh installs them into /tmp/site when .whl/ exists.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
mkdir -p .whl
fetch() {
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux2010_x86_64 --platform manylinux1_x86_64 -d .whl "$@"
}
fetch diffusers==0.42.1 importlib_metadata==8.7.0 torchao==0.17.0 ffmpeg-python==0.2.0 future==1.0.0 \
  imageio-ffmpeg==0.6.0
ls -la .whl
du -ch .whl/*.whl | tail -1
