#!/usr/bin/env bash
# Builds the deployment (docker/bot.Dockerfile, docker/worker.Dockerfile) and runs docker/compose.yaml
# on this machine, then plays a whole turn through the containers (tests/deploy/compose_check.py).
#
# For a machine without an image registry (like the CI machines): the base images come from
# Debian's packages (debootstrap + docker import) and are passed as the Dockerfiles' own build
# arguments; Postgres is an image built from Debian's postgresql package (docker/check/); the
# monitoring profile's images are left out. See README.md, "Deployment", for the same steps on a
# machine that reaches Docker Hub, and docs/deployment-check.md for what each stand-in replaces.
#
# Needs root (it installs docker.io, debootstrap and docker-compose with apt when missing and
# starts dockerd when none runs). Exit status: 0 passed, 1 failed, 3 cannot run here (not root, no
# apt, dockerd does not start); the reason is printed. Everything it made (containers, volumes,
# images, the dockerd it started) is removed at the end; COMPOSE_CHECK_KEEP_IMAGES=1 keeps the
# images and that dockerd (to rerun quickly while working on the deployment).
#
#   sudo scripts/compose-check.sh           # PYTHON=<python with the project and its test extra>
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || command -v python3 )}
TAG=check
BASE=animegamer-check/debian:bookworm
PG_IMAGE=animegamer-check/postgres:15
WORK=$(mktemp -d /tmp/compose-check.XXXXXX)
START=$(date +%s)
DOCKERD_PID=""
INDEX_PID=""

say() { printf 'compose-check: %s\n' "$*" >&2; }
cannot() { say "CANNOT RUN HERE: $*"; exit 3; }
# step NAME CMD...: runs CMD and prints how long it took. (set -e does not apply inside CMD, run
# in an `||` list: the step functions check each command themselves.)
step() {
  local name=$1 t0 rc=0
  shift
  t0=$(date +%s)
  say "-- $name"
  "$@" || rc=$?
  say "   $name: $(( $(date +%s) - t0 )) s$([ $rc = 0 ] || echo ", FAILED (exit $rc)")"
  return $rc
}

cleanup() {
  local rc=$?
  set +e
  say "-- cleanup"
  # What compose made for the project (the driver's `down --volumes` may not have run).
  local project=label=com.docker.compose.project=animegamer-check
  docker ps -aq --filter "$project" 2>/dev/null | xargs -r docker rm -f >/dev/null 2>&1
  docker volume ls -q --filter "$project" 2>/dev/null | xargs -r docker volume rm >/dev/null 2>&1
  docker network ls -q --filter "$project" 2>/dev/null | xargs -r docker network rm >/dev/null 2>&1
  if [ -z "${COMPOSE_CHECK_KEEP_IMAGES:-}" ]; then
    # The bot image's build stage is left untagged: the untagged images made since the base.
    docker images -q -f dangling=true -f since="$BASE" 2>/dev/null | xargs -r docker image rm -f >/dev/null 2>&1
    docker image rm -f "animegamer-bot:$TAG" "animegamer-worker:$TAG" "$PG_IMAGE" "$BASE" >/dev/null 2>&1
  fi
  [ -n "$INDEX_PID" ] && kill "$INDEX_PID" 2>/dev/null
  if [ -n "$DOCKERD_PID" ] && [ -z "${COMPOSE_CHECK_KEEP_IMAGES:-}" ]; then
    kill "$DOCKERD_PID" 2>/dev/null
    for _ in $(seq 20); do kill -0 "$DOCKERD_PID" 2>/dev/null || break; sleep 1; done
  fi
  rm -rf "$WORK"
  say "total: $(( $(date +%s) - START )) s; $([ $rc = 0 ] && echo PASSED || echo "FAILED (exit $rc)")"
  exit $rc
}
trap cleanup EXIT

