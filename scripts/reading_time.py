"""Per notebook: reading minutes, new concepts, plumbing share of code lines, check lines and words.

Reads the notebooks' sources (``notebooks/``), or executed copies (``--executed DIR``: ``.ipynb`` files with
outputs, e.g. from ``--execute``, which runs each one in quick mode pinned to one CPU beside a busy process,
as the one-core test does) for the printed words and the checks.  The measures and the limits are
``tests/one_core/reading.py``'s (markdown and printed words at 200 a minute, code lines at 10 a minute;
at most 20 minutes and 10 new concepts; plumbing at most 20 % of the code lines).

Run: ``.venv/bin/python scripts/reading_time.py [--execute] [--executed DIR] [--json PATH] [--only 05]``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.one_core import reading  # noqa: E402
from tests.one_core.pinned import NOTEBOOKS  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--execute", action="store_true", help="execute each notebook (quick mode, one busy CPU)")
    ap.add_argument("--executed", type=Path, help="a folder of executed copies to read outputs from")
    ap.add_argument("--save-executed", type=Path, help="with --execute: keep the executed copies here")
    ap.add_argument("--json", type=Path, help="write the table as JSON here")
    ap.add_argument("--only", action="append", default=[], help="notebook name prefix (repeatable)")
    args = ap.parse_args()
    paths = [p for p in NOTEBOOKS if not args.only or any(p.stem.startswith(o) for o in args.only)]
    rows = []
    for path in paths:
        nb = None
        if args.execute:
            from tests.one_core.pinned import run_pinned

            run = run_pinned(path, quick=True, busy=True, timeout=900)
            nb = run.notebook
            if args.save_executed:
                args.save_executed.mkdir(parents=True, exist_ok=True)
                (args.save_executed / path.name).write_text(json.dumps(nb, indent=1))
        elif args.executed and (args.executed / path.name).exists():
            nb = json.loads((args.executed / path.name).read_text())
        s = reading.stats(path, nb)
        rows.append({"notebook": s.name, "minutes": round(s.minutes, 1), "markdown_words": s.markdown_words,
                     "printed_words": s.printed_words, "code_lines": s.code_lines, "plumbing_lines": s.plumbing_lines,
                     "plumbing_share": round(s.plumbing_share, 3), "concepts": len(s.concepts),
                     "check_lines": s.check_lines, "check_words": s.check_words, "executed": s.executed})
    head = f"{'notebook':38s} {'min':>5s} {'md':>5s} {'out':>5s} {'code':>5s} {'plumb':>6s} {'conc':>4s} {'chk':>4s} {'words':>5s}"
    print(head)
    for r in rows:
        print(f"{r['notebook']:38s} {r['minutes']:5.1f} {r['markdown_words']:5d} {r['printed_words']:5d} "
              f"{r['code_lines']:5d} {r['plumbing_share']:6.0%} {r['concepts']:4d} {r['check_lines']:4d} "
              f"{r['check_words']:5d}")
    code = sum(r["code_lines"] for r in rows)
    print(f"{'all':38s} {sum(r['minutes'] for r in rows):5.1f} {sum(r['markdown_words'] for r in rows):5d} "
          f"{sum(r['printed_words'] for r in rows):5d} {code:5d} "
          f"{sum(r['plumbing_lines'] for r in rows) / max(code, 1):6.0%} {sum(r['concepts'] for r in rows):4d} "
          f"{sum(r['check_lines'] for r in rows):4d} {sum(r['check_words'] for r in rows):5d}")
    if args.json:
        args.json.write_text(json.dumps({"what": __doc__.splitlines()[0], "notebooks": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
