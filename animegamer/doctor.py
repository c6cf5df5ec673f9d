"""`animegamer doctor`: check that this machine can run the bot or a worker, and say what to fix.

Each check gives a row (check, status, detail); status is OK, FAIL, WARN (works, but look at
it), SKIP (could not or need not be checked) or INFO. Any FAIL makes the exit status 1. Checks
never hang: the database and Discord are reached with short timeouts.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

OK, FAIL, WARN, SKIP, INFO = "OK", "FAIL", "WARN", "SKIP", "INFO"
DB_TIMEOUT = 5.0  # seconds to connect to Postgres
DISCORD_TIMEOUT = 5.0
DISCORD_API = "https://discord.com/api/v10"


@dataclass(frozen=True)
class Row:
    check: str
    status: str
    detail: str


def _one_line(text) -> str:
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].endswith(":"):  # "invalid settings:" + one line per setting
        return lines[0] + " " + "; ".join(lines[1:])
    return "; ".join(lines)


def redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return url


# ------------------------------------------------------------------------------------------
# Checks


def check_settings():
    from game.catalogue import load_checked_settings as load_settings
    from settings import SettingsError

    try:
        s = load_settings()
    except SettingsError as e:
        return None, Row("settings", FAIL, _one_line(e))
    from game.catalogue import FILMS

    db = "embedded Postgres" if not s.database_url else "DATABASE_URL"
    films = f"films={', '.join(FILMS)}" + (f" (with {s.films})" if s.films else "")
    return s, Row("settings", OK, f"backend={s.backend}, database={db}, models={s.model_root}, {films}")


async def _database(url: str) -> list[Row]:
    from db.engine import make_engine
    from db.migrate import alembic_config, current_revision, head_revision

    engine = make_engine(url, connect_args={"timeout": DB_TIMEOUT}, pool_pre_ping=False)
    try:
        try:
            async with asyncio.timeout(DB_TIMEOUT * 2):
                async with engine.connect() as conn:
                    version = (await conn.exec_driver_sql("SHOW server_version")).scalar()
                current = await current_revision(engine)
        except Exception as e:  # any failure to connect is the finding itself
            reason = _one_line(e) or type(e).__name__
            return [Row("database", FAIL, f"cannot connect to {redact(url)}: {reason}"),
                    Row("migrations", SKIP, "no database connection")]
    finally:
        await engine.dispose()
    rows = [Row("database", OK, f"{redact(url)} (PostgreSQL {version})")]
    head = head_revision()
    if current == head:
        rows.append(Row("migrations", OK, f"at head {head}"))
    elif current is None:
        rows.append(Row("migrations", FAIL, f"empty database (head is {head}): run `animegamer db upgrade`"))
    else:
        from alembic.script import ScriptDirectory

        try:
            known = ScriptDirectory.from_config(alembic_config()).get_revision(current) is not None
        except Exception:
            known = False
        if known:
            rows.append(Row("migrations", FAIL, f"at {current}, head is {head}: run `animegamer db upgrade`"))
        else:
            rows.append(Row("migrations", FAIL, f"at {current}, which this version does not know (newer code migrated it?); head is {head}"))
    return rows


def check_database(settings) -> list[Row]:
    from db.engine import resolve_database_url

    try:
        url = resolve_database_url(settings)  # starts the embedded server when no URL is set
    except Exception as e:
        return [Row("database", FAIL, _one_line(e)), Row("migrations", SKIP, "no database")]
    return asyncio.run(_database(url))


def check_ffmpeg() -> Row:
    import numpy as np

    from inference.mp4 import FFmpegMissing, encode_mp4, ffmpeg_binary

    try:
        binary = ffmpeg_binary()
        clip = encode_mp4(np.zeros((2, 16, 16, 3), dtype=np.uint8), fps=8)
    except FFmpegMissing as e:
        return Row("ffmpeg", FAIL, _one_line(e))
    except Exception as e:
        return Row("ffmpeg", FAIL, f"a test encode failed: {_one_line(e)}")
    if clip[4:8] != b"ftyp":
        return Row("ffmpeg", FAIL, f"{binary} wrote no MP4 ({len(clip)} bytes)")
    return Row("ffmpeg", OK, f"{binary} (H.264 test encode, {len(clip)} bytes)")


def check_models(settings, films: list[str]) -> list[Row]:
    from game.catalogue import FILMS
    from inference.model_inventory import inventory

    required = settings.backend == "animegamer"
    rows = []
    for film_id in films:
        if film_id not in FILMS:
            rows.append(Row(f"models {film_id}", FAIL, f"not in the film catalogue; known: {', '.join(sorted(FILMS))}"))
            continue
        parts = inventory(settings.model_root, FILMS[film_id])
        missing = [c for c in parts if c.for_worker and not c.present]
        if not missing:
            rows.append(Row(f"models {film_id}", OK, f"all parts the worker loads are in {settings.model_root}"))
            continue
        detail = f"missing in {settings.model_root}: " + ", ".join(c.name for c in missing)
        if required:
            rows.append(Row(f"models {film_id}", FAIL, f"{detail}; run `animegamer models download {film_id}`"))
        else:
            rows.append(Row(f"models {film_id}", INFO, f"{detail} (not needed: backend={settings.backend})"))
    return rows


def check_gpu(settings, gpu_memory: list[float] | None = None, sessions: int = 1) -> list[Row]:
    """The GPUs found (or, without one, the sizes given with --gpu-memory) and whether the memory
    mode fits them, by the memory plan's prediction (inference.memory.plan)."""
    needed = settings is not None and settings.backend == "animegamer"
    if importlib.util.find_spec("torch") is None:
        return [Row("gpu", FAIL if needed else INFO, "torch is not installed (the `models` extra / worker image has it)")]
    import torch

    rows = []
    if not torch.cuda.is_available():
        device = settings.device if settings is not None else "auto"
        if needed and device.startswith("cuda"):
            return [Row("gpu", FAIL, f"ANIMEGAMER_DEVICE={device} but CUDA is not available (torch {torch.__version__})")]
        status = WARN if needed and not gpu_memory else INFO
        rows.append(Row("gpu", status, f"no CUDA GPU (torch {torch.__version__}); the AnimeGamer backend is impractical on CPU"))
        totals = list(gpu_memory or [])
    else:
        for i in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(i)
            free, total = torch.cuda.mem_get_info(i)
            rows.append(Row(f"gpu {i}", OK, f"{props.name}, {total / 2**30:.1f} GiB total, {free / 2**30:.1f} GiB free"))
        totals = list(gpu_memory or [torch.cuda.get_device_properties(i).total_memory / 2**30
                                     for i in range(torch.cuda.device_count())])
    if totals and (needed or gpu_memory):
        names = None if gpu_memory or not torch.cuda.is_available() else [
            torch.cuda.get_device_properties(i).name for i in range(torch.cuda.device_count())]
        rows.append(gpu_mode_advice(totals, settings, sessions, names))
    return rows


