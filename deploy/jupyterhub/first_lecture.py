"""The first lecture: 200 students logging in within five minutes, to a real local JupyterHub.

A Kubernetes cluster cannot be had here, and 200 real single-user servers do not fit in a 2-core
machine; the hub's own part of a class's arrival can be measured all the same. The hub is the real
JupyterHub (``local_class.LocalHub``: configurable-http-proxy, the class test's service token) with
``config.yaml``'s spawn settings (``hub.concurrentSpawnLimit``, ``hub.consecutiveFailureLimit``,
``singleuser.startTimeout``; the chart's defaults where it sets none); only the pods are modelled:
a pod starts a set number of seconds after its spawn begins (scheduling, a node, the image, the
server's own start) and then answers from one shared loopback HTTP server. Measured: how long each
student waits from arrival to a ready server, how many are told "429 Too many users trying to log
in" and wait the hub's ``Retry-After``, what failed spawns do (the hub exits after
``consecutive_failure_limit`` in a row), the hub's and the proxy's memory, the hub's CPU, and its
API's latency meanwhile.

The pod start times are the model's, not measurements: 15 s stands for a node with room (user
placeholders) and the image already pulled (the image pullers); 240 s for a pod that waits for the
cluster autoscaler's new node and a 1.5 GB image pull. Say which when quoting a number.

    python deploy/jupyterhub/first_lecture.py                      # config.yaml's limits, pods ready in 15 s
    python deploy/jupyterhub/first_lecture.py --limit 64 --pod-start 240   # the chart's default, nodes scaling up
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from local_class import CONFIG, ClassError, LocalHub, find_proxy  # noqa: E402

MAX_MODELLED = 200


#: A modelled pod: ``start()`` waits as a pod would (scheduling, a node, the image, the server's own
#: start), then hands the hub the shared loopback answer server; the users in ``fail_users`` get a
#: spawn that fails after the wait (a pod that timed out).
_MODELLED_SPAWNER = """
import asyncio
from jupyterhub.spawner import Spawner
from traitlets import Dict, Float, Integer, List


class ModelledPodSpawner(Spawner):
    delay_s = Float(15.0).tag(config=True)
    delays = Dict().tag(config=True)
    fail_users = List().tag(config=True)
    answer_port = Integer(0).tag(config=True)
    _running = False

    async def start(self):
        await asyncio.sleep(self.delays.get(self.user.name, self.delay_s))
        if self.user.name in self.fail_users:
            raise RuntimeError("the modelled pod did not start")
        self._running = True
        return ("127.0.0.1", self.answer_port)

    async def poll(self):
        return None if self._running else 0

    async def stop(self, now=False):
        self._running = False


