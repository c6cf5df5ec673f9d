"""The review page (`animegamer film review DIR`): an operator watches each clip, edits its caption
and states with autocomplete, accepts or rejects it; every change is saved at once (film.manifest's
review log, then the manifest and the games). server.py: the app and `serve`; store.py: the folder;
guard.py: the page answers only to itself (and to its token beyond loopback); static/: the page."""

from film.review.server import make_app, serve

__all__ = ["make_app", "serve"]
