"""Real Ctrl-Cs at random moments of a training loop in ``asynchronous()``, against eager's states.

Run in a subprocess by ``test_interrupts.py`` (a Ctrl-C that escapes a trial, or a hang, then
costs that process, not the test run)::

    python -m tests.torch_async.interrupt_runner TRIALS SEED

Each trial trains a small MLP with Adam (``STEPS`` steps, a ``loss.item()`` every few steps as a
book's loop logs it) inside a block -- 1 or 2 workers, the model built in the block or built
outside and passed through ``make_async`` -- while another thread sends this process a real
SIGINT (``os.kill`` or ``signal.raise_signal``) at a random moment of the loop: once the block has
queued a random number of its ops (up to 5 % more than the loop queues: some land in the block's
end or after it), plus up to a millisecond.  In half the trials a second one follows up to 20 ms
later, mostly while the block runs its queued ops.  Then every parameter and every tensor of
Adam's state is read, and the trial is:

* ``finished``: every one holds a state eager torch passes through (below); for a loop that ended
  before the signal, the state eager ends with;
* ``raised clearly``: some raise :class:`NotComputedError`, naming the block and the op, and the
  ones that can be read hold such a state;
* ``silent``: a value that eager never holds at any moment -- what must never happen;
* ``unclear error``: reading raised anything else.

Eager's states: the same loop, eagerly (in a thread set up as the workers are:
:func:`like_a_worker`), under a dispatch mode that records (a digest of) every parameter and Adam
tensor before and after every aten op -- so a Ctrl-C that lands between any two ops, in the middle
of an optimizer step included, has its state in the set.  Adam runs its
single-tensor loop in both (its default on a CPU), so both issue the same ops.

Before the trials each configuration runs once without a signal; it must end in eager's last
state bitwise (the summary's ``uninterrupted_is_eager``), or the oracle could not judge its trials.

Prints one JSON line per trial, then ``{"summary": {...}}``.
"""

from __future__ import annotations

import faulthandler
import hashlib
import json
import os
import random
import signal
import sys
import threading
import time

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from d2l_async.torch_async import NotComputedError, asynchronous, make_async

STEPS = 12
#: seconds one trial may take before the process dumps every thread's stack and exits (a hang)
HANG = 60.0
D, H, O, B = 64, 256, 8, 256


def data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.randn(STEPS, B, D, generator=g), torch.randn(STEPS, B, O, generator=g)


def model() -> nn.Module:
    torch.manual_seed(1)
    return nn.Sequential(nn.Linear(D, H), nn.Tanh(), nn.Linear(H, H), nn.Tanh(), nn.Linear(H, O))


def loop(net: nn.Module, opt: torch.optim.Optimizer, X: torch.Tensor, Y: torch.Tensor) -> list[float]:
    losses = []
    for k in range(STEPS):
        loss = F.mse_loss(net(X[k]), Y[k])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if k % 4 == 3:
            losses.append(loss.item())  # a blocking point, as a book's loop logs its loss
    return losses


def tracked(net: nn.Module, opt: torch.optim.Optimizer) -> list[tuple[str, torch.Tensor]]:
    """Every parameter and the tensors of its optimizer state, by name."""
    out = []
    for name, p in net.named_parameters():
        out.append((name, p))
        state = opt.state.get(p, {})
        for key in sorted(state):
            if isinstance(state[key], torch.Tensor):
                out.append((f"{name}.{key}", state[key]))
    return out


def digest(t: torch.Tensor) -> bytes:
    return hashlib.blake2b(t.detach().numpy().tobytes(), digest_size=12).digest()


def state(net: nn.Module, opt: torch.optim.Optimizer) -> tuple:
    return tuple((name, digest(t)) for name, t in tracked(net, opt))


class _States(TorchDispatchMode):
    """Records the state before and after every aten op (the mode is off inside its handler)."""

    def __init__(self, net: nn.Module, opt: torch.optim.Optimizer) -> None:
        super().__init__()
        self.net, self.opt = net, opt
        self.seen: set[tuple] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.add(state(self.net, self.opt))
        out = func(*args, **(kwargs or {}))
        self.seen.add(state(self.net, self.opt))
        return out