def gpu_mode_advice(totals_gib: list[float], settings, sessions: int = 1, names: list[str] | None = None) -> Row:
    """Whether the settings' memory mode fits GPUs of these sizes (GiB) at `sessions` concurrent
    turns (auto, the default: the mode it would pick), which mode would, the headroom, and the
    estimated seconds per turn: the worker refuses at start what this calls FAIL."""
    from inference.memory.cards import card_named, estimate_line, nearest_card, turn_work
    from inference.memory.choose_mode import mode_of, predictions
    from inference.memory.plan import advise

    mode = mode_of(settings) if settings is not None else "auto"
    try:
        preds = predictions(sessions)
        advice = advise(totals_gib, mode, sessions, preds)
    except Exception as e:  # noqa: BLE001  (the worker starts without the check then: say so, do not crash)
        return Row("gpu mode", WARN, f"the memory plan could not run here ({type(e).__name__}: {e}); "
                                     "the worker starts without its memory check")
    message = advice.message
    if advice.fits:
        pick = next((p for p in preds if p.mode == advice.mode and p.sessions == sessions and p.tiles == advice.tiles), None)
        biggest = max(totals_gib)
        named = card_named(names[totals_gib.index(biggest)], biggest) if names else None
        card = named or nearest_card(biggest)
        steps = settings.decoder_steps if settings is not None else 50
        try:
            if pick is not None:
                message += f"; {estimate_line(turn_work(pick, steps), card, nearest=named is None)}"
        except Exception as e:  # noqa: BLE001  (an estimate that cannot be counted leaves the answer)
            message += f"; no estimate of the seconds per turn ({type(e).__name__}: {e})"
    return Row("gpu mode", OK if advice.fits else FAIL, message)


