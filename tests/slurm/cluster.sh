#!/usr/bin/env bash
# Single-node Slurm test cluster for this project: real munged, slurmctld,
# slurmd and slurmdbd from Debian 12's packages (slurm-wlm 22.05, munge 0.5),
# with the accounting database in a private MariaDB (10.11) server, all started
# as plain background daemons (no systemd, no cgroups).
#
# Usage: bash tests/slurm/cluster.sh install|start|stop|restart|fresh|status|env|logs
#
#   install  apt-get the packages (root; idempotent, instant when present)
#   start    write the config, start munged + mariadbd + slurmdbd, create
#            the accounting entities (below), start slurmctld + slurmd, wait
#            until the node is idle (idempotent: exits 0 at once when up)
#   stop     cancel every job, stop the daemons, wait until they are gone
#   restart  stop, then start (saved job state and the database are kept)
#   fresh    stop, forget every saved job and the whole accounting database,
#            then start: an idle cluster with an empty queue and a new
#            database, whatever an earlier user left (what CI runs)
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
#   SWEEP_SLURM_MAX_SUBMIT  MaxSubmitJobsPerUser of the QOS `capped`, the
#                         default QOS of the users below (default 15: every array
#                         task counts, so a plan of a few dozen configurations
#                         must wait for tasks to leave the queue, as thousands do
#                         under a real site's QOS)
#   SWEEP_SLURM_TIMEOUT   seconds `start` waits for an idle node (default 60)
#
# Accounting (AccountingStorageType=accounting_storage/slurmdbd,
# AccountingStorageEnforce=limits,qos, so slurmctld refuses a submission past
# the QOS limit): the QOS `capped` with MaxSubmitJobsPerUser=$SWEEP_SLURM_MAX_SUBMIT;
# cluster `sweep` with QOS=capped DefaultQOS=capped on its own association, so
# every association inherits it (root's in account `root`, which `add cluster`
# makes, too); account `sweep`; users root and $SUDO_USER (when set) in it,
# DefaultAccount=sweep.
# MariaDB: its own data folder under the state folder, run as root
# (--user=root), listening on 127.0.0.1:3306 only and a socket in mysql/;
# slurmdbd logs in as user `slurm` over TCP.
#
# Layout of the state folder ($SWEEP_SLURM_DIR):
#   ctld/           StateSaveLocation (job state survives a restart)
#   spool/          SlurmdSpoolDir (batch scripts of running jobs)
#   munge/          munged's log, pid and seed files (owned by user munge)
#   dev/            nvidia0..N-1 -> /dev/null, the fake GPUs of gres.conf
#   mysql/data/     MariaDB's data folder (the accounting database)
#   mysql/mysqld.sock  its socket (for `mariadb --socket=...` as root)
#   log/            slurmctld.log, slurmd.log, slurmdbd.log, mariadb.log,
#                   *.out (daemon stdout/stderr)
#   slurmctld.pid, slurmd.pid, slurmdbd.pid, mariadb.pid
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
MAX_SUBMIT="${SWEEP_SLURM_MAX_SUBMIT:-15}"
CLUSTER=sweep
ACCOUNT=sweep
QOS=capped
DB_DIR="$STATE_DIR/mysql"
DB_PORT=3306
DB_SOCKET="$DB_DIR/mysqld.sock"
DB_NAME=slurm_acct_db
DB_USER=slurm
# A throwaway database on the loopback interface of a test machine.
DB_PASS=sweep-test-only
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
[[ "$MAX_SUBMIT" =~ ^[1-9][0-9]*$ ]] || die "SWEEP_SLURM_MAX_SUBMIT must be a positive number (got '$MAX_SUBMIT')"

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
        command -v pgrep >/dev/null && command -v slurmdbd >/dev/null &&
        command -v sacctmgr >/dev/null && command -v mariadbd >/dev/null &&
        command -v mariadb-install-db >/dev/null && command -v mariadb >/dev/null
}

