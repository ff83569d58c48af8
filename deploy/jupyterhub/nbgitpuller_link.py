"""Print the nbgitpuller link that opens this chapter on your JupyterHub.

A student who clicks it logs in to the hub, gets (or updates) their own copy of the repository in
their home folder — nbgitpuller merges without overwriting their edits — and lands in JupyterLab on
the notebook. The hub's image must have nbgitpuller (the image built from ``binder/`` has).

    python deploy/jupyterhub/nbgitpuller_link.py https://hub.example.edu [--notebook 01_asynchrony]
"""

from __future__ import annotations

import argparse
import sys
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from d2l_async.config import REPO_SLUG, REPO_URL  # noqa: E402

NOTEBOOKS = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


def link(hub_url: str, *, notebook: str = "00_tour", branch: str = "main", interface: str = "lab") -> str:
    """The nbgitpuller link: ``<hub>/hub/user-redirect/git-pull?repo=...&urlpath=...&branch=...``.

    Raises:
        ValueError: the hub URL is not http(s), or the notebook is not one of the chapter's.
    """
    parsed = urllib.parse.urlparse(hub_url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError(f"hub URL must look like https://hub.example.edu, got {hub_url!r}")
    stem = notebook.removesuffix(".ipynb")
    if stem not in NOTEBOOKS:
        raise ValueError(f"unknown notebook {notebook!r}; choose one of {', '.join(NOTEBOOKS)}")
    if interface not in ("lab", "tree"):
        raise ValueError(f"interface must be 'lab' or 'tree', got {interface!r}")
    folder = REPO_SLUG.split("/")[1]  # nbgitpuller clones into a folder named after the repository
    query = urllib.parse.urlencode({"repo": REPO_URL, "urlpath": f"{interface}/tree/{folder}/notebooks/{stem}.ipynb",
                                    "branch": branch})
    return f"{hub_url.rstrip('/')}/hub/user-redirect/git-pull?{query}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python deploy/jupyterhub/nbgitpuller_link.py", description=__doc__.split("\n\n")[0])
    p.add_argument("hub_url", help="your hub's address, e.g. https://hub.example.edu")
    p.add_argument("--notebook", default="00_tour", help="the notebook to open (default 00_tour)")
    p.add_argument("--branch", default="main", help="the repository branch to pull (default main)")
    p.add_argument("--interface", default="lab", choices=("lab", "tree"), help="JupyterLab (default) or the classic tree")
    args = p.parse_args(argv)
    try:
        print(link(args.hub_url, notebook=args.notebook, branch=args.branch, interface=args.interface))
    except ValueError as exc:
        p.error(str(exc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
