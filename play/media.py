"""Serving a clip from memory with HTTP byte ranges (media elements ask for them to seek).

RFC 9110 section 14: one satisfiable range (`bytes=a-b`, `bytes=a-`, `bytes=-n`) is a 206 with
its Content-Range. A well-formed range set with no byte of the clip in it is a 416 with the size.
Everything else is answered with the whole clip, as a server may ignore a Range header: a
malformed one, another unit, several ranges (no multipart answers here), or a Range sent with
If-Range (the clip has no validator for it to match, so section 13.1.5 says to ignore the Range).
"""

from __future__ import annotations

import re

from aiohttp import web

from i18n import _
from play.errors import ApiError

_SPEC = re.compile(r"([0-9]*)-([0-9]*)")  # DIGIT is ASCII only (not any Unicode digit)
_HUGE = 10**18  # beyond any clip's size: a longer number means the same


def _number(digits: str) -> int:
    """The value of a DIGIT string, capped at _HUGE (Python refuses to convert thousands of digits)."""
    digits = digits.lstrip("0") or "0"
    return int(digits) if len(digits) < 18 else _HUGE


def _span(spec: str, size: int) -> tuple[int, int] | None | bool:
    """One range-spec: (first, last) within the clip; False if it is well-formed but has no byte
    of the clip; None if it is malformed."""
    m = _SPEC.fullmatch(spec)
    if m is None or not (m.group(1) or m.group(2)):
        return None
    if m.group(1):
        first = _number(m.group(1))
        last = _number(m.group(2)) if m.group(2) else None
        if last is not None and last < first:
            return None  # an invalid range-spec (RFC 9110 14.1.1)
        if first >= size:
            return False
        return first, (size - 1 if last is None else min(last, size - 1))
    suffix = _number(m.group(2))  # the last N bytes
    if suffix == 0 or size == 0:
        return False
    return max(0, size - suffix), size - 1


def byte_range(header: str | None, size: int, if_range: str | None = None) -> tuple[int, int] | None:
    """(first, last) byte of a satisfiable single range; None to send everything.
    Raises ApiError 416 for a well-formed range set with no byte of the clip in it."""
    if header is None or if_range is not None:
        return None
    unit, eq, ranges = header.partition("=")
    if not eq or unit.lower() != "bytes":
        return None
    # A list may have empty elements, to be ignored (RFC 9110 5.6.1.2); it needs one range.
    specs = [s for s in (part.strip(" \t") for part in ranges.split(",")) if s]
    spans = [_span(spec, size) for spec in specs]
    if not spans or None in spans:
        return None
    satisfiable = [s for s in spans if isinstance(s, tuple)]
    if not satisfiable:
        raise ApiError(416, "range_not_satisfiable", _("That byte range is outside the clip."),
                       headers={"Content-Range": f"bytes */{size}"})
    return satisfiable[0] if len(spans) == 1 else None


def mp4_response(request: web.Request, data: bytes) -> web.Response:
    headers = {"Accept-Ranges": "bytes", "Cache-Control": "private, max-age=3600"}
    span = byte_range(request.headers.get("Range"), len(data), request.headers.get("If-Range"))
    if span is None:
        return web.Response(body=data, content_type="video/mp4", headers=headers)
    start, end = span
    headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
    return web.Response(status=206, body=data[start:end + 1], content_type="video/mp4", headers=headers)
