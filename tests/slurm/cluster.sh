#!/usr/bin/env bash
# Single-node Slurm test cluster for this project: real munged, slurmctld and
# slurmd from Debian 12's packages (slurm-wlm 22.05, munge 0.5), started as
# plain background daemons (no systemd, no cgroups, no accounting database).
#
# Usage: bash tests/slurm/cluster.sh install|start|stop|restart|fresh|status|env|logs
#
#   install  apt-get the packages (root; idempotent, instant when present)
#   start    write the config, start munged + slurmctld + slurmd, wait until
#            the node is idle (idempotent: exits 0 at once when already up)
#   stop     cancel every job, stop the daemons, wait until they are gone
#   restart  stop, then start (saved job state is kept)
#   fresh    stop, forget every saved job, then start: an idle cluster with
#            an empty queue whatever an earlier user left (what CI runs)
#   status   print the state; exit 0 when up, 1 when not
#   env      print the `export` lines clients need (none with the defaults)
#   logs     print the tail of the daemon logs
#
# Environment:
#   SWEEP_SLURM_DIR       state folder (spool, state save, logs, pid files);
#                         default /tmp/sweep-slurm
#   SWEEP_SLURM_CONF_DIR  where slurm.conf/gres.conf go; default /etc/slurm,
#                         which the Debian binaries read without SLURM_CONF
#   SWEEP_SLURM_MAX_ARRAY_SIZE  MaxArraySize (default 11: array indices 0-10, so
#                         the tests' plans of a dozen configurations must be split
#                         into several arrays, as a 2,500-configuration plan is on a
#                         cluster with Slurm's default of 1001)
#   SWEEP_SLURM_GPUS      number of fake GPUs declared as gres (default 2;
#                         0 declares no gres at all)
#   SWEEP_SLURM_TIMEOUT   seconds `start` waits for an idle node (default 60)
#
# Layout of the state folder ($SWEEP_SLURM_DIR):
#   ctld/           StateSaveLocation (job state survives a restart)
#   spool/          SlurmdSpoolDir (batch scripts of running jobs)
#   munge/          munged's log, pid and seed files (owned by user munge)
#   dev/            nvidia0..N-1 -> /dev/null, the fake GPUs of gres.conf
#   log/            slurmctld.log, slurmd.log, *.out (daemon stdout/stderr)
#   slurmctld.pid, slurmd.pid
#
# Fake GPUs: slurmd 22.05 silently drops a GPU gres that has no File=
# ("Removing file-less GPU gpu:(null) from final GRES list", then the node is
# INVALID: "gres/gpu count reported lower than configured (0 < 2)"), and
# regular files are rejected ("is not a valid character or block device").
# What works: $SWEEP_SLURM_DIR/dev/nvidiaN symlinks to /dev/null and
# `Name=gpu File=$SWEEP_SLURM_DIR/dev/nvidia[0-1]` with AutoDetect=off.
# Jobs may then ask `--gres=gpu:1` or `--gpus-per-node=1` (select/cons_tres);
# slurmd sets CUDA_VISIBLE_DEVICES to the index of the fake device (0 or 1).
#
# munge: the key stays at Debian's /etc/munge/munge.key and the socket at
# Debian's default /run/munge/munge.socket.2 (so every Slurm client finds it
# without any setting); munged runs as user munge.
set -euo pipefail

STATE_DIR="${SWEEP_SLURM_DIR:-/tmp/sweep-slurm}"
CONF_DIR="${SWEEP_SLURM_CONF_DIR:-/etc/slurm}"
GPUS="${SWEEP_SLURM_GPUS:-2}"
MAX_ARRAY_SIZE="${SWEEP_SLURM_MAX_ARRAY_SIZE:-11}"
START_TIMEOUT="${SWEEP_SLURM_TIMEOUT:-60}"
MUNGE_KEY=/etc/munge/munge.key
MUNGE_SOCKET_DIR=/run/munge
NODE_ADDR=127.0.0.1
CLEAN_ENV=(env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME="${HOME:-/root}" LANG=C.UTF-8)
if [[ "$CONF_DIR" != /etc/slurm ]]; then
    export SLURM_CONF="$CONF_DIR/slurm.conf"
    CLEAN_ENV+=(SLURM_CONF="$SLURM_CONF")
fi

