"""`animegamer eval` end to end on the preview backend: two held-out games played turn by turn, every
clip kept, the report, plots and contact sheets written; a run stopped after two turns and run
again ends as an uninterrupted one; two runs compared."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from animegamer.cli import main
from evaluation.evaluate import Options, evaluate
from evaluation.metrics import KEYS
from inference.backends import make_backend
from settings import Settings
from testkit.evaluation_set import write_games, write_references


class StopAfter:
    """The preview backend, stopped by an exception at its n-th turn (as a killed run stops)."""

    def __init__(self, backend, n: int) -> None:
        self.backend, self.n = backend, n
        self.name, self.is_preview = backend.name, backend.is_preview
        self.requests = []

    def load(self) -> None:
        self.backend.load()

    def generate(self, request, progress):
        if len(self.requests) == self.n:
            raise KeyboardInterrupt
        self.requests.append(request)
        return self.backend.generate(request, progress)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("inputs")
    return write_games(root / "games.jsonl"), write_references(root / "refs")


@pytest.fixture(scope="module")
def settings(tmp_path_factory):
    return Settings(models_dir=tmp_path_factory.mktemp("models"))


def _backend(settings, n: int = 10**6) -> StopAfter:
    # smaller frames than the default 720x480: the same clip, drawn and measured faster
    return StopAfter(make_backend(settings, "preview", films=["qiqi"], width=360, height=240), n)


def _options(inputs, clip_dir, out, **kw) -> Options:
    games, refs = inputs
    return Options(film="qiqi", games=games, out=out, references=refs, clip=clip_dir, progress=False, **kw)


@pytest.fixture(scope="module")
def whole(inputs, clip_dir, settings, tmp_path_factory):
    out = tmp_path_factory.mktemp("whole")
    backend = _backend(settings)
    report = evaluate(settings, _options(inputs, clip_dir, out), backend)
    return out, report, backend


def _per_turn(report: dict) -> list:
    """Every turn's numbers but its seconds (wall time differs from run to run)."""
    return [(g["id"], t["turn"], t["seed"], t["predicted"], t["measured_level"], t["motion_flow"],
             {k: v for k, v in t["values"].items() if k != "seconds"}) for g in report["games"] for t in g["turns"]]


def test_the_games_are_played_with_history_and_reported(whole):
    out, report, backend = whole
    assert [g["id"] for g in report["games"]] == ["g1", "g2"]  # g3 is a training game
    first, second = backend.requests[:2]
    assert second.history[0].instruction == first.instruction and second.history[0].prediction is not None
    assert second.states_before["Qiqi"].stamina == 50 + 5 * report["games"][0]["turns"][0]["predicted"]["stamina"]
    assert len({r.seed for r in backend.requests}) == 4
    data = json.loads((out / "report.json").read_text())
    assert {"run", "games", "summary", "not_measured", "paper"} <= set(data)
    assert set(data["summary"]) == set(KEYS)
    assert data["summary"]["clip_i"]["value"] is not None and data["summary"]["dreamsim"]["value"] is None
    assert "dreamsim package" in data["not_measured"]["dreamsim"]
    assert data["paper"]["animegamer"]["clip_i"] == 0.8132
    md = (out / "report.md").read_text()
    assert "paper: AnimeGamer (theirs)" in md and "| CLIP-I (higher is better) |" in md
    for turn in (t for g in data["games"] for t in g["turns"]):
        assert (out / turn["clip"]).stat().st_size > 0
    pngs = sorted((out / "plots").glob("*.png")) + sorted((out / "sheets").glob("*.png"))
    assert {p.name for p in out.joinpath("sheets").iterdir()} == {"g1.png", "g2.png"}
    assert (out / "plots" / "clip_i_by_turn.png").is_file() and (out / "plots" / "acc_s_by_run.png").is_file()
    assert not (out / "plots" / "dreamsim_by_run.png").exists()  # not measured: no plot of nothing
    for p in pngs:
        with Image.open(p) as im:
            im.load()
            assert im.format == "PNG" and im.width > 100


@pytest.fixture(scope="module")
def resumed(inputs, clip_dir, settings, tmp_path_factory):
    """The same run stopped at its fourth turn (three finished), then run again."""
    out = tmp_path_factory.mktemp("resumed")
    with pytest.raises(KeyboardInterrupt):
        evaluate(settings, _options(inputs, clip_dir, out), _backend(settings, 3))
    finished = len(list((out / "turns").rglob("*.json")))
    backend = _backend(settings)
    return out, evaluate(settings, _options(inputs, clip_dir, out), backend), backend, finished


def test_a_stopped_run_resumes_to_the_same_report(whole, resumed):
    _out, report, _backend_ = whole
    _out2, again, backend, finished = resumed
    assert finished == 3
    assert len(backend.requests) == 1  # only the unfinished turn was played again
    assert backend.requests[0].history  # with the earlier turn of its game as history
    assert _per_turn(again) == _per_turn(report)


def test_compare_two_runs(whole, resumed, tmp_path, capsys):
    out, _report, _backend_ = whole
    assert main(["eval", "--compare", str(out), str(resumed[0]), "--out", str(tmp_path / "cmp")]) == 0
    text = capsys.readouterr().out
    assert "| ACC-S (higher is better) |" in text and "within noise" in text
    data = json.loads((tmp_path / "cmp" / "report.json").read_text())
    clip_i = data["metrics"]["clip_i"]["differences"][0]
    assert clip_i["paired"] is True and clip_i["difference"] == 0.0 and clip_i["within_noise"] is True
    assert (tmp_path / "cmp" / "plots" / "clip_i_by_run.png").is_file()
    assert main(["eval", "--compare", str(out)]) == 2  # one run: nothing to compare
    assert "two evaluation folders or more" in capsys.readouterr().err


def test_a_run_continues_only_with_its_own_options(whole, inputs, clip_dir, tmp_path, capsys):
    out, _report, _backend_ = whole
    games, refs = inputs
    rc = main(["eval", "--film", "qiqi", "--games", str(games), "--out", str(out), "--references", str(refs),
               "--backend", "preview", "--seed", "5", "--no-progress", "--clip", str(clip_dir)])
    err = capsys.readouterr().err
    assert rc == 2 and "holds a run with seed 0, not 5" in err and "Traceback" not in err
    changed = tmp_path / "games.jsonl"
    changed.write_text(games.read_text().replace("night sky", "night town"))
    rc = main(["eval", "--film", "qiqi", "--games", str(changed), "--out", str(out), "--references", str(refs),
               "--backend", "preview", "--no-progress", "--clip", str(clip_dir)])
    err = capsys.readouterr().err
    assert rc == 2 and "holds a run with a games file that has changed since" in err
