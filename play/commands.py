"""The `animegamer play` subcommand."""

from __future__ import annotations

import errno
import sys


def register(sub) -> None:
    p = sub.add_parser("play", help="play in a local web page: no Discord, no GPU, no database server needed")
    p.add_argument("--host", default=None, help="address to serve on (default ANIMEGAMER_PLAY_HOST, 127.0.0.1)")
    p.add_argument("--port", type=int, default=None, help="port (default ANIMEGAMER_PLAY_PORT, 8080; 0 = any free port)")
    p.add_argument("--no-worker", action="store_true", help="start no worker (turns wait for workers run elsewhere)")
    p.add_argument("--preview-size", default=None, metavar="WxH", help="preview clips' frame size (default 720x480)")
    p.add_argument("--preview-delay", type=float, default=None, help="seconds each preview turn takes (demos, tests)")
    p.set_defaults(func=run_play_command)


def run_play_command(args) -> int:
    from game.catalogue import load_checked_settings as load_settings
    from play.runner import PlayOptions, run

    settings = load_settings()
    worker_args: list[str] = []
    if settings.backend == "preview":
        if args.preview_size:
            worker_args += ["--preview-size", args.preview_size]
        if args.preview_delay is not None:
            worker_args += ["--preview-delay", str(args.preview_delay)]
    options = PlayOptions(
        host=args.host or settings.play_host,
        port=settings.play_port if args.port is None else args.port,
        worker=not args.no_worker,
        worker_args=worker_args,
    )
    try:
        return run(settings, options)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            print(f"animegamer play: {options.host}:{options.port} is in use; choose another port with "
                  "--port or ANIMEGAMER_PLAY_PORT.", file=sys.stderr)
            return 2
        raise
