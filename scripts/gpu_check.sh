#!/usr/bin/env bash
# `make gpu-check`: every CUDA path of d2l-async on the machine's own CUDA torch, in one command
# (each step has its own time limit, and all of it -- the torch import, the wheel install and the summary
# included -- shares GPU_CHECK_BUDGET=450 s: under 8 minutes in all).
#
#   PYTHON=python3 make gpu-check          (or GPU_PY=/path/to/python bash scripts/gpu_check.sh)
#
# It uses the Python it is given and installs nothing: d2l_async is imported from this checkout (not
# installed), torch is the machine's CUDA build.  It needs torch, numpy, pandas and pytest (plus
# pytest-timeout); plotly only for the report step, which is skipped without it.  On a machine
# without plotly (the device tool's H200) carry its wheel as the device tool's README says: put
# plotly-*.whl in .whl/ (git-ignored there via .git/info/exclude) and this script installs it into
# /tmp/site and adds that to PYTHONPATH before anything runs.
#
# Steps, each in its own process under `timeout`, each reported PASS / FAIL / TIMEOUT / SKIP: a failing
# step never stops the ones after it (no `set -e`, no pipes whose status could be lost).  The most
# important first, NCCL (whose start-up is the slowest and least predictable) last:
#   env        the machine: GPUs, torch, CUDA
#   numbers    scripts/gpu_numbers.py: the profiler's tables, the GPU's sizing (launch, round trip and
#              kernel times, each lesson's size), sync vs async increments, the launch-queue cap, a
#              capture's queue length, NCCL all-reduce last -> gpu_numbers.json, rewritten after every
#              measurement (a later hang or time limit keeps the numbers before it)
#   tests      pytest -m gpu on the test files with gpu-marked tests only (the rest imports plotly or
#              ipywidgets), NCCL's file left to its own step
#   report     python -m d2l_async report --device cuda --quick (only where plotly imports): the CPU
#              engine's steps quick, the GPU's at the sizes measured for this GPU; report.html and
#              report.json rewritten after every step (a time limit keeps the steps done)
#   nccl_tests tests/distributed/test_gpu.py alone, within NCCL_TESTS_S (60 s)
#   nccl       benchmarks/bench_distributed.py on NCCL (only with two GPUs or more)
# Results land in $OUT (the device tool's folder) or build/gpu: gpu_check.log (every step's output),
# gpu_check.json (each step's status and the numbers), gpu_numbers.json, report.html, report.json,
# distributed_nccl.json: six files at most, as the device tool returns eight.
#
# Without CUDA it says so in one line and exits 0.  Exit status otherwise: 1 when a step failed or
# timed out, else 0.  tests/test_gpu_check.py runs this control flow with a stub Python, no GPU needed,
# and a dry run with a Python that claims a GPU.
set -u
cd "$(dirname "$0")/.." || exit 2
PY=${GPU_PY:-${PY:-python3}}
DEST=${OUT:-build/gpu}
BUDGET=${GPU_CHECK_BUDGET:-450}  # seconds for everything: the lent machine's one command stays under 8 minutes
RESERVE=20                       # kept back for the summary (and a step's kill grace)
NCCL_TESTS_S=60                  # the NCCL test file's whole step: a hung rank start costs no more
START=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - START) - RESERVE )); }
within() {  # within LIMIT FLOOR COMMAND...: under timeout, at most LIMIT s and not past the budget, but
  local limit=$1 floor=$2 l  # at least FLOOR s (the torch probe and the summary must run, even late)
  shift 2
  l=$(left)
  (( limit > l )) && limit=$l
  (( limit < floor )) && limit=$floor
  (( limit < 1 )) && return 124
  timeout -k 5 "$limit" "$@"
}

# -- no CUDA: one line, exit 0 (importing torch is bounded too: a cold CUDA torch takes tens of seconds)
NGPU=$(within 90 10 "$PY" -c 'import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)' 2>/dev/null)
rc=$?
if (( rc == 124 || rc == 137 )); then
  echo "gpu-check: importing torch in $PY took over $(( $(date +%s) - START )) s: nothing run"
  exit 1
fi
if (( rc != 0 )); then
  echo "gpu-check: $PY cannot import torch: no CUDA to check here (nothing run)"
  exit 0
fi
if [ -z "$NGPU" ] || [ "$NGPU" -lt 1 ] 2>/dev/null; then
  echo "gpu-check: no CUDA GPU here (torch.cuda.is_available() is False in $PY): nothing to check"
  exit 0
fi

mkdir -p "$DEST" || exit 2
LOG="$DEST/gpu_check.log"
STATUS="$DEST/gpu_check.status"
: > "$LOG"
: > "$STATUS"
if compgen -G ".whl/*.whl" > /dev/null; then  # carried wheels (plotly for the report)
  within 60 0 "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl >> "$LOG" 2>&1 && export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
unset D2L_ASYNC_QUICK

