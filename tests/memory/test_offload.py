"""Stage offload and ANIMEGAMER_MEMORY_MODE=auto, on the tiny models through the real backend.

On this CPU the offload's "device" is the CPU: nothing moves, but the same code swaps every
weight's pointer between the host copy and the device copy, and tracks which stage holds which
weights; a turn in the offload mode must be the turn of the mode that differs from it only in
placement (low_vram: the same int8 weights and VAE tiles), bit for bit."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from contracts.turn import TurnRequest
from inference.backends import make_backend
from inference.memory import choose_mode
from inference.memory.offload import StageOffload, transfer_seconds
from inference.memory.plan import usable_gib
from settings import Settings

pytest.importorskip("torchao", reason="the offload modes' int8/int4 MLLM weights need torchao")


@pytest.fixture(scope="module")
def models_root(tmp_path_factory):
    from game.catalogue import FILMS
    from inference.decoder.diffusers_api import AutoencoderKLCogVideoX
    from inference.decoder.latent_preview import fit_latent_rgb
    from inference.model_paths import film_paths
    from testkit.tiny.models_dir import build_models_dir

    root = build_models_dir(tmp_path_factory.mktemp("models"), {"qiqi": (1, 0)})
    # The preview map stored as a conversion stores it: fitted at load, it would run through the tiled
    # modes' VAE with diffusers' default tiles, which do not fit the tiny frames.
    decoder = film_paths(root, FILMS["qiqi"]).decoder
    fit_latent_rgb(AutoencoderKLCogVideoX.from_pretrained(str(decoder / "vae"))).save(str(decoder))
    return root


def _settings(models_root, **kw) -> Settings:
    return Settings(_env_file=None, backend="animegamer", models_dir=models_root, device="cpu", dtype="float32",
                    decoder_steps=2, history_window=2, **kw)


def _request(turn: int = 1) -> TurnRequest:
    return TurnRequest(turn_id=turn, session_id=turn, film_id="qiqi", instruction="Character: Qiqi; Motion: quickly "
                       "fly; Background: night sky.", characters=("Qiqi",), motion="fly", adverb="quickly",
                       background="sky", time_of_day="night", seed=5)


def _turn(settings: Settings):
    backend = make_backend(settings, "animegamer", films=["qiqi"])
    backend.load()
    stages: list[tuple[str, list[str]]] = []

    def progress(fraction: float, label: str) -> None:
        if backend.offload is not None:
            stages.append((label, backend.offload.on_device()))

    result = backend.generate(_request(), progress)
    return backend, result, stages


@pytest.fixture
def whole_frame_tiles(monkeypatch):
    """At the tiny size diffusers' default tiles do not give whole frames: one tile for the frame
    (what the plan does at full size: a tile size that gives whole frames), in both modes."""
    from testkit.tiny.decoder import TINY_SIZE

    real = choose_mode.resolve
    monkeypatch.setattr(choose_mode, "resolve", lambda *a, **k: dataclasses.replace(
        real(*a, **k), tiles=(TINY_SIZE["height"], TINY_SIZE["width"])))


def test_a_turn_in_the_offload_mode_is_the_same_clip_as_in_place(models_root, whole_frame_tiles):
    _, low, _ = _turn(_settings(models_root, memory_mode="low_vram"))
    backend, off, stages = _turn(_settings(models_root, memory_mode="offload"))
    assert backend.settings.offload and backend.settings.quantize == "int8"
    assert off.prediction == low.prediction
    np.testing.assert_array_equal(off.representation, low.representation)
    assert off.mp4 == low.mp4  # the same frames, encoded the same way
    # One stage's weights at a time: the decoder's for the denoise, the VAE's alone for the decode.
    held = dict(stages)
    assert held["vae"] == ["vae"] and held["encode"] == ["vae"]
    assert ["dit", "vae"] in [on for _, on in stages]
    # Each turn's cycle brings every stage's weights once (the load left the MLLM on the device).
    offload = backend.offload
    assert offload is not None
    cycles, moved = offload.cycles, offload.moved_bytes
    again = backend.generate(_request(2), lambda f, s: None)
    assert again.mp4 == off.mp4
    assert offload.cycles == cycles + 1
    assert offload.moved_bytes - moved == offload.bytes_per_cycle() == sum(offload.nbytes.values())
    backend.close()


def test_offload_int4_runs_the_turn(models_root, whole_frame_tiles):
    backend, result, _ = _turn(_settings(models_root, memory_mode="offload_int4"))
    assert backend.settings.quantize == "int4" and backend.settings.offload
    assert result.mp4 and result.representation.shape[0] == 226


def test_offload_in_place_of_the_resident_turn_is_bit_identical(models_root):
    """Offload without quantisation (the backend's flag alone): the resident turn, bit for bit."""
    from inference.backends.animegamer import AnimeGamerBackend

    resident = make_backend(_settings(models_root, memory_mode="resident"), "animegamer", films=["qiqi"])
    assert isinstance(resident, AnimeGamerBackend)
    resident.load()
    a = resident.generate(_request(), lambda f, s: None)
    resident.close()
    moved = make_backend(_settings(models_root, memory_mode="resident"), "animegamer", films=["qiqi"])
    assert isinstance(moved, AnimeGamerBackend)
    moved.settings = dataclasses.replace(moved.settings, offload=True)
    moved.load()
    b = moved.generate(_request(), lambda f, s: None)
    moved.close()
    assert moved.offload is not None and moved.offload.cycles == 2  # the load's and the turn's
    assert a.prediction == b.prediction and a.mp4 == b.mp4
    np.testing.assert_array_equal(a.representation, b.representation)


def test_stage_offload_keeps_one_stage_and_counts_its_bytes():
    a, b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 4, bias=False)
    offload = StageOffload({"a": [a], "b": [b]}, "cpu")
    assert offload.nbytes == {"a": (64 + 8) * 4, "b": 32 * 4}
    with offload.stage("a") as seconds:
        assert seconds >= 0 and offload.on_device() == ["a"] and offload.device_bytes() == 288
    with offload.stage("b"):
        assert offload.on_device() == ["b"]
        offload.release("b")
        assert offload.device_bytes() == 0
    assert offload.moved_bytes == 288 + 128
    with pytest.raises(KeyError, match="no offload group"), offload.stage("c"):
        pass
    seconds = transfer_seconds(12 * 10**9)
    assert seconds == {"PCIe 3.0 x16": 1.0, "PCIe 4.0 x16": 0.48}