say() { printf 'cluster.sh: %s\n' "$*"; }
die() {
    printf 'cluster.sh: ERROR: %s\n' "$*" >&2
    exit 1
}

[[ "$STATE_DIR" == /?* && "$STATE_DIR" != / ]] || die "SWEEP_SLURM_DIR must be an absolute path other than / (got '$STATE_DIR')"
[[ "$GPUS" =~ ^[0-9]+$ ]] || die "SWEEP_SLURM_GPUS must be a number (got '$GPUS')"
[[ "$MAX_ARRAY_SIZE" =~ ^[1-9][0-9]*$ ]] || die "SWEEP_SLURM_MAX_ARRAY_SIZE must be a positive number (got '$MAX_ARRAY_SIZE')"

node_name() {
    local n
    n="$(hostname -s 2>/dev/null || true)"
    [[ -n "$n" ]] || n=localhost
    printf '%s\n' "$n"
}

need_root() {
    [[ "$(id -u)" == 0 ]] || die "'$1' must run as root (the daemons run as root and write $CONF_DIR); try: sudo bash $0 $1"
}

have_binaries() {
    command -v slurmctld >/dev/null && command -v slurmd >/dev/null &&
        command -v sbatch >/dev/null && command -v munged >/dev/null &&
        command -v pgrep >/dev/null
}

# ---------------------------------------------------------------- install
cmd_install() {
    if have_binaries; then
        say "already installed: $(slurmd -V 2>/dev/null), $(munged -V 2>/dev/null | head -n1)"
        return 0
    fi
    need_root install
    command -v apt-get >/dev/null || die "apt-get not found: install slurmctld, slurmd, slurm-client and munge with this system's package manager"
    # Keep the packages' maintainer scripts from starting daemons with
    # Debian's default config (we start our own); remove our guard afterwards.
    local policy=/usr/sbin/policy-rc.d added_policy=0
    if [[ ! -e "$policy" ]]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy"
        chmod 755 "$policy"
        added_policy=1
    fi
    say "installing slurmctld slurmd slurm-client munge procps (apt-get)"
    local rc=0
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q || rc=$?
    if [[ $rc == 0 ]]; then
        apt-get install -y -q --no-install-recommends \
            -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
            slurmctld slurmd slurm-client munge procps util-linux || rc=$?
    fi
    [[ $added_policy == 1 ]] && rm -f "$policy"
    [[ $rc == 0 ]] || die "apt-get failed (exit $rc); see its output above"
    have_binaries || die "packages installed but slurmctld/slurmd/sbatch/munged/pgrep still missing from PATH"
    say "installed: $(slurmd -V), $(munged -V | head -n1)"
}

# ---------------------------------------------------------------- config
hw_line() {
    # `slurmd -C` prints the node line slurmd itself will compare against.
    slurmd -C 2>/dev/null | head -n1 || true
}

field() { # field NAME LINE
    sed -n "s/.*[[:space:]]$1=\([^[:space:]]*\).*/\1/p" <<<" $2"
}

