"""Backends: the factory that the worker uses to build one from settings.

"preview" needs no model (inference.backends.preview); "animegamer" is the real model
(inference.backends.animegamer, imported only when asked for, so the preview path never
imports torch).
"""

from __future__ import annotations

from collections.abc import Sequence

from animegamer.settings import Settings
from inference.backend import Backend

BACKENDS = ("preview", "animegamer")


class BackendUnavailable(RuntimeError):
    """The backend cannot be built here; the message says why and what to do."""


def make_backend(settings: Settings, name: str | None = None, *, films: Sequence[str] = (), **options) -> Backend:
    """Build (not load) the backend `name` (default: settings.backend) for `films`.

    Preview options: render, frames, width, height, fps, delay (see PreviewBackend)."""
    name = name or settings.backend
    if name == "preview":
        from inference.backends.preview import PreviewBackend

        return PreviewBackend(
            max_bytes=settings.mp4_max_bytes,
            scope_mapping=settings.motion_scope,
            scope_otherwise=settings.motion_scope_otherwise,
            **options,
        )
    if name == "animegamer":
        try:
            from inference.backends.animegamer import AnimeGamerBackend
        except ImportError as e:
            raise BackendUnavailable(
                f"the AnimeGamer backend cannot be imported ({e}). Install the model extras "
                "(pip install 'animegamer-discord[models]') on a GPU machine, or run a preview "
                "worker with --backend preview."
            ) from e
        return AnimeGamerBackend(settings, films=tuple(films), **options)
    raise BackendUnavailable(f"unknown backend {name!r}; choose one of: {', '.join(BACKENDS)}")
