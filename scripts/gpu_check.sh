#!/usr/bin/env bash
# `make gpu-check`: every CUDA path of d2l-async on the machine's own CUDA torch, in one command
# (each step has its own time limit, and all of them share GPU_CHECK_BUDGET=450 s: under 8 minutes in all).
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
# step never stops the ones after it (no `set -e`, no pipes whose status could be lost).
#   env       the machine: GPUs, torch, CUDA
#   tests     pytest -m gpu on the test files with gpu-marked tests only (the rest imports plotly/ipywidgets)
#   numbers   scripts/gpu_numbers.py: sync vs async increments, the launch-queue cap, a capture's
#             queue length, NCCL all-reduce blocking vs async -> gpu_numbers.json
#   report    python -m d2l_async report --device cuda --quick (only where plotly imports)
#   nccl      benchmarks/bench_distributed.py on NCCL (only with two GPUs or more)
# Results land in $OUT (the device tool's folder) or build/gpu: gpu_check.log (every step's output),
# gpu_check.json (each step's status and the numbers), gpu_numbers.json, report.html, report.json,
# distributed_nccl.json: six files at most, as the device tool returns eight.
#
# Without CUDA it says so in one line and exits 0.  Exit status otherwise: 1 when a step failed or
# timed out, else 0.  tests/test_gpu_check.py runs this control flow with a stub Python, no GPU needed.
set -u
cd "$(dirname "$0")/.." || exit 2
PY=${GPU_PY:-${PY:-python3}}
DEST=${OUT:-build/gpu}
BUDGET=${GPU_CHECK_BUDGET:-450}  # seconds for all steps: the lent machine's one command stays under 8 minutes
START=$(date +%s)

# -- no CUDA: one line, exit 0
if ! NGPU=$("$PY" -c 'import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)' 2>/dev/null); then
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
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    >> "$LOG" 2>&1 && export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
unset D2L_ASYNC_QUICK

step() {  # step NAME LIMIT_S COMMAND...: run it, append its output to the log, record its status
  local name=$1 limit=$2 rc t0 status left
  shift 2
  left=$(( BUDGET - ($(date +%s) - START) ))
  if (( left < 20 )); then skip "$name" "out of the ${BUDGET} s budget"; return; fi
  (( limit > left )) && limit=$left
  t0=$(date +%s)
  echo "=== $name (limit ${limit} s): $*" >> "$LOG"
  timeout -k 10 "$limit" "$@" >> "$LOG" 2>&1
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
# machine lacks; the rest of the suite does)
GPU_TESTS=$(grep -rl --include='test_*.py' -E 'mark\.gpu|^gpu = ' tests | sort | tr '\n' ' ')

step env 60 "$PY" -c 'import torch, platform
from d2l_async.devices import describe_machine
print("machine:", describe_machine())
print("torch", torch.__version__, "| CUDA", torch.version.cuda, "| python", platform.python_version())
for i in range(torch.cuda.device_count()):
    p = torch.cuda.get_device_properties(i)
    print(f"cuda:{i}: {p.name}, {p.total_memory / 2**30:.0f} GiB, {p.multi_processor_count} SMs")'
# shellcheck disable=SC2086
step tests 240 "$PY" -m pytest -m gpu -q -rfEs -p no:cacheprovider -o addopts="" $GPU_TESTS
step numbers 150 "$PY" scripts/gpu_numbers.py --out "$DEST/gpu_numbers.json"
if "$PY" -c 'import plotly' > /dev/null 2>&1; then
  step report 180 "$PY" -m d2l_async report --device cuda --quick --no-progress --output "$DEST/report.html"
else
  skip report "plotly is not importable by $PY: carry its wheel in .whl/ (see this script's header)"
fi
if [ "$NGPU" -ge 2 ]; then
  step nccl 150 "$PY" benchmarks/bench_distributed.py --backend nccl --repeat 2 --out "$DEST/distributed_nccl.json"
else
  skip nccl "NCCL with one GPU per rank needs two GPUs ($NGPU here)"
fi

# -- the summary: one line per step, and gpu_check.json (statuses + the numbers)
"$PY" - "$STATUS" "$DEST" "$(( $(date +%s) - START ))" <<'PY' >> "$LOG" 2>&1
import json, os, sys
status_path, dest, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3])
steps = []
for line in open(status_path):
    name, status, rc, secs, *why = line.rstrip("\n").split("\t")
    steps.append({"step": name, "status": status, "exit": rc, "seconds": int(secs), "why": why[0] if why else ""})
numbers = os.path.join(dest, "gpu_numbers.json")
out = {"seconds": seconds, "steps": steps,
       "numbers": json.load(open(numbers)) if os.path.exists(numbers) else None}
json.dump(out, open(os.path.join(dest, "gpu_check.json"), "w"), indent=1)
PY
echo "gpu-check: $(awk -F'\t' '{ printf "%s %s, ", $1, $2 }' "$STATUS")$(( $(date +%s) - START )) s; files in $DEST"
bad=$(awk -F'\t' '$2 == "FAIL" || $2 == "TIMEOUT"' "$STATUS" | wc -l)
rm -f "$STATUS"
[ "$bad" -eq 0 ]
