"""Teaching with JupyterHub: a class on a real local hub, one student's server killed, and the hub files.

The class test starts JupyterHub with configurable-http-proxy on 127.0.0.1 (local-process spawner,
dummy authenticator); three simulated students each start a server and run notebooks 01 and 07 in
quick mode through the REST and kernel APIs; student 1's server is killed in the middle of notebook
07 and must come back with its files while the others carry on; every lesson check must be ✔ or
explained, and no process of the run may be left. `make` installs the proxy with npm (into
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
    result = local_class.run_class(3, quick=True, timeout_s=780, proxy=_proxy(), kill=1)
    for s in result["per_student"]:
        assert not s["error"], f"{s['name']}: {s['error']}\n{result['hub_log_tail']}"
        assert set(s["notebooks"]) == set(local_class.NOTEBOOKS)
        for stem, nb in s["notebooks"].items():
            assert nb["cell_errors"] == 0, (s["name"], stem, nb["errors"])
            assert nb["checks"] > 0 and nb["unexplained"] == 0, (s["name"], stem, nb["lines"])
        assert s["peak_rss_mib"] > 50, "the server's memory was not measured"
        assert s["server_ready_s"] < s["finished_s"]
    killed, *others = result["per_student"]
    assert result["killed"] == killed["name"] == "student1"
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
