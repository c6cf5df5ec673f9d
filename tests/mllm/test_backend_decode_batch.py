"""Concurrent turns on one decoder: decoded as one batch (B sessions x guidance) under the GPU lock,
each turn with its own frames and timings; a cancelled turn does not take the others down."""

from __future__ import annotations

import concurrent.futures
import threading

import numpy as np
import pytest
from mllm_helpers import instruction

from contracts.turn import TurnRequest
from inference.backends.animegamer import AnimeGamerBackend, AnimeGamerSettings
from testkit.tiny import mllm as tiny
from testkit.tiny.decoder import TINY_TRANSFORMER_CONFIG, random_tiny_decoder

REP = TINY_TRANSFORMER_CONFIG["text_embed_dim"]


class Aborted(Exception):
    pass


@pytest.fixture(scope="module")
def small_files(tmp_path_factory):
    return tiny.build_all(tmp_path_factory.mktemp("tiny-rep32"), rep_dim=REP)


def request(turn: int) -> TurnRequest:
    return TurnRequest(
        turn_id=turn, session_id=turn, film_id="qiqi", instruction=instruction(turn), characters=("Qiqi",),
        motion="fly", adverb="quickly", background="sky", time_of_day="night", seed=100 + turn, history=(),
    )


def test_concurrent_turns_share_one_decode_batch(small_files):
    decoder = random_tiny_decoder(steps=2)
    batches = []
    inner = decoder.decode_batch_timed

    def recording(reps, scopes, seeds, *rest, **steps):  # rest, steps: progress and the step callback
        frames, timings = inner(reps, scopes, seeds, *rest, **steps)
        batches.append(dict(zip(seeds, frames, strict=True)))
        return frames, timings

    decoder.decode_batch_timed = recording
    s = AnimeGamerSettings(small_files["mistral"], small_files["tokenizer"], small_files["agent"], device="cpu",
                           rep_dim=REP, max_batch=4, batch_window=0.5)
    backend = AnimeGamerBackend(s, decoder=decoder)
    backend.load()
    start = threading.Barrier(3)

    def turn(i: int):
        start.wait()

        def progress(fraction, label):
            if i == 2 and label.startswith("denoise"):
                raise Aborted("turn 2 cancelled")

        return backend.generate(request(i), progress)

    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        futures = [pool.submit(turn, i) for i in range(3)]
        outcomes = []
        for f in futures:
            try:
                outcomes.append(f.result(timeout=600))
            except Aborted as e:
                outcomes.append(e)
    assert sorted(len(b) for b in batches) == [3], batches  # one batch of three, never three threads
    assert isinstance(outcomes[2], Aborted)
    for i in (0, 1):
        result = outcomes[i]
        assert result.timings["decode_batch"] == 3.0 and result.timings["decode_denoise"] > 0
        assert result.mp4 and result.mp4[4:8] == b"ftyp"
        alone = decoder.decode(result.representation, result.motion_scope, 100 + i)
        assert np.abs(alone.astype(int) - batches[0][100 + i].astype(int)).max() <= 1  # row i = its own decode
