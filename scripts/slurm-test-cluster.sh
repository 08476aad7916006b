#!/usr/bin/env bash
# A throwaway single-host Slurm cluster for the Slurm executor tests
# (tests/agent/slurm_executor_test.cpp).
#
#   scripts/slurm-test-cluster.sh start [DIR]   configure + start it, print DIR
#   scripts/slurm-test-cluster.sh env   [DIR]   print the exports the tests need
#   scripts/slurm-test-cluster.sh stop  [DIR]   stop its daemons and remove DIR
#
# DIR (default $CUBEPLANE_SLURM_DIR, else /tmp/cubeplane-slurm-<checksum of
# this checkout's path>) holds everything: a munge key and socket, slurm.conf
# and gres.conf, the daemons' state, pid files and logs, two fake GPUs
# (character devices, as gres.conf wants files) and cluster.env, which says
# what the node declares (the tests compare the executor's inventory to it).
#
# One node named after this host (short name, address 127.0.0.1) with 8 CPUs,
# 8 GiB and 2 GPUs of type a100, whatever the machine really has
# (SlurmdParameters=config_overrides): the tests need a few jobs side by side,
# not real hardware. munged, slurmctld and slurmd run as root on free ports,
# with their own socket and config, so a Slurm or munge already on the
# machine is left alone; `stop` cancels the cluster's jobs, then kills
# exactly the daemons whose pid files are in DIR. Needs root (slurmd runs
# jobs as their users) and the packages slurm-wlm and munge
# (scripts/install-deps.sh; `start` installs them when missing).
#
# Use it as:  eval "$(scripts/slurm-test-cluster.sh env)"
#   which starts it when needed and exports CUBEPLANE_TEST_SLURM=DIR and SLURM_CONF.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cmd=${1:-}
dir=${2:-${CUBEPLANE_SLURM_DIR:-/tmp/cubeplane-slurm-$(printf '%s' "$root" | cksum | cut -d' ' -f1)}}

node=$(hostname -s)
cpus=8
memory_mb=8192
gpu_type=a100
gpu_count=2

die() {
  echo "slurm-test-cluster: $*" >&2
  exit 1
}