c.JupyterHub.spawner_class = ModelledPodSpawner
"""


class _Answer(threading.Thread):
    """One loopback HTTP server that answers for every modelled single-user server."""

    def __init__(self) -> None:
        import http.server

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                body = b"{}"
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        super().__init__(target=self.server.serve_forever, name="class-answer", daemon=True)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.join(timeout=10)


def _hub_config_values(path: Path = CONFIG) -> dict[str, Any]:
    """config.yaml's spawn settings, or the chart's defaults where it sets none."""
    import yaml

    cfg = yaml.safe_load(path.read_text()) or {}
    chart = yaml.safe_load(next(path.parent.glob("z2jh-*/values.yaml")).read_text())
    pick = lambda section, key: (cfg.get(section) or {}).get(key, chart[section][key])  # noqa: E731
    return {"concurrent_spawn_limit": pick("hub", "concurrentSpawnLimit"),
            "consecutive_failure_limit": pick("hub", "consecutiveFailureLimit"),
            "start_timeout": pick("singleuser", "startTimeout")}


def first_lecture(students: int = 200, *, arrive_s: float = 300.0, pod_start_s: float = 15.0,
                  concurrent_spawn_limit: int | None = None, consecutive_failure_limit: int | None = None,
                  start_timeout: float | None = None, fail: tuple[int, ...] = (), proxy: str | None = None,
                  timeout_s: float = 1200.0, retry_after_s: tuple[float, float] | None = None) -> dict[str, Any]:
    """``students`` log in, evenly spread over ``arrive_s`` seconds, to a real local JupyterHub whose
    pods are modelled (each starts ``pod_start_s`` after its spawn begins); the measurements.

    Each student asks the hub for a server (``POST /users/<name>/server``), is told "429 Too many
    users" when ``concurrent_spawn_limit`` spawns are already pending and then waits the hub's
    ``Retry-After`` as its spawn page does, follows the spawn's progress stream until ready or
    failed, and after a failure tries again 10 s later (at most 3 tries). The students numbered in
    ``fail`` (1-based) get a spawn that fails after the wait (a pod that timed out); when that makes
    ``consecutive_failure_limit`` failures in a row, the hub exits, as JupyterHub does (Kubernetes
    would then restart it: here it stays down and the run says when it went). The limits default
    to ``config.yaml``'s (the chart's defaults where it sets none).  ``retry_after_s`` is the range
    the hub draws its ``Retry-After`` from (JupyterHub's ``spawn_throttle_retry_range``; None: the
    hub's own 30-60 s, as a deployment has it; a test may shorten it).

    Returns:
        A dict: the settings, per student the seconds from arrival to a ready server (or why not),
        the throttled answers (and the range of their Retry-After), the failures; the hub's peak
        memory and CPU seconds, the proxy's peak memory, the hub API's latency (median and 95th
        percentile of one request a second), and whether and when the hub exited.
    """
    import psutil

    if isinstance(students, bool) or not isinstance(students, int) or not 1 <= students <= MAX_MODELLED:
        raise ValueError(f"students must be 1..{MAX_MODELLED}, got {students!r}")
    for name, value in (("arrive_s", arrive_s), ("pod_start_s", pod_start_s), ("timeout_s", timeout_s)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1e5:
            raise ValueError(f"{name} must be a number of seconds 0..1e5, got {value!r}")
    if retry_after_s is not None and not (
            isinstance(retry_after_s, tuple) and len(retry_after_s) == 2
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in retry_after_s)
            and 0 < retry_after_s[0] <= retry_after_s[1] < 1e5):
        raise ValueError(f"retry_after_s must be (min, max) seconds with 0 < min <= max, got {retry_after_s!r}")
    bad = [k for k in fail if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= students]
    if bad:
        raise ValueError(f"fail must name students 1..{students}, got {bad}")
    shipped = _hub_config_values()
    limit = shipped["concurrent_spawn_limit"] if concurrent_spawn_limit is None else concurrent_spawn_limit
    failures = shipped["consecutive_failure_limit"] if consecutive_failure_limit is None else consecutive_failure_limit
    start_to = shipped["start_timeout"] if start_timeout is None else start_timeout
    proxy = proxy or find_proxy()
    if proxy is None:
        raise ClassError("configurable-http-proxy not found: `make` installs it with npm into .venv/chp")
    names = [f"student{i + 1}" for i in range(students)]
    answer = _Answer()
    answer.start()
    extra = _MODELLED_SPAWNER + f"""
c.ModelledPodSpawner.delay_s = {float(pod_start_s)!r}
c.ModelledPodSpawner.fail_users = {[names[k - 1] for k in fail]!r}
c.ModelledPodSpawner.answer_port = {answer.port}
c.JupyterHub.concurrent_spawn_limit = {int(limit or 0)}
c.Spawner.consecutive_failure_limit = {int(failures or 0)}
c.Spawner.start_timeout = {int(start_to)}
c.Spawner.http_timeout = 60
"""
    if retry_after_s is not None:
        # JupyterHub 5.5's trait is not tagged config=True ("not recognized"); its tornado setting is read
        extra += ("c.JupyterHub.tornado_settings = {'spawn_throttle_retry_range': "
                  f"{tuple(float(v) for v in retry_after_s)!r}}}\n")
    rows: dict[str, dict[str, Any]] = {n: {"throttled": 0, "failed": 0, "ready_s": None, "error": ""} for n in names}
    latencies: list[float] = []
    retry_after: list[float] = []  # the Retry-After of every 429
    hub_gone: dict[str, float] = {}
    load_before = os.getloadavg()
    with LocalHub(proxy=proxy, extra_config=extra) as hub:
        hub.api("POST", "/users", {"usernames": names})
        t0 = time.monotonic()
        deadline = t0 + timeout_s
        hub_proc = psutil.Process(hub.proc.pid)
        cpu0 = sum(hub_proc.cpu_times()[:2])
        peaks = {"hub_rss": 0, "proxy_rss": 0}
        halt = threading.Event()

        def watch() -> None:
            while not halt.wait(1.0):
                if hub.proc.poll() is not None:
                    hub_gone.setdefault("at_s", round(time.monotonic() - t0, 1))
                    return
                try:
                    peaks["hub_rss"] = max(peaks["hub_rss"], hub_proc.memory_info().rss)
                    peaks["hub_cpu_s"] = sum(hub_proc.cpu_times()[:2]) - cpu0
                    for child in hub_proc.children():
                        peaks["proxy_rss"] = max(peaks["proxy_rss"], child.memory_info().rss)
                except psutil.Error:
                    hub_gone.setdefault("at_s", round(time.monotonic() - t0, 1))
                    return
                start = time.monotonic()
                try:
                    hub.request("GET", f"{hub.url}/hub/api/users/{names[0]}", timeout=10)
                    latencies.append(time.monotonic() - start)
                except (ClassError, OSError):
                    pass

        def student(i: int, name: str) -> None:
            row = rows[name]
            arrive = t0 + arrive_s * i / max(students, 1)
            time.sleep(max(0.0, arrive - time.monotonic()))
            tries = 0
            while time.monotonic() < deadline and tries < 3 and not hub_gone:
                status, headers = _post_spawn(hub, name)
                if status == 429:
                    row["throttled"] += 1
                    wait = float(headers.get("retry-after", 30))  # _post_spawn's keys are lower case
                    retry_after.append(wait)
                    time.sleep(wait)
                    continue
                if status in (201, 202, 400):  # 400: already running or pending
                    outcome = _follow_progress(hub, name, deadline)
                else:  # a spawn that failed within the hub's 10 s answers 500
                    outcome = f"HTTP {status}" if status else "the hub did not answer"
                if outcome == "ready":
                    row["ready_s"] = round(time.monotonic() - arrive, 1)
                    row["error"] = ""
                    return
                row["failed"] += 1
                row["error"] = outcome
                tries += 1
                time.sleep(10)

        watcher = threading.Thread(target=watch, name="class-watch", daemon=True)
        watcher.start()
        threads = [threading.Thread(target=student, args=(i, n), name=f"class-{n}", daemon=True)
                   for i, n in enumerate(names)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=max(1.0, deadline - time.monotonic() + 30))
        wall = round(time.monotonic() - t0, 1)
        halt.set()
        watcher.join(timeout=10)
        if hub.proc.poll() is not None:
            hub_gone.setdefault("at_s", wall)
        log = (hub.dir / "hub.log").read_text(errors="replace") if (hub.dir / "hub.log").exists() else ""
    answer.close()
    time.sleep(1.0)
    left = hub.leftovers()
    shutil.rmtree(hub.dir, ignore_errors=True)
    ready = sorted(r["ready_s"] for r in rows.values() if r["ready_s"] is not None)
    lat = sorted(latencies)

    def q(xs: list[float], f: float) -> float | None:
        return round(xs[min(len(xs) - 1, int(f * len(xs)))], 3) if xs else None

    return {
        "students": students, "arrive_s": arrive_s, "pod_start_s": pod_start_s, "modelled": "the pods",
        "concurrent_spawn_limit": limit, "consecutive_failure_limit": failures, "start_timeout": start_to,
        "fail": list(fail), "wall_s": wall,
        "ready": len(ready), "never_ready": students - len(ready),
        "ready_s_median": q(ready, 0.5), "ready_s_p95": q(ready, 0.95), "ready_s_max": ready[-1] if ready else None,
        "throttled_students": sum(r["throttled"] > 0 for r in rows.values()),
        "throttled_answers": sum(r["throttled"] for r in rows.values()),
        "retry_after_s": [min(retry_after), max(retry_after)] if retry_after else None,
        "failed_spawns": sum(r["failed"] for r in rows.values()),
        "hub_exited_at_s": hub_gone.get("at_s"),
        "hub_aborted": "consecutive spawn failures" in log,
        "hub_peak_rss_mib": round(peaks["hub_rss"] / 2**20, 1), "hub_cpu_s": round(peaks.get("hub_cpu_s", 0.0), 1),
        "proxy_peak_rss_mib": round(peaks["proxy_rss"] / 2**20, 1),
        "api_latency_s_median": q(lat, 0.5), "api_latency_s_p95": q(lat, 0.95),
        "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in os.getloadavg()],
        "leftover_processes": left,
        "errors": sorted({r["error"] for r in rows.values() if r["error"]})[:5],
    }


def _post_spawn(hub: LocalHub, name: str) -> tuple[int, dict[str, str]]:
    """Ask for ``name``'s server; the HTTP status (0: no answer) and headers (names in lower case)."""
    req = urllib.request.Request(f"{hub.url}/hub/api/users/{name}/server", data=b"{}", method="POST",
                                 headers={"Authorization": f"token {hub.token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, {k.lower(): v for k, v in resp.headers.items()}
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in (exc.headers or {}).items()}
    except OSError:
        return 0, {}


def _follow_progress(hub: LocalHub, name: str, deadline: float) -> str:
    """Read the spawn's progress stream, as the spawn page does: ``"ready"`` or why not."""
    req = urllib.request.Request(f"{hub.url}/hub/api/users/{name}/server/progress",
                                 headers={"Authorization": f"token {hub.token}", "Accept": "text/event-stream"})
    try:
        with urllib.request.urlopen(req, timeout=max(5.0, deadline - time.monotonic())) as resp:
            for raw in resp:
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:"):
                    continue
                event = json.loads(line[5:])
                if event.get("ready"):
                    return "ready"
                if event.get("failed"):
                    return f"spawn failed: {event.get('message', '')}"[:120]
    except urllib.error.HTTPError as exc:
        return f"progress: HTTP {exc.code}"
    except (OSError, ValueError) as exc:
        return f"progress: {type(exc).__name__}"
    return "the progress stream ended"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python deploy/jupyterhub/first_lecture.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--students", type=int, default=200, help=f"students logging in (1..{MAX_MODELLED}; default 200)")
    p.add_argument("--arrive", type=float, default=300, help="seconds over which they arrive (default 300)")
    p.add_argument("--pod-start", type=float, default=15, help="modelled seconds from spawn to a ready pod (default 15)")
    p.add_argument("--limit", type=int, default=None, help="hub.concurrentSpawnLimit (default config.yaml's)")
    p.add_argument("--failure-limit", type=int, default=None, help="hub.consecutiveFailureLimit (default config.yaml's)")
    p.add_argument("--fail", type=int, nargs="*", default=(), help="students (1-based) whose spawn fails")
    args = p.parse_args(argv)
    result = first_lecture(args.students, arrive_s=args.arrive, pod_start_s=args.pod_start,
                           concurrent_spawn_limit=args.limit, consecutive_failure_limit=args.failure_limit,
                           fail=tuple(args.fail))
    print(json.dumps(result, indent=2))
    return 0 if not result["leftover_processes"] else 1


if __name__ == "__main__":
    sys.exit(main())
