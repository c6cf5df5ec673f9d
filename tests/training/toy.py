"""A toy recipe for the engine's tests: a small MLP with dropout regressing fixed random data.
Dropout makes the loss depend on the global random stream, so resume must restore it."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from accelerate import Accelerator

from training.config import RunConfig
from training.engine import train


class ToyData(torch.utils.data.Dataset):
    def __init__(self, size: int = 8) -> None:
        g = torch.Generator().manual_seed(1)
        self.x = torch.randn(size, 6, generator=g)
        self.y = torch.randn(size, 2, generator=g)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        return self.x[i], self.y[i]


class ToyModel(torch.nn.Module):
    def __init__(self, dropout: float) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Dropout(dropout), torch.nn.Linear(16, 2))
        self.frozen = torch.nn.Linear(2, 2)
        self.frozen.requires_grad_(False)

    def forward(self, x):
        return self.frozen(self.net(x))


class ToyRecipe:
    name = "toy"

    def __init__(self, dropout: float = 0.1, size: int = 8, with_val: bool = False) -> None:
        self.dropout, self.size, self.with_val = dropout, size, with_val

    def build_model(self, accelerator: Accelerator) -> torch.nn.Module:
        return ToyModel(self.dropout)

    def param_groups(self, model):
        return [{"params": [p for p in model.parameters() if p.requires_grad]}]

    def dataset(self):
        return ToyData(self.size)

    def val_dataset(self):
        return ToyData(3) if self.with_val else None

    def collate(self, items):
        return torch.stack([i[0] for i in items]), torch.stack([i[1] for i in items])

    def loss(self, model, batch, step):
        x, y = batch
        mse = torch.nn.functional.mse_loss(model(x), y)
        return {"loss": mse, "mse": mse}

    def export(self, model, out: Path, accelerator):
        path = Path(out) / "toy.pt"
        if accelerator.is_main_process:
            path.parent.mkdir(parents=True, exist_ok=True)
            torch.save(model.state_dict(), path)
        return [path]

    def sample(self, model, out: Path, step: int):
        """Draws from the random stream, as a decoder phase's sampling does: the engine must keep
        the training's stream as it was (the resume test has dropout)."""
        path = Path(out) / "samples" / f"step-{step}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(str(float(torch.randn(1))))
        return path

    def describe(self):
        return {"samples": self.size}


if __name__ == "__main__":  # accelerate launch -m tests.training.toy OUT BATCH ACCUM STEPS
    torch.set_num_threads(1)
    out, batch, accum, steps = Path(sys.argv[1]), *map(int, sys.argv[2:5])
    train(ToyRecipe(dropout=0.0), RunConfig(max_steps=steps, batch_size=batch, grad_accum=accum, lr=1e-2, save_every=100),
          out, resume=False, progress=False)
