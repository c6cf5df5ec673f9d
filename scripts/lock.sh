#!/usr/bin/env bash
# Refresh the locked requirements from pyproject.toml with uv:
#   requirements/test.txt    the project with its `models`, `film` and `test` extras (scripts/setup.sh, CI)
#   requirements/models.txt  with its `models` extra (docker/worker.Dockerfile)
#   requirements/bot.txt     without extras (docker/bot.Dockerfile)
# The smaller locks are constrained by test.txt, so every lock pins the same versions. torch is
# left out of them (requirements/torch.txt installs it first; see requirements/uv.toml).
# Usage: bash scripts/lock.sh                 keep the locked versions that still fit pyproject.toml
#        bash scripts/lock.sh --upgrade       move everything to the newest versions allowed
#        bash scripts/lock.sh --upgrade-package NAME
set -euo pipefail
cd "$(dirname "$0")/.."
UV_VERSION=0.13.9
UV=${UV:-}
if [ -z "$UV" ]; then
  UV=.venv/bin/uv
  [ -x "$UV" ] || { [ -x .venv/bin/python ] || python3 -m venv .venv; .venv/bin/python -m pip install -q "uv==$UV_VERSION"; }
fi
common=(--config-file requirements/uv.toml --universal --python-version 3.11 -c requirements/torch.txt
        --no-emit-package torch --custom-compile-command "bash scripts/lock.sh" --quiet)
"$UV" pip compile pyproject.toml --extra models --extra film --extra test "${common[@]}" "$@" -o requirements/test.txt
"$UV" pip compile pyproject.toml --extra models -c requirements/test.txt "${common[@]}" -o requirements/models.txt
"$UV" pip compile pyproject.toml -c requirements/test.txt "${common[@]}" -o requirements/bot.txt
echo "locked: requirements/test.txt requirements/models.txt requirements/bot.txt"