def like_a_worker(fn):
    """``fn()`` run in a new thread that sets torch's thread count as the block's workers do.

    The oracle must compute in the workers' numeric regime.  ``torch.set_num_threads`` (which every
    worker calls) also turns MKL's dynamic threading off, process-wide; a main thread that never
    called it multiplies with MKL free to pick fewer threads, and on a CPU where MKL's split depends
    on its thread count that can change the bits of a product: the likely cause, not proven, of a
    CI run in which no uninterrupted block ended in eager's last state.
    """
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(1, thread_name_prefix="interrupt-runner eager", initializer=torch.set_num_threads,
                              initargs=(torch.get_num_threads(),))
    try:
        return pool.submit(fn).result(timeout=HANG)  # fn's exception is raised here
    finally:
        pool.shutdown(wait=False)


def eager_states() -> tuple[set[tuple], tuple, list[float]]:
    """Every state eager passes through after the model and optimizer exist, and its last one
    (run :func:`like_a_worker`)."""
    return like_a_worker(_eager_states)


def _fresh() -> tuple[torch.Tensor, torch.Tensor, nn.Module, torch.optim.Optimizer]:
    """The data, the model and its Adam, as every run of the loop starts."""
    X, Y = data()
    net = model()
    return X, Y, net, torch.optim.Adam(net.parameters(), lr=1e-2)


def _eager_states() -> tuple[set[tuple], tuple, list[float]]:
    X, Y, net, opt = _fresh()
    mode = _States(net, opt)
    mode.seen.add(state(net, opt))
    with mode:
        losses = loop(net, opt, X, Y)
    final = state(net, opt)
    mode.seen.add(final)
    return mode.seen, final, losses


def plain_eager() -> tuple:
    """The last state of the loop run eagerly on this thread, with no dispatch mode."""
    X, Y, net, opt = _fresh()
    loop(net, opt, X, Y)
    return state(net, opt)


class _Sender(threading.Thread):
    """Sends SIGINT to this process once the block has queued ``target`` ops (then after a random
    fraction of a millisecond more), and again ``second`` s later (None: once).  Counting ops, not
    seconds, puts the moment in the loop whatever the machine's load."""

    def __init__(self, rt, target: int, jitter: float, second: float | None, how: str) -> None:
        super().__init__(name="interrupt-runner sender", daemon=True)
        self.rt, self.target, self.jitter, self.second, self.how = rt, target, jitter, second, how
        self.sent = 0
        self.stop = threading.Event()

    def _send(self) -> None:
        if self.how == "kill":
            os.kill(os.getpid(), signal.SIGINT)
        else:
            signal.raise_signal(signal.SIGINT)
        self.sent += 1

    def run(self) -> None:
        while not self.stop.is_set():
            s = self.rt.statistics()
            if s.pending + s.done + s.failed >= self.target or self.rt.closed:
                break
            time.sleep(0.0002)
        if self.stop.is_set():
            return
        time.sleep(self.jitter)
        self._send()
        if self.second is not None:
            time.sleep(self.second)
            self._send()


_strays: list[int] = []


def _quiet(signum, frame) -> None:
    _strays.append(signum)  # a signal that arrives once the trial's block is over


def _settle() -> None:
    """Wait until no Ctrl-C is still on its way: a relay thread of the shield (a Ctrl-C postponed in
    the runtime's bookkeeping, asked for again a moment later -- much later on a busy machine) must
    not land in the next trial."""
    deadline = time.monotonic() + 10.0
    while any(t.name == "d2l_async ctrl-c relay" for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.001)
    time.sleep(0.001)  # a signal already on its way runs its (quiet) handler here


def classify(net: nn.Module, opt: torch.optim.Optimizer, seen: set[tuple], final: tuple,
             ended: str) -> tuple[str, str]:
    read: dict[str, bytes] = {}
    errors: dict[str, NotComputedError] = {}
    for name, t in tracked(net, opt):
        try:
            read[name] = digest(t)
        except NotComputedError as exc:
            errors[name] = exc
        except Exception as exc:  # noqa: BLE001 - any other error is the finding
            return "unclear error", f"{name}: {type(exc).__name__}: {exc}"
    if errors:
        bad = [n for n, e in errors.items() if not (e.op and e.op_id >= 0 and e.block and e.ended_by)]
        if bad:
            return "unclear error", f"NotComputedError without its fields: {bad}"
        if any(all(s.get(n) == d for n, d in read.items()) for s in map(dict, seen)):
            return "raised clearly", f"{len(errors)} unreadable: {sorted(errors)[:3]}"
        return "silent", f"readable {sorted(read)} hold no state of eager's ({len(errors)} unreadable)"
    got = tuple(read.items())
    if ended == "completed":
        return ("finished", "") if got == final else ("silent", "the loop completed, the state is not eager's last")
    return ("finished", "") if got in seen else ("silent", "no state of eager's")


