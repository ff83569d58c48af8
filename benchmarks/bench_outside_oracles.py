"""Outside oracles: other people's training code, unmodified, eager vs ``asynchronous()``, bitwise.

The repository's own tests compare against eager torch with programs this project wrote.  Here the
programs are other projects' -- their models, their training loops, their logging -- run twice in
one process, eagerly and inside ``d2l_async.torch_async.asynchronous()`` (1 and 2 workers), and
every tensor they leave is compared byte for byte:

* **nanoGPT** (karpathy/nanoGPT): its ``train.py`` run as a script (``runpy``, its own configurator
  on the command line: a 2-layer GPT on synthetic tokens written as its ``train.bin``/``val.bin``,
  AdamW with its two parameter groups, cosine learning rate with warm-up, gradient accumulation,
  clipping, the GradScaler off as on a CPU, dropout, ``estimate_loss``, checkpoints with
  ``torch.save``), then ``raw_model.generate`` with top-k sampling: the model is built inside the
  block.  Then ``train.py``'s loop body (copied below, line for line without DDP, wandb and the
  evaluation) over a model built outside the block, passed through ``make_async`` with the
  optimizer made before, as ``train.py`` orders them; and the same loop with both built inside.
* **pytorch/examples**: ``word_language_model/main.py`` as a script (LSTM, GRU, Transformer, a tied
  LSTM with ``--use-optimizer``: its loop with ``clip_grad_norm_`` and the manual SGD update
  ``p.data.add_(p.grad, alpha=-lr)``, ``evaluate``, learning-rate annealing, ``torch.save`` of the
  whole model and ``torch.load`` of it) on a synthetic corpus of three small text files; and
  ``mnist/main.py``'s ``main()`` (its ``Net``, Adadelta, ``StepLR``, dropout, ``--save-model``) with
  a stand-in ``torchvision`` whose ``datasets.MNIST`` is synthetic 28 x 28 images and
  ``transforms`` do ``ToTensor``/``Normalize``'s arithmetic (no download can happen here).
* **d2l** (the book's ``d2l/torch.py``, version 1.0.3, loaded from the wheel's file with stand-ins
  for torchvision, PIL and matplotlib, which its import pulls in; figures are not drawn): §3.4's
  ``LinearRegressionScratch``, §3.5's ``LinearRegression``, §4.5's ``SoftmaxRegression`` and §7.6's
  ``LeNet`` through ``d2l.Trainer`` (the book's ``FashionMNIST.get_dataloader`` with its 4 loader
  workers, over synthetic images), ``d2l.train_ch6``, and §10.3's GRU ``RNNLM`` (``TimeMachine``
  with synthetic text, gradient clipping, ``predict``): built inside the block, built outside and
  used as is, and through ``make_async``.
* **Interrupted nanoGPT**: real SIGINTs (``os.kill``, ``signal.raise_signal``) at random moments of
  the nanoGPT loop above, a second one in half the trials, models built inside and through
  ``make_async``, 1 and 2 workers; the state after (every parameter and every AdamW tensor) must be
  one eager torch passes through -- recorded before and after each aten op of an eager run -- or
  raise ``NotComputedError``; never a value eager never holds (``tests/torch_async/interrupt_runner``'s
  oracle, reused).

Printed lines are compared too, with the wall-clock fields (``time``, ``ms/batch``, ``mfu``,
``examples/sec``) taken out.  A mismatch names the first differing entry (a tensor: how many
elements differ and the largest difference).

The outside code is read from checkouts given on the command line or in environment variables,
each either a work tree or a bare git directory (read with ``git show``), its commit recorded; a
suite whose checkout is not given is skipped, saying so.  Nothing here is needed by the package or
by ``make test``::

    python benchmarks/bench_outside_oracles.py --nanogpt PATH --examples PATH --d2l PATH [--trials 40]

    D2L_ASYNC_NANOGPT=... D2L_ASYNC_PYTORCH_EXAMPLES=... D2L_ASYNC_D2L=... python benchmarks/bench_outside_oracles.py

``--d2l`` is a directory holding ``d2l/torch.py`` (an unpacked ``pip download d2l==1.0.3 --no-deps``
wheel) or the ``.whl`` itself.  Each suite runs in a subprocess of its own (two of the projects name
a module ``model``); the JSON goes to ``benchmarks/results/outside_oracles.json``.  With no checkout
given (``make benchmarks`` runs every script bare) it says what it skipped and leaves the JSON as it is.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import math
import os
import platform
import random
import re
import runpy
import signal
import subprocess
import sys
import tempfile
import threading
import time
import types
import warnings
import zipfile
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "outside_oracles.json"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

from _provenance import command  # noqa: E402
from d2l_async import devices  # noqa: E402
from d2l_async.torch_async import NotComputedError, asynchronous, make_async  # noqa: E402

#: the files each suite reads from its checkout (and the licence that comes with them)
FILES = {
    "nanogpt": ["model.py", "train.py", "configurator.py", "LICENSE"],
    "examples": ["word_language_model/main.py", "word_language_model/model.py", "word_language_model/data.py",
                 "mnist/main.py", "LICENSE"],
}
ENV = {"nanogpt": "D2L_ASYNC_NANOGPT", "examples": "D2L_ASYNC_PYTORCH_EXAMPLES", "d2l": "D2L_ASYNC_D2L"}
WORKERS = (1, 2)
#: seconds one interrupted trial may take before the child dumps every thread's stack and exits (a hang)
HANG = 120.0

# -- comparing what two runs left ---------------------------------------------------------------------


def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    """Every tensor and plain value in nested dicts/lists/tuples, by a dotted path; a tensor as
    (dtype, shape, bytes)."""
    out: dict[str, Any] = {}
    if isinstance(obj, torch.Tensor):
        t = obj.detach()
        out[prefix] = ("tensor", str(t.dtype), tuple(t.shape), t.contiguous().numpy().tobytes())
    elif isinstance(obj, dict):
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            out.update(flatten(v, f"{prefix}[{i}]"))
    elif isinstance(obj, float):
        out[prefix] = ("float", obj.hex())
    else:
        out[prefix] = ("value", repr(obj))
    return out


def _tensor_of(entry: tuple) -> torch.Tensor:
    _, dtype, shape, data = entry
    return torch.frombuffer(bytearray(data), dtype=getattr(torch, dtype.split(".")[1])).reshape(shape)


def first_difference(eager: dict[str, Any], got: dict[str, Any]) -> dict | None:
    """None when every entry is equal bitwise; else the first entry (in eager's order) that differs."""
    for name in list(eager) + [n for n in got if n not in eager]:
        a, b = eager.get(name), got.get(name)
        if a == b:
            continue
        diff: dict[str, Any] = {"name": name}
        if a is None or b is None:
            diff["what"] = "only in eager's run" if b is None else "only in the asynchronous run"
        elif a[0] == "tensor" and b[0] == "tensor" and a[1:3] == b[1:3]:
            ta, tb = _tensor_of(a).double(), _tensor_of(b).double()
            neq = ~((ta == tb) | (ta.isnan() & tb.isnan()))
            diff.update(what="values", elements_differing=int(neq.sum()), elements=ta.numel(),
                        max_abs_difference=float((ta - tb).abs()[neq].max()) if neq.any() else 0.0)
        else:
            diff.update(what="value", eager=str(a[1:])[:200], got=str(b[1:])[:200])
        return diff
    return None


def ulp_up(x: float) -> float:
    """The next float32 above ``x``'s float32."""
    import numpy as np
    return float(np.nextafter(np.float32(x), np.float32(np.inf)))


_CLOCKS = [re.compile(p) for p in (r"time [\d.]+ms", r"mfu -?[\d.]+%", r"ms/batch +[\d.]+", r"time: +[\d.]+s",
                                   r"[\d.]+ examples/sec")]


def printed(text: str) -> list[str]:
    """The lines a program printed, wall-clock fields taken out."""
    lines = []
    for line in text.splitlines():
        for clock in _CLOCKS:
            line = clock.sub("<clock>", line)
        lines.append(line)
    return lines


@contextlib.contextmanager
def quiet_run(argv: list[str], cwd: Path):
    """``sys.argv`` and the working directory as a script expects them, its stdout captured, its
    warnings (deprecations, lazy modules) silenced."""
    old_argv, old_cwd = sys.argv, os.getcwd()
    buf = io.StringIO()
    sys.argv = argv
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(buf), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield buf
    finally:
        sys.argv = old_argv
        os.chdir(old_cwd)


def block(workers: int | None):
    """The block a variant runs in: none for eager."""
    return contextlib.nullcontext() if workers is None else asynchronous(workers=workers)


def compare_runs(suite: str, case: str, run: Callable[[str, int | None], dict],
                 variants: list[tuple[str, int]], eager_build: str = "outside",
                 control: Callable[[], dict] | None = None) -> list[dict]:
    """Eager's run once, then each (build, workers) variant: one result row each, printed as a JSON line.

    ``control``: the same program with its learning rate one float32 ulp off (a float64 ulp can vanish
    where a kernel casts the rate to the parameters' float32), run asynchronously; the
    comparison must find it (its row says whether it did), or the oracle could not tell a difference."""
    t0 = time.perf_counter()
    eager = flatten(run(eager_build, None))
    eager_s = time.perf_counter() - t0
    rows = []
    if control is not None:
        diff = first_difference(eager, flatten(control()))
        row = {"suite": suite, "case": case, "control": "learning rate one float32 ulp higher", "detected": diff is not None,
               "first_difference": diff}
        print(json.dumps(row), flush=True)
        rows.append(row)
    for build, workers in variants:
        t0 = time.perf_counter()
        try:
            got = flatten(run(build, workers))
            diff = first_difference(eager, got)
            error = None
        except Exception as exc:  # noqa: BLE001 - any error is a finding, reported with the run
            diff, error = None, f"{type(exc).__name__}: {str(exc)[:500]}"
        row = {"suite": suite, "case": case, "build": build, "workers": workers, "equal": diff is None and not error,
               "entries": len(eager), "first_difference": diff, "error": error,
               "seconds": round(time.perf_counter() - t0, 3), "eager_seconds": round(eager_s, 3)}
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


# -- nanoGPT --------------------------------------------------------------------------------------------

NANO = dict(n_layer=2, n_head=2, n_embd=32, block_size=16, batch_size=4, gradient_accumulation_steps=2,
            dropout=0.1, max_iters=6, eval_interval=3, eval_iters=2, log_interval=1, warmup_iters=2,
            lr_decay_iters=6, learning_rate=1e-3, min_lr=1e-4, weight_decay=1e-1, beta1=0.9, beta2=0.95,
            grad_clip=1.0, bias=False)
VOCAB = 65  # shakespeare_char's


def nano_data(workdir: Path) -> None:
    """``data/synthetic/{train,val}.bin`` and ``meta.pkl`` as nanoGPT's prepare scripts write them."""
    import pickle

    import numpy as np
    d = workdir / "data" / "synthetic"
    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    rng.integers(0, VOCAB, 4000, dtype=np.uint16).tofile(d / "train.bin")
    rng.integers(0, VOCAB, 1000, dtype=np.uint16).tofile(d / "val.bin")
    with open(d / "meta.pkl", "wb") as f:
        pickle.dump({"vocab_size": VOCAB}, f)


def nano_train_py(src: Path, workdir: Path, workers: int | None, bias: bool, tag: str) -> dict:
    """nanoGPT's ``train.py``, unmodified, as ``python train.py --key=value ...``; then a sample."""
    cfg = {**NANO, "bias": bias}
    argv = ["train.py", "--device=cpu", "--compile=False", "--dtype=float32", "--dataset=synthetic",
            "--out_dir=out", *(f"--{k}={v}" for k, v in cfg.items())]
    sys.path.insert(0, str(src))
    run_dir = workdir / tag  # each run its own folder: the same paths printed, its own checkpoint
    run_dir.mkdir()
    (run_dir / "configurator.py").write_text((src / "configurator.py").read_text())
    (run_dir / "data").symlink_to(workdir / "data")
    with quiet_run(argv, run_dir) as out:
        with block(workers):
            g = runpy.run_path(str(src / "train.py"), run_name="__main__")
            torch.manual_seed(7)
            sample = g["raw_model"].generate(torch.zeros((1, 1), dtype=torch.long), 8, temperature=1.0, top_k=5)
    ckpt = torch.load(run_dir / "out" / "ckpt.pt", weights_only=False)
    return {"model": g["model"].state_dict(), "optimizer": g["optimizer"].state_dict()["state"],
            "ckpt_model": ckpt["model"], "ckpt_optimizer": ckpt["optimizer"]["state"], "ckpt_iter": ckpt["iter_num"],
            "best_val_loss": ckpt["best_val_loss"], "sample": sample, "printed": printed(out.getvalue())}


def nano_build(src: Path):
    """``train.py``'s model and optimizer (``model.configure_optimizers``), seeded as it seeds."""
    sys.path.insert(0, str(src))
    from model import GPT, GPTConfig  # nanoGPT's model.py

    torch.manual_seed(1337)
    conf = GPTConfig(n_layer=NANO["n_layer"], n_head=NANO["n_head"], n_embd=NANO["n_embd"],
                     block_size=NANO["block_size"], bias=NANO["bias"], vocab_size=VOCAB, dropout=NANO["dropout"])
    with contextlib.redirect_stdout(io.StringIO()):
        model = GPT(conf)
        optimizer = model.configure_optimizers(NANO["weight_decay"], NANO["learning_rate"],
                                               (NANO["beta1"], NANO["beta2"]), "cpu")
    return model, optimizer


def nano_tokens():
    import numpy as np
    return np.random.default_rng(0).integers(0, VOCAB, 4000, dtype=np.uint16)


def nano_loop(model, optimizer, data) -> list[float]:
    """``train.py``'s loop body, line for line, less DDP, wandb, evaluation and checkpoints."""
    import numpy as np
    block_size, batch_size = NANO["block_size"], NANO["batch_size"]
    gradient_accumulation_steps, grad_clip = NANO["gradient_accumulation_steps"], NANO["grad_clip"]
    warmup_iters, lr_decay_iters = NANO["warmup_iters"], NANO["lr_decay_iters"]
    learning_rate, min_lr = NANO["learning_rate"], NANO["min_lr"]

    def get_batch():
        ix = torch.randint(len(data) - block_size, (batch_size,))
        x = torch.stack([torch.from_numpy((data[i:i+block_size]).astype(np.int64)) for i in ix])
        y = torch.stack([torch.from_numpy((data[i+1:i+1+block_size]).astype(np.int64)) for i in ix])
        return x, y

    def get_lr(it):
        if it < warmup_iters:
            return learning_rate * (it + 1) / (warmup_iters + 1)
        if it > lr_decay_iters:
            return min_lr
        decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
        coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
        return min_lr + coeff * (learning_rate - min_lr)

    scaler = torch.amp.GradScaler("cpu", enabled=False)  # train.py: enabled=(dtype == 'float16')
    X, Y = get_batch()
    losses = []
    for iter_num in range(NANO["max_iters"]):
        lr = get_lr(iter_num)
        for param_group in optimizer.param_groups:
            param_group['lr'] = lr
        for _micro_step in range(gradient_accumulation_steps):
            logits, loss = model(X, Y)
            loss = loss / gradient_accumulation_steps
            X, Y = get_batch()
            scaler.scale(loss).backward()
        if grad_clip != 0.0:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item() * gradient_accumulation_steps)  # log_interval = 1: a sync point each step
    return losses