step() {  # step NAME LIMIT_S COMMAND...: run it, append its output to the log, record its status
  local name=$1 limit=$2 rc t0 status l
  shift 2
  l=$(left)
  if (( l < 15 )); then skip "$name" "out of the ${BUDGET} s budget"; return; fi
  (( limit > l )) && limit=$l
  t0=$(date +%s)
  echo "=== $name (limit ${limit} s): $*" >> "$LOG"
  timeout -k 5 "$limit" "$@" >> "$LOG" 2>&1
  rc=$?
  if (( rc == 0 )); then status=PASS; elif (( rc == 124 || rc == 137 )); then status=TIMEOUT; else status=FAIL; fi
  printf '%s\t%s\t%s\t%s\n' "$name" "$status" "$rc" "$(( $(date +%s) - t0 ))" >> "$STATUS"
  echo "=== $name: $status (exit $rc, $(( $(date +%s) - t0 )) s)" >> "$LOG"
  echo "gpu-check: $name: $status (exit $rc, $(( $(date +%s) - t0 )) s)"
}
skip() {  # skip NAME REASON
  printf '%s\tSKIP\t-\t0\t%s\n' "$1" "$2" >> "$STATUS"
  echo "=== $1: SKIP ($2)" >> "$LOG"
  echo "gpu-check: $1: SKIP ($2)"
}

# the test files that hold gpu-marked tests (none of them imports plotly or ipywidgets, which the lent
# machine lacks; the rest of the suite does); NCCL's runs in its own step, last
NCCL_TESTS=tests/distributed/test_gpu.py
GPU_TESTS=$(grep -rl --include='test_*.py' -E 'mark\.gpu|^gpu = ' tests | sort | grep -vxF "$NCCL_TESTS" | tr '\n' ' ')

step env 45 "$PY" -c 'import torch, platform
from d2l_async.devices import describe_machine
print("machine:", describe_machine())
print("torch", torch.__version__, "| CUDA", torch.version.cuda, "| python", platform.python_version())
for i in range(torch.cuda.device_count()):
    p = torch.cuda.get_device_properties(i)
    print(f"cuda:{i}: {p.name}, {p.total_memory / 2**30:.0f} GiB, {p.multi_processor_count} SMs")'
step numbers 150 "$PY" scripts/gpu_numbers.py --out "$DEST/gpu_numbers.json"
# shellcheck disable=SC2086
step tests 150 "$PY" -m pytest -m gpu -q -rfEs -p no:cacheprovider -o addopts="" $GPU_TESTS
if (( $(left) < 15 )); then
  skip report "out of the ${BUDGET} s budget"
elif within 30 0 "$PY" -c 'import plotly' > /dev/null 2>&1; then
  step report 150 "$PY" -m d2l_async report --device cuda --quick --no-progress --output "$DEST/report.html"
else
  skip report "plotly is not importable by $PY: carry its wheel in .whl/ (see this script's header)"
fi
if [ -f "$NCCL_TESTS" ]; then
  step nccl_tests "$NCCL_TESTS_S" "$PY" -m pytest -m gpu -q -rfEs -p no:cacheprovider -o addopts="" "$NCCL_TESTS"
fi
if [ "$NGPU" -ge 2 ]; then
  step nccl 120 "$PY" benchmarks/bench_distributed.py --backend nccl --repeat 2 --out "$DEST/distributed_nccl.json"
else
  skip nccl "NCCL with one GPU per rank needs two GPUs ($NGPU here)"
fi

# -- the summary: one line per step, and gpu_check.json (statuses + the numbers), inside the reserve
RESERVE=0 within 15 5 "$PY" - "$STATUS" "$DEST" "$(( $(date +%s) - START ))" "$BUDGET" <<'PY' >> "$LOG" 2>&1
import json, os, sys
status_path, dest, seconds, budget = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
steps = []
for line in open(status_path):
    name, status, rc, secs, *why = line.rstrip("\n").split("\t")
    steps.append({"step": name, "status": status, "exit": rc, "seconds": int(secs), "why": why[0] if why else ""})
numbers = os.path.join(dest, "gpu_numbers.json")
try:
    found = json.load(open(numbers)) if os.path.exists(numbers) else None
except ValueError as exc:  # never half-written (it is renamed into place), but say so if it is
    found = {"error": f"gpu_numbers.json unreadable: {exc}"}
out = {"seconds": seconds, "budget": budget, "steps": steps, "numbers": found}
json.dump(out, open(os.path.join(dest, "gpu_check.json"), "w"), indent=1)
PY
echo "gpu-check: $(awk -F'\t' '{ printf "%s %s, ", $1, $2 }' "$STATUS")$(( $(date +%s) - START )) s; files in $DEST"
bad=$(awk -F'\t' '$2 == "FAIL" || $2 == "TIMEOUT"' "$STATUS" | wc -l)
rm -f "$STATUS"
[ "$bad" -eq 0 ]
