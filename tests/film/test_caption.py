"""The caption stage: the strict parser on canned answers, the none path, resume, and a tiny
random Qwen2-VL loaded by the real loading code and run on a real clip folder."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from film import caption, captioner_model
from film.caption import NO_CAPTIONER, caption_stage, run_stage, stage_file
from film.caption_parse import parse_answer
from film.captioner_errors import CaptionerError
from film.cast import Cast, load_cast
from film.manifest import Clip
from testkit.tiny.vlm import build_qwen2_vl

VALID = """<S>Qiqi</S>
<MD>fly over the town on a broomstick</MD>
<MA>quickly</MA>
<EV>town</EV>
<TD>morning</TD>
<SC>0</SC>
<ET>1</ET>
<ST>-1</ST>
<ML>4</ML>"""
FIELDS = {"character": "qiqi", "motion": "fly over the town on a broomstick", "adverb": "quickly",
          "background": "town", "time": "morning", "social": 0, "entertainment": 1, "stamina": -1,
          "caption_level": 4}


@pytest.fixture(scope="module")
def cast(tmp_path_factory) -> Cast:
    d = tmp_path_factory.mktemp("cast")
    rng = np.random.default_rng(1)
    for cid in ("qiqi", "jiji"):
        Image.fromarray(rng.integers(0, 255, (96, 64, 3), dtype=np.uint8)).save(d / f"{cid}.png")
    (d / "cast.toml").write_text('[[characters]]\nid = "qiqi"\nname = "Qiqi"\nreference = "qiqi.png"\n\n'
                                 '[[characters]]\nid = "jiji"\nname = "Jiji the Cat"\nreference = "jiji.png"\n')
    return load_cast(d / "cast.toml")


def make_clips(folder: Path, n: int = 2) -> list[Clip]:
    """Clips as the clip stage leaves them: 4 JPEG stills each (480x720), fields empty."""
    rng = np.random.default_rng(0)
    clips = []
    for i in range(n):
        stills = []
        for k in range(4):
            rel = f"stills/a-0000-{i:02d}/{k}.jpg"
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(rng.integers(0, 255, (480, 720, 3), dtype=np.uint8)).save(folder / rel, quality=90)
            stills.append(rel)
        clips.append(Clip(id=f"a-0000-{i:02d}", source="a.mp4", shot=0, start_s=2.125 * i, end_s=2.125 * (i + 1),
                          clip=f"clips/a-0000-{i:02d}.mp4", stills=tuple(stills), motion_flow=3.0, motion_level=2))
    return clips


# --- the parser


def test_a_valid_answer_fills_every_field(cast):
    parsed = parse_answer(VALID, cast)
    assert parsed.problem is None
    assert parsed.fields == FIELDS


def test_names_ids_order_and_optional_fields(cast):
    answer = ("Sure! Here is the caption.\n<ML>1</ML><ST>+1</ST><ET>0</ET><SC>1</SC><TD></TD>"
              "<EV> the  sea </EV><MA> </MA><MD>sleep</MD><S>  JIJI the cat </S>")
    parsed = parse_answer(answer, cast)
    assert parsed.problem is None, parsed.problem
    assert parsed.fields == {"character": "jiji", "motion": "sleep", "adverb": None, "background": "the sea",
                             "time": None, "social": 1, "entertainment": 0, "stamina": 1, "caption_level": 1}
    assert parse_answer(VALID.replace("Qiqi", "qiqi"), cast).fields["character"] == "qiqi"  # the id


@pytest.mark.parametrize(("answer", "problem"), [
    (VALID.replace("<TD>morning</TD>", ""), "missing tag <TD>"),
    (VALID.replace("<SC>0</SC>\n<ET>1</ET>", ""), "missing tags <SC>, <ET>"),
    (VALID + "\n<MA>slowly</MA>", "tag <MA> appears more than once"),
    (VALID.replace("<SC>0</SC>", "<SC>2</SC>"), "social: '2' is not one of 0, 1"),
    (VALID.replace("<ST>-1</ST>", "<ST>0</ST>"), "stamina: '0' is not one of -1, +1, 1"),
    (VALID.replace("<ML>4</ML>", "<ML>high</ML>"), "caption_level: 'high' is not one of 1, 2, 3, 4, 5"),
    (VALID.replace("<ET>1</ET>", "<ET>yes</ET>"), "entertainment: 'yes' is not one of 0, 1"),
    (VALID.replace("Qiqi", "Ponyo"), "character: 'Ponyo' is not in the cast (qiqi, jiji)"),
    (VALID.replace("<S>Qiqi</S>", "<S></S>"), "character: empty"),
    (VALID.replace("town</EV>", "town <frame_00001></EV>"), "a reserved model token in <EV>"),
    (VALID.replace("quickly", "quickly<TURN>"), "a reserved model token in <MA>"),
    (VALID.replace("<S>Qiqi", "<S>Qiqi</s>"), "a reserved model token in <S>"),
    (VALID.replace("broomstick", "broomstick <Strength_5>"), "a reserved model token in <MD>"),
    (VALID + "</s>", "a reserved model token outside the tags"),
    (VALID.replace("<MD>fly", "<MD><ML>3</ML> fly"), "<MD> is not closed before <ML>"),
    (VALID.replace("</EV>", ""), "<EV> is not closed before <TD>"),
    (VALID.replace("<ML>4</ML>", "<ML>4"), "<ML> is not closed"),
    (VALID.replace("<S>", ""), "</S> closes a tag that is not open"),
    (VALID.replace("fly over the town on a broomstick", "fly " * 30), "motion: longer than 80 characters"),
    (VALID.replace("<MD>fly over the town on a broomstick</MD>", "<MD> </MD>"), "motion: empty"),
    (VALID.replace("town</EV>", "town =>3</EV>"), "background: removed angle brackets"),
    (VALID.replace("quickly", "quick\x00ly"), "adverb: removed 1 invisible or control character"),
    (VALID.replace("morning", "ｍorning"), "time: not in normal form (NFKC)"),
    ("", "missing tags <S>, <MD>, <MA>, <EV>, <TD>, <SC>, <ET>, <ST>, <ML>"),
])
def test_an_invalid_answer_fills_nothing_and_says_why(cast, answer, problem):
    parsed = parse_answer(answer, cast)
    assert parsed.problem == problem
    assert parsed.fields == {}


# --- the stage


def test_no_captioner_marks_every_clip_for_review(tmp_path, cast):
    clips = make_clips(tmp_path)
    for captioner in (None, "none", "NONE", ""):
        out = caption_stage(tmp_path, clips, cast, captioner, progress=False)
        assert [c.status for c in out] == ["needs_review"] * 2
        assert all(c.issue == NO_CAPTIONER for c in out)
        assert [replace(c, status="needs_review", issue=None) for c in out] == clips  # nothing else changed
    assert not (tmp_path / "stages").exists()


def test_answers_become_captioned_or_needs_review_with_the_raw_answer_kept(tmp_path, cast):
    clips = make_clips(tmp_path)
    answers = {clips[0].stills[0]: VALID, clips[1].stills[0]: VALID.replace("Qiqi", "Totoro")}
    seen: list[list[Path]] = []

    def answer(stills: list[Path], _cast: Cast) -> str:
        seen.append(stills)
        return answers[str(stills[0].relative_to(tmp_path))]

    out = run_stage(tmp_path, clips, cast, "canned", answer, progress=False)
    assert seen[0] == [tmp_path / s for s in clips[0].stills]  # the 4 stills, in order, under the folder
    assert out[0] == replace(clips[0], status="captioned", issue=None, **FIELDS)
    assert out[1] == replace(clips[1], status="needs_review",
                             issue="caption: character: 'Totoro' is not in the cast (qiqi, jiji)")
    record = json.loads(stage_file(tmp_path, clips[1].id).read_text())
    assert record["answer"] == answers[clips[1].stills[0]]
    assert record["captioner"] == "canned"
    assert record["parsed"] == {"fields": {}, "problem": "character: 'Totoro' is not in the cast (qiqi, jiji)"}


def test_a_rerun_reads_the_answers_back(tmp_path, cast):
    clips = make_clips(tmp_path, 3)
    calls: list[str] = []

    def answer(stills: list[Path], _cast: Cast) -> str:
        calls.append(stills[0].parent.name)
        return VALID if len(calls) != 2 else "no tags at all"

    first = run_stage(tmp_path, clips[:2], cast, "model-a", answer, progress=False)  # interrupted after 2 clips
    assert calls == ["a-0000-00", "a-0000-01"]
    again = run_stage(tmp_path, clips, cast, "model-a", answer, progress=False)
    assert calls == ["a-0000-00", "a-0000-01", "a-0000-02"]  # only the clip not answered yet
    assert again[:2] == first
    assert again[1].issue is not None and again[1].issue.startswith("caption: missing tags")
    stage_file(tmp_path, clips[2].id).write_text('{"captioner": "model-a", "pars')  # torn by a crash
    run_stage(tmp_path, clips, cast, "model-a", answer, progress=False)
    assert calls[-1] == "a-0000-02" and len(calls) == 4
    run_stage(tmp_path, clips, cast, "model-b", answer, progress=False)  # another captioner asks again
    assert len(calls) == 7


def test_a_stored_answer_is_checked_against_the_cast_of_each_run(tmp_path, cast):
    clips = make_clips(tmp_path, 1)
    first = run_stage(tmp_path, clips, cast, "canned", lambda _s, _c: VALID, progress=False)
    assert first[0].status == "captioned"
    smaller = Cast(tuple(m for m in cast.members if m.id != "qiqi"))  # Qiqi left the cast file

    def never(_stills: list[Path], _cast: Cast) -> str:
        raise AssertionError("the stored answer is read, not asked again")

    again = run_stage(tmp_path, clips, smaller, "canned", never, progress=False)
    assert again[0] == replace(clips[0], status="needs_review", issue="caption: character: 'Qiqi' is not in the cast (jiji)")


def test_a_folder_that_is_not_a_model_is_refused_before_any_clip(tmp_path, cast):
    clips = make_clips(tmp_path, 1)
    with pytest.raises(CaptionerError, match="no config.json"):
        caption_stage(tmp_path, clips, cast, str(tmp_path / "missing"), progress=False)
    assert not (tmp_path / "stages").exists()


# --- a real (tiny, random) vision-language model


@pytest.fixture(scope="module")
def tiny_vlm(tmp_path_factory) -> Path:
    try:
        return build_qwen2_vl(tmp_path_factory.mktemp("vlm"))
    except ImportError as e:
        if "torchvision" not in str(e).casefold():
            raise
        import transformers

        # At the version floors (.ci/floors): transformers 5.4's Qwen-VL PIL image processor still
        # asks for torchvision, which has no build for this CPU torch; the locked release does not.
        pytest.skip(f"transformers {transformers.__version__}: Qwen-VL's image processor needs torchvision")


def test_a_tiny_random_qwen2_vl_runs_and_its_gibberish_is_kept_for_review(tmp_path, cast, tiny_vlm, monkeypatch):
    monkeypatch.setattr(captioner_model, "MAX_NEW_TOKENS", 24)  # gibberish either way; keep the test fast
    clips = make_clips(tmp_path)
    model = captioner_model.load_captioner(tiny_vlm)
    chat, images = captioner_model.messages([tmp_path / s for s in clips[0].stills], cast)
    batch = model.inputs.encode(chat, images)
    assert batch["image_grid_thw"].shape == (6, 3)  # two references, four stills
    big = tmp_path / "big.png"
    Image.fromarray(np.zeros((2000, 1000, 3), np.uint8)).save(big)
    _chat, scaled = captioner_model.messages([], Cast((replace(cast.members[0], reference=big),)))
    assert scaled[0].size == (256, 512)  # fits REFERENCE_SIDE, aspect kept
    pad = model.inputs.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    assert int((batch["input_ids"] == pad).sum()) == int(batch["image_grid_thw"].prod(-1).sum()) // 4  # merge 2x2
    assert len(images) == 6

    out = caption_stage(tmp_path, clips, cast, str(tiny_vlm), progress=True)
    assert [c.status for c in out] == ["needs_review"] * 2
    records = [json.loads(stage_file(tmp_path, c.id).read_text()) for c in clips]
    for c, record in zip(out, records, strict=True):
        assert record["captioner"] == captioner_model.identity(tiny_vlm)
        assert c.issue == f"caption: {record['parsed']['problem']}"
        assert record["parsed"]["problem"] == parse_answer(record["answer"], cast).problem
        assert c.character is None and c.motion is None
    # greedy: the same model gives the same answer
    assert model.answer([tmp_path / s for s in clips[0].stills], cast) == records[0]["answer"]

    def no_load(_folder: Path) -> None:
        raise AssertionError("a rerun with every clip answered must not load the model")

    monkeypatch.setattr(captioner_model, "load_captioner", no_load)
    assert caption_stage(tmp_path, clips, cast, str(tiny_vlm), progress=False) == out


def test_default_captioner_is_the_setting(monkeypatch, tmp_path):
    monkeypatch.setenv("ANIMEGAMER_CAPTIONER", str(tmp_path))
    assert caption.default_captioner() == str(tmp_path)
    monkeypatch.setenv("ANIMEGAMER_CAPTIONER", "")
    assert caption.default_captioner() is None
