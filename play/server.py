"""The play page's web server: a JSON API over the same game services the Discord bot uses,
live updates as server-sent events, the clips, and the static page.

The page is one game channel (PLAY_CHANNEL_ID) of one local guild. Each browser tab is a player,
known by a random id it keeps in sessionStorage; whoever opens the page on this machine may also
act as the guild's admin and moderator (choose the film and cast, pause, reset, cancel turns).
Refusals are the game's own GameError / InputRefused messages, so they read as in Discord.
"""

from __future__ import annotations

import asyncio
import logging
import re
import unicodedata
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from db.runtime import Database
from db.transient import classify, is_transient
from settings import Settings
from db import guilds, sessions, turns
from db.models import GameSession, Turn
from game.catalogue import FILMS, suggest
from game.errors import GameError, NoFilm, NotJoined, ServiceDown, UnknownCharacter
from game.instruction import build_instruction
from game.sanitize import InputRefused
from game.states import STATE_NAMES
from inference import queue as jobs
from play.events import EventHub, sse_frame

log = logging.getLogger(__name__)

# Discord snowflakes are far above these, so the page never meets a real guild's rows.
PLAY_GUILD_ID = 1
PLAY_CHANNEL_ID = 1
PLAY_ADMIN_ID = 0  # who "created" a session from the page

STATIC = Path(__file__).resolve().parent / "static"
MAX_PLAYER_ID = 2**53 - 1  # a JS number stays exact
NAME_MAX = 32


@dataclass
class PlayServices:
    settings: Settings
    db: Database
    hub: EventHub
    use_queue: bool = True  # False: turns are stored but no job is deferred (tests of the API alone)
    backend: str = "preview"
    # Told the film after an admin changes it (a model worker serves one film's queue).
    on_film: Callable[[str], Awaitable[None]] | None = None

    @property
    def enqueue(self) -> turns.Enqueue | None:
        return jobs.make_enqueue() if self.use_queue else None


SERVICES = web.AppKey("services", PlayServices)


class BadRequest(Exception):
    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field


# --- helpers


def _json_error(status: int, code: str, message: str, field: str | None = None) -> web.Response:
    body = {"error": code, "message": message}
    if field:
        body["field"] = field
    return web.json_response(body, status=status)


@web.middleware
async def errors_middleware(request: web.Request, handler):
    try:
        return await handler(request)
    except GameError as e:
        return _json_error(409, e.code, e.message)
    except InputRefused as e:
        return _json_error(400, "input_refused", str(e), e.field_name)
    except BadRequest as e:
        return _json_error(400, "bad_request", e.message, e.field)
    except Exception as e:
        if not is_transient(e):  # a bug: aiohttp answers 500 and logs it
            raise
        # The database went away for a moment (restart, killed connection...): "try again".
        log.warning("%s %s: database unavailable (%s): %s", request.method, request.path, classify(e), e)
        down = ServiceDown()
        return _json_error(503, down.code, down.message)


async def _body(request: web.Request) -> dict:
    try:
        data = await request.json()
    except ValueError:
        raise BadRequest("The request body must be JSON.") from None
    if not isinstance(data, dict):
        raise BadRequest("The request body must be a JSON object.")
    return data


def _player_id(value) -> int:
    try:
        pid = int(value)
    except (TypeError, ValueError):
        raise BadRequest("Missing or invalid player id; reload the page.", "player_id") from None
    if not 1 <= pid <= MAX_PLAYER_ID:
        raise BadRequest("Missing or invalid player id; reload the page.", "player_id")
    return pid


def _str(data: dict, key: str) -> str:
    v = data.get(key, "")
    if v is None:
        return ""
    if not isinstance(v, str):
        raise BadRequest(f"{key} must be text.", key)
    return v


_SPACES = re.compile(r"\s+")


def clean_name(raw: str) -> str:
    """A player's display name. It never reaches the model (the instruction names characters),
    so it keeps any printable text; the page shows it as text, never as markup."""
    s = "".join(ch for ch in unicodedata.normalize("NFKC", raw) if unicodedata.category(ch)[0] != "C" or ch.isspace())
    s = _SPACES.sub(" ", s).strip()
    if not s:
        raise InputRefused("name", "is empty; please type something")
    if len(s) > NAME_MAX:
        raise InputRefused("name", f"is too long ({len(s)} characters; at most {NAME_MAX})")
    return s


def _svc(request: web.Request) -> PlayServices:
    return request.app[SERVICES]


