"""Command line: ``python -m d2l_async report [--device auto|cpu|cuda] [--quick] [--output PATH]``.

Also installed as the ``d2l-async`` console script.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from typing import Sequence

__all__ = ["main", "build_parser"]


def _prog(argv0: str | None = None) -> str:
    """The name the reader typed: ``d2l-async`` for the console script, ``python -m d2l_async`` otherwise."""
    import os

    name = os.path.basename(argv0 if argv0 is not None else (sys.argv[0] if sys.argv else ""))
    return "python -m d2l_async" if name in {"", "__main__.py", "-c", "-m"} or name.endswith(".py") else name


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; ``prog`` (the usage name) defaults to how this process was started."""
    parser = argparse.ArgumentParser(prog=prog or _prog(),
                                     description="D2L's asynchronous computation chapter, measured on this machine.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    rep = sub.add_parser("report", help="run every experiment and write an HTML report",
                         description="Run every experiment of the chapter, print a results table and write a "
                                     "self-contained HTML report with a JSON of the numbers beside it.")
    rep.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"),
                     help="auto: CUDA when present, else the CPU engine (default); cpu: the engine only; "
                          "cuda: fail unless CUDA is available")
    rep.add_argument("--quick", action="store_true", help="small workloads (sets D2L_ASYNC_QUICK=1)")
    rep.add_argument("--output", default="build/report.html", metavar="PATH",
                     help="HTML file to write (default build/report.html); the JSON goes beside it")
    rep.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def torch_importable() -> bool:
    """Whether this Python can find torch (without importing it: that takes seconds)."""
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):  # a finder that refuses torch, or a half-removed install
        return False


def no_torch_message(python: str | None = None) -> str:
    """What to do when this Python has no torch: most often the system's python, not the venv's.

    ``make lab`` (or ``make test``) creates ``.venv`` with torch and everything else, but a new
    shell does not use it until it is activated.
    """
    python = python or sys.executable or "python"
    return (f"python -m d2l_async: this Python ({python}) cannot import torch.\n"
            "In the repository's root, run `make lab` once (it creates .venv with torch and everything else),\n"
            "then activate that environment in each new shell and run the command again:\n"
            "    source .venv/bin/activate\n"
            "    python -m d2l_async report\n"
            "(or, without activating it: .venv/bin/python -m d2l_async report)")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status: 0 when the report was written, 1 when a report step failed
    (the report is still written, with its traceback) or when this Python has no torch (with what to run
    instead), 2 without a command (argparse exits with 2 on bad arguments)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not torch_importable():
        print(no_torch_message(), file=sys.stderr)
        return 1
    if args.command != "report":
        parser.print_help(sys.stderr)
        return 2
    from d2l_async.report import check_device, run_report

    try:
        check_device(args.device)
    except ValueError as exc:
        parser.error(str(exc))
    try:
        result = run_report(device=args.device, quick=True if args.quick else None, output=args.output,
                            progress=not args.no_progress)
    except ValueError as exc:
        parser.error(str(exc))
    return 1 if result.failed else 0  # a failed step is in the report; the exit status says so too


if __name__ == "__main__":
    # Run the package's own module object (``d2l_async.__main__``), not this ``__main__`` copy: the
    # engine attributes blocks to the first frame outside ``d2l_async``, and a frame named
    # ``__main__`` would make every wait in the report look like it came from this file.
    from d2l_async.__main__ import main as _main

    sys.exit(_main())
