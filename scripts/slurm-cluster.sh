#!/usr/bin/env bash
# A real single-node Slurm cluster (Debian's slurmctld, slurmd and munge) for testing the
# project's Slurm workflow, confined to localhost: it runs in a private network namespace whose
# only interface is the loopback, so no daemon can listen on, or reach, any other address.
#
#   scripts/slurm-cluster.sh run DIR -- COMMAND [ARG...]
#       writes the configuration, a munge key, state and logs under DIR; brings the loopback up in
#       a new network namespace; starts munged, slurmctld and slurmd there; waits (bounded) for
#       the node to be idle; runs COMMAND with SLURM_CONF set; then, whatever COMMAND did (exit,
#       failure, signal), cancels every job, stops the daemons and ends every process left in the
#       namespace. Exits with COMMAND's status; 77 when it cannot run here (not root, no unshare,
#       a Slurm or munge package missing: scripts/install-deps.sh installs them).
#
# Needs root (the daemons run as root and network namespaces need CAP_SYS_ADMIN), as CI does.
# Logs: DIR/log/{munged,slurmctld,slurmd}.log; job output goes where the job says.
set -uo pipefail

usage() { echo "usage: $0 run DIR -- COMMAND [ARG...]" >&2; exit 2; }
[ $# -ge 4 ] && [ "$1" = run ] && [ "$3" = -- ] || [ "${1:-}" = _inside ] || [ "${1:-}" = _reap ] || usage
log() { echo "slurm-cluster: $*" >&2; }

if [ "$1" = run ]; then
  dir=$2
  shift 3
  missing=
  for tool in unshare ip munged slurmctld slurmd sbatch sinfo scancel; do
    command -v "$tool" > /dev/null 2>&1 || missing="$missing $tool"
  done
  [ -z "$missing" ] || { log "SKIP: missing$missing (scripts/install-deps.sh installs slurmctld slurmd slurm-client munge iproute2)"; exit 77; }
  [ "$(id -u)" = 0 ] || { log "SKIP: needs root (daemons and a network namespace)"; exit 77; }
  unshare --net true 2> /dev/null || { log "SKIP: cannot create a network namespace here (unshare --net)"; exit 77; }
  mkdir -p "$dir" && dir=$(cd "$dir" && pwd) || exit 2
  # Everything below runs in the new namespace; its exit status is COMMAND's.
  exec unshare --net -- "$0" _inside "$dir" "$@"
fi

# Every process of this namespace but the caller: the daemons, slurmstepd, the jobs' processes.
# Found with builtins only (test -ef on the namespace links), so the search starts no process.
left=()
find_left() {
  left=()
  local p
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    [ "$p" = $$ ] && continue
    [[ /proc/$p/ns/net -ef /proc/$$/ns/net ]] 2> /dev/null && left+=("$p")
  done
}
end_left() {  # TERM, then KILL, everything find_left finds
  find_left
  ((${#left[@]})) || return 0
  log "ending ${#left[@]} leftover process(es) of the namespace: ${left[*]}"
  kill -TERM "${left[@]}" 2> /dev/null
  sleep 1
  find_left
  ((${#left[@]})) && kill -KILL "${left[@]}" 2> /dev/null
  return 0
}

# ---- the watchdog: if the cluster script is killed outright (SIGKILL from a test driver's
# timeout, which no trap sees), it ends the daemons and everything else in the namespace.
if [ "$1" = _reap ]; then
  owner=$3
  while kill -0 "$owner" 2> /dev/null; do sleep 1; done
  log "the cluster script (pid $owner) is gone: stopping what it left"
  end_left
  exit 0
fi

# ---- inside the private network namespace --------------------------------------------------
dir=$2
shift 2
# A second loopback address: glibc's getaddrinfo(AI_ADDRCONFIG), which Slurm uses to bind its
# ports, returns no IPv4 address while 127.0.0.1 is the only one configured.
{ ip link set lo up && ip addr add 127.0.0.2/8 dev lo; } || { log "cannot set up the loopback in the namespace"; exit 2; }
node=$(hostname -s)
rm -rf "$dir/state" "$dir/spool" "$dir/munge" "$dir/log"
mkdir -p "$dir/state" "$dir/spool" "$dir/munge" "$dir/log" || exit 2
chmod 700 "$dir/munge"
conf=$dir/slurm.conf
export SLURM_CONF=$conf

stop_cluster() {
  local rc=$?
  # A second TERM (a process group signal followed by a parent's) must not cut the cleanup short.
  trap '' INT TERM
  trap - EXIT
  timeout 10 scancel --full --quiet --user=root > /dev/null 2>&1
  local f pid
  for f in "$dir/state/slurmd.pid" "$dir/state/slurmctld.pid" "$dir/munge/munged.pid"; do
    pid=$(cat "$f" 2> /dev/null) || continue
    kill -TERM "$pid" 2> /dev/null || continue
    for _ in $(seq 1 50); do kill -0 "$pid" 2> /dev/null || break; sleep 0.2; done
    kill -KILL "$pid" 2> /dev/null && log "killed $f's process $pid after 10 s"
  done
  # Anything left (a job step outliving slurmd, the watchdog): TERM, then KILL, by process id.
  end_left
  log "stopped (munged, slurmctld, slurmd)"
  exit "$rc"
}
trap stop_cluster EXIT
trap 'exit 130' INT TERM

# The watchdog, detached (its own session, parent init) so that a driver killing this script's
# process tree does not take it along.
(setsid "$0" _reap "$dir" $$ < /dev/null >> "$dir/log/watchdog.log" 2>&1 &)

# munge: a fresh key for this cluster only, a private socket.
head -c 1024 /dev/urandom > "$dir/munge/munge.key" && chmod 400 "$dir/munge/munge.key"
munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
  --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" \
  --seed-file="$dir/munge/munged.seed" || { log "munged did not start: $(tail -3 "$dir/log/munged.log")"; exit 2; }

cpus=$(nproc)
cat > "$conf" <<EOF
# Written by scripts/slurm-cluster.sh: one node, localhost only, no accounting, no cgroups.
ClusterName=validate-test
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=6817
SlurmdPort=6818
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/state/slurmctld.pid
SlurmdPidFile=$dir/state/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
MailProg=/bin/true
PlugStackConfig=/dev/null
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
MinJobAge=600
KillWait=5
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=local Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF

slurmctld -i -f "$conf" || { log "slurmctld did not start: $(tail -5 "$dir/log/slurmctld.log")"; exit 2; }
slurmd -f "$conf" || { log "slurmd did not start: $(tail -5 "$dir/log/slurmd.log")"; exit 2; }
state=
deadline=$((SECONDS + 60))
while [ $SECONDS -lt $deadline ]; do
  state=$(timeout 3 sinfo -h -n "$node" -o %T 2> /dev/null)
  [ "$state" = idle ] && break
  sleep 0.5
done
if [ "$state" != idle ]; then
  log "the node did not become idle in 60 s (state '${state:-none}')"
  tail -n 5 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2
  exit 2
fi
# The daemons' process ids, for a caller to check that none outlives the cluster (the daemons
# remove their own pid files when they stop).
cat "$dir/munge/munged.pid" "$dir/state/slurmctld.pid" "$dir/state/slurmd.pid" > "$dir/daemons.pids" 2> /dev/null
log "cluster up: node $node ($cpus CPUs) on 127.0.0.1 in a private network namespace; SLURM_CONF=$conf"
# In the background and waited for, so that a TERM (ctest's timeout, a cancelled CI job) stops the
# cluster at once instead of after COMMAND (bash defers traps while a foreground child runs).
"$@" &
wait $!
