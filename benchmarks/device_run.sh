#!/usr/bin/env bash
# One call on a lent GPU machine (the device tool): the CUDA tests, then benchmarks/device_search.py.
# Session 30 ran it as: PYTEST_TIMEOUT=120 BENCH_TIMEOUT=300 bash benchmarks/device_run.sh --queries 250 --cpus 16
# (about 5.5 minutes of a 15-minute device budget, machine start included).
# Expects .devdata/data (a copy of the shared data it reads: pfam_homology_pairs_dctdomain and
# hmmer_examples/tutorial/globins45.fa) and .whl/ (a pyhmmer wheel for the machine's Python) carried along.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/device_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD"
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
        && export PYTHONPATH="$PWD:/tmp/site"
fi
if [ ! -d /work/shared/data ] && [ -d .devdata/data ]; then
    mkdir -p /work/shared && cp -r .devdata/data /work/shared/data
fi
nvidia-smi -L
python3 -c "import torch, numpy; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'numpy', numpy.__version__)"
timeout "${PYTEST_TIMEOUT:-180}" python3 -m pytest -q -p no:cacheprovider tests/test_search_device.py \
    tests/test_aligner_torch.py 2>&1 | tee "$OUT/pytest.log" | tail -25
timeout "${BENCH_TIMEOUT:-330}" python3 benchmarks/device_search.py --shared /work/shared/data --out "$OUT" \
    --work /tmp/device_work "$@" 2>&1 | tee "$OUT/bench.log" | grep -v '^\[' | tail -30
python3 - "$OUT/device_search.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(json.dumps(r.get("machine")))
for step in ("kernel", "search", "jackhmmer", "proteome"):
    print(step, json.dumps({k: v for k, v in r.get(step, {}).items() if k != "traceback"}, default=float)[:2500])
PY
