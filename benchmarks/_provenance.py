"""What every benchmark's JSON records about how it was made: the command line, so the numbers page
(scripts/numbers_page.py) can say how each table was measured."""

from __future__ import annotations

import os
import shlex
import sys

__all__ = ["command"]


def command() -> str:
    """The command that is running, as typed from the repository root: ``python benchmarks/bench_x.py --repeat 5``."""
    script = os.path.relpath(sys.argv[0]) if sys.argv and sys.argv[0] else "?"
    return shlex.join(["python", script, *sys.argv[1:]])  # an argument with a space keeps its quotes
