# syntax=docker/dockerfile:1
# A GPU worker: CUDA runtime, torch with CUDA, ffmpeg, the project with its `models` extra.
# Build from the repository root:  docker build -f docker/worker.Dockerfile -t animegamer-worker .
#
# PyPI's Linux torch wheels are CUDA builds that bundle their CUDA libraries; torch 2.13.0 is
# built for CUDA 13.0 and needs an NVIDIA driver >= 580 on the host. For an older driver build
# with a matching wheel index and base, e.g.
#   --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu126 \
#   --build-arg CUDA_IMAGE=nvidia/cuda:12.6.3-runtime-ubuntu24.04
ARG CUDA_IMAGE=nvidia/cuda:13.0.0-runtime-ubuntu24.04

FROM ${CUDA_IMAGE}
ARG TORCH_INDEX_URL=https://pypi.org/simple
ENV DEBIAN_FRONTEND=noninteractive PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:$PATH

# Ubuntu 24.04's Python is 3.12 (the project supports 3.11-3.12). Distribution packages are
# not pinned: the base image's release already fixes their versions and security updates
# should come in on rebuild.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv ffmpeg ca-certificates \
    && rm -rf /var/lib/apt/lists/*

# torch first, at requirements/torch.txt's version, from the chosen index, so the project's looser
# `torch>=` is satisfied and pip does not pick another build; then the locked `models` extra
# (which leaves torch and its CUDA packages as they are).
WORKDIR /src
COPY requirements/torch.txt requirements/models.txt requirements/
RUN python3 -m venv /opt/venv \
    && pip install --no-cache-dir --index-url "${TORCH_INDEX_URL}" -r requirements/torch.txt \
    && pip install --no-cache-dir -r requirements/models.txt
COPY pyproject.toml README.md ./
COPY settings/ settings/
COPY i18n/ i18n/
COPY localweb/ localweb/
COPY contracts/ contracts/
COPY animegamer/ animegamer/
COPY game/ game/
COPY db/ db/
COPY migrations/ migrations/
COPY inference/ inference/
COPY service/ service/
COPY bot/ bot/
COPY play/ play/
COPY film/ film/
COPY training/ training/
COPY evaluation/ evaluation/
# The project itself, from the build context, without dependencies (they are locked above);
# pip check fails the build if the lock misses one.
RUN pip install --no-cache-dir --no-deps . \
    && pip check \
    && python -c "import torch, transformers, diffusers, peft" \
    && rm -rf /src

# The base image has user `ubuntu` at uid 1000: use another. /models and /data get their
# ownership into fresh named volumes.
RUN groupadd --gid 10001 animegamer \
    && useradd --create-home --no-log-init --uid 10001 --gid 10001 animegamer \
    && mkdir -p /models /data && chown animegamer:animegamer /models /data
USER 10001:10001
WORKDIR /home/animegamer
ENV ANIMEGAMER_DATA_DIR=/data ANIMEGAMER_MODELS_DIR=/models ANIMEGAMER_BACKEND=animegamer \
    HF_HOME=/models/.hf-home
ENTRYPOINT ["animegamer"]
CMD ["worker"]
