"""The real AnimeGamer backend (transformers + peft MLLM, diffusers decoder) on tiny random weights,
as the worker builds it (make_backend from the models folder), playing one game of the film
pipeline's own games.jsonl (film.games writes it from accepted clips; references from its cast)."""

from __future__ import annotations

import numpy as np
import pytest

from evaluation.evaluate import Options, evaluate
from evaluation.run_dir import load_array, rep_path
from film.cast import Cast, Member, save_cast
from film.games import games_for
from film.manifest import Clip
from game.catalogue import FILMS
from inference.backends import make_backend
from inference.decoder.latent_preview import LatentRGB
from inference.model_paths import film_paths
from settings import Settings
from testkit.evaluation_set import write_references
from testkit.tiny.decoder import TINY_SIZE, TINY_TRANSFORMER_CONFIG
from testkit.tiny.models_dir import REP_DIM, build_models_dir
from tests.evaluation.test_eval_preview import StopAfter


def _clip(n: int, motion: str, level: int, states: tuple[int, int, int]) -> Clip:
    return Clip(id=f"film-0003-{n:02d}", source="film.mp4", shot=3, start_s=10.0 + 2 * n, end_s=12.0 + 2 * n,
                clip=f"clips/film-0003-{n:02d}.mp4", stills=(), motion_flow=10.0, motion_level=level,
                status="accepted", character="qiqi", motion=motion, adverb="quickly", background="sky", time="night",
                social=states[0], entertainment=states[1], stamina=states[2])


@pytest.fixture(scope="module")
def film_folder(tmp_path_factory):
    """A film pipeline folder: its cast (with reference images) and games.jsonl, all held out."""
    folder = tmp_path_factory.mktemp("film")
    refs = write_references(folder / "given", ids=("qiqi",))
    save_cast(Cast((Member("qiqi", "Qiqi", refs / "qiqi.png"),)), folder)
    games_for(folder, [_clip(0, "fly on broomstick", 4, (0, 1, -1)), _clip(1, "walk", 2, (1, 0, 1))], heldout=1.0)
    return folder


def test_a_game_through_the_real_backend(film_folder, clip_dir, tmp_path_factory):
    root = build_models_dir(tmp_path_factory.mktemp("models"), {"qiqi": (1, 0)})
    # The worker's in-progress previews need a latent -> colour map, fitted at load when a decoder has none
    # (~25 s on this CPU). The evaluation never asks for previews, so a zero map stands in for it here.
    decoder = film_paths(root, FILMS["qiqi"]).decoder
    LatentRGB(np.zeros((TINY_TRANSFORMER_CONFIG["in_channels"], 3), np.float32), np.zeros(3, np.float32)).save(str(decoder))
    settings = Settings(models_dir=root, device="cpu", dtype="float32", decoder_steps=2, history_window=2,
                        memory_mode="resident", mllm_max_batch=1)
    backend = StopAfter(make_backend(settings, "animegamer", films=["qiqi"]), 10)
    out = tmp_path_factory.mktemp("eval")
    report = evaluate(settings, Options(film="qiqi", games=film_folder / "games.jsonl", out=out, backend="animegamer",
                                        clip=clip_dir, progress=False), backend)
    assert report["run"]["backend"] == "animegamer" and report["run"]["memory_mode"] == "resident"
    assert report["run"]["preset"] == "exact" and report["run"]["decoder_steps"] == 2
    (game,) = report["games"]
    assert [t["instruction"] for t in game["turns"]] == [
        "Character: Qiqi; Motion: quickly fly on broomstick; Background: night sky.",
        "Character: Qiqi; Motion: quickly walk; Background: night sky."]
    first = load_array(rep_path(out, game["id"], 0))
    assert first.shape == (226, REP_DIM)
    # The second turn's history is the first turn as the model made it: its representation and states.
    (hist,) = backend.requests[1].history
    np.testing.assert_array_equal(hist.representation, first)
    assert list(hist.prediction.as_tuple()) == list(game["turns"][0]["predicted"].values())
    for turn in game["turns"]:
        assert set(turn["values"]) >= {"clip_i", "clip_t", "clip_t_e", "acc_f", "mae_f", "acc_s", "mae_s"}
        assert turn["values"]["clip_i"] is not None and turn["values"]["acc_f"] in (0.0, 1.0)
        assert 1 <= turn["measured_level"] <= 5
    from evaluation.metrics import read_frames

    frames = read_frames(out / game["turns"][0]["clip"])
    assert frames.shape == (17, TINY_SIZE["height"], TINY_SIZE["width"], 3)
    assert "The preview backend" not in (out / "report.md").read_text()
