"""One worker, two films: Mistral loaded once, each film a peft adapter with its own projections,
each film's decoder moved on and off the device by the residency manager. The outputs must be
those of each film loaded alone (the single-film path merges its LoRA), turn for turn, while the
films interleave."""

from __future__ import annotations

import concurrent.futures
import threading

import numpy as np
import pytest
import torch
from mllm_helpers import instruction

from contracts.turn import HistoryTurn, TurnRequest
from inference.backend import BackendError
from inference.backends.animegamer import AnimeGamerBackend, AnimeGamerSettings
from inference.backends.multifilm import MultiFilmBackend
from inference.decoder.residency import DecoderResidency
from inference.mllm.adapters import load_films
from inference.mllm.loading import CheckpointError
from testkit.tiny import mllm as tiny
from testkit.tiny.decoder import TINY_TRANSFORMER_CONFIG, random_tiny_decoder

REP_DIM = TINY_TRANSFORMER_CONFIG["text_embed_dim"]
FILMS = ("qiqi", "ponyo")
SEEDS = {"qiqi": 11, "ponyo": 22}  # different random agents
DECODER_SEEDS = {"qiqi": 0, "ponyo": 1}  # and different random decoders


@pytest.fixture(scope="module")
def two_films(files, tmp_path_factory):
    d = tmp_path_factory.mktemp("two-films")
    agents = {}
    for film in FILMS:
        sd = tiny.released_state_dict(files["mistral"], seed=SEEDS[film], rep_dim=REP_DIM)
        agents[film] = tiny.write_checkpoint(sd, d / f"{film}.bin")
    return agents


def _settings(files, agent, **kw) -> AnimeGamerSettings:
    return AnimeGamerSettings(files["mistral"], files["tokenizer"], agent, device="cpu", dtype="float32",
                              history_window=2, rep_dim=REP_DIM, max_batch=1, **kw)


def _decoder(film):
    return random_tiny_decoder(seed=DECODER_SEEDS[film], steps=2)


@pytest.fixture(scope="module")
def alone(files, two_films):
    """Each film loaded alone, as a one-film worker loads it (LoRA merged)."""
    out = {}
    for film in FILMS:
        b = AnimeGamerBackend(_settings(files, two_films[film]), decoder=_decoder(film))
        b.load()
        out[film] = b
    return out


@pytest.fixture(scope="module")
def shared(files, two_films):
    """Both films on one base; the decoder budget holds one decoder, so every switch moves one."""
    one = sum(p.numel() * p.element_size() for m in (_decoder("qiqi").transformer, _decoder("qiqi").vae)
              for p in [*m.parameters(), *m.buffers()])
    b = MultiFilmBackend(_settings(files, two_films["qiqi"]), two_films,
                         decoders={f: _decoder(f) for f in FILMS}, decoder_budget_bytes=one)
    b.load()
    return b


def _request(film: str, turn: int, history) -> TurnRequest:
    return TurnRequest(
        turn_id=100 * turn + len(film), session_id=FILMS.index(film) + 1, film_id=film, instruction=instruction(turn),
        characters=("Qiqi",), motion="fly", adverb="quickly", background="sky", time_of_day="night",
        seed=1000 + turn, history=tuple(history),
    )


def test_two_films_interleaved_match_each_film_alone(alone, shared):
    history = {f: [] for f in FILMS}
    for turn in range(3):
        for film in FILMS:  # qiqi, ponyo, qiqi, ponyo...: the adapter and the decoder switch every turn
            req = _request(film, turn, history[film])
            want = alone[film].generate(req, lambda *_: None)
            got = shared.generate(req, lambda *_: None)
            assert got.prediction == want.prediction, (film, turn)
            assert got.motion_scope == want.motion_scope
            diff = np.abs(got.representation - want.representation).max()
            assert diff <= 1e-5, (film, turn, diff)
            assert got.mp4[4:8] == b"ftyp"
            assert "decoder_move" in got.timings and "mllm_adapter_switch" in got.timings
            history[film] = [*history[film], HistoryTurn(req.instruction, want.prediction, want.representation)][-2:]
    # Different films really are different models.
    a = alone["qiqi"].predict([_request("qiqi", 0, [])])[0][1]
    b = alone["ponyo"].predict([_request("ponyo", 0, [])])[0][1]
    assert np.abs(a - b).max() > 1e-2
    # One decoder fits the budget: each film's decoder was brought back several times.
    snap = shared.residency.snapshot()
    assert len(snap.resident) == 1 and min(snap.moves.values()) >= 2


def test_a_mixed_batch_runs_one_pass_per_film(alone, shared):
    reqs = [_request("qiqi", 0, []), _request("ponyo", 1, []), _request("qiqi", 2, []), _request("ponyo", 0, [])]
    got = shared.predict(reqs)
    for film in FILMS:
        idx = [i for i, r in enumerate(reqs) if r.film_id == film]
        want = alone[film].predict([reqs[i] for i in idx])
        for i, (p, rep) in zip(idx, want, strict=True):
            assert got[i][0] == p
            assert np.abs(got[i][1] - rep).max() <= 1e-5