# ---------------------------------------------------------------- install
cmd_install() {
    if have_binaries; then
        say "already installed: $(slurmd -V 2>/dev/null), $(munged -V 2>/dev/null | head -n1), $(mariadbd --version 2>/dev/null | sed 's/ for .*//')"
        return 0
    fi
    need_root install
    command -v apt-get >/dev/null || die "apt-get not found: install slurmctld, slurmd, slurm-client, slurmdbd, mariadb-server-core, mariadb-client-core and munge with this system's package manager"
    # Keep the packages' maintainer scripts from starting daemons with
    # Debian's default config (we start our own); remove our guard afterwards.
    local policy=/usr/sbin/policy-rc.d added_policy=0
    if [[ ! -e "$policy" ]]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy"
        chmod 755 "$policy"
        added_policy=1
    fi
    # MariaDB: only the server and client cores (mariadbd, mariadb-install-db,
    # mariadb), not mariadb-server, whose dependencies (galera, perl, rsync,
    # socat) and maintainer scripts this single-user test database never needs.
    say "installing slurmctld slurmd slurm-client slurmdbd mariadb-server-core mariadb-client-core munge procps (apt-get)"
    local rc=0
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q || rc=$?
    if [[ $rc == 0 ]]; then
        apt-get install -y -q --no-install-recommends \
            -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
            slurmctld slurmd slurm-client slurmdbd mariadb-server-core mariadb-client-core \
            munge procps util-linux || rc=$?
    fi
    [[ $added_policy == 1 ]] && rm -f "$policy"
    [[ $rc == 0 ]] || die "apt-get failed (exit $rc); see its output above"
    have_binaries || die "packages installed but slurmctld/slurmd/sbatch/munged/pgrep/slurmdbd/sacctmgr/mariadbd still missing from PATH"
    say "installed: $(slurmd -V), $(munged -V | head -n1), $(mariadbd --version | sed 's/ for .*//')"
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
# Single-node test cluster: no cgroups, accounting through slurmdbd, daemons as root.
ClusterName=$CLUSTER
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
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=6819
# limits (implies associations): a user's jobs need an association and keep to
# its limits and its QOS's, e.g. MaxSubmitJobsPerUser of the QOS capped.
AccountingStorageEnforce=limits,qos
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

write_dbd_config() {
    mkdir -p "$CONF_DIR"
    # slurmdbd refuses a config that others can read (it holds the password).
    (
        umask 077
        cat >"$CONF_DIR/slurmdbd.conf" <<EOF
# Written by tests/slurm/cluster.sh ($(date -u +%FT%TZ)) when slurmdbd is down.
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=6819
SlurmUser=root
PidFile=$STATE_DIR/slurmdbd.pid
LogFile=$STATE_DIR/log/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=$DB_USER
StoragePass=$DB_PASS
StorageLoc=$DB_NAME
EOF
    )
}

# ---------------------------------------------------------------- checks
munge_ok() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }
ctld_ok() { scontrol ping 2>/dev/null | grep -q 'is UP'; }
# A daemon that exited stays a zombie until init reaps it, and kill -0 still
# succeeds on it: where init reaps only every few seconds (as on the project's
# machines), each stop waited ~2 s on a process long gone.
running() { # pid
    local st
    st="$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null)" || return 1
    [[ -n "$st" && "${st%% *}" != Z ]]
}
pid_alive() { # pidfile
    local pid
    [[ -s "$1" ]] || return 1
    pid="$(cat "$1" 2>/dev/null)" || return 1
    [[ "$pid" =~ ^[0-9]+$ ]] && running "$pid"
}
slurmd_ok() { pid_alive "$STATE_DIR/slurmd.pid"; }
db_sql() { mariadb --no-defaults --socket="$DB_SOCKET" -uroot -N -B "$@"; }
db_ok() { pid_alive "$STATE_DIR/mariadb.pid" && db_sql -e 'SELECT 1' >/dev/null 2>&1; }
# slurmdbd answers and knows our cluster (the accounting entities exist).
dbd_ok() {
    pid_alive "$STATE_DIR/slurmdbd.pid" &&
        sacctmgr -n -P show cluster format=cluster 2>/dev/null | grep -qx "$CLUSTER"
}
node_state() { sinfo -h -n "$(node_name)" -o '%T' 2>/dev/null | head -n1 || true; }
node_ready() {
    case "$(node_state)" in
    idle | mixed | allocated | completing) return 0 ;;
    *) return 1 ;;
    esac
}
is_up() { munge_ok && db_ok && dbd_ok && ctld_ok && slurmd_ok && node_ready; }

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

