"""A member's data: what is stored about them (/privacy show), and deleting it (/privacy delete).

A deletion is a persisted request (`privacy_requests`) that a scheduled job carries out in steps,
each in its own transaction and each idempotent, so a restart at any point finishes it:

1. collect: the servers the member has rows in (one tombstone per server: user id -tombstone.id,
   name DELETED_NAME) and the names they were stored under (for free text that quotes them);
2. turns: every turn they wrote is taken down (db.removal.take_down_turns: clip, representation
   and instruction text gone; a queued or running turn is cancelled, so a worker finishing it
   writes nothing back), then its author becomes the server's tombstone;
3. votes: their proposals in open rounds are deleted (with the ballots for them, so they cannot
   win), older proposals and every ballot of theirs are kept under the tombstone with no text;
4. everything else with their id or name: player rows (deleted: they leave every game), the
   creator of a session, the opener of a round, who removed a shot, who added a filter term, the
   audit log as actor or as target (and the text of theirs the content rules refused), their
   names inside free text (who cancelled a turn, a moderator's words for a cancel, a pause or a
   shot taken down), and the one-time notices they were shown (member_notices, db/notices.py:
   deleted);
5. done: the request forgets their id and names.

What stays, anonymous, is what other players' games rest on: the turn rows (number, status,
characters, the predicted state changes), so the sequence numbers and character states of
everyone else stay valid; tallies of closed vote rounds; the servers' audit entries (who acted is
the tombstone)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import String, cast, delete, func, literal, or_, select, union, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from db.bounds import require_id
from db.models import (
    AuditLog,
    ContentFilterTerm,
    GameSession,
    MemberNotice,
    Player,
    PrivacyRequest,
    PrivacyTombstone,
    Turn,
    VoteBallot,
    VoteProposal,
    VoteRound,
)
from db.removal import take_down_turns
from game.member_data import Counts, Stored
from game.stored_reasons import CANCEL_CODES, PRIVACY_DELETED
from i18n import N_

# Stored in English in place of a name; translated where shown.
# TRANSLATORS: shown instead of the name of a member who deleted their data.
DELETED_NAME = N_("deleted member")
STEPS = 5  # collect, turns, votes, ids and names, done
MIN_QUOTED_NAME = 3


def _in_guild(column, guild_id: int | None):
    """Sessions of `guild_id` (None: every server), as a condition on a session id column."""
    if guild_id is None:
        return literal(True)
    return column.in_(select(GameSession.id).where(GameSession.guild_id == guild_id).scalar_subquery())


async def _counts(s: AsyncSession, user_id: int, guild_id: int | None) -> Counts:
    games = await s.scalar(
        select(func.count(func.distinct(Player.session_id))).where(Player.user_id == user_id, _in_guild(Player.session_id, guild_id))
    )
    turns, clips = (
        await s.execute(
            select(func.count(), func.count().filter(Turn.mp4_size.is_not(None), Turn.removed_at.is_(None), Turn.blobs_pruned_at.is_(None)))
            .where(Turn.author_id == user_id, _in_guild(Turn.session_id, guild_id))
        )
    ).one()
    rounds = select(VoteRound.id).where(_in_guild(VoteRound.session_id, guild_id)).scalar_subquery()
    ballots = await s.scalar(select(func.count()).where(VoteBallot.voter_id == user_id, VoteBallot.round_id.in_(rounds)))
    proposals = await s.scalar(select(func.count()).where(VoteProposal.author_id == user_id, VoteProposal.round_id.in_(rounds)))
    audit_q = select(func.count()).where(_audit_of(user_id))
    if guild_id is not None:
        audit_q = audit_q.where(AuditLog.guild_id == guild_id)
    audit = await s.scalar(audit_q)
    notices = 0 if guild_id is not None else await s.scalar(select(func.count()).where(MemberNotice.user_id == user_id))
    return Counts(games=games or 0, turns=turns or 0, clips=clips or 0, votes=(ballots or 0) + (proposals or 0), audit=audit or 0,
                  notices=notices or 0)


def _audit_of(user_id: int):
    """Audit entries where the member acted or was acted on (a kick's target is their id)."""
    return or_(AuditLog.actor_id == user_id, AuditLog.target == str(user_id))


async def stored(s: AsyncSession, user_id: int, guild_id: int) -> Stored:
    """What /privacy show tells a member: counts in this server and in all servers."""
    require_id(user_id, "user id")
    return Stored(
        here=await _counts(s, user_id, guild_id),
        everywhere=await _counts(s, user_id, None),
        servers=len(await _guilds_of(s, user_id)),
        pending=await pending_request(s, user_id) is not None,
    )


async def pending_request(s: AsyncSession, user_id: int) -> PrivacyRequest | None:
    q = select(PrivacyRequest).where(PrivacyRequest.user_id == user_id, PrivacyRequest.status == "pending")
    return (await s.scalars(q.order_by(PrivacyRequest.id).limit(1))).first()


async def request_deletion(s: AsyncSession, user_id: int) -> tuple[PrivacyRequest, bool]:
    """Record a deletion request (the job carries it out); an unfinished one is reused. Returns
    the request and whether it is new."""
    require_id(user_id, "user id")
    existing = await pending_request(s, user_id)
    if existing is not None:
        return existing, False
    req = PrivacyRequest(user_id=user_id)
    s.add(req)
    await s.flush()
    return req, True


async def lock_request(s: AsyncSession, request_id: int) -> PrivacyRequest | None:
    """The request, locked, if it is still pending and no one else holds it."""
    q = (
        select(PrivacyRequest)
        .where(PrivacyRequest.id == request_id, PrivacyRequest.status == "pending")
        .with_for_update(skip_locked=True)
    )
    return (await s.scalars(q)).first()


async def _guilds_of(s: AsyncSession, user_id: int) -> list[int]:
    """Every server where the member has rows."""
    sessions_with = union(
        select(Player.session_id).where(Player.user_id == user_id),
        select(Turn.session_id).where(Turn.author_id == user_id),
        select(VoteRound.session_id).where(
            or_(
                VoteRound.opened_by == user_id,
                VoteRound.id.in_(select(VoteProposal.round_id).where(VoteProposal.author_id == user_id)),
                VoteRound.id.in_(select(VoteBallot.round_id).where(VoteBallot.voter_id == user_id)),
            )
        ),
        select(GameSession.id).where(GameSession.created_by == user_id),
        select(Turn.session_id).where(Turn.removed_by_id == user_id),
    ).subquery()
    q = union(
        select(GameSession.guild_id).where(GameSession.id.in_(select(sessions_with.c[0]))),
        select(AuditLog.guild_id).where(_audit_of(user_id)),
        select(ContentFilterTerm.guild_id).where(ContentFilterTerm.added_by == user_id),
    )
    return sorted((await s.scalars(q)).all())


async def _names_of(s: AsyncSession, user_id: int) -> list[str]:
    q = union(
        select(Player.user_name).where(Player.user_id == user_id),
        select(Turn.author_name).where(Turn.author_id == user_id),
        select(VoteProposal.author_name).where(VoteProposal.author_id == user_id),
        select(AuditLog.actor_name).where(AuditLog.actor_id == user_id),
        select(Turn.removed_by_name).where(Turn.removed_by_id == user_id, Turn.removed_by_name.is_not(None)),
        select(cast(AuditLog.details["player"].astext, String)).where(
            AuditLog.target == str(user_id), AuditLog.details["player"].is_not(None)
        ),
    )
    return sorted({n for n in (await s.scalars(q)).all() if n})


async def _tombstones(s: AsyncSession, req: PrivacyRequest, uid: int) -> dict[int, int]:
    """guild id -> the tombstone user id there; a server the member has rows in since the last
    step gets its tombstone now."""
    for guild_id in await _guilds_of(s, uid):
        await s.execute(insert(PrivacyTombstone).values(request_id=req.id, guild_id=guild_id).on_conflict_do_nothing())
    rows = (await s.execute(select(PrivacyTombstone.guild_id, PrivacyTombstone.id).where(PrivacyTombstone.request_id == req.id))).all()
    return {g: -i for g, i in rows}


def _by_guild(column, guild_id: int):
    return column.in_(select(GameSession.id).where(GameSession.guild_id == guild_id).scalar_subquery())


async def _collect(s: AsyncSession, req: PrivacyRequest, uid: int) -> int | None:
    req.names = sorted(set(req.names or []) | set(await _names_of(s, uid)))
    await _tombstones(s, req, uid)
    return None


async def _turns(s: AsyncSession, req: PrivacyRequest, uid: int) -> int | None:
    ids = list((await s.scalars(select(Turn.id).where(Turn.author_id == uid))).all())
    req.turns_removed += len(await take_down_turns(s, ids, reason=PRIVACY_DELETED, by_id=None, by_name=None))
    for guild_id, tomb in (await _tombstones(s, req, uid)).items():
        await s.execute(
            update(Turn).where(Turn.author_id == uid, _by_guild(Turn.session_id, guild_id)).values(author_id=tomb, author_name=DELETED_NAME)
        )
    return None


async def _votes(s: AsyncSession, req: PrivacyRequest, uid: int) -> int | None:
    open_rounds = select(VoteRound.id).where(VoteRound.status == "open").scalar_subquery()
    await s.execute(delete(VoteBallot).where(VoteBallot.voter_id == uid, VoteBallot.round_id.in_(open_rounds)))
    await s.execute(delete(VoteProposal).where(VoteProposal.author_id == uid, VoteProposal.round_id.in_(open_rounds)))
    for guild_id, tomb in (await _tombstones(s, req, uid)).items():
        rounds = select(VoteRound.id).where(_by_guild(VoteRound.session_id, guild_id)).scalar_subquery()
        await s.execute(update(VoteBallot).where(VoteBallot.voter_id == uid, VoteBallot.round_id.in_(rounds)).values(voter_id=tomb))
        await s.execute(
            update(VoteProposal)
            .where(VoteProposal.author_id == uid, VoteProposal.round_id.in_(rounds))
            .values(author_id=tomb, author_name=DELETED_NAME, motion="", adverb="", background="", time_of_day="", instruction="")
        )
        await s.execute(update(VoteRound).where(VoteRound.opened_by == uid, VoteRound.id.in_(rounds)).values(opened_by=tomb))
    return None


def _quotable(names: Sequence[str]) -> list[str]:
    """Names looked for inside free text, longest first; one or two characters would match
    inside unrelated words, so those are left."""
    return sorted((n for n in names if len(n) >= MIN_QUOTED_NAME), key=len, reverse=True)


def _scrub(text: str | None, names: Sequence[str], uid: int) -> str | None:
    if not text:
        return text
    out = text.replace(f"<@{uid}>", DELETED_NAME).replace(f"<@!{uid}>", DELETED_NAME).replace(str(uid), DELETED_NAME)
    for name in _quotable(names):  # as a word: "bob" leaves "bobcat" alone
        out = re.sub(rf"(?<!\w){re.escape(name)}(?!\w)", DELETED_NAME, out)
    return out


def _scrub_json(value: object, names: Sequence[str], uid: int, tomb: int) -> object:
    if isinstance(value, dict):
        return {k: _scrub_json(v, names, uid, tomb) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub_json(v, names, uid, tomb) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and value == uid:
        return tomb
    if isinstance(value, str):
        return _scrub(value, names, uid)
    return value


async def _ids_and_names(s: AsyncSession, req: PrivacyRequest, uid: int) -> int | None:
    names = list(req.names or [])
    quoted_names = _quotable(names)
    await s.execute(delete(Player).where(Player.user_id == uid))
    await s.execute(delete(MemberNotice).where(MemberNotice.user_id == uid))
    tombs = await _tombstones(s, req, uid)
    for guild_id, tomb in tombs.items():
        in_guild = _by_guild(Turn.session_id, guild_id)
        await s.execute(update(Turn).where(Turn.removed_by_id == uid, in_guild).values(removed_by_id=tomb, removed_by_name=DELETED_NAME))
        await s.execute(update(GameSession).where(GameSession.created_by == uid, GameSession.guild_id == guild_id).values(created_by=tomb))
        await s.execute(
            update(ContentFilterTerm).where(ContentFilterTerm.added_by == uid, ContentFilterTerm.guild_id == guild_id).values(added_by=tomb)
        )
        details_text = cast(AuditLog.details, String)
        about = or_(_audit_of(uid), details_text.contains(str(uid)), *(details_text.contains(n) for n in quoted_names))
        entries = (await s.scalars(select(AuditLog).where(AuditLog.guild_id == guild_id, about))).all()
        for e in entries:
            if e.actor_id == uid:
                e.actor_id, e.actor_name = tomb, DELETED_NAME
            if e.target == str(uid):
                e.target = str(tomb)
            details = _scrub_json(dict(e.details or {}), names, uid, tomb)
            if e.actor_id == tomb and e.action.endswith("_refused") and isinstance(details, dict):
                details["text"] = ""  # the words the content rules refused were theirs
            e.details = details if isinstance(details, dict) else {}
        if quoted_names:  # free text quoting them: who cancelled a turn, a moderator's words
            free = (Turn.error, Turn.cancelled_by_name, Turn.cancel_note, Turn.removed_note)
            quoted = or_(*(col.contains(n) for col in free for n in quoted_names))
            for t in (await s.scalars(select(Turn).where(in_guild, quoted))).all():
                if t.error not in CANCEL_CODES:  # a code names nobody (a reason stored before the codes may)
                    t.error = _scrub(t.error, names, uid)
                t.cancelled_by_name, t.cancel_note = _scrub(t.cancelled_by_name, names, uid), _scrub(t.cancel_note, names, uid)
                t.removed_note = _scrub(t.removed_note, names, uid)
            said = or_(*(GameSession.paused_note.contains(n) for n in quoted_names))
            for gs in (await s.scalars(select(GameSession).where(GameSession.guild_id == guild_id, said))).all():
                gs.paused_note = _scrub(gs.paused_note, names, uid)
    await s.flush()
    return None


async def _done(s: AsyncSession, req: PrivacyRequest, uid: int) -> int | None:
    """Forget the member, unless rows of theirs appeared meanwhile (they played on while the
    request ran): then the steps run again from the first."""
    if await _guilds_of(s, uid):
        return 0
    await s.execute(delete(MemberNotice).where(MemberNotice.user_id == uid))  # shown meanwhile: no server to wait for
    req.user_id, req.names, req.status, req.done_at = None, None, "done", func.now()
    return None


_STEP_FUNCTIONS = (_collect, _turns, _votes, _ids_and_names, _done)
assert len(_STEP_FUNCTIONS) == STEPS


async def process_step(s: AsyncSession, request_id: int) -> bool:
    """Do the request's next step in the caller's transaction (which the caller commits). False
    when there is nothing to do: the request is done, gone, or held by another process."""
    req = await lock_request(s, request_id)
    if req is None or req.user_id is None:
        return False
    again = await _STEP_FUNCTIONS[req.step % STEPS](s, req, req.user_id)
    req.step = req.step + 1 if again is None else again
    await s.flush()
    return True


async def process(sessions, request_id: int, *, max_steps: int | None = None, before_done: bool = False) -> int:
    """Carry a request out, one committed transaction per step; returns the steps done.
    `max_steps` stops early (tests: a restart halfway); `before_done` stops before the last step
    (the bot edits the removed shots' posts in between). Each step locks the request with SKIP
    LOCKED, so two processes never work on one request at once."""
    done, limit = 0, max_steps if max_steps is not None else 3 * STEPS  # more: the next run goes on
    while done < limit:
        async with sessions.begin() as s:
            if before_done and await s.scalar(select(PrivacyRequest.step).where(PrivacyRequest.id == request_id)) == STEPS - 1:
                break
            if not await process_step(s, request_id):
                break
        done += 1
    return done


@dataclass(frozen=True)
class Post:
    """A message of a member's turn that Discord still shows (its post, or its status message)."""

    seq: int
    guild_id: int
    channel_id: int
    message_id: int


async def posts_to_clear(s: AsyncSession, request_id: int) -> list[Post]:
    """The messages of the request's turns (its tombstones' removed turns): what the bot edits
    into a notice. Asked again after a restart, it gives the same (an edit is idempotent)."""
    tombs = select(-PrivacyTombstone.id).where(PrivacyTombstone.request_id == request_id).scalar_subquery()
    q = (
        select(Turn.seq, GameSession.guild_id, GameSession.channel_id, func.coalesce(Turn.posted_message_id, Turn.status_message_id))
        .join(GameSession, GameSession.id == Turn.session_id)
        .where(Turn.author_id.in_(tombs), Turn.removed_at.is_not(None))
        .order_by(Turn.id)
    )
    return [Post(seq, g, ch, m) for seq, g, ch, m in (await s.execute(q)).all() if m is not None]


async def rounds_to_refresh(s: AsyncSession, request_id: int) -> list[int]:
    """Vote rounds whose message may still show the member (a proposal with their name and
    text): the open ones in their servers (a proposal of theirs may just have been deleted) and
    the closed ones with a proposal now under their tombstone."""
    tombs = select(-PrivacyTombstone.id).where(PrivacyTombstone.request_id == request_id).scalar_subquery()
    guilds = select(PrivacyTombstone.guild_id).where(PrivacyTombstone.request_id == request_id).scalar_subquery()
    theirs = select(VoteProposal.round_id).where(VoteProposal.author_id.in_(tombs)).scalar_subquery()
    q = select(VoteRound.id).where(
        VoteRound.message_id.is_not(None),
        or_(VoteRound.id.in_(theirs), (VoteRound.status == "open") & VoteRound.guild_id.in_(guilds)),
    )
    return list((await s.scalars(q.order_by(VoteRound.id))).all())


async def process_pending(sessions, limit: int = 10, before_done=None) -> list[int]:
    """Every pending request (the bot's scheduled job); the ids it finished. `before_done(request_id)`
    is awaited before each request's last step (the bot edits the removed shots' posts)."""
    async with sessions() as s:
        ids = list(
            (await s.scalars(
                select(PrivacyRequest.id).where(PrivacyRequest.status == "pending").order_by(PrivacyRequest.id).limit(limit)
            )).all()
        )
    finished = []
    for request_id in ids:
        for _ in range(3):  # more rounds only when the member played on meanwhile; the next run goes on
            await process(sessions, request_id, before_done=True)
            if before_done is not None:
                await before_done(request_id)
            await process(sessions, request_id, max_steps=1)  # the last step (or back to the first)
            async with sessions() as s:
                if await s.scalar(select(PrivacyRequest.status).where(PrivacyRequest.id == request_id)) == "done":
                    finished.append(request_id)
                    break
    return finished

