"""Attachments: files the bot uploads (multipart files[n]) and tests hand to attachment options,
checked against the guild's upload limit and served back at their URL like Discord's CDN."""

from __future__ import annotations

import urllib.parse
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .errors import ApiError
from .models import FakeAttachment, FakeChannel

if TYPE_CHECKING:  # pragma: no cover
    from .server import FakeDiscord


class AttachmentsMixin:
    """FakeDiscord's stored files."""

    def make_attachment(
        self: FakeDiscord, filename: str, data: bytes, *, content_type: str | None = None
    ) -> FakeAttachment:
        """An uploaded file for an attachment option; its URL is served by the fake (Attachment.read works)."""
        return self._store_attachment(0, filename, data, content_type)

    def _store_attachment(
        self: FakeDiscord,
        channel_id: int,
        filename: str,
        data: bytes,
        content_type: str | None,
        description: str | None = None,
    ) -> FakeAttachment:
        aid = self.snowflake()
        url = f"{self.base_url}/attachments/{channel_id}/{aid}/{urllib.parse.quote(filename)}"
        att = FakeAttachment(
            id=aid, filename=filename, data=data, content_type=content_type, description=description, url=url
        )
        self.attachments[aid] = att
        return att

    def _attachments_from(
        self: FakeDiscord,
        channel_id: int,
        body: dict[str, Any],
        files: list[FakeAttachment],
        existing: list[FakeAttachment],
    ) -> list[FakeAttachment]:
        """Resolve the `attachments` field against uploaded files[n] (new) and kept existing ones."""
        def store(f: FakeAttachment, filename: str, description: str | None = None) -> FakeAttachment:
            return self._store_attachment(channel_id, filename, f.data, f.content_type, description)

        by_index = dict(enumerate(files))
        meta = body.get("attachments")
        if meta is None:
            return existing + [store(f, f.filename) for f in files]
        keep = {a.id: a for a in existing}
        result: list[FakeAttachment] = []
        for entry in meta:
            aid = int(entry["id"])
            if aid in keep:
                result.append(keep[aid])
            elif aid in by_index:
                f = by_index.pop(aid)
                result.append(store(f, entry.get("filename") or f.filename, entry.get("description")))
        # files[n] not described in `attachments` are still uploaded
        return result + [store(f, f.filename) for f in by_index.values()]

    def _check_upload(self: FakeDiscord, files: list[FakeAttachment], channel: FakeChannel) -> None:
        guild = self.guilds.get(channel.guild_id)
        limit = guild.upload_limit if guild is not None else self.default_upload_limit
        if any(f.size > limit for f in files):
            raise ApiError(413, 40005, "Request entity too large")

    async def _cdn(self: FakeDiscord, request: web.Request) -> web.StreamResponse:
        att = self.attachments.get(int(request.match_info["attachment_id"]))
        if att is None:
            return web.Response(status=404)
        return web.Response(body=att.data, content_type=att.content_type or "application/octet-stream")