def check_discord_token(token: str | None, api: str = DISCORD_API, timeout: float = DISCORD_TIMEOUT) -> Row:
    """GET /users/@me with the token: 200 = valid, 401 = rejected, no route = skipped."""
    if not token or not token.strip():
        return Row("discord token", SKIP, "ANIMEGAMER_DISCORD_TOKEN not set (only `animegamer bot` needs it)")
    from bot.invite import InviteError, client_id_from_token

    try:
        client_id_from_token(token)
    except InviteError as e:
        return Row("discord token", FAIL, str(e))
    req = urllib.request.Request(
        f"{api}/users/@me",
        headers={"Authorization": f"Bot {token.strip()}", "User-Agent": "DiscordBot (animegamer-doctor, 1)"},
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            me = json.load(r)
    except urllib.error.HTTPError as e:
        if e.code == 401:
            return Row("discord token", FAIL, "Discord rejected the token (401): reset it in the developer portal")
        return Row("discord token", WARN, f"Discord answered {e.code} {e.reason}; validity unknown")
    except (TimeoutError, urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        return Row("discord token", SKIP, f"Discord not reachable from here ({reason}); token not checked")
    name = me.get("username", "?")
    return Row("discord token", OK, f"valid: bot user {name} (id {me.get('id')})" + ("" if me.get("bot") else "; NOT a bot account"))


# ------------------------------------------------------------------------------------------


SKIPPABLE = ("database", "ffmpeg", "models", "gpu", "discord")


def run_checks(films: list[str] | None = None, network: bool = True, skip: tuple[str, ...] = (),
               gpu_memory: list[float] | None = None, sessions: int = 1) -> list[Row]:
    settings, row = check_settings()
    rows = [row]
    need = Row("", SKIP, "needs valid settings")
    if "database" in skip:
        rows.append(Row("database", SKIP, "--skip database"))
    elif settings is not None:
        rows += check_database(settings)
    else:
        rows += [Row("database", need.status, need.detail), Row("migrations", need.status, need.detail)]
    rows.append(Row("ffmpeg", SKIP, "--skip ffmpeg") if "ffmpeg" in skip else check_ffmpeg())
    if "models" in skip:
        rows.append(Row("models", SKIP, "--skip models"))
    elif settings is not None:
        from game.catalogue import film_selection
        from game.errors import UnknownFilm

        try:  # `all` and comma lists as for the worker
            rows += check_models(settings, film_selection(films) or [settings.default_film])
        except UnknownFilm as e:
            rows.append(Row("models", FAIL, e.message))
    else:
        rows.append(Row("models", need.status, need.detail))
    rows += [Row("gpu", SKIP, "--skip gpu")] if "gpu" in skip else check_gpu(settings, gpu_memory, sessions)
    if "discord" in skip:
        rows.append(Row("discord token", SKIP, "--skip discord"))
    elif settings is None:
        rows.append(Row("discord token", need.status, need.detail))
    elif not network:
        rows.append(Row("discord token", SKIP, "--no-network"))
    else:
        token = settings.discord_token.get_secret_value() if settings.discord_token else None
        rows.append(check_discord_token(token))
    return rows


def render(rows: list[Row]) -> str:
    w = max(len(r.check) for r in rows)
    lines = [f"{'check':{w}}  status  detail", f"{'-' * w}  ------  {'-' * 40}"]
    lines += [f"{r.check:{w}}  {r.status:6}  {r.detail}" for r in rows]
    counts = {s: sum(r.status == s for r in rows) for s in (OK, FAIL, WARN, SKIP, INFO)}
    lines.append("")
    lines.append(", ".join(f"{n} {s}" for s, n in counts.items() if n))
    return "\n".join(lines)


def _doctor(args) -> int:
    rows = run_checks(args.film, network=not args.no_network, skip=tuple(args.skip or ()),
                      gpu_memory=args.gpu_memory, sessions=args.sessions)
    if args.json:
        print(json.dumps([r.__dict__ for r in rows], indent=1))
    else:
        print(render(rows))
    return 1 if any(r.status == FAIL for r in rows) else 0


def _gpu_sizes(text: str) -> list[float]:
    import argparse

    from inference.memory.choose_mode import parse_sizes

    try:
        return parse_sizes(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def register(sub) -> None:
    p = sub.add_parser("doctor", help="check settings, database, ffmpeg, models, GPU and the Discord token")
    p.add_argument("--film", action="append",
                   help="check these films' models (repeatable, comma-separated or `all`; default: ANIMEGAMER_DEFAULT_FILM)")
    p.add_argument("--no-network", action="store_true", help="do not contact Discord")
    p.add_argument("--skip", action="append", choices=SKIPPABLE, help="leave out a check (repeatable), e.g. gpu on the bot's host")
    p.add_argument("--json", action="store_true", help="rows as JSON (for monitoring) instead of the table")
    p.add_argument("--gpu-memory", type=_gpu_sizes, default=None, metavar="SIZE[,SIZE]",
                   help="check the memory mode against GPUs of this size (e.g. 24GiB, or 24GB,24GB for two) "
                        "instead of the ones found: the memory plan's prediction, no GPU needed")
    p.add_argument("--sessions", type=int, default=1, choices=(1, 2, 3, 4),
                   help="concurrent turns the worker decodes together (its --concurrency; default 1)")
    p.set_defaults(func=_doctor)

