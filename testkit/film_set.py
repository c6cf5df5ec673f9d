"""A tiny training set in the film pipeline's format, and tiny models for phase (b): the tests'
stand-ins for `animegamer film prepare` + `film features` output and for Mistral, the tokenizer
and phase (a)'s encoder (all random, nothing downloaded)."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from film.features import FORMAT, shard_name, write_shard
from film.games import write_games
from film.manifest import FEATURES_INDEX, Clip, write_lines, write_manifest
from testkit.tiny import mllm as tiny
from training.encoder import RepresentationEncoder

TEXT_DIM, IMAGE_DIM, WIDTH = 8, 12, 32  # T5, CLIP and representation widths, tiny
MOTIONS = ("fly", "run", "walk", "jump", "eat", "sleep")
BACKGROUNDS = ("sky", "forest", "sea", "town", "street", "house")


def training_set(path: Path, clips: int = 12, seed: int = 0, heldout_every: int = 0) -> Path:
    """`clips` accepted clips of two characters in runs of 3 shots; the states follow the motion
    (so a model can learn them from the instruction). `heldout_every`: every n-th game is held out."""
    g = torch.Generator().manual_seed(seed)
    path.mkdir(parents=True, exist_ok=True)
    refs = path / "references"
    refs.mkdir(exist_ok=True)
    cast = []
    for cid, name in (("qiqi", "Qiqi"), ("jiji", "Jiji")):
        (refs / f"{cid}.png").write_bytes(b"\x89PNG\r\n\x1a\n")
        cast.append({"id": cid, "name": name, "reference": f"references/{cid}.png"})
    (path / "cast.json").write_text(json.dumps({"characters": cast}), encoding="utf-8")
    records, tensors = [], {}
    for n in range(clips):
        m = n % len(MOTIONS)
        cid = f"film-{n // 3:04d}-{n % 3:02d}"
        records.append(Clip(id=cid, source="film.mp4", shot=n // 3, start_s=2.0 * n, end_s=2.0 * n + 2.0,
                            clip=f"clips/{cid}.mp4", stills=(), motion_flow=1.0, motion_level=1 + m % 5,
                            status="accepted", character="qiqi" if (n // 6) % 2 == 0 else "jiji",
                            motion=MOTIONS[m], adverb="quickly", background=BACKGROUNDS[m], time="night",
                            social=m % 2, entertainment=int(m >= 3), stamina=-1 if m % 3 else 1,
                            features=shard_name(0)))
        tensors[f"{cid}/latents"] = torch.randn(5, 4, 2, 2, generator=g).to(torch.bfloat16)
        tensors[f"{cid}/image"] = torch.randn(196, IMAGE_DIM, generator=g).to(torch.bfloat16)
        tensors[f"{cid}/text"] = torch.randn(226, TEXT_DIM, generator=g).to(torch.bfloat16)
    write_manifest(path, records)
    write_shard(path / shard_name(0), tensors, {"format": FORMAT, "clips": [r.id for r in records], "texts": {},
                                               "models": {}})
    write_lines(path / FEATURES_INDEX, [json.dumps({r.id: shard_name(0) for r in records})])
    write_games(path, records, heldout=0.0)
    if heldout_every:
        games = [json.loads(line) for line in (path / "games.jsonl").read_text().splitlines()]
        for i, game in enumerate(games):
            game["split"] = "heldout" if i % heldout_every == heldout_every - 1 else "train"
        write_lines(path / "games.jsonl", [json.dumps(game) for game in games])
    return path


def models(path: Path) -> dict[str, Path]:
    """Tiny Mistral, the AnimeGamer tokenizer and a phase-(a) encoder (random), as files."""
    path.mkdir(parents=True, exist_ok=True)
    out = {"mistral": path / "mistral", "tokenizer": path / "tokenizer", "encoder": path / "encoder.safetensors"}
    tiny.build_tokenizer(out["tokenizer"])
    tiny.build_mistral(out["mistral"])
    torch.manual_seed(5)
    RepresentationEncoder(text_dim=TEXT_DIM, image_dim=IMAGE_DIM, width=WIDTH).save(out["encoder"])
    return out


def phase_b_table(files: dict[str, Path], **overrides) -> dict:
    table = {"base_model": str(files["mistral"]), "tokenizer": str(files["tokenizer"]), "encoder": str(files["encoder"]),
             "quantize": "none", "film_id": "tinyfilm", "title": "Tiny Film", "export_dtype": "fp32"}
    return {**table, **overrides}
