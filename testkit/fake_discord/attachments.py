"""Attachments: files the bot uploads (multipart files[n]) and tests hand to attachment options,
checked against the guild's upload limit and served back at their URL like Discord's CDN."""

from __future__ import annotations

import urllib.parse
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .errors import ApiError, invalid_form
from .models import FakeAttachment, FakeChannel

if TYPE_CHECKING:  # pragma: no cover
    from .server import FakeDiscord

MAX_ATTACHMENTS = 10  # per message


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
        """Resolve the `attachments` field as Discord does: each entry's `id` is an attachment of the
        message to keep (an edit), or the n of an uploaded files[n]; attachments the field leaves
        out are removed; uploads it does not list are appended. An entry without an id, an id that
        is neither, an id listed twice or more than 10 attachments is a 400 (50035)."""
        def store(f: FakeAttachment, filename: str, description: str | None = None) -> FakeAttachment:
            return self._store_attachment(channel_id, filename, f.data, f.content_type, description)

        by_index = {f.id: f for f in files}
        if len(by_index) != len(files):
            raise invalid_form("files", "DUPLICATE_FILE", "Two files have the same files[n] name.")
        meta = body.get("attachments")
        if meta is None:
            result = existing + [store(f, f.filename) for f in files]
        else:
            if not isinstance(meta, list):
                raise invalid_form("attachments", "BASE_TYPE_ARRAY", "Must be an array.")
            keep = {a.id: a for a in existing}
            result, seen = [], set()
            for i, entry in enumerate(meta):
                raw = entry.get("id") if isinstance(entry, dict) else None
                if raw is None or not str(raw).isdigit():
                    raise invalid_form(f"attachments.{i}.id", "BASE_TYPE_REQUIRED", "This field is required")
                aid = int(raw)
                if aid in seen:
                    raise invalid_form(f"attachments.{i}.id", "ATTACHMENT_DUPLICATE", "Attachment listed twice.")
                seen.add(aid)
                if aid in keep:
                    result.append(keep[aid])
                elif aid in by_index:
                    f = by_index.pop(aid)
                    result.append(store(f, entry.get("filename") or f.filename, entry.get("description")))
                else:
                    raise invalid_form(f"attachments.{i}.id", "ATTACHMENT_NOT_FOUND",
                                       "Neither an attachment of this message nor an uploaded files[n].")
            result += [store(f, f.filename) for f in by_index.values()]
        if len(result) > MAX_ATTACHMENTS:
            raise invalid_form("attachments", "BASE_TYPE_MAX_LENGTH", f"Must be {MAX_ATTACHMENTS} or fewer in length.")
        return result

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
