#!/usr/bin/env python3
"""Writes the PyTorch checkpoints intlab's RL-CC loader is tested on, with torch.save itself.

Run once with PyTorch installed (CPU is enough: `pip install torch`); the files it makes are
committed in rlcc/tests/fixtures/torch/ and read by rlcc/tests/torch_checkpoints.rs:

  python3 scripts/make-torch-fixtures.py rlcc/tests/fixtures/torch

The network is RL-CC's public one (benja263/rl-cc, neural_nets/mlp.py): 4 -> 12 -> 12 -> 1,
ReLU, no biases, tanh output, its layers named net.0, net.2 and output_layer. It is saved in the
layouts users save: a state_dict, the public repository's dict (model and Adam optimizer
state), the whole module, and each of the first two in the legacy (pre-1.6, non-zip) format.
expected.json holds the weights and the outputs for a few inputs, so the test compares the
loaded network with what PyTorch computes.
"""

import json
import sys
from pathlib import Path

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 12, bias=False), nn.ReLU(), nn.Linear(12, 12, bias=False), nn.ReLU())
        self.output_layer = nn.Linear(12, 1, bias=False)

    def forward(self, x):
        return torch.tanh(self.output_layer(self.net(x)))


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(20261123)
    model = MLP()
    # One Adam step, so the optimizer state holds tensors shaped like the weights.
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    loss = model(torch.randn(8, 4)).pow(2).mean()
    loss.backward()
    opt.step()

    public = {"model_state_dict": model.state_dict(), "optimizer_state_dict": opt.state_dict()}
    torch.save(model.state_dict(), out / "state_dict.pt")
    torch.save(public, out / "public_layout.pt")
    torch.save(model, out / "whole_module.pt")
    torch.save(model.state_dict(), out / "legacy_state_dict.pt", _use_new_zipfile_serialization=False)
    torch.save(public, out / "legacy_public_layout.pt", _use_new_zipfile_serialization=False)

    inputs = [[0.0, 0.0, 0.0, 0.0], [1.0, 0.5, 1.2, -0.3], [0.9, -2.0, 1.1, 4.0], [1.2, 0.1, 0.8, 0.7]]
    with torch.no_grad():
        outputs = model(torch.tensor(inputs)).squeeze(1).tolist()
    weights = [model.net[0].weight.tolist(), model.net[2].weight.tolist(), model.output_layer.weight.tolist()]
    expected = {"torch": torch.__version__, "weights": weights, "inputs": inputs, "outputs": outputs}
    (out / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "rlcc/tests/fixtures/torch"))
