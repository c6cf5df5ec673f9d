"""Phase (b) (training/mllm_recipe.py) on a tiny random Mistral, the offline AnimeGamer tokenizer
and a tiny training set in the film pipeline's format (testkit/film_set.py)."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import numpy as np
import pytest
import torch
from accelerate import Accelerator
from accelerate.utils import set_seed

from evaluation.metrics import state_scores
from game.films_file import parse_films
from inference.mllm.instruction import InstructionEncoder
from inference.mllm.loading import load_mllm
from inference.mllm.predict import MLLMPredictor
from inference.mllm.prompt import HistoryItem, PromptBuilder
from testkit.film_set import WIDTH, models, phase_b_table, training_set
from training.config import ConfigError, RunConfig
from training.engine import checkpoints, train
from training.export import write_film_entry
from training.mllm_recipe import MLLMDataError, PhaseB, make
from training.state_accuracy import predicted_values

torch.set_num_threads(2)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("phase_b")
    out = models(root / "models")
    # 4 clips of one character: one game; its first two turns make two samples (1 and 2 turns).
    out["data"] = training_set(root / "film", clips=4)
    out["data_heldout"] = training_set(root / "film_heldout", clips=12, heldout_every=2)
    return out


def run(**kwargs) -> RunConfig:
    return RunConfig(**{"max_steps": 4, "lr": 2e-3, "batch_size": 2, "save_every": 100, "seed": 1, **kwargs})


def recipe(files, data="data", **phase):
    return make(files[data], phase_b_table(files, max_turns=2, **phase), run())


def curve(result) -> list[float]:
    return [r["loss"] for r in result.losses]


def test_loss_falls_on_a_repeated_batch_and_states_are_learned(files, tmp_path):
    """Two samples, batch 2, 20 steps: the loss falls to under half; the trained model's
    state predictions (by the worker's predictor) match the targets better than before."""
    r = recipe(files)
    result = train(r, run(max_steps=20, lr=5e-3), tmp_path, resume=False, progress=False)
    losses = curve(result)
    print("phase (b) loss per step:", " ".join(f"{v:.3f}" for v in losses))
    assert losses[-1] < losses[0] / 2, losses
    assert result.losses[-1]["ce"] < result.losses[0]["ce"] / 2
    assert result.losses[-1]["mse"] < result.losses[0]["mse"]
    # Measured: the worker's predictor over the training turns (teacher-forced history), untrained
    # (the engine's seed, the same build) vs trained (the export, through the worker's loader);
    # ACC-S scored as the evaluation scores it, and the four values with the motion level.
    loaded = load_mllm(files["mistral"], files["tokenizer"], result.exported[0], device="cpu", rep_dim=WIDTH)
    untrained = make(files["data"], phase_b_table(files, max_turns=2), run())
    set_seed(1)
    base = untrained.build_model(Accelerator(cpu=True)).mllm.eval()  # type: ignore[union-attr]
    games = [g[:2] for g in r.train_games]
    prefixes = r.dataset()

    def rep(turn):
        return prefixes.representation(turn).numpy()  # type: ignore[attr-defined]

    scores = {}
    for name, model in (("untrained", base), ("trained", loaded.model)):
        pairs = predicted_values(model, loaded.special, loaded.tokenizer, games, rep)
        scores[name] = (float(np.mean([state_scores(p[1:], a[1:])[0] for p, a in pairs])),
                        float(np.mean([np.mean(np.equal(p, a)) for p, a in pairs])))
    said = (f"on {len(pairs)} training turns: ACC-S untrained {scores['untrained'][0]:.3f}, trained "
            f"{scores['trained'][0]:.3f}; all four values untrained {scores['untrained'][1]:.3f}, trained "
            f"{scores['trained'][1]:.3f}")
    print(said)
    assert scores["trained"][1] > scores["untrained"][1], said
    assert scores["trained"] == (1.0, 1.0), said  # two samples, 20 steps: learned by heart


def test_resume_gives_the_uninterrupted_curve(files, tmp_path):
    """LoRA dropout draws from the global random stream: the checkpoint restores it."""
    whole = train(recipe(files), run(batch_size=1, save_every=2), tmp_path / "whole", resume=False, progress=False)
    cut = tmp_path / "cut"
    train(recipe(files), run(batch_size=1, save_every=2, max_steps=3), cut, resume=False, progress=False)
    shutil.rmtree(checkpoints(cut)[-1][1])  # killed after step 3, before its checkpoint
    resumed = train(recipe(files), run(batch_size=1, save_every=2), cut, resume=True, progress=False)
    assert resumed.resumed_from == 2
    assert curve(resumed) == pytest.approx(curve(whole), abs=1e-6)


def test_accumulation_equals_a_batch_of_two(files, tmp_path):
    """Two samples of different lengths: alone (2 micro-steps) or left-padded together, the same
    losses and weights (dropout off, since its masks differ with the shapes)."""
    acc = train(recipe(files, lora_dropout=0.0), run(batch_size=1, grad_accum=2, max_steps=2), tmp_path / "a",
                resume=False, progress=False)
    big = train(recipe(files, lora_dropout=0.0), run(batch_size=2, grad_accum=1, max_steps=2), tmp_path / "b",
                resume=False, progress=False)
    assert curve(acc) == pytest.approx(curve(big), rel=1e-4)
    wa = torch.load(acc.exported[0], weights_only=True)
    wb = torch.load(big.exported[0], weights_only=True)
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], rtol=1e-3, atol=1e-4)


