"""Each metric on constructed cases whose answer is known."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from evaluation.games_file import EvalTurn
from evaluation.metrics import (
    CPU_REASON,
    Scorers,
    appearance_scores,
    not_measured,
    sample_indices,
    score_turn,
    state_scores,
)
from evaluation.scorers import DREAMSIM_MISSING, ClipScorer, DreamSimScorer, Unavailable
from testkit.lavfi import Shot, make_video


def _turn(level: int = 3, states=(0, 1, -1)) -> EvalTurn:
    return EvalTurn(0, "Character: Qiqi; Motion: quickly fly; Background: night sky.", "qiqi", "fly", "quickly",
                    "sky", "night", level, *states)


def _image(seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).random((48, 72, 3)) * 255).astype(np.uint8)


@pytest.fixture(scope="module")
def clip(clip_dir):
    scorer = ClipScorer.load(clip_dir)
    assert isinstance(scorer, ClipScorer)
    return scorer


def test_identical_frames_give_clip_i_one(clip, tmp_path):
    ref = _image(0)
    Image.fromarray(ref).save(tmp_path / "qiqi.png")  # lossless: the same pixels come back
    scorers = Scorers(clip, Unavailable("not here"))
    same = appearance_scores(scorers, np.stack([ref] * 5), tmp_path / "qiqi.png", _turn())
    assert same["clip_i"] == pytest.approx(1.0, abs=1e-5)
    other = appearance_scores(scorers, np.stack([_image(s) for s in range(1, 6)]), tmp_path / "qiqi.png", _turn())
    assert other["clip_i"] < 0.9999
    assert set(same) == {"clip_i", "clip_t", "clip_t_e"}  # no DreamSim without its model


def test_clip_t_is_the_cosine_with_the_instruction_and_its_environment(clip, tmp_path):
    frames = np.stack([_image(s) for s in range(3)])
    Image.fromarray(frames[0]).save(tmp_path / "r.png")
    got = appearance_scores(Scorers(clip, Unavailable("-")), frames, tmp_path / "r.png", _turn())
    emb = clip.images(list(frames))
    text, env = clip.texts(["Character: Qiqi; Motion: quickly fly; Background: night sky.", "night sky"])
    assert got["clip_t"] == pytest.approx(float((emb @ text).mean()), abs=1e-6)
    assert got["clip_t_e"] == pytest.approx(float((emb @ env).mean()), abs=1e-6)


@pytest.fixture(scope="module")
def pan(tmp_path_factory):
    """A pan of 80 px/s at 24 fps: 10 px per frame at 8 fps, the flow of motion level 3."""
    path = tmp_path_factory.mktemp("pan") / "pan.mp4"
    make_video(path, [Shot("pan", 2.2, 80, 3)], crf=12)
    return path


@pytest.mark.parametrize(("asked", "acc", "mae"), [(3, 1.0, 0.0), (4, 0.0, 1.0), (1, 0.0, 2.0)])
def test_known_motion_scores_against_the_asked_level(pan, tmp_path, asked, acc, mae):
    Image.fromarray(_image(0)).save(tmp_path / "r.png")
    record = {"predicted": [3, 0, 1, -1], "seconds": 1.5, "peak_gpu_bytes": None}
    got = score_turn(pan, record, _turn(asked), tmp_path / "r.png", Scorers(Unavailable("-"), Unavailable("-")))
    assert got["measured_level"] == 3
    assert (got["values"]["acc_f"], got["values"]["mae_f"]) == (acc, mae)
    assert got["values"]["clip_i"] is None and got["values"]["dreamsim"] is None  # not measured, not estimated
    assert got["values"]["seconds"] == 1.5 and got["values"]["peak_gpu_gib"] is None
    assert (got["values"]["acc_s"], got["values"]["mae_s"]) == (1.0, 0.0)  # predicted states equal to annotated


def test_states_equal_and_one_off():
    assert state_scores([0, 1, -1], (0, 1, -1)) == (1.0, 0.0)
    acc, mae = state_scores([1, 1, -1], (0, 1, -1))  # social one too high
    assert acc == pytest.approx(2 / 3) and mae == pytest.approx(1 / 3)
    acc, mae = state_scores([0, 1, 0], (0, 1, -1))  # stamina one too high
    assert acc == pytest.approx(2 / 3) and mae == pytest.approx(1 / 3)
    acc, mae = state_scores([2, 0, 1], (0, 1, -1))
    assert acc == 0.0 and mae == pytest.approx((2 + 1 + 2) / 3)


def test_missing_models_are_not_measured_with_their_reason(tmp_path):
    clip = ClipScorer.load(tmp_path / "nothing")
    dreamsim = DreamSimScorer.load(tmp_path / "nothing")
    assert isinstance(clip, Unavailable) and "no CLIP model" in clip.reason
    assert isinstance(dreamsim, Unavailable) and dreamsim.reason == DREAMSIM_MISSING  # not installable here
    why = not_measured(Scorers(clip, dreamsim), [{"peak_gpu_bytes": None}])
    assert set(why) == {"clip_i", "clip_t", "clip_t_e", "dreamsim", "peak_gpu_gib"}
    assert why["peak_gpu_gib"] == CPU_REASON and "dreamsim package" in why["dreamsim"]


def test_sampled_frames_are_spread_over_the_clip():
    assert sample_indices(17) == [0, 4, 8, 12, 16]
    assert sample_indices(3) == [0, 1, 2]