write_config() {
    local node hw cpus boards sockets cores threads mem_total real_mem margin def_mem gres_node=""
    node="$(node_name)"
    hw="$(hw_line)"
    cpus="$(field CPUs "$hw")"
    boards="$(field Boards "$hw")"
    sockets="$(field SocketsPerBoard "$hw")"
    cores="$(field CoresPerSocket "$hw")"
    threads="$(field ThreadsPerCore "$hw")"
    local topo
    if [[ -n "$cpus" && -n "$boards" && -n "$sockets" && -n "$cores" && -n "$threads" ]]; then
        topo="CPUs=$cpus Boards=$boards SocketsPerBoard=$sockets CoresPerSocket=$cores ThreadsPerCore=$threads"
    else
        cpus="$(nproc)"
        topo="CPUs=$cpus"
    fi
    mem_total=$(($(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024))
    margin=$((mem_total / 20))
    ((margin < 512)) && margin=512
    real_mem=$((mem_total - margin))
    ((real_mem < 256)) && real_mem=256
    def_mem=$((real_mem / cpus))
    ((def_mem > 2048)) && def_mem=2048

    mkdir -p "$CONF_DIR"
    if [[ "$GPUS" != 0 ]]; then
        gres_node=" Gres=gpu:$GPUS"
        # slurmd 22.05 drops a GPU gres without File= ("Removing file-less
        # GPU") and rejects regular files ("not a valid character or block
        # device"): symlinks to /dev/null are accepted.
        local i files
        rm -rf "${STATE_DIR:?}/dev"
        mkdir -p "$STATE_DIR/dev"
        for ((i = 0; i < GPUS; i++)); do
            ln -s /dev/null "$STATE_DIR/dev/nvidia$i"
        done
        files="$STATE_DIR/dev/nvidia0"
        ((GPUS > 1)) && files="$STATE_DIR/dev/nvidia[0-$((GPUS - 1))]"
        cat >"$CONF_DIR/gres.conf" <<EOF
# Written by tests/slurm/cluster.sh: $GPUS fake GPUs, device files are
# symlinks to /dev/null (slurmd 22.05 ignores a GPU gres without File=).
AutoDetect=off
NodeName=$node Name=gpu File=$files
EOF
    else
        rm -f "$CONF_DIR/gres.conf"
    fi
    cat >"$CONF_DIR/slurm.conf" <<EOF
# Written by tests/slurm/cluster.sh ($(date -u +%FT%TZ)); rewritten by every
# 'cluster.sh start' that finds the daemons down (see 'cluster.sh restart').
# Single-node test cluster: no cgroups, no accounting database, daemons as root.
ClusterName=sweep
SlurmctldHost=$node($NODE_ADDR)
AuthType=auth/munge
CredType=cred/munge
# A requeued job stays PENDING (Reason=BeginTime) for cred_expire+1 seconds;
# the default 120 s (+ a scheduler cycle) made every requeue take ~2.5 min.
AuthInfo=cred_expire=10
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$STATE_DIR/ctld
SlurmdSpoolDir=$STATE_DIR/spool
SlurmctldPidFile=$STATE_DIR/slurmctld.pid
SlurmdPidFile=$STATE_DIR/slurmd.pid
SlurmctldLogFile=$STATE_DIR/log/slurmctld.log
SlurmdLogFile=$STATE_DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
MpiDefault=none
SwitchType=switch/none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
# Default cycles are 60 s (main) and 30 s (backfill): a job that became
# eligible without an event (e.g. after a requeue) waited that long.
SchedulerParameters=sched_interval=5,bf_interval=5
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=$def_mem
ReturnToService=2
JobRequeue=1
KillWait=5
MinJobAge=300
InactiveLimit=0
MessageTimeout=10
MaxArraySize=$MAX_ARRAY_SIZE
MailProg=/bin/true
GresTypes=gpu
NodeName=$node NodeHostname=$node NodeAddr=$NODE_ADDR $topo RealMemory=$real_mem$gres_node State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
PartitionName=short Nodes=$node Default=NO MaxTime=30 State=UP
# Where a sweep's CPU-only build arrays go (slurm.build_partition); the same node.
PartitionName=cpu Nodes=$node Default=NO MaxTime=INFINITE State=UP
EOF
}

# ---------------------------------------------------------------- checks
munge_ok() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }
ctld_ok() { scontrol ping 2>/dev/null | grep -q 'is UP'; }
pid_alive() { # pidfile
    local pid
    [[ -s "$1" ]] || return 1
    pid="$(cat "$1" 2>/dev/null)" || return 1
    [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null
}
slurmd_ok() { pid_alive "$STATE_DIR/slurmd.pid"; }
node_state() { sinfo -h -n "$(node_name)" -o '%T' 2>/dev/null | head -n1 || true; }
node_ready() {
    case "$(node_state)" in
    idle | mixed | allocated | completing) return 0 ;;
    *) return 1 ;;
    esac
}
is_up() { munge_ok && ctld_ok && slurmd_ok && node_ready; }

show_logs() {
    local f
    for f in "$STATE_DIR/munge/munged.log" "$STATE_DIR/log/"*.log "$STATE_DIR/log/"*.out; do
        [[ -s "$f" ]] || continue
        printf -- '----- tail of %s -----\n' "$f" >&2
        tail -n 25 "$f" >&2
    done
}

fail_start() {
    printf 'cluster.sh: ERROR: %s\n' "$*" >&2
    show_logs
    printf 'cluster.sh: state folder %s, config %s/slurm.conf; try "bash %s stop" then "bash %s start"\n' \
        "$STATE_DIR" "$CONF_DIR" "$0" "$0" >&2
    exit 1
}

