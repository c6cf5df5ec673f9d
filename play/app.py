"""The play page's aiohttp application: middlewares (the metrics outermost, so they count every
answer; then the request's language, errors, the same-origin guard, the token beyond loopback), the routes, the static files,
GET /metrics for Prometheus (play.metrics; its open event streams read at each scrape); and the
runner that serves it, with its server log."""

from __future__ import annotations

import logging

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from localweb.guard import ACCESS_TOKEN
from play.errors import errors_middleware
from play.guard import same_origin_middleware, token_middleware
from play.language import add_language_routes, locale_middleware
from play.metrics import PlayMetrics, add_metrics_route, metrics_middleware
from play.page import PAGE, Page
from play.requests import MAX_BODY
from play.retention import add_pruner
from play.routes import STATIC, routes
from play.vote_routes import add_vote_routes

# aiohttp's server log for the page (RequestHandler's `logger`, normally "aiohttp.server").
SERVER_LOG = logging.getLogger("play.server")


def _client_error(exc: BaseException | None) -> HttpProcessingError | None:
    """The parser's 4xx error behind an exception: itself, or what a RequestPayloadError (a body
    that does not decode) was raised from."""
    if isinstance(exc, web.RequestPayloadError):
        exc = exc.__cause__
    if isinstance(exc, HttpProcessingError) and 400 <= exc.code < 500:
        return exc
    return None


class MalformedRequestsInOneLine(logging.Filter):
    """A request aiohttp cannot parse (a bad request line, an oversized or broken header, no Host
    on HTTP/1.1) is answered 400 by aiohttp itself, before any handler or middleware, and logged
    by RequestHandler.handle_error as an ERROR with the parser's traceback; a body that does not
    decode (a broken gzip or chunk) is logged so too ("Unhandled exception") when aiohttp reads
    what is left of it after the answer. It is the client's mistake, not the page's: it becomes
    one WARNING line, so that a client cannot fill the operator's log with tracebacks. Every
    other record (a 500's traceback) passes unchanged."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = _client_error(record.exc_info[1] if record.exc_info else None)
        if record.levelno < logging.ERROR or exc is None:
            return True
        # handle_error's message is "Error handling request from %s", with the peer's address.
        peer = f" from {record.args[0]}" if isinstance(record.args, tuple) and record.args else ""
        reason = " ".join(exc.message.split())[:200]  # the parser's words, quoting the bytes as repr
        SERVER_LOG.warning("refused a malformed request%s (%d): %s", peer, exc.code, reason)
        return False


SERVER_LOG.addFilter(MalformedRequestsInOneLine())


METRICS = web.AppKey("metrics", PlayMetrics)


def build_app(page: Page, *, token: str | None = None) -> web.Application:
    """token: what every request must carry (localweb.guard.token_guard); None: no token (loopback)."""
    metrics = PlayMetrics()
    app = web.Application(middlewares=[metrics_middleware(metrics), locale_middleware, errors_middleware,
                                       same_origin_middleware, token_middleware],
                          client_max_size=MAX_BODY)
    app[PAGE] = page
    if token is not None:
        app[ACCESS_TOKEN] = token
    app[METRICS] = metrics
    metrics.watch_sse(lambda: len(page.hub.subscribers))  # the open /api/events streams
    add_metrics_route(app, metrics)
    app.router.add_routes(routes)
    app.router.add_static("/static/", STATIC, append_version=False)
    add_language_routes(app)  # the page's strings in the request's language (play/language.py)
    add_vote_routes(app)  # vote mode: its endpoints and the page's deadline check
    add_pruner(app)  # old clips pruned as the bot prunes Discord games' (play/retention.py)

    async def on_shutdown(app: web.Application) -> None:
        app[PAGE].hub.publish(None)  # open event streams end, so the server stops promptly

    app.on_shutdown.append(on_shutdown)
    return app


def make_runner(page: Page, *, shutdown_timeout: float = 3, token: str | None = None) -> web.AppRunner:
    """The page's app, ready to serve: aiohttp's server log goes through SERVER_LOG, and there is
    no access log (every request of every tab, polling included, would be a line)."""
    return web.AppRunner(build_app(page, token=token), shutdown_timeout=shutdown_timeout, access_log=None, logger=SERVER_LOG)
