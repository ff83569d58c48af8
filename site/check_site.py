"""Check a built site in a real browser: accessibility (axe-core) and what runs past the page column.

Every page of ``build/site`` (or ``--site``) is served over loopback and opened in headless
Chromium (Playwright, ``/usr/bin/chromium``; every request off the machine refused, as the site
needs none). On each page:

- **axe-core** (npm's ``axe-core``, ``make site`` installs it into ``.venv/site-js``) is injected
  and run with its default rules (WCAG 2 A/AA and best practices); each violation is a rule broken
  by one or more elements, with axe's impact (minor, moderate, serious, critical);
- **overflow**: the elements of the page's column whose right edge passes the column's (outside a
  box of the column that scrolls sideways, e.g. a wide table), and the code blocks (``pre``) whose
  text is wider than the block, so a reader has to scroll a code line sideways.

``--json PATH`` writes every finding; the summary line counts them.

    python site/check_site.py [--site build/site] [--json build/site-check.json]
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
AXE = ROOT / ".venv" / "site-js" / "node_modules" / "axe-core" / "axe.min.js"
CHROMIUM = os.environ.get("D2L_ASYNC_CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]

#: Elements past the column's right edge, and code blocks wider than themselves, on one page.
OVERFLOW_JS = """() => {
  const col = document.querySelector('#main-content article') || document.querySelector('main');
  if (!col) return {past: [], scrolled_code: []};
  const right = col.getBoundingClientRect().right + 1;
  const scrolls = el => {
    for (let p = el.parentElement; p && p !== col; p = p.parentElement) {
      const o = getComputedStyle(p).overflowX;
      if ((o === 'auto' || o === 'scroll' || o === 'hidden') && p.getBoundingClientRect().right <= right) return true;
    }
    return false;
  };
  const past = [];
  for (const el of col.querySelectorAll('*')) {
    if (el instanceof SVGElement && el.tagName.toLowerCase() !== 'svg') continue;
    const r = el.getBoundingClientRect();
    if (r.width > 0 && r.right > right && !scrolls(el))
      past.push(`${el.tagName.toLowerCase()}.${el.className} ${Math.round(r.right - right)} px past the column`);
  }
  const scrolled_code = [];
  for (const pre of col.querySelectorAll('pre'))
    if (pre.scrollWidth > pre.clientWidth + 1)
      scrolled_code.push(`pre ${pre.scrollWidth - pre.clientWidth} px wider than its box: ${pre.textContent.slice(0, 60)}`);
  return {past, scrolled_code};
}"""


def pages(site: Path) -> list[Path]:
    """Every page: the index, one per notebook, one per page of ``docs/``."""
    return sorted([*site.glob("*.html"), *site.glob("docs/*.html")])


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


def audit(site: Path, *, axe_js: Path = AXE, width: int = 1400) -> dict[str, Any]:
    """Open every page of ``site`` and check it; the findings per page and in total.

    Returns:
        ``{"pages": {page: {"axe": [{"id", "impact", "nodes", "help"}], "past": [...],
        "scrolled_code": [...]}}, "totals": {...}}`` where the totals count axe violations (a rule
        broken on a page) by impact, the elements they name, and both kinds of overflow.
    """
    from playwright.sync_api import sync_playwright

    if not (site / "index.html").is_file():
        raise FileNotFoundError(f"site={str(site)!r}: no index.html (build it with make site)")
    if not axe_js.is_file():
        raise FileNotFoundError(f"axe-core not found at {axe_js}: npm install --prefix .venv/site-js axe-core")
    handler = functools.partial(_Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="site-check-server", daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    axe_source = axe_js.read_text(encoding="utf-8")
    found: dict[str, Any] = {}
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
            try:
                for path in pages(site):
                    rel = path.relative_to(site).as_posix()
                    page = browser.new_page(viewport={"width": width, "height": 1000})
                    try:
                        page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(base)
                                   else route.abort())
                        page.goto(f"{base}/{rel}", wait_until="load", timeout=120_000)
                        page.wait_for_timeout(500)  # figures and MathJax draw after load
                        overflow = page.evaluate(OVERFLOW_JS)
                        page.add_script_tag(content=axe_source)
                        result = page.evaluate("async () => (await axe.run(document, {resultTypes: ['violations']}))"
                                               ".violations.map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.length,"
                                               " help: v.help}))")
                        found[rel] = {"axe": result, **overflow}
                    finally:
                        page.close()
            finally:
                browser.close()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    impact: Counter = Counter()
    for f in found.values():
        impact.update(v["impact"] or "unknown" for v in f["axe"])
    totals = {"pages": len(found),
              "axe_violations": sum(len(f["axe"]) for f in found.values()),
              "axe_elements": sum(v["nodes"] for f in found.values() for v in f["axe"]),
              "axe_by_impact": dict(impact),
              "axe_rules": dict(Counter(v["id"] for f in found.values() for v in f["axe"])),
              "past_the_column": sum(len(f["past"]) for f in found.values()),
              "code_blocks_scrolling": sum(len(f["scrolled_code"]) for f in found.values()),
              "width_px": width}
    return {"site": str(site), "pages": found, "totals": totals}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python site/check_site.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--site", default=str(ROOT / "build" / "site"), help="the built site (default build/site)")
    p.add_argument("--json", default=None, help="write every finding to this file")
    p.add_argument("--width", type=int, default=1400, help="the browser window's width in px (default 1400)")
    args = p.parse_args(argv)
    report = audit(Path(args.site), width=args.width)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    t = report["totals"]
    print(f"{t['pages']} pages: axe-core {t['axe_violations']} violations ({t['axe_elements']} elements; "
          f"{', '.join(f'{n} {k}' for k, n in sorted(t['axe_by_impact'].items())) or 'none'}); overflow: "
          f"{t['past_the_column']} elements past the column, {t['code_blocks_scrolling']} code blocks wider than "
          f"their box (window {t['width_px']} px)")
    for rule, n in sorted(t["axe_rules"].items(), key=lambda kv: -kv[1]):
        print(f"  {rule}: on {n} pages")
    return 0 if not (t["axe_violations"] or t["past_the_column"] or t["code_blocks_scrolling"]) else 1


if __name__ == "__main__":
    sys.exit(main())