# ---------------------------------------------------------------- start
start_munged() {
    if munge_ok; then
        return 0
    fi
    id munge >/dev/null 2>&1 || fail_start "user 'munge' missing: run 'bash $0 install'"
    if [[ ! -s "$MUNGE_KEY" ]]; then
        say "creating munge key $MUNGE_KEY"
        mkdir -p "$(dirname "$MUNGE_KEY")"
        if command -v mungekey >/dev/null; then
            mungekey --create --keyfile="$MUNGE_KEY" --force
        else
            dd if=/dev/urandom of="$MUNGE_KEY" bs=1 count=1024 status=none
        fi
    fi
    chown munge:munge "$(dirname "$MUNGE_KEY")" "$MUNGE_KEY"
    chmod 700 "$(dirname "$MUNGE_KEY")"
    chmod 600 "$MUNGE_KEY"
    mkdir -p "$MUNGE_SOCKET_DIR" "$STATE_DIR/munge"
    chown munge:munge "$MUNGE_SOCKET_DIR" "$STATE_DIR/munge"
    chmod 755 "$MUNGE_SOCKET_DIR"
    chmod 700 "$STATE_DIR/munge"
    # A socket left by a dead munged makes the new one refuse to start.
    rm -f "$MUNGE_SOCKET_DIR/munge.socket.2" "$MUNGE_SOCKET_DIR/munge.socket.2.lock"
    say "starting munged"
    "${CLEAN_ENV[@]}" runuser -u munge -- munged \
        --key-file="$MUNGE_KEY" \
        --log-file="$STATE_DIR/munge/munged.log" \
        --pid-file="$STATE_DIR/munge/munged.pid" \
        --seed-file="$STATE_DIR/munge/munged.seed" \
        </dev/null >"$STATE_DIR/log/munged.out" 2>&1 ||
        fail_start "munged failed to start"
    local i
    for i in $(seq 1 50); do
        munge_ok && return 0
        sleep 0.2
    done
    fail_start "munged started but 'munge -n | unmunge' still fails"
}

start_slurmctld() {
    if ctld_ok; then
        return 0
    fi
    if pid_alive "$STATE_DIR/slurmctld.pid"; then
        say "slurmctld process exists but does not answer yet; waiting"
    else
        say "starting slurmctld"
        # -i: ignore unreadable state files (e.g. left by another version).
        (cd "$STATE_DIR" && setsid "${CLEAN_ENV[@]}" slurmctld -i \
            </dev/null >"$STATE_DIR/log/slurmctld.out" 2>&1) ||
            fail_start "slurmctld exited with an error"
    fi
    local i
    for i in $(seq 1 $((START_TIMEOUT * 2))); do
        ctld_ok && return 0
        sleep 0.5
    done
    fail_start "slurmctld does not answer 'scontrol ping' after ${START_TIMEOUT}s"
}

start_slurmd() {
    if slurmd_ok; then
        return 0
    fi
    say "starting slurmd (node $(node_name))"
    (cd "$STATE_DIR" && setsid "${CLEAN_ENV[@]}" slurmd -N "$(node_name)" \
        </dev/null >"$STATE_DIR/log/slurmd.out" 2>&1) ||
        fail_start "slurmd exited with an error"
}

wait_node_idle() {
    local deadline=$((SECONDS + START_TIMEOUT)) st resumed=0
    while ((SECONDS < deadline)); do
        if node_ready; then
            return 0
        fi
        slurmd_ok || { sleep 1; slurmd_ok; } || fail_start "slurmd died after start"
        st="$(node_state)"
        if [[ "$st" == inval* ]]; then
            fail_start "slurmctld marked node $(node_name) INVALID (its config does not match what slurmd reports): $(sinfo -h -R -o '%E' 2>/dev/null | tr '\n' ' ')"
        fi
        # A node left DOWN/DRAINED by an earlier run (e.g. "Node unexpectedly
        # rebooted") is put back into service once slurmd has registered.
        if [[ $resumed == 0 && "$st" =~ (down|drain|fail) ]]; then
            sleep 2
            if scontrol update NodeName="$(node_name)" State=RESUME >/dev/null 2>&1; then
                say "resumed node $(node_name) (was $st)"
            fi
            resumed=1
        fi
        sleep 0.5
    done
    fail_start "node $(node_name) not idle after ${START_TIMEOUT}s (state: '$(node_state)'; sinfo -R: $(sinfo -h -R 2>/dev/null | tr '\n' ' '))"
}

