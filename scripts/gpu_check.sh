#!/usr/bin/env bash
# `make gpu-check`: on a CUDA machine, the gpu-marked tests and the report on CUDA, in one short run.
# Results land in $OUT (the device tool's folder) or build/gpu: the test log, report.html, report.json.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
DEST=${OUT:-build/gpu}
mkdir -p "$DEST"
export PYTHONUNBUFFERED=1

"$PY" - <<'PY'
import torch
assert torch.cuda.is_available(), "gpu-check needs CUDA: torch.cuda.is_available() is False"
from d2l_async.devices import describe_machine
print("machine:", describe_machine(), "| torch", torch.__version__, "| CUDA", torch.version.cuda)
PY
"$PY" -m pytest tests -m gpu -q -p no:cacheprovider 2>&1 | tee "$DEST/gpu-tests.log"
"$PY" -m d2l_async report --device cuda --output "$DEST/report.html" 2>&1 | tee "$DEST/report.log"
# notebook 10 on GPUs: NCCL, one GPU per rank (needs two); the step times of the benchmark, as JSON
if [ "$("$PY" -c 'import torch; print(torch.cuda.device_count())')" -ge 2 ]; then
  "$PY" benchmarks/bench_distributed.py --backend nccl --repeat 2 --out "$DEST/distributed_nccl.json" 2>&1 | tee "$DEST/distributed.log"
fi
