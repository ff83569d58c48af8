# The README's two commands: `make lab` and `make test`. Each sets itself up on a fresh machine.
#
# The virtual environment lives in ./.venv. torch is installed first and explicitly (torch==2.13.0,
# a CPU build on this machine's disk); the package's own dependency on torch is a range, so
# installing `-e .[dev]` afterwards pulls nothing more (and never touches Colab's torch).
# --no-compile: Python compiles a module when it is first imported (most of torch's and the docs tools'
# never are); compiling every file at install took 30 of the 70 s of a fresh .venv here.
# Everything Binder installs is pinned by binder/constraints.txt, and the dev environment is installed
# with the same constraints: `make test` tests exactly the versions Binder (and the hub image) get.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.d2l-async-installed
TORCH  ?= torch==2.13.0
# jupyter refuses to start as root without --allow-root.
ROOT_FLAG := $(shell [ "$$(id -u)" = 0 ] && echo --allow-root)
PYTEST_FLAGS ?=

.PHONY: lab test test-fast test-unit test-notebooks test-browser report figures benchmarks docs gpu-check clean site

CONSTRAINTS := binder/constraints.txt

$(STAMP): pyproject.toml $(CONSTRAINTS)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q --no-compile "$(TORCH)" numpy -c $(CONSTRAINTS)
	$(PY) -m pip install -q --no-compile -e ".[dev]" -c $(CONSTRAINTS)
	@touch $(STAMP)

# configurable-http-proxy (npm) for the local JupyterHub class test (tests/hub); without npm that test
# skips (under CI=true it fails: .ci/run installs nodejs and npm first).
CHP := $(VENV)/chp/node_modules/.bin/configurable-http-proxy
$(CHP):
	@if command -v npm >/dev/null 2>&1; then \
	  npm install --silent --no-fund --no-audit --prefix $(VENV)/chp configurable-http-proxy@5; \
	else echo "npm not found: the JupyterHub class test (tests/hub) will skip"; fi

# For the static site (npm, into .venv/site-js): MathJax, so the pages typeset formulas with nothing
# fetched when read, and axe-core, the accessibility check of site/check_site.py and tests/site.
# Without npm the site's formulas load MathJax from a CDN and the accessibility test skips.
SITE_JS := $(VENV)/site-js/node_modules/.d2l-async-site-js
$(SITE_JS):
	@if command -v npm >/dev/null 2>&1; then \
	  npm install --silent --no-fund --no-audit --prefix $(VENV)/site-js mathjax@3.2.2 axe-core@4.14.1 && touch $@; \
	else echo "npm not found: the site's formulas will load MathJax from a CDN; its accessibility test will skip"; fi

lab: $(STAMP)
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks $(ROOT_FLAG)

# Every notebook executed once, by nbval (a test per cell), in quick mode on one CPU beside a busy process
# (tests/notebook_run.py keeps each run in build/executed/ for the tests that read it: the lesson rules of
# tests/one_core, the figures, the site); then the unit tests, a real browser, the site and a JupyterHub class.
NBVAL := --nbval-lax --nbval-current-env --nbval-cell-timeout=900 --nbval-kernel-startup-timeout=300 -p tests.notebook_run
# With two CPUs or more, two pytest-xdist workers (each test file one unit of work): one executes the
# notebooks and then runs what reads their runs (one_core, site), the other starts with the browser tests.
# (A third worker was no faster on two CPUs: they are busy; see docs/testing.md.)
WORKERS = $(shell $(PYTHON) -c "import os; print(min(2, len(os.sched_getaffinity(0))))" 2>/dev/null || echo 1)
SPREAD = $(if $(filter 1,$(WORKERS)),,-n $(WORKERS) --dist loadscope --no-loadscope-reorder)
test: $(STAMP) $(CHP) $(SITE_JS)
	D2L_ASYNC_QUICK=1 $(PY) -m pytest notebooks tests $(NBVAL) $(SPREAD) -p no:cacheprovider --durations=25 $(PYTEST_FLAGS)

# The edit-test loop (how long it takes: docs/numbers.md): no notebook, browser, site, hub, rank or other
# process (tests/conftest.py), its tests spread over every core (pytest-xdist).
test-fast: $(STAMP)
	D2L_ASYNC_QUICK=1 D2L_ASYNC_TIER=fast $(PY) -m pytest tests -p no:cacheprovider -q -n auto $(PYTEST_FLAGS)

test-unit: $(STAMP) $(CHP)
	D2L_ASYNC_QUICK=1 $(PY) -m pytest tests --ignore=tests/browser --ignore=tests/one_core --ignore=tests/site $(PYTEST_FLAGS)

test-notebooks: $(STAMP)
	D2L_ASYNC_QUICK=1 $(PY) -m pytest notebooks tests/one_core $(NBVAL) -s $(PYTEST_FLAGS)

test-browser: $(STAMP) $(SITE_JS)
	D2L_ASYNC_QUICK=1 $(PY) -m pytest tests/browser tests/site $(PYTEST_FLAGS)

# The headless chapter run: every experiment, a results table, build/report.html.
report: $(STAMP)
	$(PY) -m d2l_async report

# The chapter as a static site: every notebook executed here (default mode) by Jupyter Book, one page
# each, launch buttons to this repository (HUB_URL=https://your.hub adds a JupyterHub/nbgitpuller one).
# It prints a line as each notebook starts and ends. `python site/check_site.py` then checks the pages
# in Chromium (axe-core, and what runs past the page column).
HUB_URL ?= $(D2L_ASYNC_HUB_URL)
site: $(STAMP) $(SITE_JS)
	$(PY) site/build_site.py --out build/site $(if $(HUB_URL),--hub-url $(HUB_URL))

figures: $(STAMP)
	$(PY) scripts/make_figures.py

benchmarks: $(STAMP)
	$(PY) benchmarks/run_all.py

# The generated pages: docs/numbers.md from benchmarks/results/*.json, docs/api.md from the docstrings
# (tests/test_docs_generated.py fails when either is stale).
docs: $(STAMP)
	$(PY) scripts/numbers_page.py
	$(PY) scripts/api_page.py

# On a CUDA machine (a lent GPU machine, Colab): the GPU tests, the GPU numbers and the report on CUDA,
# with that machine's own Python and CUDA torch: no venv, nothing installed (see scripts/gpu_check.sh).
# PYTHON=python3 make gpu-check, or GPU_PY=/path/to/python make gpu-check. Without CUDA: one line, exit 0.
GPU_PY ?= $(PYTHON)
gpu-check:
	GPU_PY="$(GPU_PY)" bash scripts/gpu_check.sh

clean:
	rm -rf build .pytest_cache
