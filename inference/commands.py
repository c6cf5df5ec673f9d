"""The `animegamer worker` subcommand."""

from __future__ import annotations

import asyncio
import sys

from inference.backends import BACKENDS


def register(sub) -> None:
    p = sub.add_parser("worker", help="run a GPU (or preview) worker that generates turns")
    p.add_argument("--film", action="append", dest="films", metavar="FILM[,FILM...]|all",
                   help="serve these films' queues (repeatable or comma-separated; `all`: every film of the catalogue). "
                        "A model worker loads Mistral once and each film as an adapter. Default: every film for the "
                        "preview, ANIMEGAMER_DEFAULT_FILM for the model")
    p.add_argument("--backend", choices=BACKENDS, default=None, help="default: ANIMEGAMER_BACKEND (preview)")
    p.add_argument("--concurrency", type=int, default=1, help="turns generated at once (default 1)")
    p.add_argument("--metrics-port", type=int, default=None,
                   help="Prometheus /metrics and /healthz port (default ANIMEGAMER_METRICS_PORT; 0 = off, -1 = any free port)")
    p.add_argument("--grace", type=float, default=30.0,
                   help="seconds a stopping worker waits for its turns before releasing them (default 30)")
    p.add_argument("--progress-interval", type=float, default=1.0, help="seconds between stored progress updates")
    p.add_argument("--no-migrate", action="store_true", help="do not apply database migrations at start")
    p.add_argument("--no-render", action="store_true", help="preview: skip drawing and encoding the clip (benchmarks)")
    p.add_argument("--preview-delay", type=float, default=0.0, help="preview: seconds each turn takes (tests)")
    p.add_argument("--preview-size", default=None, metavar="WxH", help="preview: frame size (default 720x480)")
    p.set_defaults(func=run_worker_command)


def run_worker_command(args) -> int:
    from asyncpg import PostgresError
    from sqlalchemy.exc import DBAPIError

    from db.transient import is_transient
    from game.catalogue import film_selection
    from game.catalogue import load_checked_settings as load_settings
    from game.errors import UnknownFilm
    from inference.backends import BackendUnavailable
    from inference.worker import Worker, WorkerStartError

    settings = load_settings()
    try:
        films = film_selection(args.films)
    except UnknownFilm as e:
        print(f"animegamer worker: {e.message}", file=sys.stderr)
        return 2
    backend = args.backend or settings.backend
    options = {}
    if backend == "preview":
        options = {"render": not args.no_render, "delay": args.preview_delay}
        if args.preview_size:
            w, _, h = args.preview_size.partition("x")
            options.update(width=int(w), height=int(h))
    try:
        worker = Worker(
            settings, films=films, backend=backend, backend_options=options, concurrency=args.concurrency,
            metrics_port=args.metrics_port, grace=args.grace, progress_interval=args.progress_interval,
            migrate=not args.no_migrate,
        )
        asyncio.run(worker.run())
    except (WorkerStartError, BackendUnavailable) as e:
        print(f"animegamer worker: {e}", file=sys.stderr)
        return 2
    except (DBAPIError, PostgresError, OSError) as e:
        # PostgresError: older SQLAlchemy releases let asyncpg's connect errors through unwrapped
        # (no such database, wrong password).
        if isinstance(e, (DBAPIError, PostgresError)) or is_transient(e):
            print(f"animegamer worker: cannot use the database ({type(e).__name__}: {e}); check DATABASE_URL", file=sys.stderr)
        else:  # a model file, a folder or a program: named as what it is, with its path
            print(f"animegamer worker: cannot start: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    return 0
