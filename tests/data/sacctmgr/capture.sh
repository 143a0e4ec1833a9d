#!/usr/bin/env bash
# Captures what sacctmgr answers to the two calls of sweep/executors/slurm_limits.py
# (sacctmgr_commands) on the project's test cluster, as root, with the cluster up
# (bash tests/slurm/cluster.sh start); see README.md beside this file.
#   bash tests/data/sacctmgr/capture.sh
# It changes the accounting database for a moment (an association limit, two QOS)
# and stops slurmdbd and mariadbd once each; everything is put back before it ends.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CLUSTER_SH="$HERE/../../slurm/cluster.sh"
STATE_DIR="${SWEEP_SLURM_DIR:-/tmp/sweep-slurm}"
ASSOC=(sacctmgr -n -P show assoc where user=root cluster=sweep format=User,Account,MaxSubmit,DefaultQOS)
QOS=(sacctmgr -n -P show qos format=Name,MaxSubmitPU)

bash "$CLUSTER_SH" status >/dev/null || { echo "the test cluster is down: bash $CLUSTER_SH start" >&2; exit 1; }
printf '%s\n' "${ASSOC[*]}" "${QOS[*]}" >"$HERE/commands.txt"

# 1. The cluster as cluster.sh sets it up: root in accounts sweep and root, QOS capped.
"${ASSOC[@]}" >"$HERE/assoc.txt"
"${QOS[@]}" >"$HERE/qos.txt"

# 2. With an association limit on root/sweep and two more QOS, one without a limit.
restore() {
    sacctmgr -i modify user where name=root account=sweep set MaxSubmitJobs=-1 >/dev/null || true
    sacctmgr -i delete qos long high >/dev/null 2>&1 || true
}
trap restore EXIT
sacctmgr -i modify user where name=root account=sweep set MaxSubmitJobs=12 >/dev/null
sacctmgr -i add qos long MaxSubmitJobsPerUser=20 >/dev/null
sacctmgr -i add qos high >/dev/null
"${ASSOC[@]}" >"$HERE/assoc_limit.txt"
"${QOS[@]}" >"$HERE/qos_more.txt"
restore
trap - EXIT

# 3. Where sacctmgr cannot say: its stderr (each exits 1, nothing on stdout).
down() { # name pidfile capture: stop one daemon, capture, start it again
    kill "$(cat "$2")"
    while kill -0 "$(cat "$2" 2>/dev/null)" 2>/dev/null; do sleep 0.2; done
    "${ASSOC[@]}" >/dev/null 2>"$HERE/$3" && { echo "sacctmgr answered with $1 down" >&2; exit 1; }
    bash "$CLUSTER_SH" start >/dev/null
}
down slurmdbd "$STATE_DIR/slurmdbd.pid" slurmdbd_down.err
down mariadbd "$STATE_DIR/mariadb.pid" mariadb_down.err
# A cluster without accounting (slurm.conf's AccountingStorageType=accounting_storage/none).
conf=$(mktemp -d)
sed 's|^AccountingStorageType=.*|AccountingStorageType=accounting_storage/none|; /^AccountingStorageEnforce=/d' \
    "${SWEEP_SLURM_CONF_DIR:-/etc/slurm}/slurm.conf" >"$conf/slurm.conf"
SLURM_CONF="$conf/slurm.conf" "${ASSOC[@]}" >/dev/null 2>"$HERE/no_slurmdbd.err" && exit 1
rm -rf "$conf"

for f in commands.txt assoc.txt qos.txt assoc_limit.txt qos_more.txt slurmdbd_down.err mariadb_down.err no_slurmdbd.err; do
    echo "== $f"
    cat "$HERE/$f"
done
