#!/usr/bin/env bash
# Stop what .ci/slurm/start.sh started, by the PIDs it recorded (never by name): slurmd, slurmctld, and
# munged when start.sh started it. Safe to run twice.
set -uo pipefail

STATE=${TRACKFOLD_SLURM_DIR:-/tmp/trackfold-slurm}
if [ "$(id -u)" -eq 0 ]; then SUDO=(); else SUDO=(sudo -n); fi

stop_pid_file() {
    local name=$1 file=$2 pid
    [ -s "$file" ] || return 0
    pid=$(cat "$file")
    if kill -0 "$pid" 2>/dev/null || "${SUDO[@]}" kill -0 "$pid" 2>/dev/null; then
        "${SUDO[@]}" kill -TERM "$pid" 2>/dev/null
        for _ in $(seq 40); do
            "${SUDO[@]}" kill -0 "$pid" 2>/dev/null || break
            sleep 0.25
        done
        if "${SUDO[@]}" kill -0 "$pid" 2>/dev/null; then
            "${SUDO[@]}" kill -KILL "$pid" 2>/dev/null
        fi
        printf '[slurm-ci] stopped %s (pid %s)\n' "$name" "$pid" >&2
    fi
    "${SUDO[@]}" rm -f "$file"
}

stop_pid_file slurmd "$STATE/slurmd.pid"
stop_pid_file slurmctld "$STATE/slurmctld.pid"
stop_pid_file munged "$STATE/munged.pid"
# The configuration start.sh installed (recognised by its cluster name).
for conf in /etc/slurm/slurm.conf /etc/slurm/gres.conf; do
    if [ -e "$conf" ] && grep -q -e "^ClusterName=trackfold-ci" -e "^NodeName=trackfold-ci" "$conf"; then
        "${SUDO[@]}" rm -f "$conf"
    fi
done
