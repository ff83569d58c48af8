"""Record the jax.profiler traces committed under ``tests/trace/data/jax/`` (the JAX reader's fixtures).

    .venv/bin/python scripts/record_jax_traces.py [--out tests/trace/data/jax]

Needs JAX (``pip install "d2l-async[jax]"``).  Each program's set-up runs first (it compiles what the
program calls, so the recording holds dispatches, not compilation, except for ``ten_dots``), then the
program runs inside ``jax.profiler.trace(dir, create_perfetto_trace=True)``; the
``perfetto_trace.json.gz`` it writes is copied to ``OUT/<name>.json.gz`` and ``OUT/MANIFEST.json``
records the versions, the machine and each program's set-up and source:

==================  ============================================================================
file                program
==================  ============================================================================
ten_dots            ten ``jnp.dot`` of 1000x1000, then ``block_until_ready``; recorded with the
                    profiler's default options (Python tracer on) and with ``dot`` not compiled
                    yet, as a first profile of a notebook is
jit_calls           a jitted ``tanh(dot(x, w))`` called 20 times, then ``block_until_ready``
blocking_loop       five steps of ``x = x + 1`` (1000x1000) with a one-element ``s = s + 1`` (XLA
                    runs it inline) and ``x.block_until_ready()``, then ``np.asarray(x + 1)``
two_devices         two CPU devices: eight products chained on ``cpu:1``, ``z = x * 2 + 1`` on
                    ``cpu:0``, ``z`` waited for in a ``d2l_async.wait`` annotation, then three
                    products of the same function on ``cpu:0``, then both
==================  ============================================================================
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "trace" / "data" / "jax"
WAIT = "d2l_async.wait"  # d2l_async.trace.JAX_WAIT: the annotation the reader files as a wait

#: name -> (set-up run before the recording, the program recorded)
PROGRAMS = {
    "ten_dots": ("", '''
x = jnp.ones((1000, 1000), dtype=jnp.float32)
for _ in range(10):
    y = jnp.dot(x, x)
y.block_until_ready()
'''),
    "jit_calls": ('''
x, w = jnp.ones((500, 500)), jnp.ones((500, 500)) / 500
f = jax.jit(lambda x, w: jnp.tanh(jnp.dot(x, w)))
f(x, w).block_until_ready()  # compiled here, outside the recording
''', '''
for _ in range(20):
    y = f(x, w)
y.block_until_ready()
'''),
    "blocking_loop": ('''
x, s = jnp.ones((1000, 1000)), jnp.ones(1)
(x + 1).block_until_ready(), (s + 1).block_until_ready(), np.asarray(x)
''', '''
for _ in range(5):
    x = x + 1
    s = s + 1          # one element: under 1000 flops, XLA runs it inline
    x.block_until_ready()
np.asarray(x + 1)
'''),
    "two_devices": ('''
cpu0, cpu1 = jax.devices("cpu")[:2]
a0 = jax.device_put(jnp.ones((600, 600)), cpu1)
m = jax.device_put(jnp.ones((600, 600)) / 600, cpu1)
m0 = jax.device_put(jnp.ones((600, 600)) / 600, cpu0)
x = jax.device_put(jnp.ones((2, 2)), cpu0)
(a0 @ m).block_until_ready(), (x * 2 + 1).block_until_ready(), (m0 @ m0).block_until_ready()
''', '''
a = a0
for _ in range(8):
    a = a @ m           # on cpu:1
z = x * 2 + 1           # on cpu:0
with jax.profiler.TraceAnnotation(WAIT, reason="block_until_ready", source="z.block_until_ready()"):
    z.block_until_ready()
c = jax.device_put(jnp.ones((600, 600)), cpu0)
for _ in range(3):
    c = c @ m0          # the same function on cpu:0, after the wait
a.block_until_ready(), c.block_until_ready()
'''),
}


def record(name: str, env: dict, out: Path, *, python_tracer: bool = False) -> dict:
    import jax

    setup, program = PROGRAMS[name]
    exec(setup, env)
    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 1 if python_tracer else 0
    with tempfile.TemporaryDirectory() as tmp:
        with jax.profiler.trace(tmp, create_perfetto_trace=True, profiler_options=options):
            exec(program, env)
        found = sorted(Path(tmp).glob("plugins/profile/*/perfetto_trace.json.gz"))
        if not found:
            raise SystemExit(f"{name}: jax.profiler wrote no perfetto_trace.json.gz under {tmp}")
        shutil.copyfile(found[-1], out / f"{name}.json.gz")
    return {"file": f"{name}.json.gz", "bytes": (out / f"{name}.json.gz").stat().st_size,
            "python_tracer_level": options.python_tracer_level, "setup": setup.strip(), "program": program.strip()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args()
    import jax

    jax.config.update("jax_num_cpu_devices", 2)  # before any JAX operation: two_devices needs cpu:1
    import jax.numpy as jnp
    import jaxlib
    import numpy as np

    args.out.mkdir(parents=True, exist_ok=True)
    env = {"jax": jax, "jnp": jnp, "np": np, "WAIT": WAIT}
    files = {}
    # the first recording is a first profile of a notebook: Python tracer on, dot compiled inside it
    files["ten_dots"] = record("ten_dots", env, args.out, python_tracer=True)
    for name in ("jit_calls", "blocking_loop", "two_devices"):
        files[name] = record(name, env, args.out)
    manifest = {
        "recorded_by": "scripts/record_jax_traces.py", "date": time.strftime("%Y-%m-%d"),
        "jax": jax.__version__, "jaxlib": jaxlib.__version__, "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}", "cpus": os.cpu_count(),
        "files": files,
    }
    (args.out / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")
    for name, f in files.items():
        print(f"{args.out / f['file']}: {f['bytes']:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
