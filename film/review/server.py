"""`animegamer film review DIR`: the review page's aiohttp application and the server around it.

| method | path | what |
| --- | --- | --- |
| GET | `/` | the page |
| GET | `/api/state` | the folder, the film, the cast (with reference images), the vocabulary, the counts |
| GET | `/api/clips?status=&character=&level=&offset=&limit=` | a page of the clips a filter shows, its total, the counts |
| GET | `/api/clips/{id}` | one clip |
| POST | `/api/clips/{id}` | an edit `{field: value, ...}`: 200 `{clip, counts, games}` once saved, 400 with `problems` |
| GET | `/media/{path}` | a clip's MP4 (byte ranges), its stills, the cast's references: only those, only inside the folder |

Filters: `status` one of film.manifest.STATUSES, `character` a cast id or `-` (none yet), `level` 1-5.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

from aiohttp import web

from film.cast import CastError
from film.manifest import LEVELS, STATUSES, TEXT_FIELDS, Clip
from film.review.errors import ApiError, errors_middleware
from film.review.guard import BOUND_HOST, same_origin_middleware, security_headers, token_middleware
from film.review.store import MEDIA_TYPES, EditRefused, Folder
from localweb.guard import ACCESS_TOKEN, TOKEN_PARAM, needs_token, new_token

log = logging.getLogger(__name__)

STATIC = Path(__file__).resolve().parent / "static"
FOLDER = web.AppKey("folder", Folder)
SAVING = web.AppKey("saving", asyncio.Lock)  # one edit at a time: each rewrites the manifest
PAGE_SIZE = 100
MAX_PAGE = 500
MAX_BODY = 16 * 1024
NO_CHARACTER = "-"  # the character filter for clips without one (no cast id starts with '-')

routes = web.RouteTableDef()


def media_url(path: str | None) -> str | None:
    return None if path is None else "/media/" + quote(path)


def clip_json(folder: Folder, clip: Clip) -> dict[str, Any]:
    data = json.loads(clip.to_json())
    data["media"] = {"clip": media_url(clip.clip), "stills": [media_url(s) for s in clip.stills],
                     "reference": media_url(folder.reference(clip.character))}
    return data


def _bad(message: str) -> ApiError:
    return ApiError(400, "bad_request", message)


def _filters(query: Any, folder: Folder) -> dict[str, Any]:
    status = query.get("status") or None
    if status is not None and status not in STATUSES:
        raise _bad(f"status: {status!r} is not one of {', '.join(STATUSES)}")
    character = query.get("character") or None
    if character == NO_CHARACTER:
        character = ""
    elif character is not None and character not in folder.cast.ids:
        raise _bad(f"character: {character!r} is not in the cast")
    level = query.get("level") or None
    if level is not None:
        if level not in {str(n) for n in LEVELS}:
            raise _bad(f"level: {level!r} is not a level 1-5")
        level = int(level)
    return {"status": status, "character": character, "level": level}


def _count(query: Any, name: str, default: int, most: int) -> int:
    raw = query.get(name)
    if raw is None:
        return default
    if not raw.isascii() or not raw.isdigit() or len(raw) > 9 or int(raw) > most:
        raise _bad(f"{name}: a whole number from 0 to {most}")
    return int(raw)


def _clip(request: web.Request) -> Clip:
    clip = request.app[FOLDER].clips.get(request.match_info["clip_id"])
    if clip is None:
        raise ApiError(404, "not_found", "There is no such clip.")
    return clip


@routes.get("/")
async def index(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})


@routes.get("/api/state")
async def state(request: web.Request) -> web.Response:
    folder = request.app[FOLDER]
    cast = [{"id": m.id, "name": m.name, "reference": media_url(folder.reference(m.id))} for m in folder.cast.members]
    return web.json_response({
        "folder": folder.path.name, "film": folder.film, "film_suggestions": bool(folder.suggestions), "cast": cast,
        "vocabulary": folder.vocabulary(), "counts": folder.counts(), "statuses": list(STATUSES),
        "text_max": TEXT_FIELDS, "page_size": PAGE_SIZE,
    })


@routes.get("/api/clips")
async def clips(request: web.Request) -> web.Response:
    folder = request.app[FOLDER]
    chosen = folder.select(**_filters(request.query, folder))
    offset = _count(request.query, "offset", 0, 10**9)
    limit = _count(request.query, "limit", PAGE_SIZE, MAX_PAGE)
    return web.json_response({"total": len(chosen), "offset": offset,
                              "clips": [clip_json(folder, c) for c in chosen[offset:offset + limit]],
                              "counts": folder.counts()})


@routes.get("/api/clips/{clip_id}")
async def one_clip(request: web.Request) -> web.Response:
    return web.json_response({"clip": clip_json(request.app[FOLDER], _clip(request))})


@routes.post("/api/clips/{clip_id}")
async def edit(request: web.Request) -> web.Response:
    folder = request.app[FOLDER]
    clip = _clip(request)
    if request.content_type != "application/json":
        raise ApiError(415, "unsupported_media_type", "An edit is a JSON object sent as application/json.")
    try:
        changes = json.loads(await request.text())
    except (ValueError, UnicodeDecodeError):
        raise _bad("An edit is a JSON object, e.g. {\"status\": \"accepted\"}.") from None
    if not isinstance(changes, dict):
        raise _bad("An edit is a JSON object, e.g. {\"status\": \"accepted\"}.")
    async with request.app[SAVING]:
        try:
            # fsync and rewrites block: off the loop, one edit at a time
            saved, games = await asyncio.to_thread(folder.save, clip.id, changes)
        except EditRefused as e:
            raise ApiError(400, "invalid", "; ".join(p["message"] for p in e.problems), e.problems) from None
    return web.json_response({"clip": clip_json(folder, saved), "counts": folder.counts(), "games": games})


@routes.get("/media/{path:.+}")
async def media(request: web.Request) -> web.FileResponse:
    path = request.app[FOLDER].media.get(request.match_info["path"])
    if path is None or not path.is_file():
        raise ApiError(404, "not_found", "There is no such file in this folder's clips, stills or references.")
    return web.FileResponse(path, headers={"Content-Type": MEDIA_TYPES[path.suffix.lower()],
                                           "Cache-Control": "private, max-age=3600"})


def make_app(folder: Path, token: str | None, *, host: str = "127.0.0.1") -> web.Application:
    """The review page over `folder`, bound (or as if bound) to `host`; token: what every request
    must carry, required beyond loopback. Raises FileNotFoundError, CastError, ValueError for a
    folder that cannot be reviewed."""
    if token is None and needs_token(host):
        raise ValueError(f"the review page bound to {host} would be open to the network: give it a token")
    app = web.Application(middlewares=[errors_middleware, same_origin_middleware, token_middleware],
                          client_max_size=MAX_BODY)
    app[FOLDER] = Folder(folder)
    app[SAVING] = asyncio.Lock()
    app[BOUND_HOST] = host
    if token is not None:
        app[ACCESS_TOKEN] = token
    app.on_response_prepare.append(security_headers)
    app.router.add_routes(routes)
    app.router.add_static("/static/", STATIC, append_version=False)
    return app


def page_url(host: str, port: int, token: str | None) -> str:
    name = f"[{host}]" if ":" in host else host
    return f"http://{name}:{port}/" + (f"?{TOKEN_PARAM}={quote(token)}" if token else "")


async def _serve(app: web.Application, host: str, port: int, token: str | None) -> None:
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=2)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound = runner.addresses[0][1] if runner.addresses else port  # the port chosen for --port 0
        print(f"AnimeGamer review page: {page_url(host, bound, token)}", flush=True)
        if host in ("0.0.0.0", "::"):
            print(f"(from another machine, put this machine's address in place of {host})", flush=True)
        print("Edits are saved as you make them (review.jsonl, then manifest.jsonl). Ctrl-C stops.", flush=True)
        stop = asyncio.Event()
        with contextlib.suppress(NotImplementedError):  # SIGTERM stops it as Ctrl-C does (no platform lacks it here)
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()
    finally:
        await runner.cleanup()


def serve(folder: Path, host: str, port: int, token: str | None) -> int:
    """Serve the review page until Ctrl-C; returns the exit status (2: it cannot start)."""
    if token is None and needs_token(host):
        print(f"animegamer film review: refusing to serve {folder} on {host} without a token: anyone on the "
              f"network could change the review. Bind 127.0.0.1 (the default), or give a token, e.g. "
              f"--token {new_token()}", file=sys.stderr)
        return 2
    try:
        app = make_app(folder, token, host=host)
    except (OSError, CastError, ValueError) as e:
        print(f"animegamer film review: {e}", file=sys.stderr)
        return 2
    try:
        asyncio.run(_serve(app, host, port, token))
    except KeyboardInterrupt:
        return 0
    except OSError as e:  # the port is taken, the address is not this machine's
        print(f"animegamer film review: cannot listen on {host}:{port}: {e.strerror or e}", file=sys.stderr)
        return 1
    return 0