def test_auto_picks_offload_on_a_12_gb_card_and_resident_on_80(monkeypatch, models_root):
    """The worker's path: the GPUs found (stood in for here), the plan's answer, the backend built."""
    settings = _settings(models_root)
    assert settings.memory_mode == "auto"
    monkeypatch.setattr(choose_mode, "uses_cuda", lambda s: True)
    for card, mode, quantize in ((12, "offload", "int8"), (8, "offload_int4", "int4"), (80, "resident", None)):
        monkeypatch.setattr(choose_mode, "cuda_totals", lambda card=card: [usable_gib(card)])
        picked = choose_mode.resolve(settings, 1)
        assert picked.mode == mode and picked.why.startswith(f"auto: {mode}"), picked
        assert (picked.tiles is not None) == (mode != "resident")
        backend = make_backend(settings, "animegamer", films=["qiqi"])
        assert backend.settings.quantize == quantize and backend.settings.offload == (mode != "resident")
        assert choose_mode.refusal(settings, 1) is None
    # An explicit mode still wins, and one that does not fit is refused with the one that would.
    monkeypatch.setattr(choose_mode, "cuda_totals", lambda: [usable_gib(12)])
    explicit = settings.model_copy(update={"memory_mode": "resident"})
    assert choose_mode.resolve(explicit, 1).mode == "resident"
    why = choose_mode.refusal(explicit, 1)
    assert why and "offload" in why and "ANIMEGAMER_MEMORY_MODE=offload" in why


def test_auto_without_a_gpu_is_resident(models_root):
    picked = choose_mode.resolve(_settings(models_root), 1)
    assert picked.mode == "resident" and "no GPU" in picked.why
