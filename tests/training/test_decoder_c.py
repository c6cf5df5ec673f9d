"""Phase (c) of the decoder (training/decoder_c.py) on tiny random models: the MLLM's predictions
precomputed by the worker's own code (and resumed after an interruption), the DiT adapted on them,
the export the worker loads, and through the engine: the loss falls, two CPU processes (gloo) give
one's losses, a resumed run the uninterrupted curve. The tiny training folder and decoder are
test_decoder_recipe's."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from accelerate import Accelerator

from inference.decoder.pipeline import load_decoder
from inference.decoder.transformer import AnimeGamerTransformer3DModel
from testkit.tiny.decoder import TINY_SIZE
from tests.training.test_decoder_recipe import (
    IMAGE_DIM,
    TEXT_DIM,
    clip_frames,
    one_step,
    overfit_losses,
    snapshot,
    tiny_decoder_folder,
    tiny_training_folder,
)
from training import decoder_c
from training.config import RunConfig
from training.decoder_c import PhaseC, PhaseCRecipe, describe_phase_c, precompute, read_games, turn_values
from training.decoder_data import DecoderDataError, clip_items
from training.encoder import ENCODER_FILE, RepresentationEncoder
from training.engine import train

torch.set_num_threads(1)  # tiny tensors; the machine is shared


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("phase_c_data")
    return {"data": tiny_training_folder(root / "film", heldout=(5,))}


@pytest.fixture(scope="module")
def phase_c(folders, tmp_path_factory):
    """A phase-(a) export stand-in (the tiny decoder with an encoder beside it), a tiny random MLLM
    whose representations are the DiT's width, and the predictions precomputed from them."""
    from testkit.tiny.mllm import build_all

    root = tmp_path_factory.mktemp("phase_c")
    decoder = tiny_decoder_folder(root / "decoder_a", seed=1)
    torch.manual_seed(2)
    RepresentationEncoder(TEXT_DIM, IMAGE_DIM, 32).save(decoder / ENCODER_FILE)
    mllm = build_all(root / "mllm", rep_dim=32)
    settings = PhaseC(decoder=str(decoder), mistral=str(mllm["mistral"]), tokenizer=str(mllm["tokenizer"]),
                      agent=str(mllm["agent"]), predictions=str(root / "predictions"), export_dtype="fp32",
                      predict_batch=3)
    folder = precompute(folders["data"], settings, device="cpu", dtype="float32")
    return {"settings": settings, "predictions": folder, "mllm": mllm, "decoder": decoder}


def test_precompute_writes_what_the_mllm_predicts(folders, phase_c):
    from safetensors.torch import load_file

    from inference.mllm.instruction import InstructionEncoder
    from inference.mllm.loading import load_mllm
    from inference.mllm.predict import MLLMPredictor
    from inference.mllm.prompt import HistoryItem, PromptBuilder

    folder = phase_c["predictions"]
    index = json.loads((folder / "index.json").read_text())
    assert sorted(index) == [f"film-{n:04d}-00" for n in range(6)]  # every clip of every game, held-out too
    stored = {}
    for rel in set(index.values()):
        stored.update(load_file(str(folder / rel)))
    # the third turn of the training game, predicted here with its two earlier turns teacher-forced
    game = next(g for g in read_games(folders["data"]) if g["split"] == "train")
    encoder = RepresentationEncoder.load(phase_c["decoder"] / ENCODER_FILE)
    train, _ = clip_items(folders["data"])
    shard = train[0].shard
    from safetensors import safe_open

    with safe_open(str(shard), framework="pt") as f, torch.no_grad():
        reps = [encoder(f.get_tensor(f"{t['clip']}/text")[None].float(), f.get_tensor(f"{t['clip']}/image")[None].float())[0].numpy()
                for t in game["turns"][:2]]
    history = [HistoryItem(t["instruction"], turn_values(t), r) for t, r in zip(game["turns"][:2], reps, strict=True)]
    m = phase_c["mllm"]
    loaded = load_mllm(m["mistral"], m["tokenizer"], m["agent"], device="cpu", dtype="float32", rep_dim=32)
    predictor = MLLMPredictor(loaded.model, loaded.special)
    builder = PromptBuilder(InstructionEncoder(loaded.tokenizer, loaded.special), loaded.special, 2)
    third = game["turns"][2]
    expected = predictor.predict(builder.build(third["instruction"], history)).representation
    got = stored[f"{third['clip']}/predicted"]
    assert got.shape == (226, 32) and got.dtype == torch.bfloat16
    torch.testing.assert_close(got, torch.from_numpy(expected).to(torch.bfloat16))
    # the history changed the prediction: the same turn without it is another representation
    alone = predictor.predict(builder.build(third["instruction"], [])).representation
    assert not np.allclose(alone, expected, atol=1e-3)


