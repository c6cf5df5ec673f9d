"""The play page's routes: a JSON API over the same game services the Discord bot uses, live
updates as server-sent events, the clips, and the static page.

Each handler declares its inputs with `@accepts` (play.requests) and gets them parsed; refusals
are the game's own GameError / InputRefused messages, so they read as in Discord. Adding a route
is a handler here, decorated with its path and its request model.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from aiohttp import web

from game import vocabulary
from game.catalogue import suggest
from game.errors import ServiceDown
from game.sanitize import InputRefused, clean_text
from game.stored_reasons import BY_MODERATOR
from i18n import _
from i18n.formatting import number
from play import media, shapes
from play.errors import not_found
from play.events import sse_frame
from play.page import ADMIN, PLACE, page_of
from play.requests import (
    NAME_MAX,
    ActBody,
    CastBody,
    Empty,
    FilmBody,
    JoinBody,
    LeaveBody,
    PauseBody,
    StateQuery,
    SuggestQuery,
    TurnPath,
    TurnsQuery,
    accepts,
)
from service import admin, moderation, players, reads, runtime, views
from service.deps import Member
from service.players import ActFields

STATIC = Path(__file__).resolve().parent / "static"
HEALTH_TIMEOUT = 2.0  # seconds for the health check's SELECT 1


routes = web.RouteTableDef()


async def _turn_in_play(request: web.Request, turn_id: int, *, clip: bool = False) -> views.FoundTurn:
    """The page's turn `turn_id`; a Discord guild's, or one taken down (db.removal), is not there."""
    found = await views.turn(page_of(request).deps, PLACE, turn_id, clip=clip)
    if found is None:
        raise not_found(_("There is no such turn."))
    if found.turn.removed:
        raise not_found(_("This turn was removed."))
    return found


def player_name(raw: str) -> str:
    """The page's rule for a name: something visible is left, and at most NAME_MAX characters
    (the services clean it the same way when storing it)."""
    name = clean_text(raw, NAME_MAX + 1)
    if not name:
        raise InputRefused("name", _("is empty; please type something"))
    if len(name) > NAME_MAX:
        raise InputRefused("name", _("is too long (at most %(max)s characters)", max=number(NAME_MAX)))
    return name


# --- reading


@routes.get("/")
async def index(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})


@routes.get("/healthz")
async def healthz(request: web.Request) -> web.Response:
    """200 while the page reaches its database and hears its NOTIFYs; 503 (in the JSON error
    format) while either is cut off, so a supervisor can tell the page is waiting for Postgres."""
    page = page_of(request)
    database = "up" if await runtime.answers(page.store, HEALTH_TIMEOUT) else "unreachable"
    listening = page.hub.listening
    body = {"database": database, "live_updates": "up" if listening else "reconnecting"}
    if database == "up" and listening:
        return web.json_response({"status": "ok", **body})
    down = ServiceDown()
    return web.json_response({"error": down.code, "message": down.message, **body}, status=503)


@routes.get("/api/state")
@accepts(query=StateQuery)
async def get_state(request: web.Request, query: StateQuery) -> web.Response:
    page = page_of(request)
    return web.json_response(shapes.state_json(await views.table(page.deps, PLACE), query.player, page.backend))


@routes.get("/api/turns")
@accepts(query=TurnsQuery)
async def list_turns(request: web.Request, query: TurnsQuery) -> web.Response:
    """The live session's turns, newest page first: `before` (a seq) pages back in history;
    `pending=1` gives the queued and running ones (to refresh their places)."""
    page = await views.turns_page(page_of(request).deps, PLACE, before=query.before, limit=query.limit,
                                  only_pending=query.only_pending)
    gs = page.session
    if gs is None:
        return web.json_response({"session_id": None, "turns": [], "more": False})
    names = shapes.names_of(gs.film_id)
    turns = [shapes.turn_json(t, names) for t in page.turns]
    return web.json_response({"session_id": gs.id, "turns": turns, "more": page.more})


@routes.get("/api/turns/{turn_id}")
@accepts(path=TurnPath)
async def get_turn(request: web.Request, path: TurnPath) -> web.Response:
    found = await _turn_in_play(request, path.turn_id)
    return web.json_response(shapes.turn_json(found.turn, shapes.names_of(found.film_id)))


@routes.get("/api/turns/{turn_id}/video.mp4")
@accepts(path=TurnPath)
async def get_video(request: web.Request, path: TurnPath) -> web.Response:
    data = (await _turn_in_play(request, path.turn_id, clip=True)).clip
    if not data:
        raise not_found(_("This turn has no clip (not finished, or pruned)."))
    return media.mp4_response(request, data)


@routes.get("/api/suggest")
@accepts(query=SuggestQuery)
async def get_suggestions(request: web.Request, query: SuggestQuery) -> web.Response:
    """Autocomplete, as /act offers it: the film's suggestions in the request's language, matched
    on what is shown (the act routes map a chosen one back to the English term)."""
    fields = {"motion": "motions", "adverb": "adverbs", "background": "backgrounds", "time_of_day": "times"}
    film = (await reads.playing(page_of(request).deps, PLACE)).film
    kind = fields[query.field]
    shown = tuple(vocabulary.shown(kind, term) for term in vocabulary.terms_of(film, kind))
    return web.json_response(suggest(tuple(dict.fromkeys(shown)), query.q))


@routes.get("/api/events")
async def events(request: web.Request) -> web.StreamResponse:
    """Server-sent events: every NOTIFY of this channel, as JSON. HEAD gets the stream's headers
    and nothing else (the router answers HEAD with this GET handler; aiohttp leaves the body of a
    StreamResponse to it)."""
    page = page_of(request)
    resp = web.StreamResponse(headers={
        "Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no",
    })
    await resp.prepare(request)
    if request.method == "HEAD":
        return resp
    sub = page.hub.subscribe()
    try:
        await resp.write(b"retry: 1000\n\n" + sse_frame({"type": "hello"}))
        while True:
            try:
                event = await asyncio.wait_for(sub.queue.get(), timeout=15)
            except TimeoutError:
                await resp.write(b": keep-alive\n\n")
                continue
            if event is None:  # the server is stopping
                break
            await resp.write(sse_frame(event))
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    finally:
        page.hub.unsubscribe(sub)
    return resp


# --- acting: parse, call the game service, answer


def act_fields(body: ActBody) -> ActFields:
    return ActFields(body.motion, body.background, body.adverb, body.time_of_day, body.characters)


@routes.post("/api/film")
@accepts(body=FilmBody)
async def post_film(request: web.Request, body: FilmBody) -> web.Response:
    """Admin: choose the film. A game in progress with another film is reset into the new one;
    its players leave, since the cast changes."""
    page = page_of(request)
    film = await admin.set_film(page.deps, PLACE, ADMIN, body.film, restart=True)
    if page.on_film is not None:
        await page.on_film(film.id)
    return web.json_response({"ok": True, "film": film.id})


@routes.post("/api/cast")
@accepts(body=CastBody)
async def post_cast(request: web.Request, body: CastBody) -> web.Response:
    """Admin: enable or disable a playable character."""
    playable, _cfg = await admin.set_character(page_of(request).deps, PLACE, ADMIN, body.character, body.enabled)
    return web.json_response({"ok": True, "playable": sorted(playable)})


@routes.post("/api/start")
@accepts(body=Empty)
async def post_start(request: web.Request, body: Empty) -> web.Response:
    done = await players.start(page_of(request).deps, PLACE, ADMIN)
    return web.json_response({"ok": True, "session_id": done.session_id})


@routes.post("/api/join")
@accepts(body=JoinBody)
async def post_join(request: web.Request, body: JoinBody) -> web.Response:
    who = Member(body.player_id, player_name(body.name))
    p = (await players.join(page_of(request).deps, PLACE, who, body.character)).player
    return web.json_response({"ok": True, "character": p.character_id, "name": p.user_name})


@routes.post("/api/leave")
@accepts(body=LeaveBody)
async def post_leave(request: web.Request, body: LeaveBody) -> web.Response:
    await players.leave(page_of(request).deps, PLACE, body.player_id)
    return web.json_response({"ok": True})


@routes.post("/api/act")
@accepts(body=ActBody)
async def post_act(request: web.Request, body: ActBody) -> web.Response:
    """/act: the acting player's character is in the shot, plus the others chosen."""
    done = await players.act(page_of(request).deps, PLACE, Member(body.player_id), act_fields(body))
    ins = done.instruction
    return web.json_response({"ok": True, "turn_id": done.turn.id, "seq": done.turn.seq, "instruction": ins.text,
                              "notes": list(ins.notes)})