# --- the tools ---------------------------------------------------------------------------------
install_tools() {
  local missing=()
  command -v dockerd >/dev/null || missing+=(docker.io)
  command -v debootstrap >/dev/null || missing+=(debootstrap)
  command -v docker-compose >/dev/null || missing+=(docker-compose)
  [ ${#missing[@]} = 0 ] && return 0
  [ "$(id -u)" = 0 ] || cannot "${missing[*]} missing and not root (apt-get install needs root)"
  command -v apt-get >/dev/null || cannot "${missing[*]} missing and no apt-get"
  say "installing ${missing[*]}"
  apt-get update -qq >/dev/null || cannot "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null \
    || cannot "apt-get install ${missing[*]} failed"
}

start_dockerd() {
  if docker info >/dev/null 2>&1; then say "dockerd already runs"; else
    [ "$(id -u)" = 0 ] || cannot "no dockerd runs and starting one needs root"
    # Its default storage driver (overlay2). Never vfs: it copies every layer whole (tens of GB).
    # Under nice: the builds' RUN steps and the stack run in its containers, which inherit it.
    nice -n 10 dockerd >"$WORK/dockerd.log" 2>&1 &
    DOCKERD_PID=$!
    for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; kill -0 $DOCKERD_PID 2>/dev/null || break; sleep 1; done
    docker info >/dev/null 2>&1 || { tail -n 20 "$WORK/dockerd.log" >&2; DOCKERD_PID=""; cannot "dockerd did not start"; }
  fi
  local driver
  driver=$(docker info -f '{{.Driver}}')
  [ "$driver" = overlay2 ] || cannot "dockerd uses the $driver storage driver, not overlay2 (vfs would fill the disk)"
  say "dockerd $(docker version -f '{{.Server.Version}}'), storage driver $driver, $(docker-compose version --short 2>/dev/null | sed 's/^/docker-compose /')"
}

# --- base images from Debian's packages ------------------------------------------------------------
debian_mirror() {
  # The mirror apt uses here (deb822 .sources or a one-line sources.list).
  local m
  m=$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' | grep -v security | head -n1)
  [ -n "$m" ] || m=$(grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list | awk '{print $2}' | grep -v security | head -n1)
  echo "${m:-http://deb.debian.org/debian}"
}

build_base() {
  reuse "$BASE" && return 0
  # Debian bookworm with its python3 (3.11) and venv: what python:3.11-slim-bookworm gives the bot
  # image and what the worker image adds on top of its base itself (it installs ffmpeg).
  nice -n 10 debootstrap --variant=minbase --include=python3,python3-venv,python-is-python3,ca-certificates \
    bookworm "$WORK/rootfs" "$(debian_mirror)" >"$WORK/debootstrap.log" 2>&1 \
    || { tail -n 20 "$WORK/debootstrap.log" >&2; return 1; }
  rm -rf "$WORK/rootfs/var/lib/apt/lists/"* "$WORK/rootfs/var/cache/apt/"*.bin || return 1
  # The package registries are reached through a proxy whose CA this machine trusts; pip inside the
  # builds must trust it too, and find what lies only on this machine's disk (serve_index).
  cp /etc/ssl/certs/ca-certificates.crt "$WORK/rootfs/etc/ssl/certs/host-ca-bundle.crt" || return 1
  printf '[global]\nextra-index-url = http://127.0.0.1:%s/local/simple\n' "$INDEX_PORT" >"$WORK/rootfs/etc/pip.conf" || return 1
  local ca=/etc/ssl/certs/host-ca-bundle.crt
  tar -C "$WORK/rootfs" -c . | docker import \
    -c "ENV PIP_CERT=$ca SSL_CERT_FILE=$ca REQUESTS_CA_BUNDLE=$ca LANG=C.UTF-8" -c 'CMD ["bash"]' - "$BASE" >/dev/null \
    || return 1
  rm -rf "$WORK/rootfs"
}

serve_index() {
  # An index for TORCH_INDEX_URL with the CPU torch wheel pip finds on this machine (and torch's
  # dependencies), so that the worker image gets the small CPU build; and, as /local/simple, the
  # machine's local package index (pip's config here), for packages that lie only on its disk.
  mkdir -p "$WORK/index/torch" "$WORK/wheels" || return 1
  "$PYTHON" -m pip download -q --only-binary :all: -d "$WORK/wheels" -r requirements/torch.txt >"$WORK/pip.log" 2>&1 \
    || { tail -n 20 "$WORK/pip.log" >&2; return 1; }
  ls "$WORK/wheels" | grep -q '+cpu' || { say "pip found no CPU torch wheel here"; return 1; }
  local f name
  for f in "$WORK/wheels"/*.whl; do
    name=$(basename "$f" | cut -d- -f1 | tr '[:upper:]_.' '[:lower:]--')
    mkdir -p "$WORK/index/torch/$name" && mv "$f" "$WORK/index/torch/$name/" || return 1
  done
  local local_index
  local_index=$("$PYTHON" -m pip config list 2>/dev/null | sed -n "s/.*extra-index-url='file:\/\/\([^ ']*\).*/\1/p" | head -n1)
  [ -n "$local_index" ] && [ -d "$local_index" ] && ln -s "$(dirname "$local_index")" "$WORK/index/local"
  INDEX_PORT=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$PYTHON" -m http.server -b 127.0.0.1 -d "$WORK/index" "$INDEX_PORT" >"$WORK/index.log" 2>&1 &
  INDEX_PID=$!
  for _ in $(seq 20); do curl -sf "http://127.0.0.1:$INDEX_PORT/torch/" >/dev/null && return 0; sleep 0.5; done
  return 1
}

# --- the images ----------------------------------------------------------------------------------
# The legacy builder (DOCKER_BUILDKIT=0): BuildKit would fetch the `# syntax=docker/dockerfile:1`
# frontend image from Docker Hub. It reads the build context's .dockerignore (the repository's).
build_failed() { tail -n 30 "$WORK/build.log" >&2; return 1; }
build_bot() {
  reuse "animegamer-bot:$TAG" && return 0
  DOCKER_BUILDKIT=0 nice -n 10 docker build --network host -f docker/bot.Dockerfile \
    --build-arg PYTHON_IMAGE="$BASE" -t "animegamer-bot:$TAG" . >"$WORK/build.log" 2>&1 || build_failed
}
build_worker() {
  reuse "animegamer-worker:$TAG" && return 0
  DOCKER_BUILDKIT=0 nice -n 10 docker build --network host -f docker/worker.Dockerfile \
    --build-arg CUDA_IMAGE="$BASE" --build-arg TORCH_INDEX_URL="http://127.0.0.1:$INDEX_PORT/torch" \
    -t "animegamer-worker:$TAG" . >"$WORK/build.log" 2>&1 || build_failed
}
build_postgres() {
  reuse "$PG_IMAGE" && return 0
  DOCKER_BUILDKIT=0 nice -n 10 docker build --network host -f docker/check/postgres.Dockerfile \
    --build-arg BASE_IMAGE="$BASE" -t "$PG_IMAGE" . >"$WORK/build.log" 2>&1 || build_failed
}

# COMPOSE_CHECK_KEEP_IMAGES=1 also reuses the images a kept run left.
reuse() { [ -n "${COMPOSE_CHECK_KEEP_IMAGES:-}" ] && docker image inspect "$1" >/dev/null 2>&1 && say "   reusing $1"; }

step "tools (apt-get install when missing)" install_tools
step "dockerd" start_dockerd
step "local package index" serve_index
step "base image from Debian's packages (debootstrap)" build_base
step "postgres image (Debian's postgresql-15)" build_postgres
step "bot image (docker/bot.Dockerfile)" build_bot
step "worker image (docker/worker.Dockerfile)" build_worker
for image in "$BASE" "$PG_IMAGE" "animegamer-bot:$TAG" "animegamer-worker:$TAG"; do
  say "image $image: $(docker image inspect -f '{{.Size}}' "$image" | awk '{printf "%.0f MB", $1 / 1e6}')"
done
say "monitoring profile left out: prom/prometheus and grafana/grafana come only from Docker Hub, which is out of reach here (tests/deploy/test_monitoring_config.py checks their configuration with promtool)"

# The compose stack and a whole turn: tests/deploy/compose_check.py (the fake Discord runs here).
step "compose stack and a turn" "$PYTHON" -m tests.deploy.compose_check --project animegamer-check \
  --tag "$TAG" --postgres-image "$PG_IMAGE" --env-file "$WORK/check.env"