cmd_start() {
    have_binaries || die "Slurm/munge binaries not found: run 'bash $0 install' first"
    if is_up; then
        say "already up: node $(node_name) is $(node_state) ($STATE_DIR)"
        return 0
    fi
    need_root start
    mkdir -p "$STATE_DIR"/{ctld,spool,log,munge}
    chmod 755 "$STATE_DIR"
    start_munged
    if ! ctld_ok && ! pid_alive "$STATE_DIR/slurmctld.pid" && ! slurmd_ok; then
        write_config
        say "wrote $CONF_DIR/slurm.conf$([[ $GPUS != 0 ]] && echo " and gres.conf")"
    elif [[ ! -s "$CONF_DIR/slurm.conf" ]]; then
        fail_start "daemons are partly running but $CONF_DIR/slurm.conf is missing; run 'bash $0 stop' first"
    fi
    start_slurmctld
    start_slurmd
    wait_node_idle
    say "up: $(sinfo -h -o '%P %a %D %T %C(A/I/O/T) %G' | tr '\n' ';')"
}

# ---------------------------------------------------------------- stop
stop_pidfile() { # name pidfile
    local pid i
    pid_alive "$2" || return 0
    pid="$(cat "$2")"
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    say "$1 (pid $pid) ignored SIGTERM for 10s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    sleep 0.5
}

cmd_stop() {
    need_root stop
    if have_binaries && ctld_ok; then
        local ids i
        ids="$(squeue -h -o '%A' 2>/dev/null | sort -u | tr '\n' ' ' || true)"
        if [[ -n "${ids// /}" ]]; then
            say "cancelling jobs: $ids"
            # shellcheck disable=SC2086
            scancel $ids 2>/dev/null || true
            for i in $(seq 1 30); do
                [[ -z "$(squeue -h -o '%A' -t pending,running,completing,suspended,configuring 2>/dev/null)" ]] && break
                sleep 0.5
            done
        fi
    fi
    stop_pidfile slurmd "$STATE_DIR/slurmd.pid"
    stop_pidfile slurmctld "$STATE_DIR/slurmctld.pid"
    stop_pidfile munged "$STATE_DIR/munge/munged.pid"
    local left
    left="$(pgrep -a -x 'slurmstepd|slurmd|slurmctld' 2>/dev/null || true)"
    if [[ -n "$left" ]]; then
        say "warning: Slurm processes still running (not started from $STATE_DIR?):"
        printf '%s\n' "$left"
    fi
    say "stopped"
}

cmd_fresh() {
    need_root fresh
    cmd_stop
    # Jobs an earlier run left queued would be recovered from the saved state
    # and hold the node, so tests time out waiting for theirs.
    rm -rf "${STATE_DIR:?}/ctld" "${STATE_DIR:?}/spool"
    say "cleared saved job state in $STATE_DIR"
    cmd_start
}

# ---------------------------------------------------------------- status/env
cmd_status() {
    if ! have_binaries; then
        say "down: Slurm/munge binaries not installed (bash $0 install)"
        return 1
    fi
    local m c d n
    munge_ok && m=up || m=down
    ctld_ok && c=up || c=down
    slurmd_ok && d=up || d=down
    n="$(node_state)"
    if is_up; then
        say "up: munged=$m slurmctld=$c slurmd=$d node $(node_name)=$n state=$STATE_DIR"
        sinfo -o '%P %a %l %D %T %C %G %m' 2>/dev/null || true
        return 0
    fi
    say "down: munged=$m slurmctld=$c slurmd=$d node $(node_name)='${n:-?}' state=$STATE_DIR"
    return 1
}

cmd_env() {
    if [[ "$CONF_DIR" != /etc/slurm ]]; then
        printf 'export SLURM_CONF=%q\n' "$CONF_DIR/slurm.conf"
    else
        printf '# config at /etc/slurm/slurm.conf: the Debian clients need no variable\n'
    fi
}

case "${1:-}" in
install) cmd_install ;;
start) cmd_start ;;
stop) cmd_stop ;;
restart) cmd_stop && cmd_start ;;
fresh) cmd_fresh ;;
status) cmd_status ;;
env) cmd_env ;;
logs) show_logs 2>&1 ;;
*)
    echo "usage: bash $0 install|start|stop|restart|fresh|status|env|logs" >&2
    exit 2
    ;;
esac