async def _config(s: AsyncSession, svc: PlayServices) -> guilds.ChannelConfig:
    return await guilds.channel_config(s, svc.settings, PLAY_GUILD_ID, PLAY_CHANNEL_ID)


async def ensure_film(svc: PlayServices) -> str:
    """The page's guild gets the default film the first time, so there is always a cast.
    Returns the film being played (the live session's, else the configured one)."""
    async with svc.db.sessions() as s, s.begin():
        cfg = await _config(s, svc)
        film_id = cfg.film.id if cfg.film else None
        if film_id is None:
            film_id = (await guilds.set_film(s, PLAY_GUILD_ID, svc.settings.default_film)).id
        gs = await sessions.live_session(s, PLAY_CHANNEL_ID)
        return gs.film_id if gs is not None else film_id


# --- JSON shapes


def turn_json(t: Turn, names: dict[str, str], position: int | None = None) -> dict:
    pred = None
    if t.status == "done" and t.motion_level is not None:
        pred = {"motion_level": t.motion_level, "social": t.delta_social,
                "entertainment": t.delta_entertainment, "stamina": t.delta_stamina}
    has_video = t.status == "done" and t.mp4_size is not None and t.blobs_pruned_at is None
    return {
        "id": t.id,
        "session_id": t.session_id,
        "seq": t.seq,
        "author_id": str(t.author_id),
        "author_name": t.author_name,
        "characters": [{"id": c, "name": names.get(c, c)} for c in t.characters],
        "instruction": t.instruction,
        "status": t.status,
        "progress": t.progress,
        "stage": t.progress_stage,
        "position": position,
        "error": t.error,
        "backend": t.backend,
        "is_preview": t.is_preview,
        "prediction": pred,
        "motion_scope": t.motion_scope,
        "states_before": t.states_before,
        "states_after": t.states_after,
        # The seed changes when a turn is regenerated, so the URL does too (no stale cache).
        "video": f"/api/turns/{t.id}/video.mp4?v={t.seed}" if has_video else None,
        "video_pruned": t.status == "done" and t.blobs_pruned_at is not None,
        "timings": t.timings,
        "created_at": t.created_at.isoformat() if t.created_at else None,
        "finished_at": t.finished_at.isoformat() if t.finished_at else None,
    }


async def _position(svc: PlayServices, s: AsyncSession, t: Turn) -> int | None:
    if t.status != "queued" or not svc.use_queue:
        return None
    return await jobs.queue_position(s, t)


async def _turns_json(svc: PlayServices, s: AsyncSession, rows: list[Turn], gs: GameSession | None) -> list[dict]:
    names = _names(gs.film_id if gs else None)
    return [turn_json(t, names, await _position(svc, s, t)) for t in rows]


def _names(film_id: str | None) -> dict[str, str]:
    film = FILMS.get(film_id) if film_id else None
    return {c.id: c.name for c in film.characters} if film else {}


def _cast(cfg: guilds.ChannelConfig, film) -> list:
    """The playable characters of the session's film (the configured cast, when it is that film)."""
    return cfg.cast() if cfg.film is not None and cfg.film.id == film.id else list(film.characters)


def _film_json(film) -> dict:
    return {
        "id": film.id,
        "title": film.title,
        "characters": [{"id": c.id, "name": c.name} for c in film.characters],
    }


# --- handlers: reading


async def index(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})


async def get_state(request: web.Request) -> web.Response:
    """Everything the page shows besides the log: film, cast, session, players, bars."""
    svc = _svc(request)
    me = request.query.get("player")
    me_id = _player_id(me) if me else None
    async with svc.db.sessions() as s:
        cfg = await _config(s, svc)
        gs = await sessions.live_session(s, PLAY_CHANNEL_ID)
        players, states, pending = [], {}, []
        if gs is not None:
            players = await sessions.players(s, gs.id)
            states = await sessions.states(s, gs.id)
            pending = await turns.pending_turns(s, gs.id)
        film = FILMS.get(gs.film_id) if gs else cfg.film
        names = _names(film.id if film else None)
        mine = next((p for p in players if me_id is not None and p.user_id == me_id), None)
        return web.json_response({
            "films": [_film_json(f) for f in FILMS.values()],
            "config": {
                "film": cfg.film.id if cfg.film else None,
                "playable": [c.id for c in cfg.cast()],
            },
            "film": _film_json(film) if film else None,
            "options": {
                "motions": list(film.motions), "adverbs": list(film.adverbs),
                "backgrounds": list(film.backgrounds), "times": list(film.times),
            } if film else None,
            "session": None if gs is None else {
                "id": gs.id, "status": gs.status, "paused_reason": gs.paused_reason, "film": gs.film_id,
                "next_seq": gs.next_seq,
            },
            "players": [
                {"user_id": str(p.user_id), "name": p.user_name, "character": p.character_id,
                 "character_name": names.get(p.character_id, p.character_id)}
                for p in players
            ],
            "me": None if mine is None else {"name": mine.user_name, "character": mine.character_id},
            "states": {
                cid: {"name": names.get(cid, cid), **st.as_dict()}
                for cid, st in states.items() if cid in names
            },
            "state_names": list(STATE_NAMES),
            "pending": [t.id for t in pending],
            "limits": {
                "max_instruction_len": cfg.limits.max_instruction_len,
                "cooldown_seconds": cfg.limits.cooldown_seconds,
                "backlog_cap": cfg.limits.backlog_cap,
            },
            "backend": svc.backend,
        })


