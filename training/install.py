"""`animegamer train install RUN_DIR...`: a trained film's exports put where the worker looks, and
its films-file table merged into the operator's films file, so that `animegamer worker --film ID`,
the bot and the play page offer it with no other step (docs/training.md, "Playing the new film").

What a run folder holds (training/engine.py writes `<run>/export/`):

    phase (b)       <run>/export/MLLM-<id>/pytorch_model.bin    and <run>/films.toml ([films.<id>])
    phase (a)/(c)   <run>/export/decoder/ (transformer/, vae/, decoder.json)   (c) writes films.toml too

Where they go is inference.model_paths' layout, with the folder names of the film's table:
`<models>/animegamer/<mllm_checkpoint>/` and `<models>/converted/<id>/decoder/`. Each folder is
copied (or linked) to a hidden sibling first and renamed into place, so a half-copied folder is
never taken for a model. Everything is checked before anything is written."""

from __future__ import annotations

import os
import re
import shutil
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from training.engine import EXPORT
from training.export import FILMS_FILE, _without_film

DECODER_DIR = "decoder"  # training.decoder_export.DECODER_DIR (not imported: it pulls in the decoder's models)
AGENT_FILES = ("pytorch_model.bin", "model.safetensors", "pytorch_model.safetensors")  # model_paths.agent_checkpoint
HEADER = ("# Films installed by `animegamer train install` (docs/training.md). Name this file in\n"
          "# ANIMEGAMER_FILMS; `animegamer films check` validates it.\n")


class InstallError(Exception):
    """A refusal: one line for the operator."""


@dataclass(frozen=True)
class Export:
    run: Path
    folder: Path
    film_id: str | None  # the film the run's films.toml names for it (None: phase (a), no entry)
    entry: str | None  # that film's tables, as text


@dataclass(frozen=True)
class Installed:
    film_id: str
    title: str
    mllm: Path
    decoder: Path
    films_file: Path
    setting_line: str | None  # `ANIMEGAMER_FILMS=...` when the settings do not name films_file yet


def film_tables(text: str, film_id: str) -> str:
    """The text of `film_id`'s tables ([films.ID] and [films.ID.*]) in a films file: what
    training.export._without_film leaves out."""
    out, owner = [], None
    for line in text.splitlines(keepends=True):
        header = re.match(r"^\[films\.([a-z0-9_-]+)[.\]]", line)
        if header:
            owner = header.group(1)
        if owner == film_id:
            out.append(line)
    return "".join(out).strip() + "\n"


def _run_films(run: Path) -> dict[str, dict]:
    path = run / FILMS_FILE
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise InstallError(f"{path}: not a readable films file ({e})") from None
    films = data.get("films", {})
    return {k: v for k, v in films.items() if isinstance(v, dict)} if isinstance(films, dict) else {}


def find_exports(runs: Sequence[Path]) -> tuple[list[Export], list[Export]]:
    """The MLLM and decoder exports of the run folders (missing exports refused)."""
    mllms, decoders = [], []
    for run in map(Path, runs):
        if not run.is_dir():
            raise InstallError(f"{run}: no such run folder")
        export = run / EXPORT
        tables = _run_films(run)
        text = (run / FILMS_FILE).read_text(encoding="utf-8") if tables else ""
        found = False
        for folder in sorted(export.glob("MLLM-*")) if export.is_dir() else []:
            if not any((folder / name).is_file() for name in AGENT_FILES):
                raise InstallError(f"{run}: {folder.name}/ holds no pytorch_model.bin (an unfinished export?)")
            named = [fid for fid, t in tables.items() if t.get("mllm_checkpoint") == folder.name]
            film_id = named[0] if named else folder.name.removeprefix("MLLM-")
            mllms.append(Export(run, folder, film_id, film_tables(text, film_id) if film_id in tables else None))
            found = True
        decoder = export / DECODER_DIR
        if decoder.is_dir():
            needed = [decoder / "decoder.json", decoder / "transformer" / "config.json", decoder / "vae" / "config.json"]
            missing = [str(p.relative_to(decoder)) for p in needed if not p.is_file()]
            if missing:
                raise InstallError(f"{run}: {EXPORT}/{DECODER_DIR}/ lacks {', '.join(missing)} (an unfinished export?)")
            film_id = next(iter(tables)) if len(tables) == 1 else None
            decoders.append(Export(run, decoder, film_id, film_tables(text, film_id) if film_id else None))
            found = True
        if not found:
            raise InstallError(f"{run}: no export ({EXPORT}/MLLM-<id>/ or {EXPORT}/{DECODER_DIR}/): did the run finish?")
    return mllms, decoders


def pair(mllms: list[Export], decoders: list[Export]) -> tuple[Export, Export]:
    """The film's MLLM and decoder (one film at a time); refuses a half of a film, saying which."""
    if not mllms:
        runs = ", ".join(str(d.run) for d in decoders)
        raise InstallError(f"{runs} holds a decoder but no MLLM run was given: add phase (b)'s run folder "
                           f"(with {EXPORT}/MLLM-<id>/)")
    if len(mllms) > 1:
        raise InstallError("several MLLM exports (" + ", ".join(str(m.folder) for m in mllms) + "): install one film at a time")
    mllm = mllms[0]
    if not decoders:
        raise InstallError(f"{mllm.run} holds the MLLM of film {mllm.film_id!r} but no decoder run was given: add the "
                           f"decoder phase's run folder (phase (c) or (a), with {EXPORT}/{DECODER_DIR}/)")
    other = [d for d in decoders if d.film_id not in (None, mllm.film_id)]
    if other:
        raise InstallError(f"{other[0].run} holds a decoder of film {other[0].film_id!r}, {mllm.run} the MLLM of "
                           f"{mllm.film_id!r}: give one film's runs")
    if len(decoders) > 1:  # phase (a) and (c) both given: (c)'s, which names the film, is the one played
        decoders = [d for d in decoders if d.film_id == mllm.film_id] or decoders
    if len(decoders) > 1:
        raise InstallError("several decoder exports (" + ", ".join(str(d.run) for d in decoders) + "): give the one to play")
    return mllm, decoders[0]