@routes.post("/api/pause")
@accepts(body=PauseBody)
async def post_pause(request: web.Request, body: PauseBody) -> web.Response:
    deps = page_of(request).deps
    if body.paused:
        await moderation.pause(deps, PLACE, ADMIN, code=BY_MODERATOR)
    else:
        await moderation.resume(deps, PLACE, ADMIN)
    return web.json_response({"ok": True, "paused": body.paused})


@routes.post("/api/reset")
@accepts(body=Empty)
async def post_reset(request: web.Request, body: Empty) -> web.Response:
    done = await moderation.reset(page_of(request).deps, PLACE, ADMIN)
    return web.json_response({"ok": True, "session_id": done.fresh.id})


@routes.post("/api/regenerate")
@accepts(body=Empty)
async def post_regenerate(request: web.Request, body: Empty) -> web.Response:
    """Moderator: generate the latest turn again with a new seed (its state changes are undone)."""
    t = (await moderation.regenerate(page_of(request).deps, PLACE, ADMIN, moderator=True)).turn
    return web.json_response({"ok": True, "turn_id": t.id, "seq": t.seq})


@routes.post("/api/turns/{turn_id}/cancel")
@accepts(path=TurnPath, body=Empty)
async def post_cancel(request: web.Request, path: TurnPath, body: Empty) -> web.Response:
    t = (await _turn_in_play(request, path.turn_id)).turn
    await moderation.cancel(page_of(request).deps, PLACE, ADMIN, turn_id=t.id)  # unnamed: "cancelled by a moderator"
    return web.json_response({"ok": True})