def test_phase_c_trains_its_parts_and_exports(folders, phase_c, tmp_path):
    run = RunConfig(max_steps=2, lr=1e-3, gradient_checkpointing=True, mixed_precision="bf16")
    settings = dataclasses.replace(phase_c["settings"], predictions=str(tmp_path / "predictions"))
    recipe = PhaseCRecipe(folders["data"], settings, run)
    model = recipe.build_model(Accelerator(cpu=True))  # no predictions there yet: it makes them first
    index = json.loads((tmp_path / "predictions" / "index.json").read_text())
    assert index.keys() == json.loads((phase_c["predictions"] / "index.json").read_text()).keys()
    assert model.encoder is None  # the condition is the MLLM's prediction
    before = snapshot(model)
    one_step(recipe, model, step=0)
    trained = {k for k, v in model.named_parameters() if v.grad is not None}
    assert trained == {k for k in before if "lora_" in k or ".norm1.linear." in k or ".norm2.linear." in k
                       or k.startswith("transformer.ofs_embedding.")}
    assert len(recipe.val_dataset()) == 1
    assert recipe.film_id == "film"  # the training folder's name: the films entry written after it
    recipe.settings.sample_steps = 2  # frozen weights in bf16, trained ones fp32: sampled under autocast
    assert clip_frames(recipe.sample(model, tmp_path, 1)) == 17
    folder = recipe.export(model, tmp_path / "export", Accelerator(cpu=True))[0]
    decoder = load_decoder(str(folder), device="cpu", dtype=torch.float32, steps=2)
    base = AnimeGamerTransformer3DModel.from_pretrained(str(phase_c["decoder"] / "transformer"))
    torch.testing.assert_close(decoder.transformer.uncond_embedding, base.uncond_embedding)  # kept from phase (a)
    assert (folder / ENCODER_FILE).is_file()
    clip = decoder.decode(np.zeros((226, 32), np.float32), 2.5, seed=0)
    assert clip.shape == (17, TINY_SIZE["height"], TINY_SIZE["width"], 3)


def test_phase_c_leaves_out_clips_in_no_game(phase_c, tmp_path):
    data = tiny_training_folder(tmp_path / "film", clips=4, incomplete=(3,))
    settings = dataclasses.replace(phase_c["settings"], predictions=str(tmp_path / "predictions"))
    recipe = PhaseCRecipe(data, settings, RunConfig())
    precompute(data, settings, device="cpu", dtype="float32")
    assert [i.id for i in recipe.dataset().items] == [f"film-{n:04d}-00" for n in range(3)]


def test_precompute_interrupted_continues_to_the_same_bytes(folders, phase_c, tmp_path, monkeypatch):
    """Killed after its first shard (of 2 clips): a second run keeps that shard, predicts only the
    rest, and leaves the files an uninterrupted run leaves; training refuses the half-done folder."""
    settings = dataclasses.replace(phase_c["settings"], predict_batch=2)
    whole = precompute(folders["data"], dataclasses.replace(settings, predictions=str(tmp_path / "whole")),
                       device="cpu", dtype="float32", shard_clips=2)
    cut = dataclasses.replace(settings, predictions=str(tmp_path / "cut"))
    real_write = decoder_c.write_shard
    written: list[str] = []

    def dies_after_one(path, tensors, meta):
        if written:
            raise KeyboardInterrupt("killed mid-precompute")
        real_write(path, tensors, meta)
        written.append(path.name)

    monkeypatch.setattr(decoder_c, "write_shard", dies_after_one)
    with pytest.raises(KeyboardInterrupt):
        precompute(folders["data"], cut, device="cpu", dtype="float32", shard_clips=2)
    assert written == ["shard-00000.safetensors"] and not (tmp_path / "cut" / "done.json").exists()
    with pytest.raises(DecoderDataError, match="not all of them"):
        PhaseCRecipe(folders["data"], cut, RunConfig()).dataset()
    first = (tmp_path / "cut" / "shard-00000.safetensors").stat().st_mtime_ns
    monkeypatch.setattr(decoder_c, "write_shard", real_write)
    predicted = []
    real_predict = decoder_c.write_predictions

    def counting(out, made_by, shards, clips_of, predict, progress):
        def counted(shard):
            predicted.extend(clips_of(shard))
            return predict(shard)
        return real_predict(out, made_by, shards, clips_of, counted, progress)

    monkeypatch.setattr(decoder_c, "write_predictions", counting)
    again = precompute(folders["data"], cut, device="cpu", dtype="float32", shard_clips=2)
    assert len(predicted) == 4 and (again / "shard-00000.safetensors").stat().st_mtime_ns == first  # 6 clips: 2 kept
    files = sorted(p.name for p in whole.iterdir())
    assert files == sorted(p.name for p in again.iterdir()) and "shard-00002.safetensors" in files
    for name in files:
        assert (whole / name).read_bytes() == (again / name).read_bytes(), name
    # another MLLM's predictions are not continued: the folder starts over (other settings, or an
    # agent retrained under the same name)
    other = dataclasses.replace(cut, history_window=1)
    precompute(folders["data"], other, device="cpu", dtype="float32", shard_clips=2)
    assert json.loads((again / "done.json").read_text())["history_window"] == 1
    (again / "done.json").unlink()  # as if that run had been interrupted too
    agent = Path(cut.agent)
    os.utime(agent, ns=(agent.stat().st_atime_ns, agent.stat().st_mtime_ns + 10**9))
    predicted.clear()
    precompute(folders["data"], cut, device="cpu", dtype="float32", shard_clips=2)
    assert len(predicted) == 6


