"""A private PostgreSQL cluster for fault tests: initdb + pg_ctl on a free port, as an
unprivileged system user, so that tests can restart it, stop it for a while, or kill its
connections without ever touching the machine's shared server.

    with PgCluster() as pg:              # initdb (once per cluster) and start
        url = pg.create_database()       # postgresql://postgres@127.0.0.1:PORT/agfault_xxx
        pg.restart()                     # pg_ctl restart -m fast
        pg.stop(); ...; pg.start()       # an outage of any length
        pg.terminate_connections()       # pg_terminate_backend on every application connection

Run as root (initdb refuses root), the server runs as the system user `agpg` (created if
missing; override with ANIMEGAMER_TEST_PG_USER) through `runuser`. Binaries: the newest
/usr/lib/postgresql/*/bin, or ANIMEGAMER_TEST_PG_BIN.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import psycopg

PG_USER = os.environ.get("ANIMEGAMER_TEST_PG_USER", "agpg")


def pg_bin() -> Path:
    explicit = os.environ.get("ANIMEGAMER_TEST_PG_BIN")
    if explicit:
        return Path(explicit)
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit() else 0)
    if found:
        return Path(found[-1])
    on_path = shutil.which("pg_ctl")
    if on_path:
        return Path(on_path).parent
    raise RuntimeError("no PostgreSQL server binaries (initdb, pg_ctl): install postgresql or set ANIMEGAMER_TEST_PG_BIN")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ensure_user(name: str) -> None:
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)


class PgCluster:
    def __init__(self, *, max_connections: int = 100, log_name: str = "postgres.log") -> None:
        self.bin = pg_bin()
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="agpgcluster-"))
        self.data = self.root / "data"
        self.log = self.root / log_name
        self.max_connections = max_connections
        self.as_root = os.geteuid() == 0
        if self.as_root:
            _ensure_user(PG_USER)
            pw = pwd.getpwnam(PG_USER)
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
            self.root.chmod(0o700)

    # --- running the binaries as the cluster's owner

    def _run(self, *args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        cmd = [str(self.bin / args[0]), *args[1:]]
        if self.as_root:
            cmd = ["runuser", "-u", PG_USER, "--", *cmd]
        return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=timeout)

    def init(self) -> None:
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        with open(self.data / "postgresql.conf", "a") as f:
            f.write(
                f"\nport = {self.port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{self.root}'\n"
                f"max_connections = {self.max_connections}\nfsync = off\nsynchronous_commit = off\n"
                "full_page_writes = off\nshared_buffers = 32MB\n"
            )

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def restart(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-m", mode, "-w", "-t", "60", "restart")

    def running(self) -> bool:
        return self._run("pg_ctl", "-D", str(self.data), "status", check=False).returncode == 0

    # --- connections

    @property
    def admin_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def url_for(self, dbname: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def create_database(self, prefix: str = "agfault") -> str:
        name = f"{prefix}_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url_for(name)

    def terminate_connections(self) -> int:
        """pg_terminate_backend on every client connection but this one (57P01 for them)."""
        with psycopg.connect(self.admin_url, autocommit=True, connect_timeout=5) as conn:
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
            ).fetchall()
        return sum(1 for (ok,) in rows if ok)

    def wait_ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.admin_url, connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)  # sleep: poll interval until the server accepts connections

    # --- lifetime

    def __enter__(self) -> PgCluster:
        self.init()
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.destroy()

    def destroy(self) -> None:
        with contextlib.suppress(Exception):
            if self.data.exists():
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "-t", "30", "stop", check=False)
        shutil.rmtree(self.root, ignore_errors=True)
