"""A class on a real JupyterHub, on this machine's loopback: what one student costs.

Starts JupyterHub (pip's ``jupyterhub``) with its configurable-http-proxy (npm's), a local-process
spawner (every student's single-user server is a process of this user, home folders in a temporary
directory) and the dummy authenticator, everything bound to 127.0.0.1. Each student's server gets
what ``config.yaml`` gives a pod: its ``singleuser.extraEnv`` (so the class runs in the mode the hub
is configured for: quick mode, ``D2L_ASYNC_QUICK=1``, as shipped) and its ``singleuser.extraFiles``
Jupyter configuration (kernel culling), read from a configuration folder as the image reads
``/etc/jupyter``. Then N simulated students, at the same time, each: is created through the hub's
REST API, starts a server, uploads every notebook of ``notebooks/`` (whatever it holds; or the ones
named) through the server's contents API, and runs every code cell through a kernel (the kernels
API and its websocket). Measured per student: the peak memory of their server's process tree
(server + kernels), the server alone, the most threads (what a pod's process limit counts), the
most bytes in their temporary folder (what a pod's ephemeral storage counts), the time to a ready
server and to the last cell, and every lesson check (✔, or ✘/? with its reason); per notebook: its
time and its kernel's peak memory and memory once idle (what an open JupyterLab tab keeps). At the
end every server and the hub are stopped and no process of the run is left (checked).

``keep_kernels=True``: each notebook's kernel stays open until the student has run them all, as
JupyterLab keeps a kernel per opened notebook when nothing culls it (the student's peak is then the
server plus every kernel).

``kill=K``: student K's server is killed in the middle of the last notebook (its whole process
tree, ``SIGKILL``, as the kernel OOM-killer or a node failure would); the student, as a browser tab
would, keeps asking for the server until the hub has seen it stop, starts it again, finds the
uploaded notebooks still in their home, and reruns that notebook. Measured: seconds from the kill to
a ready server again, and whether the files were kept; the other students must be unaffected.

A simulated student talks to its kernel as JupyterLab does: over one websocket per kernel with a
session id, and when the server closes that websocket (it does when a client has not answered its
pings for ``ws_ping_timeout``, 90 s: at a load of 13 on 2 cores this happened mid-cell), it
reconnects with the same session id and the server replays the messages it kept meanwhile. Each
student's ``reconnects`` count is reported.

``first_lecture.py`` beside this file is the other half: 200 students logging in to the same kind
of hub with their pods modelled.

Bounded: at most 16 students, one overall deadline; nothing listens beyond 127.0.0.1.

    python deploy/jupyterhub/local_class.py --students 2          # prints one JSON object
    python deploy/jupyterhub/local_class.py --students 4 --kill 1 # student1's server killed mid-notebook
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CONFIG = Path(__file__).resolve().with_name("config.yaml")
#: the kill test's short class (one notebook each): 07 is the one killed in the middle and run again
SHORT_CLASS = ("01_asynchrony", "07_automatic_parallelism")
MAX_STUDENTS = 16


def chapter_notebooks() -> tuple[str, ...]:
    """Every notebook of ``notebooks/``, in the chapter's order (their names sort that way)."""
    return tuple(sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb")))


def singleuser_config(path: Path = CONFIG) -> dict[str, Any]:
    """What ``config.yaml`` gives every student's pod that a local server can get too.

    Returns ``{"env": singleuser.extraEnv as strings, "jupyter_files": {file name: data}}``, the
    latter for each ``singleuser.extraFiles`` entry mounted into ``/etc/jupyter`` (a Jupyter
    configuration file the server reads at start)."""
    import yaml

    single = (yaml.safe_load(path.read_text()) or {}).get("singleuser") or {}
    env = {str(k): str(v) for k, v in (single.get("extraEnv") or {}).items()}
    files = {}
    for entry in (single.get("extraFiles") or {}).values():
        mount = Path(str(entry.get("mountPath", "")))
        if mount.parent == Path("/etc/jupyter") and "data" in entry:
            files[mount.name] = entry["data"]
    return {"env": env, "jupyter_files": files}


def _quick_from(env: dict[str, str]) -> bool:
    """Quick mode as ``d2l_async.config.quick_mode`` reads ``D2L_ASYNC_QUICK``."""
    from d2l_async.config import quick_mode

    old = os.environ.get("D2L_ASYNC_QUICK")
    try:
        os.environ["D2L_ASYNC_QUICK"] = env.get("D2L_ASYNC_QUICK", "")
        return quick_mode()
    finally:
        if old is None:
            os.environ.pop("D2L_ASYNC_QUICK", None)
        else:
            os.environ["D2L_ASYNC_QUICK"] = old


class ClassError(RuntimeError):
    """The hub, a server or a kernel did not do what a student needed (the message says which)."""


def find_proxy() -> str | None:
    """configurable-http-proxy: ``$D2L_ASYNC_CHP``, the Makefile's ``.venv/chp``, or on ``PATH``."""
    for candidate in (os.environ.get("D2L_ASYNC_CHP"),
                      str(ROOT / ".venv" / "chp" / "node_modules" / ".bin" / "configurable-http-proxy"),
                      shutil.which("configurable-http-proxy")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Student:
    """One simulated student's run."""

    name: str
    server_ready_s: float | None = None
    finished_s: float | None = None
    peak_rss_mib: float = 0.0
    notebooks: dict[str, dict[str, Any]] = field(default_factory=dict)
    error: str = ""
    reconnects: int = 0  # kernel websockets the server closed and the student opened again
    closes: list[str] = field(default_factory=list)  # where and why each of them closed
    killed: dict[str, Any] = field(default_factory=dict)  # kill=K: when, how long back, files kept
    ping_gap_max_s: float = 0.0  # the longest wait between two of the server's websocket pings
    server_rss_mib: float = 0.0  # the single-user server process alone (its peak)
    threads_max: int = 0  # the most threads of the server's tree at once: pids a pod uses
    tmp_peak_mib: float = 0.0  # the most the student's TMPDIR held: a pod's ephemeral storage
    cpu_s: float = 0.0  # CPU seconds of the server's tree (server and kernels)
    server_pid: int | None = None
    open_kernels: list[str] = field(default_factory=list)  # keep_kernels: the kernels left running

    @property
    def checks_ok(self) -> bool:
        """Every lesson check ✔, or ✘/? with its reason, and no cell error."""
        return not self.error and all(
            nb["cell_errors"] == 0 and nb["checks"] > 0 and nb["unexplained"] == 0 for nb in self.notebooks.values())


# -- the hub ---------------------------------------------------------------------------------------------


class LocalHub:
    """JupyterHub + proxy on loopback in a temporary folder; a context manager that leaves nothing.

    Every server gets ``config.yaml``'s ``singleuser.extraEnv`` and its Jupyter configuration files
    (:func:`singleuser_config`); ``quick`` overrides the mode, ``jupyter_overrides`` (file name ->
    class -> trait -> value) changes single traits of those files (a test's shorter culling times).
    """

    def __init__(self, *, proxy: str, quick: bool | None = None, workdir: Path | None = None,
                 hub_config: dict[str, dict[str, Any]] | None = None,
                 jupyter_overrides: dict[str, dict[str, dict[str, Any]]] | None = None,
                 extra_config: str = "") -> None:
        self.proxy = proxy
        self.single = singleuser_config()
        self.env = dict(self.single["env"])
        if quick is not None:
            self.env["D2L_ASYNC_QUICK"] = "1" if quick else "0"
        self.quick = _quick_from(self.env)
        self.jupyter_files = {name: {cls: dict(traits) for cls, traits in data.items()}
                              for name, data in self.single["jupyter_files"].items()}
        for name, classes in (jupyter_overrides or {}).items():
            for cls, traits in classes.items():
                self.jupyter_files.setdefault(name, {}).setdefault(cls, {}).update(traits)
        #: a Zero to JupyterHub ``hub.config`` (class -> trait -> value) to apply instead of the
        #: class test's own authentication (dummy, everyone allowed): config.yaml's, in its test
        self.hub_config = hub_config
        self.extra_config = extra_config
        self.dir = Path(workdir or tempfile.mkdtemp(prefix="d2l-class-"))
        self.port, self.hub_port, self.api_port = _free_port(), _free_port(), _free_port()
        self.token = secrets.token_hex(24)
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def tmp_dir(self, user: str) -> Path:
        """The student's temporary folder (``TMPDIR``): what a pod's ephemeral storage holds."""
        return self.dir / "tmp" / user

    def config(self) -> str:
        venv_bin = Path(sys.executable).parent
        etc = self.dir / "etc" / "jupyter"  # stands for the image's /etc/jupyter
        env = {**self.env, "PATH": f"{venv_bin}:{os.environ.get('PATH', '')}", "JUPYTER_CONFIG_PATH": str(etc)}
        env.setdefault("MPLBACKEND", "Agg")
        return f"""
import os
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {self.port}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {self.hub_port}
c.ConfigurableHTTPProxy.command = [{self.proxy!r}]
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{self.api_port}"
c.JupyterHub.db_url = "sqlite:///{self.dir / 'hub.sqlite'}"
c.JupyterHub.cookie_secret_file = "{self.dir / 'cookie_secret'}"
c.JupyterHub.pid_file = "{self.dir / 'hub.pid'}"
{self._auth()}
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = "{self.dir / 'home' / '{username}'}"
c.Spawner.ip = "127.0.0.1"
c.Spawner.cmd = [{str(venv_bin / 'jupyterhub-singleuser')!r}]
c.Spawner.args = ["--allow-root", "--ServerApp.open_browser=False"]


def _tmpdir(spawner, _root={str(self.dir / 'tmp')!r}):
    path = os.path.join(_root, spawner.user.name)
    os.makedirs(path, exist_ok=True)
    return path


c.Spawner.environment = {{**{env!r}, "TMPDIR": _tmpdir}}
c.Spawner.start_timeout = 180
c.Spawner.http_timeout = 180
c.JupyterHub.services = [{{"name": "class-test", "api_token": {self.token!r}}}]
c.JupyterHub.load_roles = [{{"name": "class-test", "services": ["class-test"],
    "scopes": ["admin:users", "admin:servers", "admin:server_state", "access:servers", "tokens"]}}]
{self.extra_config}
"""

    def _auth(self) -> str:
        if self.hub_config is None:
            return 'c.JupyterHub.authenticator_class = "dummy"\nc.Authenticator.allow_all = True'
        # z2jh sets each hub.config entry as a traitlets config value: c[Class][trait] = value
        return "\n".join(f"c.{cls}.{trait} = {value!r}" for cls, traits in self.hub_config.items()
                         for trait, value in traits.items())

    def login(self, user: str, password: str) -> bool:
        """Log in through the hub's login form, as a browser does: True if the hub let ``user`` in."""
        import http.cookiejar
        import re

        jar = http.cookiejar.CookieJar()

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args: Any, **kw: Any) -> None:
                return None

        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar), NoRedirect)
        try:
            page = opener.open(f"{self.url}/hub/login", timeout=30).read().decode()
        except urllib.error.HTTPError as exc:
            if exc.code in (403, 404):  # no login form (the null authenticator refuses at once)
                return False
            raise
        xsrf = re.search(r'name="_xsrf"\s+value="([^"]+)"', page)
        form = urllib.parse.urlencode({"username": user, "password": password,
                                       **({"_xsrf": xsrf.group(1)} if xsrf else {})}).encode()
        try:
            resp = opener.open(urllib.request.Request(f"{self.url}/hub/login", data=form), timeout=30)
            status = resp.status
        except urllib.error.HTTPError as exc:
            status = exc.code
        return status in (301, 302, 303) and any(c.name.startswith("jupyterhub-") and "session" in c.name
                                                  or c.name == "jupyterhub-hub-login" for c in jar)

    def __enter__(self) -> "LocalHub":
        (self.dir / "home").mkdir(parents=True, exist_ok=True)
        etc = self.dir / "etc" / "jupyter"
        etc.mkdir(parents=True, exist_ok=True)
        for name, data in self.jupyter_files.items():  # as the chart renders extraFiles' data
            (etc / name).write_text(json.dumps(data, indent=2))
        cfg = self.dir / "jupyterhub_config.py"
        cfg.write_text(self.config())
        log = open(self.dir / "hub.log", "w")
        hub = Path(sys.executable).with_name("jupyterhub")
        self.proc = subprocess.Popen([str(hub), "-f", str(cfg)], cwd=self.dir, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.monotonic() + 90
        while True:
            try:
                self.api("GET", "/")
                return self
            except (OSError, ClassError):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.__exit__(None, None, None)
                    raise ClassError(f"the hub did not answer within 90 s:\n{self.log_tail()}")
                time.sleep(0.3)

    def log_tail(self, n: int = 30) -> str:
        path = self.dir / "hub.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:]) if path.exists() else ""

    def request(self, method: str, url: str, body: Any = None, *, timeout: float = 60) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method,
                                     headers={"Authorization": f"token {self.token}",
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                raw, status, kind = resp.read(), resp.status, resp.headers.get("Content-Type", "")
        except urllib.error.HTTPError as exc:
            raise ClassError(f"{method} {url}: HTTP {exc.code} {exc.read()[:300]!r}") from None
        try:
            return json.loads(raw) if raw.strip() else None
        except ValueError:
            raise ClassError(f"{method} {url}: HTTP {status}, a reply that is not JSON ({kind}): {raw[:200]!r}") from None

    def api(self, method: str, path: str, body: Any = None) -> Any:
        return self.request(method, f"{self.url}/hub/api{path}", body)

    def __exit__(self, *exc: Any) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is not None:  # the hub exited on its own (first_lecture's failure limit)
            self._stop_orphaned_proxy()
            self.proc = None
            return
        try:
            for user in self.api("GET", "/users") or []:
                if user.get("servers"):
                    try:
                        self.api("DELETE", f"/users/{user['name']}/server")
                    except ClassError:
                        pass
        except (OSError, ClassError):
            pass
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # the hub stops its proxy and servers
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self.proc = None

    def _stop_orphaned_proxy(self) -> None:
        """The proxy of a hub that exited by itself runs on (JupyterHub starts it in a session of its
        own, and a hub that aborts does not stop it): stop it, found by the pid file the hub wrote."""
        import psutil

        try:
            proxy = psutil.Process(int((self.dir / "jupyterhub-proxy.pid").read_text().split()[0]))
            if f"{self.api_port}" in " ".join(proxy.cmdline()):  # ours, not a reused pid
                proxy.terminate()
                proxy.wait(timeout=10)
        except (OSError, ValueError, IndexError, psutil.Error):
            pass

    def leftovers(self) -> list[str]:
        """Processes still alive whose command line mentions this run's folder or ports."""
        import psutil

        marks = (str(self.dir), f":{self.port}", f"{self.api_port}")
        out = []
        for p in psutil.process_iter(["pid", "cmdline", "environ"]):
            try:
                cmd = " ".join(p.info["cmdline"] or [])
                home = (p.info.get("environ") or {}).get("HOME", "")
            except (psutil.Error, TypeError):
                continue
            if p.pid != os.getpid() and (any(m in cmd for m in marks) or home.startswith(str(self.dir))):
                out.append(f"{p.pid}: {cmd[:120]}")
        return out


# -- one student -------------------------------------------------------------------------------------------


def _tree(pid: int) -> list[Any]:
    import psutil

    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def _dir_bytes(path: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return total


class _Peak(threading.Thread):
    """Samples a process and its descendants every 0.2 s and keeps the peaks: their RSS, the root's
    own RSS, their threads (what a pod's pids limit counts: every thread takes a pid) and, every
    second, the bytes under ``folder`` (a student's TMPDIR)."""

    def __init__(self, pid: int, folder: Path | None = None) -> None:
        super().__init__(name=f"class-rss-{pid}", daemon=True)
        self.pid, self.folder, self._halt = pid, folder, threading.Event()
        self.peak = self.root_peak = self.threads = self.folder_bytes = 0
        self.last = 0  # the tree's RSS at the latest sample
        self._cpu: dict[int, float] = {}  # pid -> CPU seconds at its latest sample (kept after it exits)

    @property
    def cpu_s(self) -> float:
        """CPU seconds the tree used (each process as last sampled: up to 0.2 s short per process)."""
        return sum(self._cpu.values())

    def sample(self) -> int:
        """One sample now (also called by hand); the tree's RSS in bytes (0 once it is gone)."""
        import psutil

        try:
            procs = _tree(self.pid)
        except psutil.Error:
            return 0
        total = threads = 0
        for i, p in enumerate(procs):
            try:
                rss = p.memory_info().rss
                threads += p.num_threads()
                times = p.cpu_times()
                self._cpu[p.pid] = times.user + times.system
            except psutil.Error:
                continue
            total += rss
            if i == 0:
                self.root_peak = max(self.root_peak, rss)
        self.peak, self.threads, self.last = max(self.peak, total), max(self.threads, threads), total
        return total

    def run(self) -> None:
        n = 0
        while not self._halt.is_set():
            self.sample()
            if self.folder is not None and n % 5 == 0:
                self.folder_bytes = max(self.folder_bytes, _dir_bytes(self.folder))
            n += 1
            self._halt.wait(0.2)

    def stop(self) -> int:
        self._halt.set()
        self.join(timeout=5)
        return self.peak


def _kernel_pid(server_pid: int, kernel_id: str, deadline: float) -> int | None:
    """The kernel process the server started for ``kernel_id`` (its connection file names the id)."""
    import psutil

    until = min(deadline, time.monotonic() + 60)
    while time.monotonic() < until:
        try:
            for p in psutil.Process(server_pid).children(recursive=True):
                try:
                    if any(kernel_id in part for part in p.cmdline()):
                        return p.pid
                except psutil.Error:
                    continue
        except psutil.Error:
            return None
        time.sleep(0.1)
    return None


def _decode(raw: str | bytes) -> dict[str, Any]:
    """A kernel message from the websocket: text JSON, or (with binary buffers, e.g. a widget's) the
    legacy binary framing: uint32 count, uint32 offsets, the JSON message, then the buffers."""
    if isinstance(raw, str):
        return json.loads(raw)
    n = int.from_bytes(raw[:4], "big")
    offsets = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(n)]
    end = offsets[1] if n > 1 else len(raw)
    return json.loads(raw[offsets[0]:end].decode("utf-8"))


class _Killed(Exception):
    """The student's server was killed on purpose (``kill=K``) while a cell ran."""


def _kill_tree(pid: int) -> int:
    """SIGKILL a single-user server and every process under it (its kernels); how many were killed."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    for p in procs:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(procs, timeout=10)
    return len(procs)


def _run_notebook(hub: LocalHub, s: Student, stem: str, deadline: float,
                  kill_at: int | None = None, kill: Any = None, *, keep: bool = False) -> dict[str, Any]:
    """Upload ``stem`` and run its code cells in a fresh kernel; outputs read from the websocket.

    ``kill_at``: right after sending that code cell, call ``kill()`` (the student's server dies
    mid-cell) and raise :class:`_Killed` once the websocket is gone. ``keep``: leave the kernel
    running afterwards (its id goes to ``s.open_kernels``), as an open JupyterLab tab does."""
    import nbformat
    import websocket

    from d2l_async.lesson import checks_in_outputs

    user = s.name
    nb = nbformat.read(ROOT / "notebooks" / f"{stem}.ipynb", as_version=4)
    base = f"{hub.url}/user/{user}/api"
    hub.request("PUT", f"{base}/contents/{stem}.ipynb", {"type": "notebook", "format": "json", "content": nb})
    kernel = hub.request("POST", f"{base}/kernels", {"name": "python3"})
    session = uuid.uuid4().hex
    # the session id, as JupyterLab sends it: the server keeps the kernel's messages for this session
    # while its websocket is closed and replays them when it reconnects
    ws_url = f"ws://127.0.0.1:{hub.port}/user/{user}/api/kernels/{kernel['id']}/channels?session_id={session}"

    def connect() -> Any:
        return websocket.create_connection(ws_url, header=[f"Authorization: token {hub.token}"], timeout=30)

    kpid = _kernel_pid(s.server_pid, kernel["id"], deadline) if s.server_pid else None
    kpeak = _Peak(kpid) if kpid else None
    if kpeak:
        kpeak.start()
    ws = connect()
    start, outputs_all, errors, cells = time.monotonic(), [], [], 0
    last_ping = start
    killed = False
    try:
        for cell in nb.cells:
            if cell.cell_type != "code" or not cell.source.strip():
                continue
            cells += 1
            msg_id = uuid.uuid4().hex
            ws.send(json.dumps({
                "header": {"msg_id": msg_id, "msg_type": "execute_request", "session": session, "username": user,
                           "version": "5.3", "date": ""},
                "parent_header": {}, "metadata": {}, "channel": "shell",
                "content": {"code": cell.source, "silent": False, "store_history": True,
                            "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}}))
            if kill_at == cells and kill is not None:
                kill()
                killed = True
            idle = replied = False
            while not (idle and replied):
                if time.monotonic() > deadline:
                    raise ClassError(f"{user}: {stem} passed the run's deadline at cell {cells}")
                ws.settimeout(max(1.0, deadline - time.monotonic()))
                try:
                    opcode, data = ws.recv_data(control_frame=True)  # a ping is answered in here, then returned
                    if opcode == websocket.ABNF.OPCODE_PING:
                        now = time.monotonic()
                        s.ping_gap_max_s = max(s.ping_gap_max_s, round(now - last_ping, 2))
                        last_ping = now
                        continue
                    if opcode == websocket.ABNF.OPCODE_PONG:
                        continue
                    why = (f"close frame {int.from_bytes(data[:2], 'big')} {data[2:80].decode(errors='replace')!r}"
                           if len(data) >= 2 else "close frame") if opcode == websocket.ABNF.OPCODE_CLOSE else ""
                except (websocket.WebSocketException, OSError) as exc:
                    opcode, why = websocket.ABNF.OPCODE_CLOSE, f"{type(exc).__name__}: {exc}"
                if opcode == websocket.ABNF.OPCODE_CLOSE:
                    if killed:
                        raise _Killed(f"{stem}, cell {cells}")
                    ws = _reconnect(connect, ws, s, f"{stem}, cell {cells}: {why}", deadline)
                    last_ping = time.monotonic()
                    continue
                msg = _decode(data if opcode == websocket.ABNF.OPCODE_BINARY else data.decode("utf-8"))
                if msg.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                kind, content = msg["msg_type"], msg["content"]
                if kind == "status" and content.get("execution_state") == "idle":
                    idle = True
                elif kind == "execute_reply":
                    replied = True
                    if content.get("status") != "ok":
                        errors.append(f"cell {cells}: {content.get('ename')}: {content.get('evalue')}")
                elif kind == "stream":
                    outputs_all.append({"output_type": "stream", "name": content["name"], "text": content["text"]})
                elif kind in ("display_data", "execute_result"):
                    outputs_all.append({"output_type": kind, "data": content.get("data", {}),
                                        "metadata": content.get("metadata", {})})
            if errors:
                break
    finally:
        seconds = round(time.monotonic() - start, 2)
        ws.close()
        idle = kpeak.sample() if kpeak else 0  # what the kernel keeps while its tab stays open
        if kpeak:
            kpeak.stop()
        if not killed:
            if keep:
                s.open_kernels.append(kernel["id"])
            else:
                try:
                    hub.request("DELETE", f"{base}/kernels/{kernel['id']}")
                except ClassError:
                    pass
    checks = checks_in_outputs(outputs_all)
    mib = 2**20
    return {"seconds": seconds, "cells": cells, "cell_errors": len(errors),
            "kernel_peak_rss_mib": round(kpeak.peak / mib, 1) if kpeak else None,
            "kernel_idle_rss_mib": round(idle / mib, 1) if kpeak else None,
            "kernel_threads_max": kpeak.threads if kpeak else None,
            "errors": errors, "checks": len(checks), "held": sum(c.holds is True for c in checks),
            "explained": sum(c.holds is not True and bool(c.otherwise.strip()) for c in checks),
            "unexplained": sum(c.holds is not True and not c.otherwise.strip() for c in checks),
            "lines": [c.text for c in checks]}


def _reconnect(connect: Any, ws: Any, s: Student, where: str, deadline: float) -> Any:
    """The server closed the kernel's websocket: open it again, as JupyterLab does (a few tries)."""
    try:
        ws.close()
    except Exception:  # noqa: BLE001 - it is closed already
        pass
    s.closes.append(where)
    last: Exception | None = None
    for attempt in range(10):
        try:
            new = connect()
            s.reconnects += 1
            return new
        except Exception as exc:  # noqa: BLE001 - retried, then named
            last = exc
        if time.monotonic() + 2 > deadline:
            break
        time.sleep(min(2.0, 0.2 * 2 ** attempt))
    raise ClassError(f"{s.name}: the server closed the kernel's websocket ({where}) and it could not be "
                     f"opened again: {last!r}")


def _restart(hub: LocalHub, s: Student, old_pid: int, deadline: float) -> int:
    """After the kill: what a student's browser tab does until their server is back; the new pid."""
    while time.monotonic() < deadline:
        try:  # the tab retrying: the proxy sends a request for a dead server to the hub
            hub.request("GET", f"{hub.url}/user/{s.name}/api/status", timeout=10)
        except (ClassError, OSError):
            pass
        server = (hub.api("GET", f"/users/{s.name}").get("servers") or {}).get("")
        if not server:  # the hub has seen it stop: start it again
            try:
                hub.api("POST", f"/users/{s.name}/server")
            except ClassError:
                pass  # already pending
        else:
            pid = (server.get("state") or {}).get("pid")
            if server.get("ready") and pid and pid != old_pid:
                return int(pid)
        time.sleep(0.5)
    raise ClassError(f"{s.name}: the server was not back before the deadline after it was killed")


def _ready(hub: LocalHub, s: Student, deadline: float) -> dict[str, Any]:
    while True:
        model = hub.api("GET", f"/users/{s.name}")
        server = (model.get("servers") or {}).get("", {})
        if server.get("ready"):
            return server
        if time.monotonic() > deadline:
            raise ClassError(f"{s.name}: the server was not ready before the deadline")
        time.sleep(0.3)


def _student(hub: LocalHub, s: Student, t0: float, deadline: float, notebooks: tuple[str, ...], *,
             kill: bool = False, keep: bool = False) -> None:
    peaks: list[_Peak] = []
    try:
        hub.api("POST", f"/users/{s.name}")
        hub.api("POST", f"/users/{s.name}/server")
        server = _ready(hub, s, deadline)
        s.server_ready_s = round(time.monotonic() - t0, 2)
        pid = (server.get("state") or {}).get("pid")
        s.server_pid = int(pid) if pid else None
        if pid:
            peaks.append(_Peak(int(pid), hub.tmp_dir(s.name)))
            peaks[-1].start()
        for stem in notebooks:
            victim = kill and stem == notebooks[-1] and pid
            when: dict[str, float] = {}

            def strike() -> None:
                when["t"] = time.monotonic()
                s.killed["processes"] = _kill_tree(int(pid))

            try:
                s.notebooks[stem] = _run_notebook(hub, s, stem, deadline, kill_at=3 if victim else None,
                                                  kill=strike if victim else None, keep=keep)
            except _Killed as where:
                s.killed.update(at_s=round(when["t"] - t0, 2), where=str(where))
                pid = _restart(hub, s, int(pid), deadline)
                s.server_pid = pid
                s.killed["back_s"] = round(time.monotonic() - when["t"], 2)
                peaks.append(_Peak(pid, hub.tmp_dir(s.name)))
                peaks[-1].start()
                names = {f["name"] for f in hub.request("GET", f"{hub.url}/user/{s.name}/api/contents")["content"]}
                s.killed["files_kept"] = all(f"{n}.ipynb" in names for n in notebooks)
                s.notebooks[stem] = _run_notebook(hub, s, stem, deadline, keep=keep)  # the student runs it again
        s.finished_s = round(time.monotonic() - t0, 2)
    except Exception as exc:  # noqa: BLE001 - reported per student, the class goes on
        s.error = f"{type(exc).__name__}: {exc}"
    finally:
        for kid in s.open_kernels:  # the tabs closed at the end of the class
            try:
                hub.request("DELETE", f"{hub.url}/user/{s.name}/api/kernels/{kid}")
            except (ClassError, OSError):
                pass
        if peaks:
            mib = 2**20
            s.peak_rss_mib = round(max(p.stop() for p in peaks) / mib, 1)
            s.server_rss_mib = round(max(p.root_peak for p in peaks) / mib, 1)
            s.threads_max = max(p.threads for p in peaks)
            s.tmp_peak_mib = round(max(p.folder_bytes for p in peaks) / mib, 1)
            s.cpu_s = round(sum(p.cpu_s for p in peaks), 1)


def _check_notebooks(notebooks: Any) -> tuple[str, ...]:
    found = chapter_notebooks()
    if notebooks is None:
        return found
    if isinstance(notebooks, str) or not isinstance(notebooks, (list, tuple)) or not notebooks:
        raise ValueError(f"notebooks must be a non-empty list of notebook names (or None: all), got {notebooks!r}")
    stems = tuple(str(n).removesuffix(".ipynb") for n in notebooks)
    unknown = [n for n in stems if n not in found]
    if unknown:
        raise ValueError(f"notebooks {unknown} are not in notebooks/; choose from {', '.join(found)}")
    return stems


def run_class(students: int, *, notebooks: list[str] | tuple[str, ...] | None = None, quick: bool | None = None,
              keep_kernels: bool = False, timeout_s: float = 900, proxy: str | None = None,
              kill: int | None = None, one_each: bool = False) -> dict[str, Any]:
    """Run ``students`` simulated students at once on a fresh local hub; the measurements as a dict.

    ``notebooks``: the notebooks each student runs, in order (default: every notebook of
    ``notebooks/``); with ``one_each`` student ``i`` (from 1) runs only the ``i``-th of them (counting
    round). ``quick``: the mode (default: ``config.yaml``'s ``singleuser.extraEnv``).
    ``keep_kernels``: leave each notebook's kernel open until the student has run them all.
    ``kill``: the number (1..students) of the student whose server is killed in the middle of the
    last notebook (see the module docstring)."""
    if isinstance(students, bool) or not isinstance(students, int) or not 1 <= students <= MAX_STUDENTS:
        raise ValueError(f"students must be 1..{MAX_STUDENTS}, got {students!r}")
    if kill is not None and (isinstance(kill, bool) or not isinstance(kill, int) or not 1 <= kill <= students):
        raise ValueError(f"kill must be a student's number 1..{students} (or None), got {kill!r}")
    if not isinstance(one_each, bool):
        raise ValueError(f"one_each must be True or False, got {one_each!r}")
    stems = _check_notebooks(notebooks)
    proxy = proxy or find_proxy()
    if proxy is None:
        raise ClassError("configurable-http-proxy not found: `make` installs it with npm into .venv/chp "
                         "(or npm install -g configurable-http-proxy), or set D2L_ASYNC_CHP")
    from d2l_async.devices import describe_machine

    load_before = os.getloadavg()
    roster = [Student(f"student{i + 1}") for i in range(students)]
    with LocalHub(proxy=proxy, quick=quick) as hub:
        t0 = time.monotonic()
        deadline = t0 + timeout_s
        threads = [threading.Thread(target=_student,
                                    args=(hub, s, t0, deadline, (stems[i % len(stems)],) if one_each else stems),
                                    kwargs={"kill": i + 1 == kill, "keep": keep_kernels},
                                    name=f"class-{s.name}", daemon=True) for i, s in enumerate(roster)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=max(1.0, deadline - time.monotonic() + 30))
        wall = round(time.monotonic() - t0, 2)
        hub_log = hub.log_tail()
        # the servers log into the hub's log: a websocket the server closed says why there
        full = (hub.dir / "hub.log").read_text(errors="replace") if (hub.dir / "hub.log").exists() else ""
        ping_timeouts = full.count("WebSocket ping timeout")
        quick_used, env_used, jupyter_files = hub.quick, dict(hub.env), hub.jupyter_files
    time.sleep(1.0)  # the proxy and servers get a moment after the hub's exit
    left = hub.leftovers()
    shutil.rmtree(hub.dir, ignore_errors=True)
    peaks = [s.peak_rss_mib for s in roster if s.peak_rss_mib]
    per_student = []
    for s in roster:
        row = {**asdict(s), "checks_ok": s.checks_ok}
        for private in ("server_pid", "open_kernels"):
            row.pop(private)
        per_student.append(row)
    return {
        "students": students, "quick": quick_used, "mode": "quick" if quick_used else "default",
        "env": env_used, "jupyter_files": jupyter_files, "keep_kernels": keep_kernels,
        "notebooks": list(stems), "wall_s": wall,
        "killed": roster[kill - 1].name if kill else None,
        "reconnects": sum(s.reconnects for s in roster), "ws_ping_timeouts": ping_timeouts,
        "machine": describe_machine(), "cpus": os.cpu_count(), "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "peak_rss_mib_max": max(peaks) if peaks else None,
        "finished_s_max": max((s.finished_s for s in roster if s.finished_s is not None), default=None),
        "all_ok": all(s.checks_ok for s in roster) and all(
            s.killed.get("files_kept") for s in roster if kill and s.name == roster[kill - 1].name),
        "leftover_processes": left,
        "per_student": per_student,
        "hub_log_tail": "" if all(s.checks_ok for s in roster) else hub_log,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python deploy/jupyterhub/local_class.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--students", type=int, default=2, help=f"simulated students at once (1..{MAX_STUDENTS}; default 2)")
    p.add_argument("--notebooks", nargs="+", default=None, help="the notebooks each runs (default: every one)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--default-mode", action="store_true", help="the notebooks' default workloads")
    mode.add_argument("--quick", action="store_true", help="quick mode (default: config.yaml's singleuser.extraEnv)")
    p.add_argument("--keep-kernels", action="store_true", help="leave every notebook's kernel open until the end")
    p.add_argument("--timeout", type=float, default=900, help="deadline for the whole class in seconds (default 900)")
    p.add_argument("--one-each", action="store_true", help="student K runs only the K-th notebook (counting round)")
    p.add_argument("--kill", type=int, default=None, metavar="K",
                   help="kill student K's server in the middle of the last notebook (it comes back and reruns it)")
    args = p.parse_args(argv)
    quick = False if args.default_mode else (True if args.quick else None)
    result = run_class(args.students, notebooks=args.notebooks, quick=quick, keep_kernels=args.keep_kernels,
                       timeout_s=args.timeout, kill=args.kill, one_each=args.one_each)
    print(json.dumps(result, indent=2))
    return 0 if result["all_ok"] and not result["leftover_processes"] else 1


if __name__ == "__main__":
    sys.exit(main())