def test_decoders_moved_off_and_back_decode_the_same_frames(shared):
    rep = np.random.default_rng(0).standard_normal((226, REP_DIM)).astype(np.float32)
    for film in ("ponyo", "qiqi", "ponyo"):
        with shared.residency.use(film) as (decoder, _):
            got = decoder.decode(rep, 10.0, 7)
        assert shared.residency.resident() == [film]
        np.testing.assert_array_equal(got, _decoder(film).decode(rep, 10.0, 7))


def test_residency_evicts_least_recently_used_and_never_a_busy_decoder():
    decs = {f: random_tiny_decoder(seed=i, steps=1) for i, f in enumerate(("a", "b", "c"))}
    size = DecoderResidency({"x": random_tiny_decoder(seed=9, steps=1)}, "cpu").nbytes("x")
    r = DecoderResidency(decs, "cpu", budget_bytes=2 * size)
    assert r.resident() == ["a", "b"]  # warm start: what fits, in order
    with r.use("a"):
        pass
    with r.use("c") as (_, moved):  # b is the least recently used
        assert moved >= 0
    assert sorted(r.resident()) == ["a", "c"]
    with r.use("a"), r.use("c"):
        import threading

        entered = threading.Event()

        def want_b():
            with r.use("b"):
                entered.set()

        t = threading.Thread(target=want_b)
        t.start()
        assert not entered.wait(0.3)  # both resident decoders are busy: b waits
    t.join(5)
    assert entered.is_set() and "b" in r.resident()


def test_key_accounting_per_film(files, two_films, tmp_path):
    sd = torch.load(two_films["ponyo"], weights_only=True)
    lora = next(k for k in sd if ".lora_B." in k)
    broken = tiny.write_checkpoint({k: v for k, v in sd.items() if k != lora}, tmp_path / "missing.bin")
    with pytest.raises(CheckpointError, match=r"film 'ponyo'.*1 required keys missing, e\.g\. " + lora.replace(".", r"\.")):
        load_films(files["mistral"], files["tokenizer"], {"qiqi": two_films["qiqi"], "ponyo": broken}, device="cpu", rep_dim=REP_DIM)
    base = next(k for k in sd if k.endswith("q_proj.base_layer.weight"))
    other_base = tiny.write_checkpoint({**sd, base: sd[base] + 1}, tmp_path / "other-base.bin")
    with pytest.raises(CheckpointError, match="base weights that differ from the Mistral directory's"):
        load_films(files["mistral"], files["tokenizer"], {"qiqi": two_films["qiqi"], "ponyo": other_base}, device="cpu", rep_dim=REP_DIM)
    # A base saved in another dtype differs by rounding only: loaded, with the shared base.
    rounded = tiny.write_checkpoint({**sd, base: sd[base].half().float()}, tmp_path / "rounded.bin")
    load_films(files["mistral"], files["tokenizer"], {"qiqi": two_films["qiqi"], "ponyo": rounded}, device="cpu", rep_dim=REP_DIM)
    loaded = load_films(files["mistral"], files["tokenizer"], two_films, device="cpu", rep_dim=REP_DIM)
    assert {f: r.loaded for f, r in loaded.reports.items()} == {"qiqi": len(sd), "ponyo": len(sd)}


def test_a_film_the_worker_does_not_serve_is_refused(shared):
    with pytest.raises(BackendError, match="does not serve the film 'totoro'"):
        shared.generate(_request("qiqi", 0, []).__class__(**{**_request("qiqi", 0, []).__dict__, "film_id": "totoro"}), lambda *_: None)


class Aborted(Exception):
    pass


def _concurrent_backend(files, two_films, decoders) -> MultiFilmBackend:
    """Both films, batching up to four turns, with a window wide enough to gather them all."""
    s = AnimeGamerSettings(files["mistral"], files["tokenizer"], two_films["qiqi"], device="cpu", dtype="float32",
                           history_window=2, rep_dim=REP_DIM, max_batch=4, batch_window=0.5)
    one = DecoderResidency({"x": _decoder("qiqi")}, "cpu").nbytes("x")
    backend = MultiFilmBackend(s, two_films, decoders=decoders, decoder_budget_bytes=one)
    backend.load()
    return backend


def _play_at_once(backend, turns: list[tuple[str, int]], cancel: set[int] = frozenset()) -> list:
    """Start the turns together in threads; each outcome is a TurnResult or the turn's error."""
    start = threading.Barrier(len(turns))

    def play(i: int):
        film, turn = turns[i]
        start.wait()

        def progress(fraction, label):
            if i in cancel and label.startswith("denoise"):
                raise Aborted(f"turn {i} cancelled")

        return backend.generate(_request(film, turn, []), progress)

    with concurrent.futures.ThreadPoolExecutor(len(turns)) as pool:
        futures = [pool.submit(play, i) for i in range(len(turns))]
        outcomes = []
        for f in futures:
            try:
                outcomes.append(f.result(timeout=600))
            except Exception as e:  # noqa: BLE001
                outcomes.append(e)
    return outcomes