def test_exported_checkpoint_plays_in_the_worker_and_the_films_entry_parses(files, tmp_path):
    r = recipe(files)
    result = train(r, run(max_steps=2), tmp_path, resume=False, progress=False)
    agent = result.exported[0]
    assert agent.name == "pytorch_model.bin" and agent.parent.name == "MLLM-tinyfilm"
    loaded = load_mllm(files["mistral"], files["tokenizer"], agent, device="cpu", rep_dim=WIDTH, merge=False)
    assert not [k for k in loaded.report.leftovers if "base_layer" not in k and "original_module" not in k]
    # The worker's predictor on the loaded (merged) model gives the trained model's outputs.
    merged = load_mllm(files["mistral"], files["tokenizer"], agent, device="cpu", rep_dim=WIDTH)
    builder = PromptBuilder(InstructionEncoder(merged.tokenizer, merged.special), merged.special, history_window=4)
    turns = r.train_games[0]
    history = [HistoryItem(turns[0].instruction, turns[0].values, np.ones((226, WIDTH), np.float32))]
    prompt = builder.build(turns[1].instruction, history)
    got = MLLMPredictor(merged.model, merged.special).predict(prompt)
    want = MLLMPredictor(loaded.model.eval(), loaded.special).predict(prompt)
    np.testing.assert_allclose(got.representation, want.representation, rtol=1e-4, atol=1e-5)
    assert got.values == want.values and got.representation.shape == (226, WIDTH)
    # The films entry names the folders and the training set's cast, and the game parses it.
    path = write_film_entry(tmp_path, "tinyfilm", "Tiny Film", agent.parent, tmp_path / "export" / "decoder", r.cast())
    write_film_entry(tmp_path, "tinyfilm", "Tiny Film 2", agent.parent, tmp_path / "export" / "decoder", r.cast())
    films = parse_films(tomllib.loads(path.read_text()), str(path), base={})
    film = films["tinyfilm"]
    assert film.title == "Tiny Film 2" and film.mllm_checkpoint == "MLLM-tinyfilm" and film.decoder_checkpoint == "decoder"
    assert [(c.id, c.name) for c in film.characters] == [("qiqi", "Qiqi"), ("jiji", "Jiji")]


