"""Teaching with JupyterHub: a class on a real local hub, one student's server killed, and the hub files.

The class test starts JupyterHub with configurable-http-proxy on 127.0.0.1 (local-process spawner,
dummy authenticator); three simulated students each start a server and run one notebook (01, 07,
01) in quick mode through the REST and kernel APIs; student 2's server is killed in the middle of
notebook 07 and must come back with its files while the others carry on; every lesson check must be
✔ or explained, and no process of the run may be left. `make` installs the proxy with npm (into
.venv/chp); without it the hub tests skip, except under CI=true.

``deploy/jupyterhub/config.yaml`` must deploy as shipped: it validates against the Zero to
JupyterHub chart's own schema (vendored with its licence, ``z2jh-4.4.0/``), its image's jupyterhub
has the chart's hub's major version, it sets up HTTPS, and its placeholder authentication admits
nobody (run on a local hub).
"""

from __future__ import annotations

import sys
import urllib.parse
from pathlib import Path

import pytest
import yaml

from d2l_async.config import REPO_URL

from ..conftest import skip_or_fail

ROOT = Path(__file__).parents[2]
DEPLOY = ROOT / "deploy" / "jupyterhub"
sys.path.insert(0, str(DEPLOY))
import first_lecture  # noqa: E402
import local_class  # noqa: E402
import nbgitpuller_link  # noqa: E402

sys.path.remove(str(DEPLOY))


def _proxy() -> str:
    proxy = local_class.find_proxy()
    if proxy is None:
        skip_or_fail("configurable-http-proxy is not installed (make installs it with npm into .venv/chp)")
    return proxy


@pytest.mark.timeout(900)
def test_a_class_of_three_on_a_local_hub_with_one_server_killed_mid_notebook():
    """One notebook per student (01, 07, 01): student 2's server is killed in 07."""
    result = local_class.run_class(3, notebooks=local_class.SHORT_CLASS, quick=True, timeout_s=780, proxy=_proxy(),
                                   kill=2, one_each=True)
    short = local_class.SHORT_CLASS
    for i, s in enumerate(result["per_student"]):
        assert not s["error"], f"{s['name']}: {s['error']}\n{result['hub_log_tail']}"
        assert list(s["notebooks"]) == [short[i % len(short)]]
        for stem, nb in s["notebooks"].items():
            assert nb["cell_errors"] == 0, (s["name"], stem, nb["errors"])
            assert nb["checks"] > 0 and nb["unexplained"] == 0, (s["name"], stem, nb["lines"])
            assert nb["kernel_peak_rss_mib"] > 50, (s["name"], stem, "the kernel's memory was not measured")
        assert s["peak_rss_mib"] > 50, "the server's memory was not measured"
        assert 0 < s["server_rss_mib"] < s["peak_rss_mib"] and s["threads_max"] > 2 and s["cpu_s"] > 0
        assert s["server_ready_s"] < s["finished_s"]
    first, killed, third = result["per_student"]
    others = [first, third]
    assert result["killed"] == killed["name"] == "student2"
    assert killed["killed"]["processes"] >= 2  # the server and its kernel
    assert killed["killed"]["where"] == "07_automatic_parallelism, cell 3"
    assert killed["killed"]["files_kept"] is True and killed["killed"]["back_s"] < 120
    assert all(not o["killed"] for o in others)
    assert result["all_ok"]
    assert result["leftover_processes"] == [], result["leftover_processes"]


def test_run_class_is_bounded():
    with pytest.raises(ValueError, match="1..16"):
        local_class.run_class(17)
    with pytest.raises(ValueError, match="1..16"):
        local_class.run_class(0)
    with pytest.raises(ValueError, match=r"kill must be a student's number 1\.\.3"):
        local_class.run_class(3, kill=4)
    with pytest.raises(ValueError, match=r"notebooks \['99_nothing'\] are not in notebooks/"):
        local_class.run_class(1, notebooks=["99_nothing"])
    with pytest.raises(ValueError, match="students must be 1..200"):
        first_lecture.first_lecture(201)
    with pytest.raises(ValueError, match="fail must name students 1..3"):
        first_lecture.first_lecture(3, fail=(4,))
    with pytest.raises(ValueError, match="one_each must be True or False"):
        local_class.run_class(1, one_each="yes")
    with pytest.raises(ValueError, match=r"retry_after_s must be \(min, max\)"):
        first_lecture.first_lecture(3, retry_after_s=(4, 2))


