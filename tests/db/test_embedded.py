"""With DATABASE_URL unset the app starts an embedded Postgres under the data directory;
with it set, it uses that server. Both through the real `animegamer db` command."""

from __future__ import annotations

import os
import subprocess
import sys

import psycopg

from testkit.pg import fresh_database


def _cli(*args, env):
    return subprocess.run(
        [sys.executable, "-m", "animegamer.cli", *args], env=env, capture_output=True, text=True, timeout=180
    )


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANIMEGAMER_") and k != "DATABASE_URL"}
    env.update(extra)
    return env


def test_embedded_database_is_started_and_migrated(embedded_data_dir):
    data = embedded_data_dir
    env = _env(ANIMEGAMER_DATA_DIR=str(data))
    out = _cli("db", "upgrade", env=env)
    assert out.returncode == 0, out.stderr
    assert "database revision: " in out.stdout and "empty" not in out.stdout
    assert (data / "pg" / "PG_VERSION").is_file()
    # A second start finds the same data (the server was stopped by the first process).
    out2 = _cli("db", "current", env=env)
    assert out2.returncode == 0, out2.stderr
    assert out.stdout.splitlines()[-1] == out2.stdout.splitlines()[-1]


def test_configured_server_is_used(tmp_path):
    with fresh_database("agcli") as url:
        env = _env(DATABASE_URL=url, ANIMEGAMER_DATA_DIR=str(tmp_path / "unused"))
        out = _cli("db", "upgrade", env=env)
        assert out.returncode == 0, out.stderr
        assert not (tmp_path / "unused" / "pg").exists()
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT count(*) FROM game_sessions").fetchone() == (0,)


def test_bad_settings_exit_with_a_named_error(tmp_path):
    out = _cli("db", "current", env=_env(ANIMEGAMER_BACKLOG_CAP="many", ANIMEGAMER_DATA_DIR=str(tmp_path)))
    assert out.returncode == 2
    assert "ANIMEGAMER_BACKLOG_CAP" in out.stderr
