"""What the bot showed to people on the fake Discord, and which of it did not pass through a catalog.

`shown_texts(server.requests)` reads every text a member could see out of the requests the bot
made (message contents, embeds, components, interaction answers, follow-ups and edits, autocomplete
choices, modals). `leftovers(text, allowed)` finds, in a text rendered in the pseudo-locale, the
words that are neither catalog text (accented, between ⟦ ⟧) nor legitimately outside the catalogs
(numbers, markup, URLs, file names, players' text and names, film titles...).

A catalog string's own letters are all accented by the pseudo-locale (i18n.pseudo), so plain
letters inside ⟦ ⟧ are values filled into a placeholder: those are held to the same rule, which
catches an English word handed to a translated sentence as a value.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from i18n.pseudo import CLOSE, OPEN, pseudo

CALLBACK = "/interactions/{interaction_id}/{token}/callback"
COMMAND_SYNC = ("/applications/{application_id}/commands", "/applications/{application_id}/guilds/{guild_id}/commands")
AUTOCOMPLETE_RESULT, MODAL = 8, 9

# The letters a pseudo-locale string's own text is made of (every ASCII letter accented), and its padding.
ACCENTED = frozenset(pseudo(string.ascii_letters)[len(OPEN):-len(CLOSE)].rstrip("·")) - set(string.ascii_letters)
PAD = "·"

# Not catalog text, wherever it appears:
MARKUP = re.compile(r"<(?:t:-?\d+(?::[tTdDfFRS])?|#\d+|@[!&]?\d+|/[^<>:\n]+:\d+|a?:\w+:\d+|id:\w+)>")
URL = re.compile(r"https?://[^\s<>()\[\]`]+")
FILE_NAME = re.compile(r"(?<![\w.-])[\w.-]+\.(?:mp4|webm|gif|png|jpe?g|webp|txt|json|csv|zip|toml|po)\b", re.I)
# The pseudo-locale formats numbers, times and lists with English CLDR data (i18n.locales.babel_locale)
CLDR_EN = re.compile(
    r"(?<!\w)(?:in\s+)?[\d.,\u00a0\u202f]*\d\s*(?:seconds?|minutes?|hours?|days?|weeks?|months?|years?|"
    r"sec|min|hr|ms|s|MB|KB|GB|kB)(?!\w)(?:\s+ago\b)?|(?<!\w)(?:and|or)(?!\w)"
)
# The model's instruction format (game/instruction.py), shown as the model received it
INSTRUCTION_LABELS = re.compile(r"(?<!\w)(?:Character|Motion|Background):")
BACKTICKS = re.compile(r"`[^`\n]*`")
WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class Shown:
    request: str  # "#12 POST /channels/{channel_id}/messages"
    field: str  # "embeds[0].fields[1].value"
    text: str
    autocomplete: bool = False  # an autocomplete choice's name (its values are not typed text)


@dataclass(frozen=True)
class Leftover:
    shown: Shown
    words: tuple[str, ...]  # the words with letters left
    inside: bool  # inside ⟦ ⟧: a value filled into a translated sentence

    def __str__(self) -> str:
        where = "in a translated sentence's value" if self.inside else "outside the catalog"
        text = self.shown.text if len(self.shown.text) <= 300 else self.shown.text[:300] + "…"
        return f"{self.shown.request} {self.shown.field} ({where}): {' '.join(self.words)!r}  in  {text!r}"


def _message(payload: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    """(field, text) of everything visible in a message payload (create, edit or interaction answer)."""
    if not isinstance(payload, dict):
        return
    if isinstance(payload.get("content"), str):
        yield f"{prefix}content", payload["content"]
    for i, e in enumerate(payload.get("embeds") or ()):
        p = f"{prefix}embeds[{i}]"
        for key in ("title", "description"):
            if isinstance(e.get(key), str):
                yield f"{p}.{key}", e[key]
        for part, key in (("author", "name"), ("footer", "text"), ("provider", "name")):
            if isinstance(e.get(part), dict) and isinstance(e[part].get(key), str):
                yield f"{p}.{part}.{key}", e[part][key]
        for j, f in enumerate(e.get("fields") or ()):
            for key in ("name", "value"):
                if isinstance(f.get(key), str):
                    yield f"{p}.fields[{j}].{key}", f[key]
    yield from _components(payload.get("components") or (), f"{prefix}components")
    for i, a in enumerate(payload.get("attachments") or ()):
        if isinstance(a, dict) and isinstance(a.get("description"), str):
            yield f"{prefix}attachments[{i}].description", a["description"]
    poll = payload.get("poll")
    if isinstance(poll, dict):
        if isinstance((poll.get("question") or {}).get("text"), str):
            yield f"{prefix}poll.question", poll["question"]["text"]
        for i, a in enumerate(poll.get("answers") or ()):
            text = ((a or {}).get("poll_media") or {}).get("text")
            if isinstance(text, str):
                yield f"{prefix}poll.answers[{i}]", text


def _components(items: Iterable[Any], prefix: str) -> Iterator[tuple[str, str]]:
    for i, c in enumerate(items):
        if not isinstance(c, dict):
            continue
        p = f"{prefix}[{i}]"
        # labels and placeholders (buttons, selects, text inputs, labels), text displays' content,
        # a text input's prefilled value, media descriptions
        for key in ("label", "placeholder", "content", "description", "title"):
            if isinstance(c.get(key), str):
                yield f"{p}.{key}", c[key]
        if c.get("type") == 4 and isinstance(c.get("value"), str):
            yield f"{p}.value", c["value"]
        for j, o in enumerate(c.get("options") or ()):
            for key in ("label", "description"):
                if isinstance(o, dict) and isinstance(o.get(key), str):
                    yield f"{p}.options[{j}].{key}", o[key]
        for j, item in enumerate(c.get("items") or ()):
            if isinstance(item, dict) and isinstance(item.get("description"), str):
                yield f"{p}.items[{j}].description", item["description"]
        yield from _components(c.get("components") or (), f"{p}.components")
        for key in ("accessory", "component"):
            if isinstance(c.get(key), dict):
                yield from _components([c[key]], f"{p}.{key}")


def shown_texts(requests: Iterable[Any]) -> list[Shown]:
    """Every user-visible text in the bot's requests to the fake Discord (RecordedRequest list)."""
    out: list[Shown] = []
    for n, r in enumerate(requests):
        body = r.json
        if r.method not in ("POST", "PATCH", "PUT") or not isinstance(body, dict) or r.route in COMMAND_SYNC:
            continue
        where = f"#{n} {r.method} {r.route or r.path}"
        if r.route == CALLBACK:
            kind, data = body.get("type"), body.get("data") or {}
            if kind == AUTOCOMPLETE_RESULT:
                for i, choice in enumerate(data.get("choices") or ()):
                    out.append(Shown(f"{where} (autocomplete)", f"choices[{i}].name", str(choice.get("name")), True))
                continue
            if kind == MODAL:
                if isinstance(data.get("title"), str):
                    out.append(Shown(f"{where} (modal)", "title", data["title"]))
                out += [Shown(f"{where} (modal)", f, t) for f, t in _components(data.get("components") or (), "components")]
                continue
            out += [Shown(f"{where} (answer type {kind})", f, t) for f, t in _message(data)]
        else:
            out += [Shown(where, f, t) for f, t in _message(body)]
    return [s for s in out if s.text]


