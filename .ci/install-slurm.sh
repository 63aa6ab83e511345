#!/usr/bin/env bash
# A single-node Slurm on this machine for the executor tests: Debian's slurm-wlm and munge,
# slurmctld and slurmd on localhost, partition `debug`, no accounting, no cgroups.
#
# Idempotent: when the node already answers idle it does nothing. Never fails CI: on any problem
# it prints one line starting with "install-slurm: skipped" and exits 0, and the Slurm tests then
# skip with their own reason.
set -uo pipefail

WAIT_S="${SLURM_WAIT_S:-60}"
CONF_DIR=/etc/slurm
CONF="$CONF_DIR/slurm.conf"
LOG_DIR=/var/log/slurm
SPOOL=/var/spool/slurmd
STATE=/var/lib/slurm/slurmctld

skip() {
  echo "install-slurm: skipped: $*"
  exit 0
}

node_state() {
  sinfo -h -n localhost -o %t 2>/dev/null | head -n1
}

node_up() {
  case "$(node_state)" in idle | mix | alloc | comp) return 0 ;; *) return 1 ;; esac
}

start=$(date +%s)
if command -v sinfo >/dev/null 2>&1 && node_up; then
  echo "install-slurm: already up (node localhost $(node_state))"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
  else
    skip "needs root or password-less sudo to install and start slurmctld/slurmd"
  fi
fi

if ! command -v slurmctld >/dev/null 2>&1 || ! command -v slurmd >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
  command -v apt-get >/dev/null 2>&1 || skip "no apt-get here (Debian's slurm-wlm and munge are what this script installs)"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null 2>&1 || skip "apt-get update failed"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null 2>&1 \
    || skip "apt-get install slurm-wlm munge failed"
fi

# munge: a key and a running munged (started as the munge user, as its package intends).
if [ ! -s /etc/munge/munge.key ]; then
  if command -v mungekey >/dev/null 2>&1; then
    $SUDO mungekey --create --force >/dev/null 2>&1 || skip "cannot create /etc/munge/munge.key"
  else
    $SUDO dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none || skip "cannot create /etc/munge/munge.key"
  fi
  $SUDO chown munge:munge /etc/munge/munge.key && $SUDO chmod 0400 /etc/munge/munge.key
fi
$SUDO mkdir -p /run/munge /var/log/munge /var/lib/munge
$SUDO chown munge:munge /run/munge /var/log/munge /var/lib/munge
if ! pgrep -x munged >/dev/null 2>&1; then
  $SUDO runuser -u munge -- /usr/sbin/munged >/dev/null 2>&1 || skip "munged did not start (see /var/log/munge/munged.log)"
fi
munge -n 2>/dev/null | unmunge >/dev/null 2>&1 || skip "munge does not round-trip a credential (munged not working)"

# slurm.conf: this node's real CPU topology and memory as slurmd detects them.
hw=$(slurmd -C 2>/dev/null | head -n1 | sed -e 's/^NodeName=[^ ]* //')
case "$hw" in *CPUs=*RealMemory=*) ;; *) skip "slurmd -C did not report this node's CPUs and memory" ;; esac
$SUDO mkdir -p "$CONF_DIR" "$LOG_DIR" "$SPOOL" "$STATE"
$SUDO chown slurm:slurm "$LOG_DIR" "$STATE" 2>/dev/null || true
conf=$(mktemp)
cat >"$conf" <<EOF
# Written by .ci/install-slurm.sh: a single-node test cluster.
ClusterName=harness-ci
SlurmctldHost=localhost
AuthType=auth/munge
SlurmUser=slurm
SlurmdUser=root
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ReturnToService=2
KillWait=10
MinJobAge=300
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmdSpoolDir=$SPOOL
StateSaveLocation=$STATE
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd.log
NodeName=localhost $hw State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
if ! cmp -s "$conf" "$CONF"; then
  $SUDO cp "$conf" "$CONF" && $SUDO chmod 0644 "$CONF"
  changed=1
else
  changed=0
fi
rm -f "$conf"

if ! pgrep -x slurmctld >/dev/null 2>&1; then
  $SUDO /usr/sbin/slurmctld >/dev/null 2>&1 || skip "slurmctld did not start (see $LOG_DIR/slurmctld.log)"
elif [ "$changed" = 1 ]; then
  $SUDO scontrol reconfigure >/dev/null 2>&1 || true
fi
if ! pgrep -x slurmd >/dev/null 2>&1; then
  $SUDO /usr/sbin/slurmd -N localhost >/dev/null 2>&1 || skip "slurmd did not start (see $LOG_DIR/slurmd.log)"
fi

# Wait for the node to register; a node left down or drained by an earlier run is resumed.
deadline=$(($(date +%s) + WAIT_S))
while ! node_up; do
  case "$(node_state)" in down* | drain* | drng*)
    $SUDO scontrol update nodename=localhost state=resume >/dev/null 2>&1 || true ;;
  esac
  [ "$(date +%s)" -ge "$deadline" ] && skip "node localhost not idle after ${WAIT_S}s (state: $(node_state || echo none); see $LOG_DIR)"
  sleep 1
done
echo "install-slurm: up in $(($(date +%s) - start))s (node localhost $(node_state), partition debug)"
