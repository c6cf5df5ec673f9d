"""The JSON the page reads: turns, films, the whole state. Pure functions of the service's views
(service.views); what it names
(films' titles, characters, state labels, suggestions) is in the request's locale, the names a
player of that language knows (game.catalogue's local names); ids and instructions stay as stored."""

from __future__ import annotations

from game import vocabulary
from game.catalogue import FILMS, Film
from game.states import STATE_NAMES, state_label
from game.stored_reasons import cancel_reason, pause_text
from game.turn_texts import failure_text
from service.views import TableView, TurnView
from settings.limits import FIELD_MAX


def names_of(film_id: str | None) -> dict[str, str]:
    """Character id -> name in the current locale, for a film of the catalogue."""
    film = FILMS.get(film_id) if film_id else None
    return {c.id: film.character_name_in(c.id) for c in film.characters} if film else {}


def turn_json(t: TurnView, names: dict[str, str]) -> dict:
    pred = None
    if t.status == "done" and t.motion_level is not None:
        pred = {"motion_level": t.motion_level, "social": t.delta_social,
                "entertainment": t.delta_entertainment, "stamina": t.delta_stamina}
    return {
        "id": t.id,
        "session_id": t.session_id,
        "seq": t.seq,
        "author_id": str(t.author_id),
        "author_name": t.author_name,
        "characters": [{"id": c, "name": names.get(c, c)} for c in t.characters],
        "instruction": t.instruction,
        "status": t.status,
        "progress": t.progress,
        "stage": t.stage,
        "position": t.position,
        "error": t.error,
        # The stored code as the request's language reads it (game.turn_texts, game.stored_reasons).
        "error_text": failure_text(t.error) if t.status == "failed" else str(cancel_reason(t.error, t.cancelled_by_name, t.cancel_note)),
        "backend": t.backend,
        "is_preview": t.is_preview,
        "prediction": pred,
        "motion_scope": t.motion_scope,
        "states_before": t.states_before,
        "states_after": t.states_after,
        # The seed changes when a turn is regenerated, so the URL does too (no stale cache).
        "video": f"/api/turns/{t.id}/video.mp4?v={t.seed}" if t.has_clip else None,
        "video_pruned": t.clip_pruned,
        "timings": t.timings,
        "created_at": t.created_at.isoformat() if t.created_at else None,
        "finished_at": t.finished_at.isoformat() if t.finished_at else None,
    }


def film_json(film: Film) -> dict:
    return {
        "id": film.id,
        "title": film.title_in(),
        "characters": [{"id": c.id, "name": film.character_name_in(c.id)} for c in film.characters],
    }


def state_json(table: TableView, me_id: int | None, backend: str) -> dict:
    """Everything the page shows besides the log: film, cast, session, players, bars."""
    cfg, gs, players, states = table.config, table.session, table.players, table.states
    film = FILMS.get(gs.film_id) if gs else cfg.film
    names = names_of(film.id if film else None)
    mine = next((p for p in players if me_id is not None and p.user_id == me_id), None)
    return {
        "films": [film_json(f) for f in FILMS.values()],
        "config": {
            "film": cfg.film.id if cfg.film else None,
            "playable": [c.id for c in cfg.cast()],
        },
        "film": film_json(film) if film else None,
        # The suggestions as shown in the request's language (the routes map them back to English).
        "options": {
            kind: [vocabulary.shown(kind, term) for term in vocabulary.terms_of(film, kind)] for kind in vocabulary.KINDS
        } if film else None,
        "session": None if gs is None else {
            "id": gs.id, "status": gs.status, "film": gs.film_id, "next_seq": gs.next_seq,
            # Why it is paused in the request's language, and its code (game.stored_reasons; None: no reason).
            "paused_reason": pause_text(gs.paused_reason, gs.paused_note), "paused_reason_code": gs.paused_reason,
        },
        "players": [
            {"user_id": str(p.user_id), "name": p.user_name, "character": p.character_id,
             "character_name": names.get(p.character_id, p.character_id)}
            for p in players
        ],
        "me": None if mine is None else {"name": mine.user_name, "character": mine.character_id},
        "states": {
            cid: {"name": names.get(cid, cid), **st.as_dict()}
            for cid, st in states.items() if cid in names
        },
        "state_names": list(STATE_NAMES),
        "state_labels": {name: state_label(name) for name in STATE_NAMES},
        "pending": list(table.pending),
        "limits": {
            "max_instruction_len": cfg.limits.max_instruction_len,
            "cooldown_seconds": cfg.limits.cooldown_seconds,
            "backlog_cap": cfg.limits.backlog_cap,
            "fields": FIELD_MAX,  # each /act field's cap as typed: the inputs' maxlength
        },
        "backend": backend,
    }
