"""Record the small ``with_stack=True`` CPU trace committed next to this script.

    .venv/bin/python tests/trace/data/record_with_stack.py tests/trace/data/with_stack_cpu.json.gz

Two steps of a tiny MLP under ``torch.profiler.profile(with_stack=True)`` on the CPU: the file has
``python_function`` events (the Python call stack) besides the ``cpu_op`` events.
"""

from __future__ import annotations

import gzip
import os
import sys
import tempfile
from pathlib import Path


def step(model, opt, x, y):
    import torch

    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


def main(out: str) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 16), torch.randn(8, 1)
    step(model, opt, x, y)  # warm up outside the recording
    with profile(activities=[ProfilerActivity.CPU], with_stack=True) as prof:
        for _ in range(2):
            step(model, opt, x, y)
    fd, tmp = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    prof.export_chrome_trace(tmp)
    Path(out).write_bytes(gzip.compress(Path(tmp).read_bytes()))
    os.unlink(tmp)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else str(Path(__file__).parent / "with_stack_cpu.json.gz"))
