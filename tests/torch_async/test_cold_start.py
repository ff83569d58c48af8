"""Cold start: the first block pays for the meta kernels' imports when it
opens, not inside the user's loop -- checked in a fresh interpreter by counting the modules the
loop imports (timing is the benchmark's job: benchmarks/bench_torch_async.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_the_first_blocks_loop_imports_nothing():
    code = textwrap.dedent("""
        import sys, torch
        from d2l_async.torch_async import asynchronous, synchronize
        x = torch.randn(50, 50)
        with asynchronous():
            before = set(sys.modules)
            for _ in range(3):
                y = (x @ x + 1) * 2
                z = torch.relu(y).sum()
            new = sorted(set(sys.modules) - before)
            synchronize()
        print(len(new), new[:10])
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    count = int(out.stdout.split()[0])
    assert count == 0, out.stdout