start_mariadb() {
    local pid=""
    if db_ok; then
        return 0
    fi
    mkdir -p "$DB_DIR"
    if [[ ! -d "$DB_DIR/data/mysql" ]]; then
        say "creating the MariaDB data folder $DB_DIR/data"
        rm -rf "${DB_DIR:?}/data"
        "${CLEAN_ENV[@]}" mariadb-install-db --no-defaults --user=root --datadir="$DB_DIR/data" \
            --auth-root-authentication-method=socket --skip-test-db --skip-name-resolve \
            </dev/null >"$STATE_DIR/log/mariadb-install-db.out" 2>&1 ||
            fail_start "mariadb-install-db failed (see $STATE_DIR/log/mariadb-install-db.out)"
    fi
    if ! pid_alive "$STATE_DIR/mariadb.pid"; then
        say "starting mariadbd (127.0.0.1:$DB_PORT)"
        rm -f "$DB_SOCKET"
        # --user=root: no mysql user exists (mariadb-server-core creates none);
        # binary log off and lazy log flushes: a test database, nothing to replicate
        # or to keep across a power cut. The lock wait timeout is slurmdbd's wish
        # (it logs "Database settings not recommended values" below 900 s).
        # mariadbd stays in the foreground: it runs in the background of this
        # script, with no descriptor of ours (a caller's pipe would never close).
        (cd "$STATE_DIR" && exec setsid "${CLEAN_ENV[@]}" mariadbd --no-defaults --user=root \
            --datadir="$DB_DIR/data" --socket="$DB_SOCKET" --pid-file="$STATE_DIR/mariadb.pid" \
            --bind-address=127.0.0.1 --port="$DB_PORT" --skip-name-resolve --skip-log-bin \
            --log-error="$STATE_DIR/log/mariadb.log" --innodb-flush-log-at-trx-commit=2 \
            --innodb-lock-wait-timeout=900) \
            </dev/null >"$STATE_DIR/log/mariadb.out" 2>&1 &
        pid=$! # mariadbd's own: the subshell is no group leader, so setsid and env exec in place
    fi
    local i
    for i in $(seq 1 $((START_TIMEOUT * 5))); do
        if [[ -n "$pid" ]] && ! running "$pid"; then
            fail_start "mariadbd exited at start (port $DB_PORT taken by another server? see $STATE_DIR/log/mariadb.log)"
        fi
        if db_ok; then
            # slurmdbd's login: made once per data folder, checked every start.
            db_sql -e "CREATE USER IF NOT EXISTS '$DB_USER'@'127.0.0.1' IDENTIFIED BY '$DB_PASS';
                GRANT ALL ON \`$DB_NAME\`.* TO '$DB_USER'@'127.0.0.1';" ||
                fail_start "could not create MariaDB user $DB_USER"
            return 0
        fi
        sleep 0.2
    done
    fail_start "mariadbd does not answer on $DB_SOCKET after ${START_TIMEOUT}s"
}

start_slurmdbd() {
    if pid_alive "$STATE_DIR/slurmdbd.pid"; then
        return 0
    fi
    write_dbd_config
    say "starting slurmdbd"
    (cd "$STATE_DIR" && setsid "${CLEAN_ENV[@]}" slurmdbd \
        </dev/null >"$STATE_DIR/log/slurmdbd.out" 2>&1) ||
        fail_start "slurmdbd exited with an error"
    local i
    for i in $(seq 1 $((START_TIMEOUT * 2))); do
        sacctmgr -n -P show cluster format=cluster >/dev/null 2>&1 && return 0
        pid_alive "$STATE_DIR/slurmdbd.pid" || { sleep 0.5; pid_alive "$STATE_DIR/slurmdbd.pid"; } ||
            fail_start "slurmdbd died after start"
        sleep 0.5
    done
    fail_start "slurmdbd does not answer 'sacctmgr show cluster' after ${START_TIMEOUT}s"
}

acct() { # sacctmgr with immediate commit; its output is shown only when it fails
    local out
    out="$(sacctmgr -i "$@" 2>&1)" || fail_start "sacctmgr $* failed: $out"
}

# The QOS capped, the cluster, the account and its users: made where missing
# (each sacctmgr change costs ~0.5 s, so a new database gets four), the QOS
# limit set to $MAX_SUBMIT every time (a restart may change it).
setup_accounting() {
    local users=(root) u new=0
    [[ -n "${SUDO_USER:-}" && "${SUDO_USER}" != root ]] && id "$SUDO_USER" >/dev/null 2>&1 && users+=("$SUDO_USER")
    case "$(sacctmgr -n -P show qos "$QOS" format=name,maxsubmitpu)" in
    "$QOS|$MAX_SUBMIT") ;;
    "") acct add qos "$QOS" MaxSubmitJobsPerUser="$MAX_SUBMIT" ;;
    *) acct modify qos "$QOS" set MaxSubmitJobsPerUser="$MAX_SUBMIT" ;;
    esac
    # Set on the cluster's own association, the QOS is every association's
    # (root's in account root too) by inheritance; sacctmgr shows it on each.
    if ! sacctmgr -n -P show cluster format=cluster | grep -qx "$CLUSTER"; then
        acct add cluster "$CLUSTER" QOS="$QOS" DefaultQOS="$QOS"
        new=1
    fi
    sacctmgr -n -P show account "$ACCOUNT" format=account | grep -qx "$ACCOUNT" ||
        acct add account "$ACCOUNT" Cluster="$CLUSTER" Description="sweep tests" Organization=sweep
    for u in "${users[@]}"; do
        if [[ $new == 1 ]]; then # a new database: nothing to check
            acct add user "$u" Account="$ACCOUNT" DefaultAccount="$ACCOUNT"
            continue
        fi
        [[ -n "$(sacctmgr -n -P show assoc where user="$u" account="$ACCOUNT" format=user)" ]] ||
            acct add user "$u" Account="$ACCOUNT" DefaultAccount="$ACCOUNT"
        [[ "$(sacctmgr -n -P show user "$u" format=defaultaccount)" == "$ACCOUNT" ]] ||
            acct modify user where name="$u" set DefaultAccount="$ACCOUNT"
        [[ "$(sacctmgr -n -P show assoc where user="$u" format=qos,defaultqos | sort -u)" == "$QOS|$QOS" ]] ||
            fail_start "user $u's associations do not all have QOS $QOS as their only and default QOS: $(
                sacctmgr -n -P show assoc where user="$u" format=account,qos,defaultqos | tr '\n' ' ')"
    done
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
    have_binaries || die "Slurm/munge/MariaDB binaries not found: run 'bash $0 install' first"
    if is_up; then
        say "already up: node $(node_name) is $(node_state) ($STATE_DIR)"
        return 0
    fi
    need_root start
    mkdir -p "$STATE_DIR"/{ctld,spool,log,munge}
    chmod 755 "$STATE_DIR"
    start_munged
    # slurm.conf first: sacctmgr reads AccountingStorageType from it.
    if ! ctld_ok && ! pid_alive "$STATE_DIR/slurmctld.pid" && ! slurmd_ok; then
        write_config
        say "wrote $CONF_DIR/slurm.conf$([[ $GPUS != 0 ]] && echo " and gres.conf")"
    elif [[ ! -s "$CONF_DIR/slurm.conf" ]]; then
        fail_start "daemons are partly running but $CONF_DIR/slurm.conf is missing; run 'bash $0 stop' first"
    elif ! grep -qx 'AccountingStorageType=accounting_storage/slurmdbd' "$CONF_DIR/slurm.conf"; then
        fail_start "Slurm runs with a slurm.conf without accounting (written by an older cluster.sh?): run 'bash $0 restart'"
    fi
    start_mariadb
    start_slurmdbd
    setup_accounting
    start_slurmctld
    start_slurmd
    wait_node_idle
    say "up: $(sinfo -h -o '%P %a %D %T %C(A/I/O/T) %G' | tr '\n' ';') QOS $QOS MaxSubmitJobsPerUser=$MAX_SUBMIT"
}

# ---------------------------------------------------------------- stop
stop_pidfile() { # name pidfile [KILL]
    local pid i
    pid_alive "$2" || return 0
    pid="$(cat "$2")"
    kill "-${3:-TERM}" "$pid" 2>/dev/null || true
    for i in $(seq 1 100); do
        running "$pid" || return 0
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
    # `fresh` deletes the database next: nothing of it needs a clean shutdown
    # (which takes slurmdbd and mariadbd ~2 s each).
    stop_pidfile slurmdbd "$STATE_DIR/slurmdbd.pid" "${1:-TERM}"
    stop_pidfile mariadbd "$STATE_DIR/mariadb.pid" "${1:-TERM}"
    stop_pidfile munged "$STATE_DIR/munge/munged.pid"
    local left
    # (zombies not yet reaped are gone for this purpose; they hold no port or file)
    left="$(pgrep -a -x -r R,S,D,T,t 'slurmstepd|slurmd|slurmctld|slurmdbd|mariadbd' 2>/dev/null || true)"
    if [[ -n "$left" ]]; then
        say "warning: Slurm processes still running (not started from $STATE_DIR?):"
        printf '%s\n' "$left"
    fi
    say "stopped"
}

cmd_fresh() {
    need_root fresh
    cmd_stop KILL
    # Jobs an earlier run left queued would be recovered from the saved state
    # and hold the node, so tests time out waiting for theirs.
    # The accounting database goes too: job ids start at 1 again, and sacct
    # would show an earlier run's jobs under the same ids.
    rm -rf "${STATE_DIR:?}/ctld" "${STATE_DIR:?}/spool" "${DB_DIR:?}"
    say "cleared saved job state and the accounting database in $STATE_DIR"
    cmd_start
}

# ---------------------------------------------------------------- status/env
cmd_status() {
    if ! have_binaries; then
        say "down: Slurm/munge binaries not installed (bash $0 install)"
        return 1
    fi
    local m b a c d n
    munge_ok && m=up || m=down
    db_ok && b=up || b=down
    dbd_ok && a=up || a=down
    ctld_ok && c=up || c=down
    slurmd_ok && d=up || d=down
    n="$(node_state)"
    if is_up; then
        say "up: munged=$m mariadbd=$b slurmdbd=$a slurmctld=$c slurmd=$d node $(node_name)=$n state=$STATE_DIR"
        sinfo -o '%P %a %l %D %T %C %G %m' 2>/dev/null || true
        return 0
    fi
    say "down: munged=$m mariadbd=$b slurmdbd=$a slurmctld=$c slurmd=$d node $(node_name)='${n:-?}' state=$STATE_DIR"
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