async def list_turns(request: web.Request) -> web.Response:
    """The live session's turns, newest page first: `before` (a seq) pages back in history;
    `pending=1` gives the queued and running ones (to refresh their places)."""
    svc = _svc(request)
    try:
        limit = max(1, min(50, int(request.query.get("limit") or 20)))
    except ValueError:
        raise BadRequest("limit must be a number.") from None
    before = request.query.get("before")
    async with svc.db.sessions() as s:
        gs = await sessions.live_session(s, PLAY_CHANNEL_ID)
        if gs is None:
            return web.json_response({"session_id": None, "turns": [], "more": False})
        if request.query.get("pending"):
            rows = await turns.pending_turns(s, gs.id)
            more = False
        else:
            q = select(Turn).where(Turn.session_id == gs.id)
            if before:
                try:
                    q = q.where(Turn.seq < int(before))
                except ValueError:
                    raise BadRequest("before must be a turn number.") from None
            rows = list((await s.scalars(q.order_by(Turn.seq.desc()).limit(limit + 1))).all())
            more = len(rows) > limit
            rows = list(reversed(rows[:limit]))
        return web.json_response({"session_id": gs.id, "turns": await _turns_json(svc, s, rows, gs), "more": more})


async def _turn_in_play(s: AsyncSession, turn_id: str) -> tuple[Turn, GameSession]:
    try:
        tid = int(turn_id)
    except ValueError:
        raise web.HTTPNotFound() from None
    t = await turns.get_turn(s, tid)
    if t is None:
        raise web.HTTPNotFound()
    gs = await s.get(GameSession, t.session_id)
    if gs is None or gs.channel_id != PLAY_CHANNEL_ID:  # a Discord guild's turn: not ours to show
        raise web.HTTPNotFound()
    return t, gs


async def get_turn(request: web.Request) -> web.Response:
    svc = _svc(request)
    async with svc.db.sessions() as s:
        t, gs = await _turn_in_play(s, request.match_info["turn_id"])
        return web.json_response((await _turns_json(svc, s, [t], gs))[0])


_RANGE = re.compile(r"bytes=(\d*)-(\d*)$")


async def get_video(request: web.Request) -> web.Response:
    """The clip, with byte ranges (media elements ask for them to seek)."""
    svc = _svc(request)
    async with svc.db.sessions() as s:
        t, _ = await _turn_in_play(s, request.match_info["turn_id"])
        full = await turns.get_turn(s, t.id, blobs=True)
        data = full.mp4 if full is not None else None
    if not data:
        raise web.HTTPNotFound(text="This turn has no clip (not finished, or pruned).")
    headers = {"Accept-Ranges": "bytes", "Cache-Control": "private, max-age=3600"}
    m = _RANGE.match(request.headers.get("Range", ""))
    if m and (m.group(1) or m.group(2)):
        size = len(data)
        if m.group(1):
            start = int(m.group(1))
            end = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
        else:  # the last N bytes
            start, end = max(0, size - int(m.group(2))), size - 1
        if start >= size or start > end:
            raise web.HTTPRequestRangeNotSatisfiable(headers={"Content-Range": f"bytes */{size}"})
        headers["Content-Range"] = f"bytes {start}-{end}/{size}"
        return web.Response(status=206, body=data[start:end + 1], content_type="video/mp4", headers=headers)
    return web.Response(body=data, content_type="video/mp4", headers=headers)


