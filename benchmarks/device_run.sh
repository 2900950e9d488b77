#!/usr/bin/env bash
# One run on a GPU machine: the CUDA tests, then benchmarks/device_search.py. The H200 results in
# benchmarks/RESULTS.md come from
#   PYTEST_TIMEOUT=100 BENCH_TIMEOUT=280 bash benchmarks/device_run.sh --queries 250 --cpus 16 --proteome-queries 120
# (the tests and the benchmark: 207 s on the H200).
# Reads the benchmark data from $DATA (default ../shared/data; .devdata/data when that is absent: a copy of
# pfam_homology_pairs_dctdomain and hmmer_examples/tutorial/globins45.fa) and installs a pyhmmer wheel for the
# machine's Python from .whl/ when present. Results go to $OUT, scratch files to $WORK.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-benchmarks/_work/device_out}
WORK=${WORK:-benchmarks/_work/device_work}
DATA=${DATA:-../shared/data}
mkdir -p "$OUT" "$WORK"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD"
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$WORK/site" .whl/*.whl \
        && export PYTHONPATH="$PWD:$WORK/site"
fi
if [ ! -d "$DATA" ] && [ -d .devdata/data ]; then
    DATA=.devdata/data
fi
nvidia-smi -L
python3 -c "import torch, numpy; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'numpy', numpy.__version__)"
timeout "${PYTEST_TIMEOUT:-180}" python3 -m pytest -q -p no:cacheprovider tests/test_search_device.py \
    tests/test_aligner_torch.py 2>&1 | tee "$OUT/pytest.log" | tail -25
timeout "${BENCH_TIMEOUT:-330}" python3 benchmarks/device_search.py --shared "$DATA" --out "$OUT" \
    --work "$WORK" "$@" 2>&1 | tee "$OUT/bench.log" | grep -v '^\[' | tail -30
python3 - "$OUT/device_search.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(json.dumps(r.get("machine")))
for step in ("kernel", "search", "jackhmmer", "proteome"):
    print(step, json.dumps({k: v for k, v in r.get(step, {}).items() if k != "traceback"}, default=float)[:2500])
PY
