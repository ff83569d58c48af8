"""Teaching with JupyterHub (issue 22): a class of two on a real local hub, and the hub files.

The class test starts JupyterHub with configurable-http-proxy on 127.0.0.1 (local-process spawner,
dummy authenticator); two simulated students each start a server and run notebooks 01 and 07 in
quick mode through the REST and kernel APIs; every lesson check must be ✔ or explained, and no
process of the run may be left. `make` installs the proxy with npm (into .venv/chp); without it the
test skips, except under CI=true.
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


@pytest.mark.timeout(600)
def test_a_class_of_two_on_a_local_hub():
    proxy = local_class.find_proxy()
    if proxy is None:
        skip_or_fail("configurable-http-proxy is not installed (make installs it with npm into .venv/chp)")
    result = local_class.run_class(2, quick=True, timeout_s=480, proxy=proxy)
    for s in result["per_student"]:
        assert not s["error"], f"{s['name']}: {s['error']}\n{result['hub_log_tail']}"
        assert set(s["notebooks"]) == set(local_class.NOTEBOOKS)
        for stem, nb in s["notebooks"].items():
            assert nb["cell_errors"] == 0, (s["name"], stem, nb["errors"])
            assert nb["checks"] > 0 and nb["unexplained"] == 0, (s["name"], stem, nb["lines"])
        assert s["peak_rss_mib"] > 50, "the server's memory was not measured"
        assert s["server_ready_s"] < s["finished_s"]
    assert result["all_ok"]
    assert result["leftover_processes"] == [], result["leftover_processes"]


def test_run_class_is_bounded():
    with pytest.raises(ValueError, match="1..16"):
        local_class.run_class(17)
    with pytest.raises(ValueError, match="1..16"):
        local_class.run_class(0)


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