def phrases_pattern(phrases: Iterable[str]) -> re.Pattern[str]:
    """Whole-word, case-insensitive matches of any of the phrases, the longest first."""
    unique = sorted({p.strip() for p in phrases if p and p.strip()}, key=len, reverse=True)
    if not unique:
        return re.compile(r"(?!x)x")
    return re.compile(r"(?<!\w)(?:" + "|".join(re.escape(p) for p in unique) + r")(?!\w)", re.I)


def _blank(s: str, start: int, end: int) -> str:
    return s[:start] + " " * (end - start) + s[end:]


def leftovers(shown: Shown, allowed: re.Pattern[str], commands: re.Pattern[str],
              code: frozenset[str] | None = None) -> list[Leftover]:
    """The words of `shown.text` with letters that did not come from a catalog and are not allowed.
    `code`: the `code` spans the catalog's messages hold as written (None: any inside ⟦ ⟧)."""
    text = shown.text
    depth, level = [], 0
    for ch in text:
        if ch == OPEN:
            level += 1
        depth.append(level)
        if ch == CLOSE and level > 0:
            level -= 1
    s = text
    # Inside ⟦ ⟧: the catalog's own text (accented letters, padding) and what the pseudo-locale
    # keeps as written (`code`, e.g. a command name quoted in a sentence) are catalog text.
    for m in BACKTICKS.finditer(s):
        if all(depth[i] for i in range(m.start(), m.end())) and (code is None or m.group() in code):
            s = _blank(s, m.start(), m.end())
    s = "".join(" " if ch in (OPEN, CLOSE) or (depth[i] and (ch in ACCENTED or ch == PAD)) else ch
                for i, ch in enumerate(s))
    for pattern in (MARKUP, URL, FILE_NAME, commands, INSTRUCTION_LABELS, allowed, CLDR_EN):
        s = pattern.sub(lambda m: " " * len(m.group()), s)
    found: dict[bool, list[str]] = {}
    for m in WORD.finditer(s):
        if any(unicodedata.category(ch).startswith("L") for ch in m.group()):
            found.setdefault(bool(depth[m.start()]), []).append(m.group())
    return [Leftover(shown, tuple(words), inside) for inside, words in sorted(found.items())]