def _writable(folder: Path) -> None:
    """Refuses a folder that cannot be written (or created: its nearest existing parent)."""
    probe = folder
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise InstallError(f"{folder}: cannot write there ({probe} is not a writable folder)")


def place(src: Path, dest: Path, link: bool) -> None:
    """`src` copied (or symlinked) to `dest` by way of a hidden sibling renamed into place; an earlier
    `dest` is set aside first and removed after."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.installing-{os.getpid()}")
    old = dest.with_name(f".{dest.name}.replaced-{os.getpid()}")
    for leftover in (tmp, old):
        _remove(leftover)
    try:
        if link:
            tmp.symlink_to(src.resolve(), target_is_directory=True)
        else:
            shutil.copytree(src, tmp, symlinks=False)
        if dest.is_symlink() or dest.exists():
            dest.rename(old)
        tmp.rename(dest)
    except BaseException:
        if (old.is_symlink() or old.exists()) and not (dest.is_symlink() or dest.exists()):
            old.rename(dest)  # the earlier install stays
        raise
    finally:
        _remove(tmp)
    _remove(old)


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def merged_films_file(films_file: Path, film_id: str, entry: str) -> str:
    """The films file's text with the film's tables replaced by `entry`, checked by the game's
    parser over the packaged catalogue."""
    from game.films_file import CatalogueError, packaged_films, parse_films

    try:
        old = films_file.read_text(encoding="utf-8") if films_file.is_file() else ""
    except (OSError, UnicodeDecodeError) as e:
        raise InstallError(f"{films_file}: cannot read it ({e})") from None
    kept = _without_film(old, film_id).rstrip()
    text = (kept + "\n\n" if kept else HEADER + "\n") + entry
    try:
        films = parse_films(tomllib.loads(text), str(films_file), packaged_films())
    except tomllib.TOMLDecodeError as e:
        raise InstallError(f"{films_file}: with the film's table it is not valid TOML ({e})") from None
    except CatalogueError as e:
        more = f" (and {len(e.problems) - 1} more: animegamer films check)" if len(e.problems) > 1 else ""
        raise InstallError(f"the films file would be invalid: {e.problems[0]}{more}") from None
    if film_id not in films:
        raise InstallError(f"{films_file}: film {film_id!r} would not be in the catalogue (enabled = false?)")
    return text


def install(runs: Sequence[Path], models: Path | None = None, films_file: Path | None = None, *, link: bool = False,
            replace: bool = False, configured_films: Path | None = None) -> Installed:
    """Checks everything, then places the exports and writes the films file.
    models: default the settings' models dir; films_file: default the settings' films file, else
    <models>/films.toml. configured_films: the films file the settings name (None: read them)."""
    from game.films_file import packaged_films, parse_films
    from inference.model_paths import film_paths

    mllm, decoder = pair(*find_exports(runs))
    film_id = mllm.film_id or ""
    entry = mllm.entry or decoder.entry
    if entry is None:
        raise InstallError(f"no films entry for film {film_id!r}: {mllm.run / FILMS_FILE} has no [films.{film_id}] "
                           "(phase (b) writes it after its export)")
    if film_id in packaged_films() and not replace:
        raise InstallError(f"film {film_id!r} is a packaged film: installing would override it; train under another "
                           "id (phase.film_id) or pass --replace")
    if configured_films is None:  # the settings: the models dir, and whether they name the films file
        from settings import SettingsError, load_settings

        try:
            settings = load_settings()
            models = Path(models) if models is not None else settings.model_root
            configured_films = settings.films
        except SettingsError as e:
            if models is None or films_file is None:
                raise InstallError(" ".join(str(e).split())) from None
    if models is None:
        raise InstallError("no models directory: pass --models DIR")
    models = Path(models)
    target = Path(films_file) if films_file else (Path(configured_films) if configured_films else models / FILMS_FILE)
    text = merged_films_file(target, film_id, entry)
    film = parse_films(tomllib.loads(entry), f"the films entry of {film_id}", base=packaged_films())[film_id]
    paths = film_paths(models, film)
    for folder in (paths.agent_dir.parent, paths.decoder.parent, target.parent):
        _writable(folder)
    if target.exists() and not os.access(target, os.W_OK):
        raise InstallError(f"{target}: cannot write the films file")
    try:
        place(mllm.folder, paths.agent_dir, link)
        place(decoder.folder, paths.decoder, link)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(target)
    except OSError as e:
        raise InstallError(f"cannot install: {e}") from None
    same = configured_films is not None and Path(configured_films).resolve() == target.resolve()
    line = None if same else f"ANIMEGAMER_FILMS={target.resolve()}"
    return Installed(film_id, film.title, paths.agent_dir, paths.decoder, target, line)