def test_describe_phase_c_full_size():
    facts = describe_phase_c()
    lora = 30 * 4 * 64 * (1920 + 1920)
    adaln = 30 * 2 * (512 * 6 * 1920 + 6 * 1920)
    flow = 1920 * 512 + 512 + 512 * 512 + 512
    assert facts["trainable"] == lora + adaln + flow
    assert facts["video_tokens"] + facts["condition_tokens"] == 6976


# ---------------------------------------------------------------------------------------------
# Through the engine: loss falls, two processes equal one, resume gives the uninterrupted curve


def test_phase_c_loss_falls_on_an_overfit_batch(folders, phase_c):
    """One batch with the same timesteps and noise at every step (the draws follow from the step
    number, given as 1 each time), no condition dropped: the loss falls well under half in 120 steps
    (measured on CPU: 1.358 -> 0.495 at step 80, 0.389 at step 120, a ratio of 0.29; bound 0.45)."""
    settings = dataclasses.replace(phase_c["settings"], text_drop=0.0, image_drop=0.0)
    recipe = PhaseCRecipe(folders["data"], settings, RunConfig(lr=1e-2))
    losses = overfit_losses(recipe, recipe.build_model(Accelerator(cpu=True)), 120)
    assert losses[-1] < 0.45 * losses[0], losses


def engine_run(steps: int = 3, save_every: int = 3) -> RunConfig:
    return RunConfig(max_steps=steps, lr=1e-3, batch_size=2, save_every=save_every, seed=0)


def engine_phase(decoder: Path, predictions: Path) -> dict:
    """The stored predictions (done.json there: no MLLM is loaded), conditions dropped as trained."""
    return {"decoder": str(decoder), "predictions": str(predictions), "export_dtype": "fp32", "text_drop": 0.3,
            "image_drop": 0.3, "sample_steps": 0}


def test_phase_c_on_two_cpu_processes_equals_one(folders, phase_c, tmp_path):
    """accelerate launch --num_processes 2 --cpu (gloo), same global batch: the same losses as one
    process (measured: the same three floats, 1.3367, 1.3093, 1.3641; the bound is phase (a)'s rel 1e-4 as
    gloo's all-reduce may sum in another order)."""
    phase = engine_phase(phase_c["decoder"], phase_c["predictions"])
    single = train(decoder_c.make(folders["data"], phase, engine_run()), engine_run(), tmp_path / "one",
                   resume=False, progress=False)
    command = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "2", "--cpu", "--num_machines", "1",
               "--mixed_precision", "no", "--dynamo_backend", "no", "-m", "tests.training.test_decoder_c",
               str(folders["data"]), str(phase_c["decoder"]), str(phase_c["predictions"]), str(tmp_path / "two")]
    done = subprocess.run(command, cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    two = [json.loads(line)["loss"] for line in (tmp_path / "two" / "losses.jsonl").read_text().splitlines()]
    assert two == pytest.approx([r["loss"] for r in single.losses], rel=1e-4, abs=1e-6)


if __name__ == "__main__":  # one process of the two-process run above
    data, decoder, predictions, out = (Path(a) for a in sys.argv[1:5])
    torch.set_num_threads(1)
    train(decoder_c.make(data, engine_phase(decoder, predictions), engine_run()), engine_run(), out, resume=False,
          progress=False)


def test_phase_c_resumed_gives_the_uninterrupted_curve(folders, phase_c, tmp_path):
    """Stopped after its checkpoint at step 2 of 4 and resumed: the uninterrupted run's losses
    (the draws, the dropped conditions and the sample order follow from the step and the seed;
    measured: the same four floats, 1.3367, 1.3093, 1.3641, 1.2269)."""
    phase = engine_phase(phase_c["decoder"], phase_c["predictions"])
    whole = train(decoder_c.make(folders["data"], phase, engine_run(4, 2)), engine_run(4, 2), tmp_path / "whole",
                  resume=False, progress=False)
    train(decoder_c.make(folders["data"], phase, engine_run(2, 2)), engine_run(2, 2), tmp_path / "cut", resume=False,
          progress=False)
    resumed = train(decoder_c.make(folders["data"], phase, engine_run(4, 2)), engine_run(4, 2), tmp_path / "cut",
                    resume=True, progress=False)
    assert resumed.resumed_from == 2
    assert [r["loss"] for r in resumed.losses] == pytest.approx([r["loss"] for r in whole.losses], rel=1e-6)