def nano_loop_run(src: Path, build: str, workers: int | None, lr_ulps: int = 0) -> dict:
    data = nano_tokens()
    model, optimizer = nano_build(src) if build != "inside" else (None, None)
    lr = NANO["learning_rate"]
    for _ in range(lr_ulps):
        NANO["learning_rate"] = ulp_up(NANO["learning_rate"])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with block(workers):
                if build == "inside":
                    model, optimizer = nano_build(src)
                elif build == "make_async":
                    make_async(model)
                losses = nano_loop(model, optimizer, data)
    finally:
        NANO["learning_rate"] = lr
    return {"losses": losses, "model": model.state_dict(), "optimizer": optimizer.state_dict()["state"],
            "tied": model.lm_head.weight is model.transformer.wte.weight}


def suite_nanogpt(src: Path) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="nanogpt-") as tmp:
        work = Path(tmp)
        nano_data(work)
        for bias in (False, True):
            counter = iter(range(100))
            rows += compare_runs("nanogpt", f"train.py (bias={bias})",
                                 lambda b, w, bias=bias: nano_train_py(src, work, w, bias, f"run{bias}{next(counter)}"),
                                 [("inside", w) for w in WORKERS], eager_build="inside")
        rows += compare_runs("nanogpt", "train.py's loop", lambda b, w: nano_loop_run(src, b, w),
                             [(b, w) for b in ("make_async", "inside") for w in WORKERS],
                             control=lambda: nano_loop_run(src, "make_async", 1, lr_ulps=1))
    return rows


