"""Serving a clip from memory with HTTP byte ranges (media elements ask for them to seek).

One range per request (`bytes=a-b`, `bytes=a-`, `bytes=-n`); anything else that is not a
satisfiable single range is answered 416 with the size, or, if the header is malformed, with the
whole clip (as RFC 9110 allows a server to ignore a Range it does not understand).
"""

from __future__ import annotations

import re

from aiohttp import web

from play.errors import ApiError

_RANGE = re.compile(r"bytes=(\d{0,20})-(\d{0,20})")


def byte_range(header: str, size: int) -> tuple[int, int] | None:
    """(first, last) byte of a satisfiable single range; None to send everything.
    Raises ApiError 416 for a well-formed range outside the clip."""
    m = _RANGE.fullmatch(header.strip())
    if not m or not (m.group(1) or m.group(2)):
        return None
    first, last = m.group(1), m.group(2)
    if first:
        start = int(first)
        end = min(int(last), size - 1) if last else size - 1
    else:  # the last N bytes
        n = int(last)
        if n == 0:
            start, end = size, size - 1  # unsatisfiable
        else:
            start, end = max(0, size - n), size - 1
    if start >= size or start > end:
        raise ApiError(416, "range_not_satisfiable", "That byte range is outside the clip.",
                       headers={"Content-Range": f"bytes */{size}"})
    return start, end


def mp4_response(request: web.Request, data: bytes) -> web.Response:
    headers = {"Accept-Ranges": "bytes", "Cache-Control": "private, max-age=3600"}
    span = byte_range(request.headers.get("Range", ""), len(data))
    if span is None:
        return web.Response(body=data, content_type="video/mp4", headers=headers)
    start, end = span
    headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
    return web.Response(status=206, body=data[start:end + 1], content_type="video/mp4", headers=headers)