def test_released_checkpoint_as_a_start(files, tmp_path):
    """phase.init_agent: a released agent checkpoint loads through the worker's loader first."""
    from testkit.tiny import mllm as tiny

    sd = tiny.released_state_dict(files["mistral"], rep_dim=WIDTH)
    agent = tiny.write_checkpoint(sd, tmp_path / "pytorch_model.bin")
    r = recipe(files, init_agent=str(agent))
    model = r.build_model(Accelerator(cpu=True))
    state = model.mllm.state_dict()  # type: ignore[union-attr]
    for key in ("llm.base_model.model.model.embed_tokens.weight", "output_resampler.proj.2.weight",
                "llm.base_model.model.model.layers.0.self_attn.q_proj.lora_B.default.weight"):
        torch.testing.assert_close(state[key], sd[key])


def test_heldout_games_give_a_validation_loss(files, tmp_path):
    r = recipe(files, data="data_heldout")
    assert r.heldout_games and r.train_games
    result = train(r, run(max_steps=2, validate_every=2), tmp_path, resume=False, progress=False)
    assert [v["step"] for v in result.val_losses] == [2]


def test_bad_training_sets_and_settings(files, tmp_path):
    with pytest.raises(MLLMDataError, match="no such folder"):
        make(tmp_path / "nope", phase_b_table(files), run())
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(MLLMDataError, match="manifest"):
        make(empty, phase_b_table(files), run())
    broken = tmp_path / "broken"
    shutil.copytree(files["data"], broken)
    (broken / "features" / "index.json").write_text("{}")
    with pytest.raises(MLLMDataError, match="no features"):
        make(broken, phase_b_table(files), run())
    (broken / "games.jsonl").unlink()
    with pytest.raises(MLLMDataError, match="games.jsonl"):
        make(broken, phase_b_table(files), run())
    with pytest.raises(ConfigError, match="base_model"):
        make(files["data"], phase_b_table(files, base_model=""), run())
    with pytest.raises(ConfigError, match="no such file"):
        make(files["data"], phase_b_table(files, encoder=str(tmp_path / "none")), run())
    with pytest.raises(ConfigError, match="no setting"):
        PhaseB.from_table({"lora_rnk": 3})


def test_training_prompt_is_the_worker_prompt_plus_the_states(files):
    from inference.mllm.tokens import SPECIAL

    r = recipe(files)
    r.build_model(Accelerator(cpu=True))
    assert r.builder is not None
    turns = r.train_games[0]
    history = [HistoryItem(turns[0].instruction, turns[0].values, np.zeros((226, 1), np.float32))]
    turn = r.builder.build_training(turns[1].instruction, history, (3, 1, 0, -1))
    assert turn.input_ids[: len(turn.prompt)] == r.builder.build(turns[1].instruction, history).input_ids
    assert [turn.input_ids[i] for i in turn.state_positions] == [SPECIAL.strength_id(v) for v in (3, 1, 0, -1)]
    assert turn.input_ids[len(turn.prompt) - 1] == SPECIAL.state_open[0]
    assert turn.input_ids[-2:] == [SPECIAL.state_close[3], SPECIAL.turn_end]


def test_int8_frozen_base_trains_the_lora_on_top(files):
    """phase.quantize=int8: the decoder layers' base weights are torchao int8 and frozen; peft's
    torchao LoRA layer wraps them and the gradients reach the LoRA and the head."""
    r = recipe(files, quantize="int8")
    model = r.build_model(Accelerator(cpu=True))
    q_proj = model.mllm.causal_lm.model.layers[0].self_attn.q_proj  # type: ignore[union-attr]
    assert type(q_proj.base_layer.weight).__name__ == "Int8Tensor" and not q_proj.base_layer.weight.requires_grad
    r.loss(model, r.collate([r.dataset()[0]]), 0)["loss"].backward()
    assert q_proj.lora_B.default.weight.grad.abs().sum() > 0
    assert model.mllm.causal_lm.lm_head.weight.grad is not None  # type: ignore[union-attr]


def test_a_base_of_another_vocabulary_is_refused(files, tmp_path):
    from testkit.tiny import mllm as tiny

    other = tmp_path / "other"
    tiny.build_mistral(other, vocab_size=1000)
    r = recipe(files, base_model=str(other))
    with pytest.raises(ConfigError, match="1000 tokens"):
        r.build_model(Accelerator(cpu=True))