def test_a_class_runs_every_notebook_by_default():
    """Whatever notebooks/ holds (the chapter grows and splits): the default class runs all of it."""
    assert local_class.chapter_notebooks() == tuple(sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb")))
    assert local_class._check_notebooks(None) == local_class.chapter_notebooks()


def test_nbgitpuller_link_points_at_this_repository():
    url = nbgitpuller_link.link("https://hub.example.edu/", notebook="07_automatic_parallelism.ipynb")
    parsed = urllib.parse.urlparse(url)
    assert parsed.netloc == "hub.example.edu" and parsed.path == "/hub/user-redirect/git-pull"
    q = urllib.parse.parse_qs(parsed.query)
    assert q["repo"] == [REPO_URL] and q["branch"] == ["main"]
    assert q["urlpath"][0].endswith("/notebooks/07_automatic_parallelism.ipynb")
    with pytest.raises(ValueError, match="choose one of"):
        nbgitpuller_link.link("https://hub.example.edu", notebook="99_nothing")
    with pytest.raises(ValueError, match="hub URL"):
        nbgitpuller_link.link("hub.example.edu")


def test_z2jh_config_has_measured_guarantees_culling_and_the_binder_image():
    cfg = yaml.safe_load((DEPLOY / "config.yaml").read_text())
    single = cfg["singleuser"]
    mem, cpu = single["memory"], single["cpu"]

    def gib(text: str) -> float:
        value, unit = float(str(text)[:-1]), str(text)[-1]
        return value / 1024 if unit == "M" else value

    assert 0 < gib(mem["guarantee"]) <= gib(mem["limit"])
    assert 0 < cpu["guarantee"] <= cpu["limit"]
    assert cfg["cull"]["enabled"] is True and cfg["cull"]["timeout"] > 0
    assert "repo2docker" in (DEPLOY / "config.yaml").read_text()
    assert single["defaultUrl"] == "/lab"


def test_z2jh_guarantees_follow_the_measurement():
    """config.yaml's guarantees cover what benchmarks/bench_class.py measured (results/class.json)."""
    import json

    measured = json.loads((ROOT / "benchmarks" / "results" / "class.json").read_text())["capacity"]
    single = yaml.safe_load((DEPLOY / "config.yaml").read_text())["singleuser"]
    guarantee = str(single["memory"]["guarantee"])
    gib = float(guarantee[:-1]) / (1024 if guarantee.endswith("M") else 1)
    assert gib * 1024 >= measured["peak_rss_mib"], (guarantee, measured["peak_rss_mib"])
    assert abs(single["cpu"]["guarantee"] - 1 / measured["students_per_core"]) < 0.05, \
        (single["cpu"]["guarantee"], measured["students_per_core"])


# -- config.yaml deploys as shipped --------------------------------------------------------------
CHART = next(DEPLOY.glob("z2jh-*"))  # the vendored chart files, named by the chart's version
CHART_VERSION = CHART.name.removeprefix("z2jh-")


def _merged(defaults: dict, values: dict) -> dict:
    out = dict(defaults)
    for k, v in values.items():
        out[k] = _merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def test_config_yaml_is_valid_for_the_chart_as_helm_checks_it():
    """helm validates the chart's defaults with the user's values merged in against values.schema.yaml."""
    import jsonschema

    schema = yaml.safe_load((CHART / "values.schema.yaml").read_text())
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    cfg = yaml.safe_load((DEPLOY / "config.yaml").read_text())
    validator = jsonschema.Draft7Validator(schema)
    assert [e.message for e in validator.iter_errors(_merged(defaults, cfg))] == []
    # the check can fail: a misspelt key and a wrong type are caught
    wrong = _merged(defaults, {"singleuser": {"memroy": {"limit": "2G"}}, "cull": {"timeout": "an hour"}})
    assert len(list(validator.iter_errors(wrong))) == 2
    assert (CHART / "LICENSE").read_text().startswith("BSD 3-Clause License")


def test_the_image_s_jupyterhub_has_the_chart_hub_s_major_version():
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    pins = dict(line.split("==") for line in (ROOT / "binder" / "constraints.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    assert chart["appVersion"].split(".")[0] == pins["jupyterhub"].split(".")[0], (chart["appVersion"], pins["jupyterhub"])
    assert "jupyterhub>=5,<6" in (ROOT / "binder" / "requirements.txt").read_text()


def test_the_deploy_docs_give_the_exact_helm_commands_for_the_vendored_chart():
    docs = (DEPLOY / "README.md").read_text()
    assert "helm repo add jupyterhub https://hub.jupyter.org/helm-chart/" in docs
    assert "helm repo update" in docs
    flat = " ".join(docs.replace("\\\n", " ").split())
    assert (f"helm upgrade --cleanup-on-fail --install class jupyterhub/jupyterhub --namespace class "
            f"--create-namespace --version={CHART_VERSION} --values deploy/jupyterhub/config.yaml") in flat
    assert f"--version={CHART_VERSION}" in (DEPLOY / "config.yaml").read_text()


def test_config_yaml_serves_https():
    https = yaml.safe_load((DEPLOY / "config.yaml").read_text())["proxy"]["https"]
    assert https["enabled"] is True and https["type"] == "letsencrypt"
    assert https["hosts"] and https["letsencrypt"]["contactEmail"]


@pytest.mark.timeout(300)
def test_config_yaml_s_placeholder_authentication_admits_nobody(tmp_path):
    """Its hub.config run on a local hub: no login succeeds, whatever the name or password; the
    class test's own configuration, beside it, does let a student in (the check can tell)."""
    hub_config = yaml.safe_load((DEPLOY / "config.yaml").read_text())["hub"]["config"]
    proxy = _proxy()
    with local_class.LocalHub(proxy=proxy, hub_config=hub_config, workdir=tmp_path / "placeholder") as hub:
        tries = [("instructor", "x"), ("instructor", ""), ("student1", "password"), ("admin", "admin")]
        assert [hub.login(u, p) for u, p in tries] == [False] * len(tries)
        assert hub.proc.poll() is None, "the hub did not start with config.yaml's hub.config"
    with local_class.LocalHub(proxy=proxy, workdir=tmp_path / "dummy") as hub:
        assert hub.login("student1", "anything") is True


# -- config.yaml for a class of 200 --------------------------------------------------------------


def _config() -> dict:
    return yaml.safe_load((DEPLOY / "config.yaml").read_text())


def _measured() -> dict:
    import json

    return json.loads((ROOT / "benchmarks" / "results" / "class.json").read_text())


def test_the_hub_runs_the_mode_the_capacity_was_measured_in():
    """config.yaml sets the mode explicitly, and class.json measured every notebook in that mode."""
    env = {k: str(v) for k, v in (_config()["singleuser"].get("extraEnv") or {}).items()}
    assert "D2L_ASYNC_QUICK" in env, "config.yaml leaves the mode to the default: set D2L_ASYNC_QUICK"
    mode = "quick" if local_class._quick_from(env) else "default"
    measured = _measured()
    assert measured["capacity"]["mode"] == mode
    runs = measured["runs"]
    assert runs and all(r["mode"] == mode for r in runs)
    # every notebook of the chapter as it is now: re-measure (python benchmarks/bench_class.py) when it changes
    assert all(r["notebooks"] == list(local_class.chapter_notebooks()) for r in runs), \
        "class.json was measured on other notebooks than notebooks/ holds: rerun benchmarks/bench_class.py"


def _bytes(text: str) -> int:
    """A memory or storage quantity as Kubernetes reads it (Ki/Mi/Gi) and KubeSpawner (K/M/G: 1024-based)."""
    from jupyterhub.spawner import Spawner

    text = str(text)
    return Spawner(mem_limit=text[:-1] if text.endswith("i") else text).mem_limit


def test_the_pod_s_memory_limit_is_what_the_notebooks_see(tmp_path):
    """KubeSpawner writes singleuser.memory.limit as the container's limit; a pod's cgroup v2 shows it
    to every process, so the machine line and the dashboards' guard (limit minus the pod's use, every
    kernel included) read it, not the node's free memory."""
    from d2l_async._machine import mem_available, read_machine

    limit = _bytes(_config()["singleuser"]["memory"]["limit"])
    used = 1536 * 2**20  # a server and a kernel running
    files = {"proc/self/cgroup": "0::/\n",  # a pod with its own cgroup namespace: its group at the mount point
             "proc/self/mountinfo": "30 25 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n",
             "proc/meminfo": f"MemTotal: {64 * 2**20} kB\nMemAvailable: {48 * 2**20} kB\n",  # the node's
             "sys/fs/cgroup/memory.max": f"{limit}\n", "sys/fs/cgroup/memory.current": f"{used}\n",
             "sys/fs/cgroup/memory.stat": "anon 0\ninactive_file 0\n"}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    free, seen = mem_available(tmp_path)
    assert seen == limit and free == limit - used
    assert f"container limit {limit / 2**30:.1f} GiB" in read_machine(tmp_path).describe()


def test_memory_guarantee_and_limit_cover_the_measured_student():
    """The guarantee covers a student's measured peak (server + the heaviest notebook's kernel); the
    limit also leaves room for one more kernel kept open within the culling window (the largest idle
    one measured); and a student who keeps every kernel open passes it (why kernels are culled)."""
    cap = _measured()["capacity"]
    memory = _config()["singleuser"]["memory"]
    mib = 2**20
    assert _bytes(memory["guarantee"]) / mib >= cap["peak_rss_mib"], (memory["guarantee"], cap["peak_rss_mib"])
    idle = max(r["kernel_idle_rss_mib_max"] or 0 for c in _measured()["classes"] for r in c["per_notebook"].values())
    assert _bytes(memory["limit"]) / mib >= cap["peak_rss_mib"] + idle, (memory["limit"], cap["peak_rss_mib"], idle)
    assert cap["all_kernels_open_peak_rss_mib"] > _bytes(memory["limit"]) / mib


def test_temporary_storage_and_processes_are_decided_in_the_file():
    single = _config()["singleuser"]
    cap = _measured()["capacity"]
    limits, guarantees = single["extraResource"]["limits"], single["extraResource"]["guarantees"]
    assert _bytes(guarantees["ephemeral-storage"]) <= _bytes(limits["ephemeral-storage"])
    assert _bytes(limits["ephemeral-storage"]) / 2**20 >= 10 * max(cap["tmp_peak_mib"], 1)
    text = (DEPLOY / "config.yaml").read_text()
    m = __import__("re").search(r"set podPidsLimit to (\d+)", text)
    assert m and int(m.group(1)) >= 4 * cap["threads_max"], "the pods' process limit, with headroom over the measure"


def test_spawn_limits_and_placeholders_are_sized_for_200_in_five_minutes():
    cfg = _config()
    assert cfg["hub"]["concurrentSpawnLimit"] >= 200
    assert cfg["scheduling"]["userPlaceholder"]["replicas"] >= 200
    assert cfg["hub"]["consecutiveFailureLimit"] > 5  # the chart's 5: one slow node restarts the hub
    assert cfg["prePuller"]["hook"]["enabled"] and cfg["prePuller"]["continuous"]["enabled"]
    lectures = {r["name"]: r for r in _measured()["first_lecture"]}
    shipped = lectures["shipped"]
    assert shipped["ready"] == 200 and shipped["throttled_students"] == 0 and shipped["hub_exited_at_s"] is None
    assert lectures["chart defaults, nodes scaling up"]["throttled_students"] > 0
    assert lectures["chart's failure limit, one slow node"]["hub_exited_at_s"] is not None
    assert lectures["shipped failure limit, one slow node"]["hub_exited_at_s"] is None


def test_jupyter_server_reads_the_kernel_culling_file_where_the_chart_mounts_it():
    from jupyter_core.paths import SYSTEM_CONFIG_PATH

    files = _config()["singleuser"]["extraFiles"]
    culling = next(f for f in files.values() if "MappingKernelManager" in (f.get("data") or {}))
    mount = Path(culling["mountPath"])
    assert str(mount.parent) in SYSTEM_CONFIG_PATH and mount.name == "jupyter_server_config.json"
    mkm = culling["data"]["MappingKernelManager"]
    assert mkm["cull_idle_timeout"] > 0 and mkm["cull_interval"] > 0
    assert mkm["cull_connected"] is True and mkm["cull_busy"] is False


@pytest.mark.timeout(300)
def test_an_idle_kernel_with_its_tab_open_is_culled_on_a_local_hub(tmp_path):
    """config.yaml's kernel culling, read by a real single-user server (its timeouts shortened): a
    kernel whose notebook is still open (a connected websocket) but idle is shut down."""
    import time

    import websocket

    short = {"jupyter_server_config.json": {"MappingKernelManager": {"cull_idle_timeout": 3, "cull_interval": 1}}}
    with local_class.LocalHub(proxy=_proxy(), workdir=tmp_path / "hub", jupyter_overrides=short) as hub:
        assert hub.jupyter_files["jupyter_server_config.json"]["MappingKernelManager"]["cull_connected"] is True
        hub.api("POST", "/users/student1")
        hub.api("POST", "/users/student1/server")
        student = local_class.Student("student1")
        local_class._ready(hub, student, time.monotonic() + 120)
        base = f"{hub.url}/user/student1/api"
        kernel = hub.request("POST", f"{base}/kernels", {"name": "python3"})
        ws = websocket.create_connection(f"ws://127.0.0.1:{hub.port}/user/student1/api/kernels/{kernel['id']}/channels",
                                         header=[f"Authorization: token {hub.token}"], timeout=30)
        try:
            deadline = time.monotonic() + 60
            while any(k["id"] == kernel["id"] for k in hub.request("GET", f"{base}/kernels")):
                assert time.monotonic() < deadline, "the idle kernel was not culled"
                time.sleep(0.5)
        finally:
            ws.close()


@pytest.mark.timeout(300)
def test_lecturers_manage_students_servers_but_cannot_enter_them(tmp_path):
    """config.yaml's instructor role on a local hub: a lecturer lists the class and stops a student's
    server, and is refused at the student's server itself."""
    import time
    import urllib.error
    import urllib.request

    cfg = _config()
    role = dict(cfg["hub"]["loadRoles"]["instructor"], name="instructor", users=["lecturer"])
    assert "access:servers" not in role["scopes"]
    assert cfg["hub"]["config"]["JupyterHub"]["admin_access"] is False
    extra = f"c.JupyterHub.load_roles = c.JupyterHub.load_roles + [{role!r}]"
    with local_class.LocalHub(proxy=_proxy(), workdir=tmp_path / "hub", hub_config=cfg["hub"]["config"],
                              extra_config=extra) as hub:
        # the role's users exist once the hub has loaded it: only the student is created here
        hub.api("POST", "/users/student1")
        hub.api("POST", "/users/student1/server")
        local_class._ready(hub, local_class.Student("student1"), time.monotonic() + 120)
        token = hub.api("POST", "/users/lecturer/tokens", {"note": "test"})["token"]

        def as_lecturer(method: str, url: str) -> int:
            req = urllib.request.Request(url, method=method, headers={"Authorization": f"token {token}"})
            try:
                with urllib.request.urlopen(req, timeout=30) as resp:
                    return resp.status
            except urllib.error.HTTPError as exc:
                return exc.code

        assert as_lecturer("GET", f"{hub.url}/hub/api/users") == 200
        assert as_lecturer("GET", f"{hub.url}/user/student1/api/contents") == 403
        assert as_lecturer("DELETE", f"{hub.url}/hub/api/users/student1/server") in (202, 204)


@pytest.mark.timeout(300)
def test_the_first_lecture_harness_throttles_and_the_hub_exits_after_failures_in_a_row():
    """A small first lecture: past the spawn limit students are told 429 and get in later; spawns
    failing in a row up to the failure limit stop the hub."""
    proxy = _proxy()
    busy = first_lecture.first_lecture(8, arrive_s=2, pod_start_s=3, concurrent_spawn_limit=2, proxy=proxy,
                                       retry_after_s=(2, 4))  # the hub's 30-60 s would only make the test wait
    assert busy["ready"] == 8 and busy["throttled_students"] > 0 and busy["hub_exited_at_s"] is None
    assert 2 <= busy["retry_after_s"][0] <= busy["retry_after_s"][1] <= 4  # the hub was told the range
    assert busy["hub_peak_rss_mib"] > 20 and busy["leftover_processes"] == []
    failing = first_lecture.first_lecture(6, arrive_s=3, pod_start_s=1, consecutive_failure_limit=2, fail=(2, 3),
                                          proxy=proxy, timeout_s=120)
    assert failing["hub_aborted"] and failing["hub_exited_at_s"] is not None and failing["ready"] < 6


def test_the_first_lecture_is_reused_only_with_the_spawn_settings_it_ran_with(tmp_path):
    """bench_class --reuse-first-lecture keeps the saved scenarios (they do not depend on the notebooks)
    and refuses them once config.yaml's spawn settings differ from those they ran with."""
    import json

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_class
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    saved = _measured()
    rows = bench_class.previous_lectures()
    assert [r["name"] for r in rows] == [name for name, _, _ in bench_class.LECTURES]
    assert all(r["measured"] for r in rows)
    saved["first_lecture"][0]["consecutive_failure_limit"] = 5  # "shipped" ran with the chart's value
    (tmp_path / "class.json").write_text(json.dumps(saved))
    with pytest.raises(ValueError, match="consecutive_failure_limit"):
        bench_class.previous_lectures(tmp_path / "class.json")