def trial(rng: random.Random, workers: int, build: str, second: bool, how: str, ops: int,
          seen: set[tuple], final: tuple) -> dict:
    X, Y = data()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # a Ctrl-C in the `finally` of torch's own Python (an optimizer's step restores grad mode there)
    # leaves the process-wide grad mode off, in eager torch as here: each trial starts afresh
    leaked = not torch.is_grad_enabled()
    torch.set_grad_enabled(True)
    net = model() if build == "make_async" else None
    opt = torch.optim.Adam(net.parameters(), lr=1e-2) if net is not None else None
    target = rng.randint(1, int(ops * 1.05))  # a few land after the loop: in the block's end, or after it
    ended = "completed"
    sender = None
    t0 = time.perf_counter()
    try:
        try:
            with asynchronous(workers=workers) as rt:
                if build == "inside":
                    net = model()
                    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
                else:
                    make_async(net)
                sender = _Sender(rt, target, rng.uniform(0.0, 0.001), rng.uniform(0.0, 0.02) if second else None,
                                 how)
                sender.start()
                loop(net, opt, X, Y)
        except KeyboardInterrupt:
            ended = "interrupted"
        signal.signal(signal.SIGINT, _quiet)
    except KeyboardInterrupt:  # the second Ctrl-C, after the block (in the lines above)
        ended = "interrupted"
        signal.signal(signal.SIGINT, _quiet)
    elapsed = time.perf_counter() - t0
    sender.stop.set()
    sender.join(10.0)
    _settle()
    outcome, detail = classify(net, opt, seen, final, ended)
    return {"workers": workers, "build": build, "second": second, "how": how, "target": target, "sent": sender.sent,
            "ended": ended, "outcome": outcome, "detail": detail, "seconds": round(elapsed, 3),
            "ops_done": rt.statistics().done, "grad_mode_left_off_before": leaked}


def uninterrupted(workers: int, build: str) -> tuple[int, tuple]:
    """How many ops one uninterrupted trial's block queues (the model made in the block included),
    and the state it ends with (eager's last, bitwise, or the oracle cannot judge the trials)."""
    X, Y = data()
    net = model() if build == "make_async" else None
    with asynchronous(workers=workers) as rt:
        if net is None:
            net = model()
        else:
            make_async(net)
        opt = torch.optim.Adam(net.parameters(), lr=1e-2)
        loop(net, opt, X, Y)
    s = rt.statistics()
    return s.done + s.failed, state(net, opt)


def main(argv: list[str]) -> int:
    trials, seed = int(argv[0]), int(argv[1])
    rng = random.Random(seed)
    main_first = plain_eager()  # before anything sets torch's threads: the diagnosis if the oracle fails
    seen, final, _ = eager_states()
    configs = [(w, b) for w in (1, 2) for b in ("inside", "make_async")]
    runs = {c: uninterrupted(*c) for c in configs}
    ops = {c: n for c, (n, _) in runs.items()}
    agree = {f"{w}/{b}": end == final for (w, b), (_, end) in runs.items()}
    counts: dict[str, int] = {}
    left_off = 0
    for i in range(trials):
        workers, build = configs[i % len(configs)]
        second = (i // len(configs)) % 2 == 1
        how = "kill" if (i // (2 * len(configs))) % 2 == 0 else "raise_signal"
        faulthandler.dump_traceback_later(HANG, exit=True)  # a trial that hangs: every thread's stack, then exit
        row = trial(rng, workers, build, second, how, ops[(workers, build)], seen, final)
        row["trial"] = i
        left_off += row["grad_mode_left_off_before"]
        counts[row["outcome"]] = counts.get(row["outcome"], 0) + 1
        key = f"ended {row['ended']}"
        counts[key] = counts.get(key, 0) + 1
        print(json.dumps(row), flush=True)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    print(json.dumps({"summary": counts, "trials": trials, "eager_states": len(seen), "strays": len(_strays),
                      "ops": {f"{w}/{b}": n for (w, b), n in ops.items()}, "uninterrupted_is_eager": agree,
                      "grad_mode_left_off": left_off, "main_thread_eager_is_eager": main_first == final}),
          flush=True)
    faulthandler.cancel_dump_traceback_later()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
