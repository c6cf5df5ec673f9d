# syntax=docker/dockerfile:1
# The bot (and the one-shot migrations): the project without the `models` extra, so no torch.
# Build from the repository root:  docker build -f docker/bot.Dockerfile -t animegamer-bot .
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
# The locked dependencies first (their own layer, rebuilt only when the lock changes).
COPY requirements/bot.txt requirements/bot.txt
RUN pip install --no-cache-dir -r requirements/bot.txt
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
# Non-editable install without dependencies (they are locked above): the venv alone is copied to
# the final image. pip check fails the build if the lock misses one.
RUN pip install --no-cache-dir --no-deps . && pip check

FROM ${PYTHON_IMAGE}
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 \
    ANIMEGAMER_DATA_DIR=/data
COPY --from=build /opt/venv /opt/venv
# An unprivileged user; /data is where a named volume picks up its ownership.
RUN groupadd --gid 10001 animegamer \
    && useradd --create-home --no-log-init --uid 10001 --gid 10001 animegamer \
    && mkdir -p /data && chown animegamer:animegamer /data
USER 10001:10001
# Settings come from the environment; an empty working directory means no stray .env or TOML.
WORKDIR /home/animegamer
ENTRYPOINT ["animegamer"]
CMD ["bot"]
