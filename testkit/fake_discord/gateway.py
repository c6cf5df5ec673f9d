"""The fake gateway: one websocket endpoint speaking Discord's JSON gateway protocol (v10).

Flow, as discord.py's DiscordWebSocket drives it:
  connect ?v=10&encoding=json&compress=zlib-stream -> HELLO (op 10)
  client heartbeats (op 1) -> HEARTBEAT_ACK (op 11)
  IDENTIFY (op 2) -> READY (guilds unavailable) -> GUILD_CREATE per guild (of the session's shard)
  RESUME (op 6) with a known session -> missed dispatches replayed -> RESUMED; unknown -> op 9 false
  REQUEST_GUILD_MEMBERS (op 8) -> GUILD_MEMBERS_CHUNK

Frames are JSON text frames. discord.py always asks for transport compression, but decodes text
frames as plain JSON, so the fake ignores `compress` unless FakeDiscord(gateway_compression=True),
which sends zlib-stream binary frames like the real gateway.

Sharding: an IDENTIFY with `shard: [shard_id, shard_count]` makes a session of that shard. It is
told of, and gets the events of, only the guilds with `(guild_id >> 22) % shard_count == shard_id`
(READY's list, GUILD_CREATE, guild, channel, member, message and AutoMod events, interactions);
events without a guild (DMs) go to shard 0. An invalid pair (id outside 0..count-1, count < 1, not
two integers) is closed with 4010 "Invalid shard", as on Discord. An IDENTIFY without `shard` is
shard 0 of 1: every guild. Two sessions of the same shard (two processes started with the same
shard on one token) both get every event of it, interactions included, as on Discord; that is what a
sharded bot must not do. GET /gateway/bot answers `shards: gateway.recommended_shards` (default 1),
which is what discord.py's AutoShardedClient launches when given no shard_count.

A session outlives its websocket: dispatches sent while the client is disconnected are buffered
and replayed on RESUME. A client close with code 1000/1001 ends the session, as on Discord; note
that discord.py's Client.close() often reaches the wire as 4000 (its reader task closes first), so
a closed client's session stays resumable. Interactions therefore go only to connected sessions.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import WSMsgType, web

if TYPE_CHECKING:  # pragma: no cover
    from .server import FakeDiscord

log = logging.getLogger(__name__)

OP_DISPATCH = 0
OP_HEARTBEAT = 1
OP_IDENTIFY = 2
OP_PRESENCE = 3
OP_RESUME = 6
OP_RECONNECT = 7
OP_REQUEST_MEMBERS = 8
OP_INVALID_SESSION = 9
OP_HELLO = 10
OP_HEARTBEAT_ACK = 11

INTENT_GUILD_MEMBERS = 1 << 1
INTENT_GUILD_MESSAGES = 1 << 9
INTENT_MESSAGE_CONTENT = 1 << 15

_BUFFER_LIMIT = 2000  # dispatches kept per session for RESUME
CLOSE_INVALID_SHARD = 4010
_SESSION_EVENTS = frozenset({"READY", "RESUMED"})  # about the session itself: sent whatever its shard


def shard_of(guild_id: int, shard_count: int) -> int:
    """Discord's shard formula: the shard that receives a guild's events."""
    return (guild_id >> 22) % shard_count


def valid_shard(shard: Any) -> bool:
    """An IDENTIFY `shard` Discord accepts: [shard_id, shard_count] with 0 <= shard_id < shard_count."""
    if not isinstance(shard, (list, tuple)) or len(shard) != 2:
        return False
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in shard):
        return False
    shard_id, count = shard
    return count >= 1 and 0 <= shard_id < count


def event_guild(event: str, data: Any) -> int | None:
    """The guild an event is about (GUILD_* carry it as `id`), None for one without a guild."""
    if not isinstance(data, dict):
        return None
    raw = data.get("id") if event in ("GUILD_CREATE", "GUILD_UPDATE", "GUILD_DELETE") else data.get("guild_id")
    return int(raw) if raw is not None else None


class GatewayConnection:
    """One websocket. Frames go through a queue so sequence order equals wire order."""

    def __init__(self, ws: web.WebSocketResponse, *, compress: bool) -> None:
        self.ws = ws
        self.queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.session: GatewaySession | None = None
        self._compressor = zlib.compressobj() if compress else None
        self.writer = asyncio.create_task(self._write_loop(), name="fake-discord-gateway-writer")
        self.received: list[dict[str, Any]] = []
        self.server_close_code: int | None = None  # set when the fake closed the socket itself
        self.client_close_code: int | None = None  # code of the client's close frame

    def send(self, frame: dict[str, Any]) -> None:
        self.queue.put_nowait(frame)

    async def _write_loop(self) -> None:
        while True:
            frame = await self.queue.get()
            if frame is None or self.ws.closed:
                return
            text = json.dumps(frame)
            try:
                if self._compressor is not None:
                    data = self._compressor.compress(text.encode()) + self._compressor.flush(zlib.Z_SYNC_FLUSH)
                    await self.ws.send_bytes(data)
                else:
                    await self.ws.send_str(text)
            except (ConnectionError, RuntimeError):  # peer went away mid-send
                return

    async def close(self, code: int) -> None:
        self.server_close_code = code
        # Detach at once: later dispatches go to the session buffer only, for replay on RESUME.
        if self.session is not None and self.session.conn is self:
            self.session.conn = None
        self.queue.put_nowait(None)
        await self.ws.close(code=code)


@dataclass(eq=False)
class GatewaySession:
    id: str
    intents: int
    shard: list[int] | None
    seq: int = 0
    buffer: list[dict[str, Any]] = field(default_factory=list)
    conn: GatewayConnection | None = None
    ended: bool = False
    identify: dict[str, Any] = field(default_factory=dict)

    def wants(self, intent: int) -> bool:
        return bool(self.intents & intent)

    def owns(self, guild_id: int | None) -> bool:
        """Whether this session's shard gets the guild's events (None: no guild, a DM: shard 0)."""
        if self.shard is None:
            return True
        shard_id, count = self.shard
        return shard_id == 0 if guild_id is None else shard_of(guild_id, count) == shard_id

    def dispatch(self, event: str, data: Any) -> int | None:
        """Send (or buffer) one event; an event of a guild of another shard is not sent (None)."""
        if event not in _SESSION_EVENTS and not self.owns(event_guild(event, data)):
            return None
        self.seq += 1
        frame = {"op": OP_DISPATCH, "t": event, "s": self.seq, "d": data}
        self.buffer.append(frame)
        del self.buffer[:-_BUFFER_LIMIT]
        if self.conn is not None:
            self.conn.send(frame)
        return self.seq


class Gateway:
    """Gateway endpoint state held by a FakeDiscord."""

    def __init__(self, server: FakeDiscord, *, heartbeat_interval_ms: int, compression: bool) -> None:
        self.server = server
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.compression = compression
        self.sessions: dict[str, GatewaySession] = {}
        self.connections: list[GatewayConnection] = []
        # (event, details) tuples: "connect", "identify", "resume", "resumed", "invalid_session", "close"
        self.log: list[tuple] = []
        self.refusing = False  # test control: new connections get HTTP 503 (a gateway outage)
        self.recommended_shards = 1  # GET /gateway/bot's `shards` (what AutoShardedClient launches)

    # -- which sessions get events ---------------------------------------------------------------

    def live_sessions(self) -> list[GatewaySession]:
        """Sessions that will receive a dispatch now or on RESUME."""
        return [s for s in self.sessions.values() if not s.ended]

    def connected_sessions(self) -> list[GatewaySession]:
        return [s for s in self.live_sessions() if s.conn is not None]

    def guild_sessions(self, guild_id: int | None, *, connected: bool = False) -> list[GatewaySession]:
        """Live (or only connected) sessions whose shard gets the guild's events (None: DMs)."""
        return [s for s in (self.connected_sessions() if connected else self.live_sessions()) if s.owns(guild_id)]

    # -- websocket handler -----------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if self.refusing:
            return web.Response(status=503, text="gateway unavailable (test outage)")
        ws = web.WebSocketResponse(autoping=True, max_msg_size=0)
        await ws.prepare(request)
        encoding = request.query.get("encoding", "json")
        compress = self.compression and request.query.get("compress") == "zlib-stream"
        conn = GatewayConnection(ws, compress=compress)
        self.connections.append(conn)
        self.log.append(("connect", dict(request.query)))
        if encoding != "json":
            await conn.close(4002)  # "Decode error": the fake only speaks JSON
            return ws
        conn.send({"op": OP_HELLO, "d": {"heartbeat_interval": self.heartbeat_interval_ms}, "s": None, "t": None})
        try:
            while True:
                msg = await ws.receive()
                if msg.type == WSMsgType.TEXT:
                    await self._on_frame(conn, json.loads(msg.data))
                elif msg.type == WSMsgType.CLOSE:
                    conn.client_close_code = int(msg.data)
                    break
                elif msg.type in (WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR):
                    break
        finally:
            # aiohttp may report 1000 for a close we started, so remember who closed and how.
            server_closed = conn.server_close_code is not None
            code = conn.server_close_code if server_closed else (conn.client_close_code or ws.close_code)
            self.log.append(("close", int(code) if code is not None else None, "server" if server_closed else "client"))
            conn.queue.put_nowait(None)
            session = conn.session
            if session is not None and session.conn is conn:
                session.conn = None
                # A deliberate client close ends the session; anything else may be resumed.
                if not server_closed and code in (1000, 1001):
                    session.ended = True
            if conn in self.connections:
                self.connections.remove(conn)
            self.server._notify()
        return ws

    async def _on_frame(self, conn: GatewayConnection, frame: dict[str, Any]) -> None:
        conn.received.append(frame)
        op = frame.get("op")
        data = frame.get("d")
        if op == OP_HEARTBEAT:
            conn.send({"op": OP_HEARTBEAT_ACK, "d": None, "s": None, "t": None})
        elif op == OP_IDENTIFY:
            await self._identify(conn, data)
        elif op == OP_RESUME:
            self._resume(conn, data)
        elif op == OP_REQUEST_MEMBERS:
            self._request_members(conn, data)
        elif op == OP_PRESENCE:
            self.server.presence_updates.append(data)
        else:
            log.debug("fake gateway ignoring op %s", op)
        self.server._notify()

    async def _identify(self, conn: GatewayConnection, data: dict[str, Any]) -> None:
        if data.get("token") != self.server.token:
            self.log.append(("identify_failed", None))
            await conn.close(4004)  # Authentication failed
            return
        shard = data.get("shard")
        if shard is not None and not valid_shard(shard):
            self.log.append(("identify_failed", f"invalid shard {shard!r}"))
            await conn.close(CLOSE_INVALID_SHARD)
            return
        session = GatewaySession(
            id=uuid.uuid4().hex, intents=int(data.get("intents", 0)), shard=data.get("shard"), identify=data
        )
        self.sessions[session.id] = session
        session.conn = conn
        conn.session = session
        self.log.append(("identify", session.id))
        srv = self.server
        ready = {
            "v": 10,
            "user": srv.bot_user_payload(),
            "guilds": [{"id": str(g.id), "unavailable": True} for g in srv.guilds.values() if session.owns(g.id)],
            "session_id": session.id,
            "session_type": "normal",
            "resume_gateway_url": srv.gateway_url,
            "application": {"id": str(srv.application_id), "flags": srv.application_flags},
            "private_channels": [],
            "relationships": [],
            "presences": [],
            "guild_join_requests": [],
            "geo_ordered_rtc_regions": [],
            "user_settings": {},
            "auth": {},
            "_trace": ["fake-discord"],
        }
        if session.shard is not None:
            ready["shard"] = session.shard
        session.dispatch("READY", ready)
        for guild in srv.guilds.values():
            if session.owns(guild.id):
                session.dispatch("GUILD_CREATE", srv.guild_create_payload(guild, session))

    def _resume(self, conn: GatewayConnection, data: dict[str, Any]) -> None:
        session = self.sessions.get(data.get("session_id") or "")
        if session is None or session.ended or data.get("token") != self.server.token:
            self.log.append(("invalid_session", data.get("session_id")))
            conn.send({"op": OP_INVALID_SESSION, "d": False, "s": None, "t": None})
            return
        if session.conn is not None and session.conn is not conn:
            # A newer socket takes over the session, like Discord does.
            old = session.conn
            old.session = None
            asyncio.ensure_future(old.close(4000))
        session.conn = conn
        conn.session = session
        last = int(data.get("seq") or 0)
        self.log.append(("resume", session.id, last))
        for frame in session.buffer:
            if frame["s"] > last:
                conn.send(frame)
        session.dispatch("RESUMED", {"_trace": ["fake-discord"]})
        self.log.append(("resumed", session.id))

    def _request_members(self, conn: GatewayConnection, data: dict[str, Any]) -> None:
        session = conn.session
        if session is None:
            return
        guild = self.server.guilds.get(int(data["guild_id"]))
        if guild is None or not session.owns(guild.id):
            return
        members = list(guild.members.values())
        query = data.get("query")
        if query:
            members = [m for m in members if m.user.username.lower().startswith(query.lower())]
        if data.get("user_ids"):
            wanted = {int(u) for u in data["user_ids"]}
            members = [m for m in members if m.id in wanted]
        limit = data.get("limit") or 0
        if limit:
            members = members[:limit]
        payload: dict[str, Any] = {
            "guild_id": str(guild.id),
            "members": [m.payload() for m in members],
            "chunk_index": 0,
            "chunk_count": 1,
            "not_found": [],
        }
        if data.get("nonce") is not None:
            payload["nonce"] = data["nonce"]
        session.dispatch("GUILD_MEMBERS_CHUNK", payload)

    # -- test controls ---------------------------------------------------------------------------

    async def drop(self, code: int = 4000) -> None:
        """Close every gateway socket with a resumable code; sessions stay resumable."""
        for conn in list(self.connections):
            await conn.close(code)

    def send_reconnect(self) -> None:
        """op 7: ask connected clients to reconnect and resume."""
        for conn in list(self.connections):
            conn.send({"op": OP_RECONNECT, "d": None, "s": None, "t": None})

    def invalidate_sessions(self) -> None:
        """op 9 (not resumable): clients must IDENTIFY again; buffered events are lost."""
        for session in self.live_sessions():
            session.ended = True
            if session.conn is not None:
                session.conn.send({"op": OP_INVALID_SESSION, "d": False, "s": None, "t": None})

    async def close(self) -> None:
        for conn in list(self.connections):
            await conn.close(1001)
        for conn in list(self.connections):
            conn.writer.cancel()
