"""The play page's aiohttp application: middlewares (errors outermost, then the same-origin
guard), the routes, the static files."""

from __future__ import annotations

from aiohttp import web

from play.errors import errors_middleware
from play.guard import same_origin_middleware
from play.requests import MAX_BODY
from play.routes import STATIC, routes
from play.services import SERVICES, PlayServices
from play.vote_routes import add_vote_routes


def build_app(svc: PlayServices) -> web.Application:
    app = web.Application(middlewares=[errors_middleware, same_origin_middleware], client_max_size=MAX_BODY)
    app[SERVICES] = svc
    app.router.add_routes(routes)
    app.router.add_static("/static/", STATIC, append_version=False)
    add_vote_routes(app)  # vote mode: its endpoints and the page's deadline check

    async def on_shutdown(app: web.Application) -> None:
        app[SERVICES].hub.publish(None)  # open event streams end, so the server stops promptly

    app.on_shutdown.append(on_shutdown)
    return app