async def get_suggestions(request: web.Request) -> web.Response:
    """Autocomplete, exactly as /act offers it."""
    svc = _svc(request)
    field = request.query.get("field", "")
    fields = {"motion": "motions", "adverb": "adverbs", "background": "backgrounds", "time_of_day": "times"}
    if field not in fields:
        raise BadRequest(f"field must be one of {', '.join(fields)}.", "field")
    async with svc.db.sessions() as s:
        gs = await sessions.live_session(s, PLAY_CHANNEL_ID)
        film = FILMS.get(gs.film_id) if gs else (await _config(s, svc)).film
    options = getattr(film, fields[field]) if film else ()
    return web.json_response(suggest(options, request.query.get("q", "")))


async def events(request: web.Request) -> web.StreamResponse:
    """Server-sent events: every NOTIFY of this channel, as JSON."""
    svc = _svc(request)
    resp = web.StreamResponse(headers={
        "Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no",
    })
    await resp.prepare(request)
    sub = svc.hub.subscribe()
    try:
        await resp.write(b"retry: 1000\n\n" + sse_frame({"type": "hello"}))
        while True:
            try:
                event = await asyncio.wait_for(sub.queue.get(), timeout=15)
            except asyncio.TimeoutError:
                await resp.write(b": keep-alive\n\n")
                continue
            if event is None:  # the server is stopping
                break
            await resp.write(sse_frame(event))
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    finally:
        svc.hub.unsubscribe(sub)
    return resp


# --- handlers: acting


async def post_film(request: web.Request) -> web.Response:
    """Admin: choose the film. A game in progress with another film is reset into the new one;
    its players leave, since the cast changes."""
    svc = _svc(request)
    data = await _body(request)
    film_id = _str(data, "film")
    async with svc.db.sessions() as s, s.begin():
        film = await guilds.set_film(s, PLAY_GUILD_ID, film_id)
        gs = await sessions.live_session(s, PLAY_CHANNEL_ID, lock=True)
        if gs is not None and gs.film_id != film.id:
            fresh = await sessions.reset(s, gs, by=PLAY_ADMIN_ID)
            for p in await sessions.players(s, fresh.id):
                await sessions.leave(s, fresh, p.user_id)
            fresh.film_id = film.id
            await s.flush()
            if svc.use_queue:
                await jobs.cancel_stale_jobs(s, gs.id)
    if svc.on_film is not None:
        await svc.on_film(film.id)
    return web.json_response({"ok": True, "film": film.id})


async def post_cast(request: web.Request) -> web.Response:
    """Admin: enable or disable a playable character."""
    svc = _svc(request)
    data = await _body(request)
    async with svc.db.sessions() as s, s.begin():
        playable = await guilds.set_character_enabled(
            s, svc.settings, PLAY_GUILD_ID, PLAY_CHANNEL_ID, _str(data, "character"), bool(data.get("enabled"))
        )
    return web.json_response({"ok": True, "playable": sorted(playable)})


async def post_start(request: web.Request) -> web.Response:
    svc = _svc(request)
    async with svc.db.sessions() as s, s.begin():
        cfg = await _config(s, svc)
        if cfg.film is None:
            raise NoFilm()
        gs = await sessions.start_session(s, PLAY_GUILD_ID, PLAY_CHANNEL_ID, cfg.film, created_by=PLAY_ADMIN_ID)
    return web.json_response({"ok": True, "session_id": gs.id})


async def post_join(request: web.Request) -> web.Response:
    svc = _svc(request)
    data = await _body(request)
    pid = _player_id(data.get("player_id"))
    name = clean_name(_str(data, "name"))
    character = _str(data, "character")
    async with svc.db.sessions() as s, s.begin():
        cfg = await _config(s, svc)
        gs = await sessions.require_session(s, PLAY_CHANNEL_ID)
        film = FILMS[gs.film_id]
        cast = _cast(cfg, film)
        ch = film.character(character)
        if ch is None or ch not in cast:
            raise UnknownCharacter(character, [c.name for c in cast])
        p = await sessions.join(s, gs, film, pid, name, ch.id)
    return web.json_response({"ok": True, "character": p.character_id, "name": p.user_name})


async def post_leave(request: web.Request) -> web.Response:
    svc = _svc(request)
    data = await _body(request)
    pid = _player_id(data.get("player_id"))
    async with svc.db.sessions() as s, s.begin():
        gs = await sessions.require_session(s, PLAY_CHANNEL_ID)
        await sessions.leave(s, gs, pid)
    return web.json_response({"ok": True})


