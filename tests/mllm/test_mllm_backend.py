"""The animegamer backend: loading rules, the turn pipeline, history from the request, batching."""

from __future__ import annotations

import numpy as np
import pytest
from mllm_helpers import history, instruction

from contracts.turn import HistoryTurn, TurnRequest
from game.motion import motion_scope
from game.states import Prediction
from inference.backend import Backend, BackendError
from inference.backends.animegamer import AnimeGamerBackend, AnimeGamerSettings


class RecordingDecoder:
    """Stands in for the video decoder (another component): records its inputs, returns frames."""

    fps = 8

    def __init__(self):
        self.calls = []

    def decode(self, representation, motion_scope, seed, progress=None):
        self.calls.append((representation, motion_scope, seed))
        for i in range(3):
            if progress:
                progress((i + 1) / 3, f"denoise {i + 1}/3")
        level = int(np.clip(np.abs(representation).mean() * 100, 0, 255))
        return np.full((17, 48, 72, 3), level, dtype=np.uint8)


def settings(files, **kw):
    return AnimeGamerSettings(files["mistral"], files["tokenizer"], files["agent"], device="cpu", **kw)


def request(turn: int, hist=()) -> TurnRequest:
    return TurnRequest(
        turn_id=turn, session_id=1, film_id="qiqi", instruction=instruction(turn), characters=("Qiqi",),
        motion="fly", adverb="quickly", background="sky", time_of_day="night", seed=1234 + turn,
        history=tuple(hist),
    )


def as_history(items):
    return [HistoryTurn(h.instruction, Prediction.from_sequence(h.values), h.representation) for h in items]


def test_decoder_is_required(files):
    backend = AnimeGamerBackend(settings(files))
    assert isinstance(backend, Backend)
    with pytest.raises(BackendError, match="needs a clip decoder"):
        backend.load()
    with pytest.raises(BackendError, match="not loaded"):
        backend.generate(request(0), lambda f, s: None)


def test_bad_checkpoint_is_a_backend_error(files, tmp_path):
    bad = tmp_path / "pytorch_model.bin"
    bad.write_bytes(b"not a checkpoint")
    backend = AnimeGamerBackend(AnimeGamerSettings(files["mistral"], files["tokenizer"], bad, device="cpu", mllm_only=True))
    with pytest.raises(BackendError, match="cannot read the agent checkpoint"):
        backend.load()


def test_turn_with_decoder(files):
    decoder = RecordingDecoder()
    backend = AnimeGamerBackend(settings(files, history_window=2), decoder_factory=lambda: decoder)
    backend.load()
    seen = []
    result = backend.generate(request(3, as_history(history(3, seed=4))), lambda f, s: seen.append((f, s)))
    rep, scope, seed = decoder.calls[0]
    assert rep is result.representation and rep.shape == (226, 1920)
    assert scope == result.motion_scope == motion_scope(result.prediction.motion_level)
    assert seed == 1237
    assert result.mp4[4:8] == b"ftyp" and not result.is_preview
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[0] == 0.0 and fractions[-1] == 1.0
    assert [s for _, s in seen][:2] == ["mllm", "decode"] and "denoise 3/3" in [s for _, s in seen]
    assert {"mllm", "mllm_prefill", "mllm_states", "decode", "encode"} <= set(result.timings)


def test_history_window_and_batch(files):
    backend = AnimeGamerBackend(settings(files, history_window=2, mllm_only=True))
    backend.load()
    hist = as_history(history(3, seed=6))
    full = backend.generate(request(3, hist), lambda f, s: None)
    assert full.mp4 is None and full.representation.shape == (226, 1920)
    # window 2: only the last two turns count; turns without a representation (previews) are skipped
    preview = HistoryTurn("Character: Jiji; Motion: run; Background: day town.", Prediction(1, 0, 0, 0), None)
    same = backend.generate(request(3, [hist[0], preview, hist[1], hist[2]]), lambda f, s: None)
    last_two = backend.generate(request(3, hist[1:]), lambda f, s: None)
    np.testing.assert_allclose(same.representation, full.representation, atol=1e-5)
    np.testing.assert_allclose(last_two.representation, full.representation, atol=1e-5)
    assert same.prediction == full.prediction
    # several sessions in one forward pass agree with one by one
    reqs = [request(0), request(1, hist[:1]), request(3, hist)]
    batched = backend.predict(reqs)
    for r, (pred, rep) in zip(reqs, batched, strict=True):
        one = backend.generate(r, lambda f, s: None)
        assert pred == one.prediction
        np.testing.assert_allclose(rep, one.representation, atol=2e-5)


def test_concurrent_turns_share_one_mllm_pass(files):
    """A worker running several sessions' turns at once (--concurrency) batches their MLLM part;
    each turn still gets exactly its own result."""
    import threading

    backend = AnimeGamerBackend(settings(files, history_window=2, mllm_only=True, max_batch=3, batch_window=2.0))
    backend.load()
    hist = as_history(history(3, seed=6))
    reqs = [request(0), request(1, hist[:1]), request(3, hist)]
    expected = backend.predict(reqs)  # one pass, no batcher
    results: dict[int, object] = {}
    start = threading.Barrier(len(reqs))

    def run(r):
        start.wait()
        results[r.turn_id] = backend.generate(r, lambda f, s: None)

    threads = [threading.Thread(target=run, args=(r,)) for r in reqs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert backend._batcher.batch_sizes == [3]
    for r, (pred, rep) in zip(reqs, expected, strict=True):
        assert results[r.turn_id].prediction == pred
        np.testing.assert_allclose(results[r.turn_id].representation, rep, atol=2e-5)


def test_batch_errors_reach_every_waiting_turn():
    from inference.mllm.batcher import MicroBatcher

    def boom(batch):
        raise RuntimeError("out of memory")

    b = MicroBatcher(boom, max_batch=2, window=0.01)
    with pytest.raises(RuntimeError, match="out of memory"):
        b.submit("x")
    ok = MicroBatcher(lambda batch: [x * 2 for x in batch], max_batch=4, window=0.0)
    assert ok.submit(21) == 42


def test_a_batch_function_returning_too_few_results_fails_every_turn_instead_of_hanging():
    import threading

    from inference.mllm.batcher import MicroBatcher

    b = MicroBatcher(lambda batch: [], max_batch=2, window=0.0)
    outcome: list = []

    def turn():
        try:
            outcome.append(b.submit("x"))
        except RuntimeError as e:
            outcome.append(e)

    t = threading.Thread(target=turn, daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "the turn is still waiting for a result that will never come"
    assert isinstance(outcome[0], RuntimeError) and "0 results for 1 requests" in str(outcome[0])
    b.close()


def test_batcher_close_stops_its_thread_and_a_later_submit_restarts_it():
    from inference.mllm.batcher import MicroBatcher

    b = MicroBatcher(lambda batch: [x + 1 for x in batch], max_batch=4, window=0.0)
    assert b.submit(1) == 2
    thread = b._thread
    b.close()
    assert not thread.is_alive()  # it no longer holds run_batch (and the model behind it)
    assert b.submit(2) == 3
    b.close()
