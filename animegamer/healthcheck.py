"""`animegamer healthcheck bot|worker`: the probe the compose file's healthchecks run.

It asks the bot's or the worker's /healthz on this machine (the port and host of the settings
that process reads) and exits 0 when it answers 200, 1 otherwise, printing the answer or why there
was none, so `docker compose ps` and `docker inspect` show the cause.
"""

from __future__ import annotations

import sys
import urllib.error
import urllib.request

# Which setting holds each part's port (both serve on ANIMEGAMER_METRICS_HOST).
PORTS = {"bot": "bot_health_port", "worker": "metrics_port"}


def register(sub) -> None:
    p = sub.add_parser("healthcheck", help="probe this machine's bot or worker /healthz (exit 0: healthy)")
    p.add_argument("part", choices=sorted(PORTS))
    p.add_argument("--timeout", type=float, default=4.0, help="seconds to wait for the answer (default 4)")
    p.set_defaults(func=run)


def run(args) -> int:
    from settings import load_settings

    settings = load_settings()
    field = PORTS[args.part]
    port = getattr(settings, field)
    if not port:
        print(f"the {args.part}'s /healthz is off (ANIMEGAMER_{field.upper()}=0)", file=sys.stderr)
        return 1
    host = settings.metrics_host
    if host in ("", "0.0.0.0", "::"):  # listening on every address: ask over loopback
        host = "127.0.0.1"
    url = f"http://{host}:{port}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=args.timeout) as r:
            print(f"{url}: {r.status} {r.read().decode(errors='replace')}")
            return 0
    except urllib.error.HTTPError as e:  # 503: up, but waiting for the database, Discord or a model
        print(f"{url}: {e.code} {e.read().decode(errors='replace')}", file=sys.stderr)
    except (urllib.error.URLError, OSError) as e:
        print(f"{url}: no answer ({getattr(e, 'reason', e)})", file=sys.stderr)
    return 1