ensure_installed() {
  local missing=()
  command -v slurmctld >/dev/null 2>&1 || missing+=(slurmctld)
  command -v slurmd >/dev/null 2>&1 || missing+=(slurmd)
  command -v sbatch >/dev/null 2>&1 || missing+=(slurm-client)
  command -v munged >/dev/null 2>&1 || missing+=(munge)
  ((${#missing[@]})) || return 0
  [ "$(id -u)" -eq 0 ] || die "missing ${missing[*]}; run scripts/install-deps.sh as root"
  echo "slurm-test-cluster: installing slurm-wlm munge" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurm-wlm munge >&2
}

# Whether the daemon whose pid file is $1 runs (and is the program $2).
alive() {
  local pid
  [ -f "$1" ] || return 1
  pid=$(cat "$1" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ -d "/proc/$pid" ] && grep -q "$2" "/proc/$pid/comm" 2>/dev/null
}

running() {
  [ -f "$dir/cluster.env" ] && alive "$dir/run/munged.pid" munged && alive "$dir/run/slurmctld.pid" slurmctld &&
    alive "$dir/run/slurmd.pid" slurmd && SLURM_CONF="$dir/etc/slurm.conf" scontrol ping >/dev/null 2>&1
}

free_port() {
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' && return 0
  fi
  echo $((20000 + RANDOM % 20000))
}

# Kills the daemon of pid file $1 (program $2), TERM then KILL.
kill_daemon() {
  local pid
  alive "$1" "$2" || return 0
  pid=$(cat "$1")
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do
    [ -d "/proc/$pid" ] || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
}

# Whether the test cluster's jobs are all over (slurmstepd outlives slurmd,
# so they must end before the daemons go).
jobs_gone() {
  [ -z "$(SLURM_CONF="$dir/etc/slurm.conf" squeue -h -t RUNNING,COMPLETING,CONFIGURING -o %i 2>/dev/null)" ]
}

stop() {
  if alive "$dir/run/slurmctld.pid" slurmctld; then
    SLURM_CONF="$dir/etc/slurm.conf" scancel --user="$(id -un)" >/dev/null 2>&1 || true
    wait_for 15 jobs-ended jobs_gone || true
  fi
  kill_daemon "$dir/run/slurmd.pid" slurmd
  kill_daemon "$dir/run/slurmctld.pid" slurmctld
  kill_daemon "$dir/run/munged.pid" munged
  rm -rf "$dir"
}

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local n=$(($1 * 10)) what=$2
  shift 2
  for _ in $(seq 1 "$n"); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  return 1
}

node_idle() {
  SLURM_CONF="$dir/etc/slurm.conf" sinfo -h -n "$node" -o '%t' 2>/dev/null | grep -Eq '^(idle|mix|alloc)'
}

start() {
  [ "$(id -u)" -eq 0 ] || die "must run as root (slurmd runs jobs as their users)"
  ensure_installed
  if running; then
    echo "$dir"
    return 0
  fi
  stop  # whatever is left of an earlier run
  # slurmd keeps its sockets and a cached hardware topology in its spool
  # dir, which it does not create: without it every job launch probes the
  # hardware again.
  mkdir -p "$dir"/{etc,munge,run,log,state,spool,dev} "$dir/spool/slurmd-$node"
  chmod 755 "$dir" "$dir/munge"
  chmod 700 "$dir/state" "$dir/spool"

  # munge: a fresh key, our own socket; --force because it runs as root.
  dd if=/dev/urandom of="$dir/etc/munge.key" bs=1024 count=1 status=none
  chmod 600 "$dir/etc/munge.key"
  munged --force --socket="$dir/munge/munge.socket.2" --key-file="$dir/etc/munge.key" \
    --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/run/munged.seed" ||
    die "munged did not start; see $dir/log/munged.log"
  wait_for 10 munged test -S "$dir/munge/munge.socket.2" || die "munged has no socket; see $dir/log/munged.log"

  local i gres_files=""
  for ((i = 0; i < gpu_count; i++)); do
    mknod "$dir/dev/nvidia$i" c 195 "$i"
  done
  gres_files="$dir/dev/nvidia[0-$((gpu_count - 1))]"

  local ctld_port slurmd_port
  ctld_port=$(free_port)
  slurmd_port=$(free_port)
  [ "$ctld_port" != "$slurmd_port" ] || slurmd_port=$((ctld_port + 1))

  cat >"$dir/etc/slurm.conf" <<EOF
# Generated by scripts/slurm-test-cluster.sh: a throwaway test cluster.
ClusterName=cubeplane-test
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket.2
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/slurmd-%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=256
GresTypes=gpu
SlurmdParameters=config_overrides
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,default_queue_depth=1000,sched_min_interval=0,bf_interval=1
# Kept at the default 300 s: scontrol still shows a job that ended a while ago.
MinJobAge=300
KillWait=5
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory_mb Gres=gpu:$gpu_type:$gpu_count State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
  cat >"$dir/etc/gres.conf" <<EOF
AutoDetect=off
NodeName=$node Name=gpu Type=$gpu_type File=$gres_files
EOF
  cat >"$dir/cluster.env" <<EOF
NODE=$node
CPUS=$cpus
MEMORY_MB=$memory_mb
GPU_TYPE=$gpu_type
GPU_COUNT=$gpu_count
PARTITION=test
EOF

  export SLURM_CONF="$dir/etc/slurm.conf"
  # -c: a clean start, no state of an earlier cluster. Both daemons fork;
  # slurmctld exits quietly on a bad config, so its log says why.
  slurmctld -c -f "$SLURM_CONF" || { tail -n 20 "$dir/log/slurmctld.log" >&2 || true; die "slurmctld did not start"; }
  wait_for 30 slurmctld scontrol ping || {
    tail -n 20 "$dir/log/slurmctld.log" >&2 || true
    die "slurmctld does not answer; see $dir/log/slurmctld.log"
  }
  slurmd -N "$node" -f "$SLURM_CONF" || { tail -n 20 "$dir/log/slurmd.log" >&2 || true; die "slurmd did not start"; }
  wait_for 60 node node_idle || {
    tail -n 20 "$dir/log/slurmd.log" "$dir/log/slurmctld.log" >&2 || true
    die "node $node did not come up; see $dir/log/"
  }
  echo "$dir"
}

case "$cmd" in
  start) start ;;
  env)
    running || start >/dev/null
    echo "export CUBEPLANE_TEST_SLURM=$dir"
    echo "export SLURM_CONF=$dir/etc/slurm.conf"
    ;;
  stop) stop ;;
  *) die "usage: $0 start|env|stop [DIR]" ;;
esac