# -- interrupted nanoGPT ------------------------------------------------------------------------------


def suite_interrupt(src: Path, trials: int, seed: int) -> list[dict]:
    """Real SIGINTs in the nanoGPT loop; each trial classified by ``interrupt_runner.classify``."""
    import faulthandler

    from tests.torch_async import interrupt_runner as ir

    warnings.simplefilter("ignore")
    data = nano_tokens()

    def eager() -> tuple[set[tuple], tuple]:
        model, optimizer = nano_build(src)
        mode = ir._States(model, optimizer)
        mode.seen.add(ir.state(model, optimizer))
        with mode:
            nano_loop(model, optimizer, data)
        final = ir.state(model, optimizer)
        return mode.seen | {final}, final

    seen, final = ir.like_a_worker(eager)  # in the workers' numeric regime (see like_a_worker)

    configs = [(w, b) for w in WORKERS for b in ("inside", "make_async")]
    ops, agree = {}, {}
    for workers, build in configs:
        m, o = nano_build(src) if build == "make_async" else (None, None)
        with asynchronous(workers=workers) as rt:
            if m is None:
                m, o = nano_build(src)
            else:
                make_async(m)
            nano_loop(m, o, data)
        s = rt.statistics()
        ops[(workers, build)] = s.done + s.failed
        agree[f"{workers}/{build}"] = ir.state(m, o) == final
    rng = random.Random(seed)
    rows = []
    for i in range(trials):
        workers, build = configs[i % len(configs)]
        second = (i // len(configs)) % 2 == 1
        how = "kill" if (i // (2 * len(configs))) % 2 == 0 else "raise_signal"
        faulthandler.dump_traceback_later(HANG, exit=True)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        torch.set_grad_enabled(True)  # a Ctrl-C in an optimizer's `finally` may leave it off, in eager too
        m, o = nano_build(src) if build == "make_async" else (None, None)
        target = rng.randint(1, int(ops[(workers, build)] * 1.05))
        ended, sender = "completed", None
        t0 = time.perf_counter()
        try:
            try:
                with asynchronous(workers=workers) as rt:
                    if build == "inside":
                        m, o = nano_build(src)
                    else:
                        make_async(m)
                    sender = ir._Sender(rt, target, rng.uniform(0.0, 0.001),
                                        rng.uniform(0.0, 0.02) if second else None, how)
                    sender.start()
                    nano_loop(m, o, data)
            except KeyboardInterrupt:
                ended = "interrupted"
            signal.signal(signal.SIGINT, ir._quiet)
        except KeyboardInterrupt:  # the second Ctrl-C, after the block
            ended = "interrupted"
            signal.signal(signal.SIGINT, ir._quiet)
        elapsed = time.perf_counter() - t0
        if sender is not None:
            sender.stop.set()
            sender.join(10.0)
        ir._settle()
        if m is None or o is None:  # interrupted while the block built them: nothing to read
            outcome, detail = "interrupted before the model existed", ""
        else:
            outcome, detail = ir.classify(m, o, seen, final, ended)
        row = {"suite": "interrupt", "trial": i, "workers": workers, "build": build, "second": second, "how": how,
               "target": target, "sent": sender.sent if sender else 0, "ended": ended, "outcome": outcome,
               "detail": detail, "seconds": round(elapsed, 3)}
        print(json.dumps(row), flush=True)
        rows.append(row)
    faulthandler.cancel_dump_traceback_later()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    print(json.dumps({"suite": "interrupt", "summary": True, "eager_states": len(seen),
                      "ops": {f"{w}/{b}": n for (w, b), n in ops.items()}, "uninterrupted_is_eager": agree,
                      "strays": len(ir._strays)}), flush=True)
    return rows


# -- pytorch/examples -----------------------------------------------------------------------------------


def corpus(workdir: Path) -> Path:
    """Three small text files as word_language_model's ``data.Corpus`` reads them (a 60-word vocabulary)."""
    rng = random.Random(0)
    words = [f"w{i}" for i in range(60)]
    d = workdir / "corpus"
    d.mkdir(exist_ok=True)
    for name, lines in (("train.txt", 60), ("valid.txt", 12), ("test.txt", 12)):
        (d / name).write_text("".join(" ".join(rng.choices(words, k=rng.randint(4, 12))) + "\n"
                                      for _ in range(lines)))
    return d


def word_lm(src: Path, workdir: Path, workers: int | None, args: list[str], tag: str) -> dict:
    """word_language_model/main.py, unmodified, as a script."""
    folder = src / "word_language_model"
    sys.path.insert(0, str(folder))
    argv = ["main.py", "--data", str(corpus(workdir)), "--emsize", "16", "--nhid", "16", "--nlayers", "2",
            "--bptt", "8", "--batch_size", "4", "--epochs", "3", "--log-interval", "5",
            "--save", str(workdir / f"model_{tag}.pt"), *args]
    with quiet_run(argv, workdir) as out:
        with block(workers):
            g = runpy.run_path(str(folder / "main.py"), run_name="__main__")
    return {"model": g["model"].state_dict(), "test_loss": g["test_loss"], "best_val_loss": g["best_val_loss"],
            "lr": g["lr"], "printed": printed(out.getvalue())}


def torchvision_stand_in() -> None:
    """A ``torchvision`` for mnist/main.py's imports: ``datasets.MNIST`` of synthetic 28 x 28 uint8
    images (128 to train, 100 to test), ``transforms`` with ToTensor's and Normalize's arithmetic."""
    tv = types.ModuleType("torchvision")
    datasets, transforms = types.ModuleType("torchvision.datasets"), types.ModuleType("torchvision.transforms")

    class MNIST(torch.utils.data.Dataset):
        def __init__(self, root, train=True, download=False, transform=None):
            g = torch.Generator().manual_seed(0 if train else 1)
            n = 128 if train else 100
            self.images = torch.randint(0, 256, (n, 28, 28), dtype=torch.uint8, generator=g)
            self.targets = torch.randint(0, 10, (n,), generator=g)
            self.transform = transform

        def __len__(self):
            return len(self.targets)

        def __getitem__(self, i):
            return self.transform(self.images[i]), int(self.targets[i])

    class Compose:
        def __init__(self, ts):
            self.ts = ts

        def __call__(self, x):
            for t in self.ts:
                x = t(x)
            return x

    class ToTensor:
        def __call__(self, img):
            return img.unsqueeze(0).to(torch.float32).div(255)

    class Normalize:
        def __init__(self, mean, std):
            self.mean, self.std = torch.tensor(mean).view(-1, 1, 1), torch.tensor(std).view(-1, 1, 1)

        def __call__(self, x):
            return (x - self.mean) / self.std

    datasets.MNIST = MNIST
    transforms.Compose, transforms.ToTensor, transforms.Normalize = Compose, ToTensor, Normalize
    tv.datasets, tv.transforms = datasets, transforms
    sys.modules.update({"torchvision": tv, "torchvision.datasets": datasets, "torchvision.transforms": transforms})


def mnist(src: Path, workdir: Path, workers: int | None, tag: str) -> dict:
    """mnist/main.py's ``main()``, unmodified, with ``--save-model``."""
    run_dir = workdir / f"mnist_{tag}"
    run_dir.mkdir()
    argv = ["main.py", "--epochs", "2", "--batch-size", "16", "--test-batch-size", "50", "--log-interval", "2",
            "--save-model", "--no-accel"]
    with quiet_run(argv, run_dir) as out:
        with block(workers):
            runpy.run_path(str(src / "mnist" / "main.py"), run_name="__main__")
    return {"model": torch.load(run_dir / "mnist_cnn.pt"), "printed": printed(out.getvalue())}


def suite_examples(src: Path) -> list[dict]:
    rows = []
    torchvision_stand_in()
    with tempfile.TemporaryDirectory(prefix="examples-") as tmp:
        work = Path(tmp)
        counter = iter(range(1000))
        for args in (["--model", "LSTM"], ["--model", "GRU"], ["--model", "Transformer"],
                     ["--model", "LSTM", "--tied", "--use-optimizer", "--lr", "0.01"]):
            control = None
            if args == ["--model", "LSTM"]:  # main.py's default --lr is 20
                control = lambda: word_lm(src, work, 1, ["--model", "LSTM", "--lr", repr(ulp_up(20.0))],
                                          str(next(counter)))
            rows += compare_runs("examples", "word_language_model " + " ".join(args),
                                 lambda b, w, args=args: word_lm(src, work, w, args, str(next(counter))),
                                 [("inside", w) for w in WORKERS], eager_build="inside", control=control)
        rows += compare_runs("examples", "mnist", lambda b, w: mnist(src, work, w, str(next(counter))),
                             [("inside", w) for w in WORKERS], eager_build="inside")
    return rows


# -- d2l ------------------------------------------------------------------------------------------------


class _Figure:
    """Stands in for matplotlib and IPython.display in d2l's plotting code: every attribute and
    call gives itself back (``plt.subplots`` unpacks as a figure and its axes)."""

    def __getattr__(self, name):
        return self

    def __call__(self, *args, **kwargs):
        return self

    def __getitem__(self, key):
        return self

    def __iter__(self):
        return iter((self, self))


def _stand_in_attribute(name: str):
    if name.startswith("__"):  # __file__, __path__, __spec__: what import machinery and inspect look for
        raise AttributeError(name)
    return _Figure()


def load_d2l(path: Path):
    """d2l's ``torch.py`` from ``path`` (a folder with ``d2l/torch.py``); the modules its import
    pulls in that are not installed (torchvision, PIL, matplotlib) stood in for."""
    import importlib.util
    for name in ("torchvision", "torchvision.transforms", "PIL", "PIL.Image", "matplotlib",
                 "matplotlib.pyplot", "matplotlib_inline", "matplotlib_inline.backend_inline"):
        try:
            importlib.import_module(name)
        except ImportError:
            mod = types.ModuleType(name)
            mod.__getattr__ = _stand_in_attribute
            sys.modules[name] = mod
            parent, _, child = name.rpartition(".")
            if parent:
                setattr(sys.modules[parent], child, mod)
    spec = importlib.util.spec_from_file_location("d2l_torch", path / "d2l" / "torch.py")
    d2l = importlib.util.module_from_spec(spec)
    sys.modules["d2l_torch"] = d2l
    spec.loader.exec_module(d2l)
    d2l.plt = d2l.display = d2l.backend_inline = _Figure()
    return d2l


def d2l_cases(d2l) -> dict[str, Callable[[], tuple[Callable, Callable]]]:
    """Each case: ``build() -> objects`` and ``fit(objects) -> results``, as the book's cells do them."""

    class FashionMNIST(d2l.FashionMNIST):
        """The book's class (its ``get_dataloader``, 4 loader workers), with synthetic images."""

        def __init__(self, batch_size=64, resize=(28, 28)):
            d2l.DataModule.__init__(self)
            self.save_hyperparameters()
            g = torch.Generator().manual_seed(0)
            X, y = torch.rand(384, 1, *resize, generator=g), torch.randint(0, 10, (384,), generator=g)
            self.train = torch.utils.data.TensorDataset(X[:256], y[:256])
            self.val = torch.utils.data.TensorDataset(X[256:], y[256:])

    class TimeMachine(d2l.TimeMachine):
        """The book's class, its download replaced by synthetic text."""

        def _download(self):
            rng = random.Random(0)
            return " ".join("".join(rng.choices("abcdefghij", k=rng.randint(2, 7))) for _ in range(800))

    def board(model):
        return {k: [(float(p.x), float(p.y)) for p in v] for k, v in model.board.data.items()}

    def trainer_case(make_model, make_data, epochs, clip=0, init=None, extra=None):
        def build():
            torch.manual_seed(0)
            data = make_data()
            model = make_model(data)
            return model, data

        def fit(objs):
            model, data = objs
            torch.manual_seed(1)
            if init is not None:
                model.apply_init([next(iter(data.get_dataloader(True)))[0]], init)
            d2l.Trainer(max_epochs=epochs, gradient_clip_val=clip).fit(model, data)
            out = {"params": [p.detach() for p in model.parameters()], "board": board(model)}
            if hasattr(model, "w"):  # §3.4's scratch model keeps w, b as plain tensors
                out["w"], out["b"] = model.w.detach(), model.b.detach()
            if extra:
                out.update(extra(model, data))
            return out
        return build, fit

    def regression():
        return d2l.SyntheticRegressionData(w=torch.tensor([2, -3.4]), b=4.2)

    def ch6():
        def build():
            torch.manual_seed(0)
            net = torch.nn.Sequential(
                torch.nn.Conv2d(1, 6, kernel_size=5, padding=2), torch.nn.Sigmoid(),
                torch.nn.AvgPool2d(kernel_size=2, stride=2), torch.nn.Conv2d(6, 16, kernel_size=5), torch.nn.Sigmoid(),
                torch.nn.AvgPool2d(kernel_size=2, stride=2), torch.nn.Flatten(),
                torch.nn.Linear(16 * 5 * 5, 120), torch.nn.Sigmoid(), torch.nn.Linear(120, 84), torch.nn.Sigmoid(),
                torch.nn.Linear(84, 10))
            data = FashionMNIST(batch_size=32)
            return net, data

        def fit(objs):
            net, data = objs
            torch.manual_seed(1)
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                d2l.train_ch6(net, data.get_dataloader(True), data.get_dataloader(False), 2, 0.9, d2l.try_gpu())
            return {"params": [p.detach() for p in net.parameters()], "printed": printed(buf.getvalue())}
        return build, fit

    return {
        "§3.4 LinearRegressionScratch": lambda: trainer_case(
            lambda data: d2l.LinearRegressionScratch(2, lr=0.03), regression, 3),
        "§3.5 LinearRegression": lambda lr=0.03: trainer_case(lambda data: d2l.LinearRegression(lr=lr), regression, 3),
        "§4.5 SoftmaxRegression": lambda: trainer_case(
            lambda data: d2l.SoftmaxRegression(num_outputs=10, lr=0.1), lambda: FashionMNIST(batch_size=64), 2),
        "§7.6 LeNet": lambda: trainer_case(lambda data: d2l.LeNet(lr=0.1), lambda: FashionMNIST(batch_size=64), 2,
                                           init=d2l.init_cnn),
        "§7.6 train_ch6": ch6,
        "§10.3 GRU RNNLM": lambda: trainer_case(
            lambda data: d2l.RNNLM(d2l.GRU(num_inputs=len(data.vocab), num_hiddens=16, num_layers=2),
                                   vocab_size=len(data.vocab), lr=2),
            lambda: TimeMachine(batch_size=16, num_steps=8, num_train=256, num_val=128), 1, clip=1,
            extra=lambda model, data: {"predict": model.predict("abc", 10, data.vocab, d2l.try_gpu())}),
    }


def d2l_run(build_fit: tuple[Callable, Callable], build: str, workers: int | None) -> dict:
    make, fit = build_fit
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        objs = make() if build != "inside" else None
        with block(workers):
            if build == "inside":
                objs = make()
            elif build == "make_async":
                make_async(objs[0])
            return fit(objs)


def suite_d2l(path: Path) -> list[dict]:
    d2l = load_d2l(path)
    rows = []
    for case, factory in d2l_cases(d2l).items():
        bf = factory()
        control = None
        if case == "§3.5 LinearRegression":
            nudged = factory(lr=ulp_up(0.03))
            control = lambda: d2l_run(nudged, "outside", 1)
        rows += compare_runs("d2l", case, lambda b, w, bf=bf: d2l_run(bf, b, w),
                             [(b, w) for b in ("inside", "outside", "make_async") for w in WORKERS], control=control)
    return rows


# -- the parent: checkouts, subprocesses, the JSON ----------------------------------------------------


def _git(args: list[str]) -> str | None:
    try:
        out = subprocess.run(["git", *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def checkout(suite: str, path: Path, dest: Path) -> dict:
    """The suite's files from a work tree or a bare git directory, copied to ``dest``; where they came from."""
    bare = (path / "HEAD").is_file() and (path / "objects").is_dir() and not (path / FILES[suite][0]).exists()
    commit = _git([f"--git-dir={path}", "rev-parse", "HEAD"]) if bare else _git(["-C", str(path), "rev-parse", "HEAD"])
    for name in FILES[suite]:
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if bare:
            text = _git([f"--git-dir={path}", "show", f"HEAD:{name}"])
            if text is None:
                raise SystemExit(f"{suite}: {name} is not in {path} (HEAD)")
            target.write_text(text + "\n")
        else:
            target.write_text((path / name).read_text())
    return {"path": str(path), "commit": commit, "kind": "bare git directory" if bare else "work tree",
            "files": FILES[suite]}


def d2l_source(path: Path, dest: Path) -> tuple[Path, dict]:
    """A folder holding ``d2l/torch.py``: ``path`` itself, or the wheel at ``path`` unpacked in ``dest``."""
    given = path
    if path.is_file() and path.suffix == ".whl":
        with zipfile.ZipFile(path) as whl:
            whl.extractall(dest)
        path = dest
    torch_py = path / "d2l" / "torch.py"
    if not torch_py.is_file():
        raise SystemExit(f"--d2l {path}: no d2l/torch.py there (unpack `pip download d2l==1.0.3 --no-deps`)")
    version = None
    for meta in path.glob("d2l-*.dist-info/METADATA"):
        version = next((ln.split(":", 1)[1].strip() for ln in meta.read_text().splitlines()
                        if ln.startswith("Version:")), None)
    return path, {"path": str(given), "version": version,
                  "torch_py_sha256": hashlib.sha256(torch_py.read_bytes()).hexdigest()}


def run_child(suite: str, src: Path, extra: list[str], timeout: float) -> tuple[list[dict], dict | None, str]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", suite, "--src", str(src), *extra]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
        stdout, stderr, rc = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        stdout, stderr, rc = (exc.stdout or b"").decode(), (exc.stderr or b"").decode(), "timeout"
    rows, summary = [], None
    for line in stdout.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            if row.get("summary"):
                summary = row
            else:
                rows.append(row)
    problem = "" if rc == 0 else f"exit {rc}: {stderr[-3000:]}"
    return rows, summary, problem


def summarize(rows: list[dict]) -> dict:
    controls = [r for r in rows if "control" in r]
    rows = [r for r in rows if "control" not in r]
    return {"runs": len(rows), "bitwise_equal": sum(r["equal"] for r in rows),
            "mismatches": [{k: r[k] for k in ("case", "build", "workers", "first_difference", "error")}
                           for r in rows if not r["equal"]],
            "controls": len(controls), "controls_detected": sum(r["detected"] for r in controls)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nanogpt", type=Path, default=os.environ.get(ENV["nanogpt"]),
                   help=f"karpathy/nanoGPT: a work tree or bare git dir (or ${ENV['nanogpt']})")
    p.add_argument("--examples", type=Path, default=os.environ.get(ENV["examples"]),
                   help=f"pytorch/examples: a work tree or bare git dir (or ${ENV['examples']})")
    p.add_argument("--d2l", type=Path, default=os.environ.get(ENV["d2l"]),
                   help=f"a folder with d2l/torch.py, or d2l-1.0.3-py3-none-any.whl (or ${ENV['d2l']})")
    p.add_argument("--trials", type=int, default=40, help="interrupted nanoGPT trials")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--suites", default="nanogpt,examples,d2l,interrupt")
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--src", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        fn = {"nanogpt": suite_nanogpt, "examples": suite_examples, "d2l": suite_d2l,
              "interrupt": lambda s: suite_interrupt(s, args.trials, args.seed)}[args.child]
        fn(args.src)
        return 0
    if args.trials < 0:
        p.error(f"--trials must be >= 0, got {args.trials}")
    wanted = [s.strip() for s in args.suites.split(",") if s.strip()]
    unknown = set(wanted) - {"nanogpt", "examples", "d2l", "interrupt"}
    if unknown:
        p.error(f"--suites: unknown {sorted(unknown)}; choose from nanogpt, examples, d2l, interrupt")
    affinity = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    result: dict[str, Any] = {
        "what": "other projects' training code, eager vs asynchronous(), compared bitwise",
        "command": command(), "machine": devices.machine().describe(), "python": platform.python_version(),
        "torch": torch.__version__, "cpus_allowed": affinity, "load_average_before": list(os.getloadavg()),
        "when": time.strftime("%Y-%m-%d %H:%M:%S"), "sources": {}, "suites": {}, "skipped": {}}
    with tempfile.TemporaryDirectory(prefix="outside-oracles-") as tmp:
        tmp_path = Path(tmp)
        sources: dict[str, Path] = {}
        for suite, arg in (("nanogpt", args.nanogpt), ("examples", args.examples)):
            if arg is None or not Path(arg).exists():
                result["skipped"][suite] = (f"no checkout: pass --{suite} PATH or set {ENV[suite]}" if arg is None
                                            else f"{arg} does not exist")
                continue
            sources[suite] = tmp_path / suite
            result["sources"][suite] = checkout(suite, Path(arg), sources[suite])
        if args.d2l is None or not Path(args.d2l).exists():
            result["skipped"]["d2l"] = (f"no d2l: pass --d2l PATH or set {ENV['d2l']}" if args.d2l is None
                                        else f"{args.d2l} does not exist")
        else:
            sources["d2l"], result["sources"]["d2l"] = d2l_source(Path(args.d2l), tmp_path / "d2l")
        if "nanogpt" in sources:
            sources["interrupt"] = sources["nanogpt"]
        elif "interrupt" in wanted:
            result["skipped"]["interrupt"] = "needs the nanoGPT checkout"
        if not any(suite in sources for suite in wanted):  # `make benchmarks` without checkouts: keep the JSON
            for suite, why in result["skipped"].items():
                print(f"{suite}: skipped ({why})")
            print(f"nothing to run: {args.out} left as it is")
            return 0
        for suite in wanted:
            if suite not in sources:
                continue
            print(f"{suite} ...", flush=True)
            t0 = time.perf_counter()
            extra = ["--trials", str(args.trials), "--seed", str(args.seed)] if suite == "interrupt" else []
            rows, summary, problem = run_child(suite, sources[suite], extra, timeout=3600)
            seconds = round(time.perf_counter() - t0, 1)
            if suite == "interrupt":
                outcomes: dict[str, int] = {}
                for r in rows:
                    outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + 1
                entry = {"trials": len(rows), "outcomes": outcomes,
                         "silent": outcomes.get("silent", 0), "unclear_error": outcomes.get("unclear error", 0),
                         "ended": {e: sum(r["ended"] == e for r in rows) for e in ("completed", "interrupted")},
                         "not_clean": [r for r in rows if r["outcome"] not in ("finished", "raised clearly")],
                         "summary": summary, "seconds": seconds, "raw": rows}
            else:
                entry = {**summarize(rows), "seconds": seconds, "raw": rows}
            if problem:
                entry["child_failed"] = problem
            result["suites"][suite] = entry
            print(f"  {json.dumps({k: v for k, v in entry.items() if k not in ('raw', 'summary')})[:600]}",
                  flush=True)
    result["load_average_after"] = list(os.getloadavg())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
