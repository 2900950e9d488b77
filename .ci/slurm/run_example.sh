#!/usr/bin/env bash
# Run the workflow on config/ci_slurm.yaml twice, on this machine (profiles/local) and through the one-node
# Slurm of start.sh (profiles/slurm + snakemake-executor-plugin-slurm), and check both give identical results
# (every file under results/ byte for byte, except the timing files in results/benchmarks/ and measured seconds
# inside tables: workflow_lib/report/compare.py). Each run is bounded by
# `timeout`. Needs start.sh to have run; stop.sh stops the daemons.
#
#   .ci/slurm/start.sh && .ci/slurm/run_example.sh; status=$?; .ci/slurm/stop.sh; exit $status
#
# Environment: TRACKFOLD_SLURM_DIR (start.sh's state, default /tmp/trackfold-slurm), TRACKFOLD_SLURM_WORK
# (where both runs happen, default a new /tmp folder), TRACKFOLD_SLURM_CONFIG (default config/ci_slurm.yaml),
# TRACKFOLD_SLURM_TIMEOUT_S (per run, default 1500), PYTHON (default .venv/bin/python).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
STATE=${TRACKFOLD_SLURM_DIR:-/tmp/trackfold-slurm}
WORK=${TRACKFOLD_SLURM_WORK:-$(mktemp -d /tmp/trackfold-slurm-run.XXXXXX)}
CONFIG=${TRACKFOLD_SLURM_CONFIG:-$ROOT/config/ci_slurm.yaml}
TIMEOUT_S=${TRACKFOLD_SLURM_TIMEOUT_S:-1500}
PY=${PYTHON:-$ROOT/.venv/bin/python}
# The plugin versions this script was run with (used only when the environment has no plugin installed).
PLUGINS=("snakemake-executor-plugin-slurm==2.8.0" "snakemake-executor-plugin-slurm-jobstep==0.6.1")
# First status check after 5 s; start.sh's MinJobAge (300 s) is >= 3x that, so the plugin trusts squeue.
INIT_S=5

log() { printf '[slurm-ci] %s\n' "$*" >&2; }

[ -s "$STATE/env.sh" ] || { log "no cluster: run .ci/slurm/start.sh first"; exit 1; }
# shellcheck source=/dev/null
source "$STATE/env.sh"
sinfo -h -o %T | grep -q -E '^(idle|mix|alloc)' || { log "the Slurm node is not up (sinfo)"; exit 1; }

[ -d "$STATE/plugins" ] && export PYTHONPATH=$STATE/plugins${PYTHONPATH:+:$PYTHONPATH}
if ! "$PY" -c "import snakemake_executor_plugin_slurm, snakemake_executor_plugin_slurm_jobstep" 2>/dev/null; then
    log "installing ${PLUGINS[*]} into $STATE/plugins (not into the environment)"
    "$PY" -m pip install -q --no-deps --target "$STATE/plugins" "${PLUGINS[@]}"
    export PYTHONPATH=$STATE/plugins${PYTHONPATH:+:$PYTHONPATH}
fi

run() {
    local mode=$1; shift
    mkdir -p "$WORK/$mode"
    ln -sfn "$ROOT/example" "$WORK/$mode/example"
    log "$mode run in $WORK/$mode"
    local start=$SECONDS status=0
    timeout --kill-after=30 "$TIMEOUT_S" "$PY" -m snakemake -s "$ROOT/Snakefile" -d "$WORK/$mode" \
        --configfile "$CONFIG" --profile "$ROOT/profiles/$mode" "$@" > "$WORK/$mode.log" 2>&1 || status=$?
    log "$mode run: exit $status after $((SECONDS - start)) s (log: $WORK/$mode.log)"
    if [ "$status" -ne 0 ]; then
        tail -n 40 "$WORK/$mode.log" >&2
        [ "$status" -eq 124 ] && log "$mode run hit the ${TIMEOUT_S}s timeout"
        return "$status"
    fi
}

run local --cores 2
# --cores/--resources cap each submission (group jobs included) to what the one CI node has, and the
# multi-threaded rules ask for at most the node's CPUs (profiles/slurm asks for 4: sbatch would leave them
# pending forever with Reason=PartitionConfig on a 2-CPU node).
node_mem_mb=$(scontrol show node -o | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' | head -n 1)
node_cpus=$(nproc)
[ "$node_cpus" -gt 4 ] && node_cpus=4
run slurm --jobs 4 --cores "$(nproc)" --resources mem_mb="$node_mem_mb" --slurm-no-account --slurm-status-command squeue \
    --slurm-init-seconds-before-status-checks "$INIT_S" --slurm-keep-successful-logs \
    --set-threads search_shard="$node_cpus" template_search="$node_cpus" template_msas="$node_cpus" \
    --set-resources search_shard:cpus_per_task="$node_cpus" template_search:cpus_per_task="$node_cpus" \
    template_msas:cpus_per_task="$node_cpus"

submitted=$(grep -c -E "Job [^ ]+ has been submitted with SLURM jobid" "$WORK/slurm.log" || true)
log "slurm run: $submitted sbatch submissions"
[ "$submitted" -gt 0 ] || { log "no job went through sbatch"; exit 1; }

# Same files, byte for byte, except the benchmark files and the measured seconds inside tables.
if ! "$PY" -m workflow_lib.report.compare "$WORK/local/results" "$WORK/slurm/results" >&2; then
    log "results differ between the local and the Slurm run"
    exit 1
fi
log "local and Slurm results are identical"
