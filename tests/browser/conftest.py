"""A real JupyterLab in a temporary folder (the browser is the suite's one Chromium, tests/conftest.py)."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from ..conftest import skip_or_fail

ROOT = Path(__file__).parents[2]
BUILD = ROOT / "build" / "browser"



def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def lab_server(tmp_path_factory):
    """`jupyter lab` on a free loopback port with a random token, serving a copy of the notebooks."""
    if not shutil.which("jupyter", path=str(Path(sys.executable).parent)):
        skip_or_fail("jupyter is not installed in this environment")
    workdir = tmp_path_factory.mktemp("lab")
    shutil.copytree(ROOT / "notebooks", workdir / "notebooks")
    port, token = _free_port(), secrets.token_hex(16)
    settings = workdir / "settings"
    # Start the notebook's kernel without asking, and no news pop-up over the page.
    for plugin, values in {
        "notebook-extension/tracker": {"autoStartDefaultKernel": True},
        "apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
    }.items():
        target = settings / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(values))
    env = {**os.environ, "D2L_ASYNC_QUICK": "1", "JUPYTER_CONFIG_DIR": str(workdir / "cfg"),
           "JUPYTER_RUNTIME_DIR": str(workdir / "runtime"), "JUPYTERLAB_SETTINGS_DIR": str(settings),
           "JUPYTERLAB_WORKSPACES_DIR": str(workdir / "workspaces")}
    log = open(workdir / "lab.log", "w")
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "jupyter"), "lab", "--no-browser", "--ip=127.0.0.1",
         f"--port={port}", f"--IdentityProvider.token={token}", "--ServerApp.open_browser=False",
         f"--notebook-dir={workdir / 'notebooks'}", "--allow-root"],
        stdout=log, stderr=subprocess.STDOUT, env=env,
    )
    base = f"http://127.0.0.1:{port}"
    from d2l_async.devices import machine

    m = machine(sample_s=0)  # a loaded machine starts JupyterLab slower: scale the wait
    deadline = time.monotonic() + 90 * min(5.0, max(1.0, m.load_avg / max(m.usable_cpus, 1.0)))
    while True:
        try:
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"jupyter lab did not start: {(workdir / 'lab.log').read_text()[-2000:]}")
            time.sleep(0.25)
    yield {"base": base, "token": token, "dir": workdir / "notebooks"}
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
    log.close()




@pytest.fixture(scope="session")
def screenshots() -> Path:
    """Where screenshots go: build/browser/ (kept for a human to look at)."""
    BUILD.mkdir(parents=True, exist_ok=True)
    return BUILD
