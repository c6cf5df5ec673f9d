"""The manifest's record and the review log: what every stage and the review page rely on."""

from __future__ import annotations

import json

from film.manifest import (
    REVIEW_LOG,
    Clip,
    append_review,
    check_fields,
    read_manifest,
    read_review,
    with_review,
    write_manifest,
)


def clip(clip_id: str, **kw) -> Clip:
    return Clip(id=clip_id, source="film.mkv", shot=1, start_s=1.0 / 3, end_s=2.5, clip=f"clips/{clip_id}.mp4",
                stills=(f"stills/{clip_id}-0.jpg",), motion_flow=2.123456, motion_level=2, **kw)


def test_the_manifest_is_the_same_bytes_whatever_the_order(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    write_manifest(a, [clip("x-0002-00"), clip("x-0001-00")])
    write_manifest(b, [clip("x-0001-00"), clip("x-0002-00")])
    assert (a / "manifest.jsonl").read_bytes() == (b / "manifest.jsonl").read_bytes()
    first = json.loads((a / "manifest.jsonl").read_text().splitlines()[0])
    assert first["id"] == "x-0001-00" and first["start_s"] == 0.3333 and first["motion_flow"] == 2.1235
    assert [c.id for c in read_manifest(a)] == ["x-0001-00", "x-0002-00"]


def test_an_edit_after_a_torn_line_is_kept(tmp_path):
    append_review(tmp_path, "x-0001-00", {"status": "accepted"})
    with (tmp_path / REVIEW_LOG).open("a") as f:
        f.write('{"id":"x-0002-00","sta')  # a crash mid-write
    append_review(tmp_path, "x-0002-00", {"status": "rejected"})
    assert read_review(tmp_path) == {"x-0001-00": {"status": "accepted"}, "x-0002-00": {"status": "rejected"}}
    [reviewed] = with_review([clip("x-0002-00", issue="caption: no <S>")], read_review(tmp_path))
    assert reviewed.status == "rejected" and reviewed.issue is None


def test_field_checks_name_each_problem():
    cast = ("qiqi", "tombo")
    assert check_fields({"character": "qiqi", "motion": "fly", "social": 1, "stamina": -1}, cast) == []
    problems = check_fields({"character": ["qiqi"], "motion": "fly <frame_00001>", "adverb": "x" * 31,
                             "social": 2, "stamina": True, "caption_level": 6, "status": "done", "id": "y"}, cast)
    assert [p.split(":")[0] for p in problems] == ["character", "motion", "adverb", "social", "stamina",
                                                   "caption_level", "status", "id"]
    assert check_fields({"character": "jiji"}, cast) == ["character: 'jiji' is not in the cast (qiqi, tombo)"]