def _recording(decoder, log: list, film: str):
    inner = decoder.decode_batch_timed

    def record(reps, scopes, seeds, progress=None):
        frames, timings = inner(reps, scopes, seeds, progress)
        log.append((film, dict(zip(seeds, frames, strict=True))))
        return frames, timings

    decoder.decode_batch_timed = record
    return decoder


def test_concurrent_turns_are_decoded_in_one_batch_per_film(files, two_films):
    batches: list = []
    decoders = {f: _recording(_decoder(f), batches, f) for f in FILMS}
    backend = _concurrent_backend(files, two_films, decoders)
    turns = [("qiqi", 0), ("ponyo", 0), ("qiqi", 1), ("qiqi", 2)]
    outcomes = _play_at_once(backend, turns, cancel={3})
    mllm_batches = backend._batcher.batch_sizes
    backend.close()
    assert backend._batcher is None and backend._decode_batcher is None
    assert mllm_batches == [4]  # gathered together (then one pass per film)
    # One decode per film: the three qiqi clips in one batch, never three calls on the GPU lock.
    assert sorted((film, len(rows)) for film, rows in batches) == [("ponyo", 1), ("qiqi", 3)], batches
    assert isinstance(outcomes[3], Aborted)  # cancelled mid-batch: fails alone
    for (film, turn), result in zip(turns[:3], outcomes[:3], strict=True):
        assert result.mp4[4:8] == b"ftyp"
        assert result.timings["decode_batch"] == (3.0 if film == "qiqi" else 1.0)
        assert "decoder_move" in result.timings and "mllm_adapter_switch" in result.timings
        row = next(rows for f, rows in batches if f == film)[1000 + turn]
        alone = _decoder(film).decode(result.representation, result.motion_scope, 1000 + turn)
        assert np.abs(alone.astype(int) - row.astype(int)).max() <= 1  # row = the clip decoded alone


def test_a_failing_decoder_fails_its_films_turns_only(files, two_films):
    broken = _decoder("ponyo")

    def fault(*args, **kwargs):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    broken.decode_batch_timed = fault
    backend = _concurrent_backend(files, two_films, {"qiqi": _decoder("qiqi"), "ponyo": broken})
    outcomes = _play_at_once(backend, [("qiqi", 0), ("ponyo", 0), ("qiqi", 1)])
    backend.close()
    assert isinstance(outcomes[1], RuntimeError) and "illegal memory access" in str(outcomes[1])
    assert outcomes[0].mp4[4:8] == b"ftyp" and outcomes[2].mp4[4:8] == b"ftyp"
    assert outcomes[0].timings["decode_batch"] == 2.0


def test_compiled_presets_are_warmed_up_on_the_device_at_load(files, two_films):
    """Several films' decoders are built on the CPU; a compiled preset's compiles happen at load,
    on the device the residency manager brings each decoder to, at batch 1 and the worker's most."""
    from inference.decoder.pipeline import prepare

    sizes: dict[str, list[int]] = {f: [] for f in FILMS}
    decoders = {}
    for film in FILMS:
        d = _decoder(film)
        report = prepare(d, "cpu", speed="fast", compile_backend="eager", runs_on="cpu")
        assert any(a.startswith("fused qkv") for a in report.applied)
        inner = d.decode_batch
        d.decode_batch = lambda reps, *a, _film=film, _inner=inner, **kw: (sizes[_film].append(len(reps)), _inner(reps, *a, **kw))[1]
        decoders[film] = d
    backend = _concurrent_backend(files, two_films, decoders)
    backend.close()
    assert sizes == {"qiqi": [1, 4], "ponyo": [1, 4]}


def test_the_bases_own_embeddings_and_lm_head_are_freed(shared):
    """Each film has its own embeddings and lm_head; the base's copies, which no film uses, hold no
    memory (the outputs above are unchanged by it)."""
    from peft.utils import ModulesToSaveWrapper

    wrappers = {n.rsplit(".", 1)[-1]: m for n, m in shared.mllm.llm.named_modules() if isinstance(m, ModulesToSaveWrapper)}
    for name in ("embed_tokens", "lm_head"):
        assert wrappers[name].original_module.weight.numel() == 0
        assert all(wrappers[name].modules_to_save[f].weight.numel() > 0 for f in FILMS)
    vocab, hidden = shared.mllm.config.vocab_size, shared.mllm.config.hidden_size
    assert shared.mllm.freed_bytes == 2 * vocab * hidden * 4  # float32 here


def test_exact_decoders_are_not_moved_at_load(files, two_films):
    """Only compiled presets warm up at load: with `exact` and room for one decoder, loading moves
    nothing beyond the warm start (the first film's decoder)."""
    backend = _concurrent_backend(files, two_films, {f: _decoder(f) for f in FILMS})
    backend.close()
    assert backend.residency.snapshot().moves == {"qiqi": 1, "ponyo": 0}
