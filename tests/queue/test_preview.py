"""The preview backend's clip (checked with ffprobe) and its word rules."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

from contracts.turn import TurnRequest
from game import preview_rules
from game.states import CharacterState
from inference.backends import BackendUnavailable, make_backend
from inference.backends.preview import PreviewBackend
from settings import Settings


def _request(**kw) -> TurnRequest:
    base = dict(
        turn_id=1, session_id=1, film_id="qiqi", instruction="Character: Qiqi, Jiji; Motion: quickly fly on broomstick; Background: night sky.",
        characters=("Qiqi", "Jiji"), motion="fly on broomstick", adverb="quickly", background="sky", time_of_day="night",
        seed=7, states_before={"Qiqi": CharacterState(80, 20, 50)},
    )
    return TurnRequest(**{**base, **kw})


def _probe(path) -> dict:
    out = subprocess.run(
        ["ffprobe", "-v", "error", "-select_streams", "v:0", "-count_frames",
         "-show_entries", "stream=codec_name,pix_fmt,width,height,nb_read_frames,r_frame_rate", "-of", "json", str(path)],
        capture_output=True, text=True, check=True,
    )
    return json.loads(out.stdout)["streams"][0]


@pytest.mark.parametrize("size", [(720, 480), (160, 96)])
def test_preview_clip_decodes(tmp_path, size):
    w, h = size
    stages = []
    result = PreviewBackend(width=w, height=h).generate(_request(), lambda f, s: stages.append((f, s)))
    path = tmp_path / "clip.mp4"
    path.write_bytes(result.mp4)
    info = _probe(path)
    assert info == {"codec_name": "h264", "width": w, "height": h, "pix_fmt": "yuv420p", "r_frame_rate": "8/1", "nb_read_frames": "17"}
    assert len(result.mp4) < 10 * 1024 * 1024
    assert result.mp4.index(b"moov") < result.mp4.index(b"mdat")  # +faststart: index first
    assert result.is_preview and result.representation is None
    assert [f for f, _ in stages] == sorted(f for f, _ in stages) and stages[-1] == (1.0, "done")


def test_preview_frames_move_and_are_labelled():
    b = PreviewBackend(width=320, height=192)
    pred = preview_rules.predict("fly on broomstick", "quickly", 2, "night")
    f0, f8 = b._frame(_request(), pred, 0), b._frame(_request(), pred, 8)
    assert f0.shape == (192, 320, 3) and f0.dtype == np.uint8
    assert np.abs(f0.astype(int) - f8.astype(int)).mean() > 2  # visibly animated
    banner = f0[: 192 // 48 * 5]
    assert (np.abs(banner.astype(int) - (200, 30, 40)).sum(-1) < 30).mean() > 0.5  # the red PREVIEW banner


def test_render_off_gives_only_the_prediction():
    result = PreviewBackend(render=False).generate(_request(), lambda f, s: None)
    assert result.mp4 is None
    assert result.prediction == preview_rules.predict("fly on broomstick", "quickly", 2, "night")
    assert result.motion_scope == 40.0  # level 5: the batch script's "otherwise"


@pytest.mark.parametrize(
    "motion, adverb, chars, time, expected",
    [
        ("sleep", "", 1, "night", (1, 0, 0, 3)),  # rest: level 1, stamina back
        ("sit on railing", "calmly", 1, "day", (1, 0, 0, 2)),
        ("walk", "", 1, "day", (2, 0, 0, 0)),
        ("talk", "", 3, "day", (2, 4, 0, 0)),  # social, with two others
        ("run", "quickly", 1, "day", (4, 0, 0, -2)),
        ("fly on broomstick", "quickly", 2, "night", (5, 1, 3, -3)),
        ("deliver a parcel", "", 1, "day", (3, 2, -1, -1)),  # a chore
        ("eat ham", "happily", 2, "day", (2, 1, 1, 0)),
        ("ponder the meaning", "", 1, "day", (2, 0, 0, 0)),  # unknown words: calm
        ("flying", "slowly", 1, "day", (3, 0, 2, -1)),  # stems match inflections
    ],
)
def test_preview_rules(motion, adverb, chars, time, expected):
    assert preview_rules.predict(motion, adverb, chars, time).as_tuple() == expected


def test_preview_rules_stay_in_range():
    for motion in ("sleep sleep nap", "fly race dash", "talk hug wave kiss dance play"):
        for adverb in ("", "quickly", "slowly"):
            p = preview_rules.predict(motion, adverb, 9, "night")
            assert 1 <= p.motion_level <= 5 and all(-5 <= v <= 5 for v in p.as_tuple())


def test_backend_factory(tmp_path):
    settings = Settings(data_dir=tmp_path, _env_file=None)
    b = make_backend(settings, "preview", render=False)
    assert isinstance(b, PreviewBackend) and b.is_preview and not b.render
    with pytest.raises(BackendUnavailable, match="unknown backend"):
        make_backend(settings, "dall-e")
    try:
        import inference.backends.animegamer  # noqa: F401  (another issue builds it)
    except ImportError:
        with pytest.raises(BackendUnavailable, match="--backend preview"):
            make_backend(settings, "animegamer", films=("qiqi",))
    else:
        with pytest.raises(BackendUnavailable, match="--film FILM"):
            make_backend(settings, "animegamer", films=())
        with pytest.raises(BackendUnavailable, match="models download qiqi"):
            make_backend(settings, "animegamer", films=("qiqi", "ponyo"))  # several films: each one's files
        with pytest.raises(BackendUnavailable, match="models download qiqi"):
            make_backend(settings, "animegamer", films=("qiqi",))


def test_preview_worker_does_not_import_torch():
    import sys

    code = (
        "import sys, inference.worker, inference.queue, inference.backends.preview, db.listen\n"
        "from settings import Settings\n"
        "from inference.backends import make_backend\n"
        "make_backend(Settings(_env_file=None), 'preview')\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    from testkit.queue import ROOT, worker_env

    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=worker_env("postgresql://x@localhost/x"), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_imageio_ffmpeg_binary_is_used_without_one_on_path(tmp_path):
    import sys

    from testkit.queue import ROOT, worker_env

    code = (
        "from inference.worker import check_ffmpeg\n"
        "from inference.backends.preview import PreviewBackend\n"
        "from tests.queue.test_preview import _request\n"
        "print(check_ffmpeg())\n"
        "r = PreviewBackend(width=64, height=48).generate(_request(), lambda f, s: None)\n"
        f"open({str(tmp_path / 'clip.mp4')!r}, 'wb').write(r.mp4)\n"
    )
    env = worker_env("postgresql://x@localhost/x")
    env["PATH"] = str(tmp_path)  # no ffmpeg here
    env.pop("ANIMEGAMER_FFMPEG", None)
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "imageio_ffmpeg" in r.stdout
    assert _probe(tmp_path / "clip.mp4")["nb_read_frames"] == "17"