async def post_act(request: web.Request) -> web.Response:
    """/act: the acting player's character is in the shot, plus the others chosen."""
    svc = _svc(request)
    data = await _body(request)
    pid = _player_id(data.get("player_id"))
    others = data.get("characters") or []
    if not isinstance(others, list) or not all(isinstance(c, str) for c in others):
        raise BadRequest("characters must be a list of names.", "characters")
    async with svc.db.sessions() as s, s.begin():
        cfg = await _config(s, svc)
        gs = await sessions.require_session(s, PLAY_CHANNEL_ID, active=True)
        me = await sessions.player_of(s, gs.id, pid)
        if me is None:
            raise NotJoined()
        film = FILMS[gs.film_id]
        ins = build_instruction(
            film,
            [me.character_id, *others],
            motion=_str(data, "motion"),
            background=_str(data, "background"),
            adverb=_str(data, "adverb"),
            time_of_day=_str(data, "time_of_day"),
            max_len=cfg.limits.max_instruction_len,
            playable={c.id for c in _cast(cfg, film)},
        )
        t = await turns.submit_turn(
            s, gs, author_id=pid, author_name=me.user_name, instruction=ins, limits=cfg.limits, enqueue=svc.enqueue
        )
        body = {"ok": True, "turn_id": t.id, "seq": t.seq, "instruction": ins.text, "notes": list(ins.notes)}
    return web.json_response(body)


async def post_pause(request: web.Request) -> web.Response:
    svc = _svc(request)
    data = await _body(request)
    paused = bool(data.get("paused"))
    async with svc.db.sessions() as s, s.begin():
        gs = await sessions.require_session(s, PLAY_CHANNEL_ID, lock=True)
        await sessions.set_paused(s, gs, paused, "paused by a moderator" if paused else None)
    return web.json_response({"ok": True, "paused": paused})


async def post_reset(request: web.Request) -> web.Response:
    svc = _svc(request)
    async with svc.db.sessions() as s, s.begin():
        gs = await sessions.require_session(s, PLAY_CHANNEL_ID, lock=True)
        fresh = await sessions.reset(s, gs, by=PLAY_ADMIN_ID)
        if svc.use_queue:  # the old session's turns were cancelled: drop their waiting jobs
            await jobs.cancel_stale_jobs(s, gs.id)
    return web.json_response({"ok": True, "session_id": fresh.id})


async def post_regenerate(request: web.Request) -> web.Response:
    """Moderator: generate the latest turn again with a new seed (its state changes are undone)."""
    svc = _svc(request)
    async with svc.db.sessions() as s, s.begin():
        gs = await sessions.require_session(s, PLAY_CHANNEL_ID)
        t = await turns.regenerate_latest(s, gs, svc.enqueue)
    return web.json_response({"ok": True, "turn_id": t.id, "seq": t.seq})


async def post_cancel(request: web.Request) -> web.Response:
    svc = _svc(request)
    async with svc.db.sessions() as s, s.begin():
        t, _ = await _turn_in_play(s, request.match_info["turn_id"])
        if svc.use_queue:
            await jobs.cancel_queued_turn(s, t, "cancelled by a moderator")
        else:
            await turns.cancel_turn(s, t, "cancelled by a moderator")
    return web.json_response({"ok": True})


# --- the app


def build_app(svc: PlayServices) -> web.Application:
    app = web.Application(middlewares=[errors_middleware], client_max_size=64 * 1024)
    app[SERVICES] = svc
    app.router.add_get("/", index)
    app.router.add_static("/static/", STATIC, append_version=False)
    app.router.add_get("/api/state", get_state)
    app.router.add_get("/api/turns", list_turns)
    app.router.add_get("/api/turns/{turn_id}", get_turn)
    app.router.add_get("/api/turns/{turn_id}/video.mp4", get_video)
    app.router.add_get("/api/suggest", get_suggestions)
    app.router.add_get("/api/events", events)
    app.router.add_post("/api/film", post_film)
    app.router.add_post("/api/cast", post_cast)
    app.router.add_post("/api/start", post_start)
    app.router.add_post("/api/join", post_join)
    app.router.add_post("/api/leave", post_leave)
    app.router.add_post("/api/act", post_act)
    app.router.add_post("/api/pause", post_pause)
    app.router.add_post("/api/reset", post_reset)
    app.router.add_post("/api/turns/{turn_id}/cancel", post_cancel)
    app.router.add_post("/api/regenerate", post_regenerate)

    async def on_shutdown(app: web.Application) -> None:
        app[SERVICES].hub.publish(None)  # open event streams end, so the server stops promptly

    app.on_shutdown.append(on_shutdown)
    return app


__all__ = ["PLAY_CHANNEL_ID", "PLAY_GUILD_ID", "PlayServices", "build_app", "ensure_film"]
