#!/usr/bin/env bash
# Start a one-node Slurm cluster on this machine for CI: munged, slurmctld and slurmd run directly (no
# systemd), with their state, logs and PID files under $TRACKFOLD_SLURM_DIR (default /tmp/trackfold-slurm)
# and the configuration in /etc/slurm (removed again by stop.sh).
# Installs the Debian packages (slurmctld slurmd slurm-client munge) when they are missing; needs root or
# password-less sudo for that and for the daemons. Waits until `sinfo` shows the node idle.
#
#   .ci/slurm/start.sh                      # then: source "$TRACKFOLD_SLURM_DIR/env.sh"; sinfo
#   .ci/slurm/stop.sh                       # stops the daemons by PID
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
STATE=${TRACKFOLD_SLURM_DIR:-/tmp/trackfold-slurm}
NODE=trackfold-ci
WAIT_S=${TRACKFOLD_SLURM_WAIT_S:-60}
MIN_JOB_AGE=${TRACKFOLD_SLURM_MIN_JOB_AGE:-300}
GPUS=${TRACKFOLD_SLURM_GPUS:-1}
ETC=/etc/slurm

log() { printf '[slurm-ci] %s\n' "$*" >&2; }
if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
    as_user() { local user=$1; shift; runuser -u "$user" -- "$@"; }
else
    sudo -n true 2>/dev/null || { log "needs root or password-less sudo"; exit 1; }
    SUDO=(sudo -n)
    as_user() { local user=$1; shift; sudo -n -u "$user" "$@"; }
fi

install_packages() {
    local missing=()
    command -v slurmctld >/dev/null || missing+=(slurmctld)
    command -v slurmd >/dev/null || missing+=(slurmd)
    command -v sinfo >/dev/null || missing+=(slurm-client)
    command -v munged >/dev/null || missing+=(munge)
    [ ${#missing[@]} -eq 0 ] && return 0
    log "installing ${missing[*]}"
    "${SUDO[@]}" apt-get update -q >/dev/null
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        "${missing[@]}" >/dev/null
}

start_munge() {
    if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
        log "munged already running"
        return 0
    fi
    "${SUDO[@]}" mkdir -p /etc/munge /run/munge /var/lib/munge /var/log/munge
    if [ ! -s /etc/munge/munge.key ]; then
        "${SUDO[@]}" mungekey --create --keyfile=/etc/munge/munge.key
    fi
    "${SUDO[@]}" chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge
    "${SUDO[@]}" chmod 0400 /etc/munge/munge.key
    as_user munge /usr/sbin/munged --pid-file=/run/munge/munged.pid
    "${SUDO[@]}" cp /run/munge/munged.pid "$STATE/munged.pid"     # we started it, so stop.sh stops it
    for _ in $(seq 20); do
        munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && return 0
        sleep 0.5
    done
    log "munged did not come up"; exit 1
}

write_config() {
    local cpus mem_mb host
    cpus=$(nproc)
    host=$(hostname -s)
    # RealMemory below the machine's (slurmd drains a node that has less than it claims).
    mem_mb=$(awk '/MemTotal/ {printf "%d", $2 / 1024 * 0.8}' /proc/meminfo)
    sed -e "s|@HOST@|$host|g" -e "s|@NODE@|$NODE|g" -e "s|@STATE@|$STATE|g" -e "s|@CPUS@|$cpus|g" \
        -e "s|@MEM_MB@|$mem_mb|g" -e "s|@GPUS@|$GPUS|g" -e "s|@MIN_JOB_AGE@|$MIN_JOB_AGE|g" \
        -e "s|@SLURM_USER@|root|g" -e "s|@CTLD_PORT@|${TRACKFOLD_SLURMCTLD_PORT:-6817}|g" \
        -e "s|@SLURMD_PORT@|${TRACKFOLD_SLURMD_PORT:-6818}|g" \
        "$HERE/slurm.conf.in" > "$STATE/slurm.conf"
    # One GRES line per fake GPU; /dev/null stands in for the device file (task/none binds nothing).
    : > "$STATE/gres.conf"
    for _ in $(seq "$GPUS"); do
        printf 'NodeName=%s Name=gpu File=/dev/null\n' "$NODE" >> "$STATE/gres.conf"
    done
    # Job steps (srun inside a batch job) read the default /etc/slurm/slurm.conf, not $SLURM_CONF: install
    # the configuration there, unless a configuration we did not write is in the way.
    if [ -e "$ETC/slurm.conf" ] && ! grep -q "^ClusterName=trackfold-ci" "$ETC/slurm.conf"; then
        log "$ETC/slurm.conf exists and is not ours; not touching it"
        return 1
    fi
    "${SUDO[@]}" mkdir -p "$ETC"
    "${SUDO[@]}" cp "$STATE/slurm.conf" "$STATE/gres.conf" "$ETC/"
    printf 'export SLURM_CONF=%s\n' "$ETC/slurm.conf" > "$STATE/env.sh"
    log "node $NODE: $cpus CPUs, ${mem_mb} MB, $GPUS GPU(s) (no device file), MinJobAge=$MIN_JOB_AGE s"
}

wait_idle() {
    local state=""
    for _ in $(seq $((WAIT_S * 2))); do
        state=$(sinfo -h -N -n "$NODE" -o %T 2>/dev/null || true)
        case "$state" in
            idle) log "node idle"; return 0 ;;
            inval*|drain*|down*) break ;;
        esac
        sleep 0.5
    done
    log "node not idle (waited up to ${WAIT_S}s, state: '${state:-no answer}'); daemon logs follow"
    grep -v -e pmix -e "MPI:" "$STATE/slurmctld.log" | tail -n 15 >&2 || true
    grep -v -e pmix -e "MPI:" "$STATE/slurmd.log" | tail -n 15 >&2 || true
    return 1
}

install_packages
if [ -s "$STATE/slurmctld.pid" ] && kill -0 "$(cat "$STATE/slurmctld.pid")" 2>/dev/null; then
    log "already running (state in $STATE); stop it with .ci/slurm/stop.sh"
    exit 0
fi
"${SUDO[@]}" mkdir -p "$STATE/ctld" "$STATE/spool"
"${SUDO[@]}" chown "$(id -u)" "$STATE"
write_config
trap '"$HERE/stop.sh"' ERR     # a failed start leaves no daemon behind
export SLURM_CONF=$ETC/slurm.conf
start_munge
"${SUDO[@]}" env SLURM_CONF="$SLURM_CONF" /usr/sbin/slurmctld -f "$SLURM_CONF" -c   # -c: no state from an earlier run
"${SUDO[@]}" env SLURM_CONF="$SLURM_CONF" /usr/sbin/slurmd -f "$SLURM_CONF" -N "$NODE"
wait_idle
log "ready: source $STATE/env.sh"
