#!/usr/bin/env bash
# A private one-node Slurm cluster (munged, slurmctld, slurmd: Debian's slurmctld, slurmd,
# slurm-client and munge packages) for the Slurm tests, and for trying the sbatch scripts by hand:
#   tests/slurm/cluster.sh start DIR [PID]  # prints `export SLURM_CONF=DIR/slurm.conf`; 77 = cannot run here
#   tests/slurm/cluster.sh stop DIR         # cancels the jobs left, stops the daemons
# Configuration, state and logs live in DIR, the daemons listen on ports free at the start, and
# job ids start at a random number (ampt's Slurm rendezvous port is 15000 + job id mod 20000), so
# it runs beside a system Slurm or another build's cluster and touches nothing outside DIR. The
# daemons stop by themselves once process PID (default: the caller, such as CTest) has gone, so an
# interrupted test run leaves nothing behind.
set -uo pipefail

usage="usage: tests/slurm/cluster.sh start DIR [PID] | stop DIR"
action="${1:?$usage}"
dir="${2:?$usage}"
mkdir -p "$dir" && dir="$(cd "$dir" && pwd)" || exit 1
conf="$dir/slurm.conf"

# Exit status 77 is the fixture's SKIP_RETURN_CODE; the Slurm tests read the reason from DIR/skipped.
skip() {
  echo "$*" > "$dir/skipped"
  echo "Slurm tests skipped: $*" >&2
  exit 77
}

fail() {
  echo "tests/slurm/cluster.sh: error: $*" >&2
  for log in "$dir"/log/*.log; do
    if [ -s "$log" ]; then echo "--- $log" >&2; tail -n 20 "$log" >&2; fi
  done
  stop_cluster
  exit 1
}

# A Unix socket path holds at most 107 bytes, and slurmd names its step sockets after the node
# and job inside its spool directory: both go to a short directory when DIR's path is long.
make_run_dir() {
  if [ "${#dir}" -le 60 ]; then mkdir -p "$dir/run" && echo "$dir/run"
  else mktemp -d /tmp/ampt-slurm.XXXXXX
  fi
}

# TERM to every pid given, then KILL to those left after 10 s.
stop_pids() {
  local pid left
  for pid in "$@"; do kill -TERM "$pid" 2>/dev/null; done
  for _ in $(seq 100); do
    left=()
    for pid in "$@"; do if kill -0 "$pid" 2>/dev/null; then left+=("$pid"); fi; done
    [ "${#left[@]}" -eq 0 ] && return 0
    sleep 0.1
  done
  kill -KILL "${left[@]}" 2>/dev/null
}

stop_cluster() {
  rm -f "$dir/up"
  [ -f "$dir/run_dir" ] || return 0
  local run pid
  run="$(cat "$dir/run_dir")"
  pid="$(cat "$run/slurmctld.pid" 2>/dev/null)"
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    # The jobs first, so that slurmd's step daemons and their tasks end before slurmd does.
    SLURM_CONF="$conf" scancel --quiet --user root 2>/dev/null
    for _ in $(seq 150); do
      [ -z "$(SLURM_CONF="$conf" squeue --noheader --format %i 2>/dev/null)" ] && break
      sleep 0.2
    done
  fi
  local daemons=()
  for daemon in watchdog slurmd slurmctld munged; do
    pid="$(cat "$run/$daemon.pid" 2>/dev/null)"
    # The watchdog runs this very function when the process it watches has gone.
    if [ -n "$pid" ] && [ "$pid" != "$$" ]; then daemons+=("$pid"); fi
  done
  stop_pids "${daemons[@]}"
  if [ "$run" = "$dir/run" ]; then rm -rf "$run"/*; else rm -rf "$run"; fi
  rm -f "$dir/run_dir"
}

# Two free ports for the daemons, and a first job id whose rendezvous ports (the next 100 jobs')
# are free too.
pick_ports() {
  python3 - <<'EOF'
import random, socket

def free(port):
    with socket.socket() as s:
        try:
            s.bind(("", port))
            return True
        except OSError:
            return False

daemons = []
for _ in range(2):
    with socket.socket() as s:
        s.bind(("", 0))
        daemons.append(s.getsockname()[1])
while True:
    first = random.randrange(15000, 35000 - 100)
    if all(free(p) and p not in daemons for p in range(first, first + 100)):
        break
print(*daemons, 20000 + first - 15000)
EOF
}

start_cluster() {
  local watched="${1:-$PPID}"
  rm -f "$dir/skipped"
  stop_cluster  # whatever an interrupted run left
  [ "$(id -u)" -eq 0 ] || skip "they start munged, slurmctld and slurmd as root (this is uid $(id -u))"
  for exe in munged mungekey slurmctld slurmd sbatch srun scontrol squeue sinfo scancel python3; do
    command -v "$exe" >/dev/null 2>&1 \
      || skip "$exe not found (scripts/bootstrap.sh installs Debian's slurmctld, slurmd, slurm-client and munge)"
  done

  [ "$(nproc)" -ge 2 ] || skip "their jobs run 2 tasks, and this machine has 1 CPU"
  local run host cpus ports ctld_port slurmd_port first_job
  host="$(hostname -s)"
  # The node is this machine under its own name, which ampt's rendezvous looks up.
  getent hosts "$host" >/dev/null || skip "this machine's name '$host' does not resolve (getent hosts $host)"

  run="$(make_run_dir)" || fail "cannot create a directory for the daemons' sockets"
  echo "$run" > "$dir/run_dir"
  rm -rf "$dir/state"
  mkdir -p "$run/spool" "$dir/state" "$dir/log"
  chmod go+x "$dir" "$run"  # munged wants its socket reachable by every user
  # Two CPUs at most: the test jobs are small, and `ctest -j` runs other tests beside them.
  cpus="$(nproc)"
  if [ "$cpus" -gt 2 ]; then cpus=2; fi
  ports="$(pick_ports)" || fail "python3 could not find free ports"
  read -r ctld_port slurmd_port first_job <<< "$ports"

  mungekey --create --force --keyfile "$dir/munge.key" >/dev/null 2>&1 \
    || fail "mungekey could not write $dir/munge.key"
  munged --key-file "$dir/munge.key" --socket "$run/munge.socket" --pid-file "$run/munged.pid" \
    --log-file "$dir/log/munged.log" --seed-file "$dir/munged.seed" </dev/null >/dev/null 2>&1 \
    || fail "munged did not start"

  cat > "$conf" <<EOF
# Written by tests/slurm/cluster.sh: one node, jobs as root, everything in $dir.
ClusterName=ampt-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$run/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$run/spool
SlurmctldPidFile=$run/slurmctld.pid
SlurmdPidFile=$run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
FirstJobId=$first_job
# scancel and a step's end send SIGTERM, then SIGKILL this many seconds later.
KillWait=10
# Finished jobs stay visible to scontrol for the tests' checks.
MinJobAge=600
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
  export SLURM_CONF="$conf"
  slurmctld -f "$conf" </dev/null >/dev/null 2>&1 || fail "slurmctld did not start"
  slurmd -f "$conf" -N "$host" </dev/null >/dev/null 2>&1 || fail "slurmd did not start"
  local ready=""
  for _ in $(seq 150); do
    if [ "$(sinfo --noheader --format %t 2>/dev/null)" = idle ]; then ready=1; break; fi
    sleep 0.2
  done
  [ -n "$ready" ] || fail "node $host did not become idle within 30 s: $(sinfo --noheader --format '%t %E' 2>&1)"

  touch "$dir/up"
  setsid bash -c 'while kill -0 "$0" 2>/dev/null && [ -f "$2/up" ]; do sleep 2; done
                  if [ -f "$2/up" ]; then exec bash "$1" stop "$2"; fi' \
    "$watched" "$(readlink -f "${BASH_SOURCE[0]}")" "$dir" </dev/null >/dev/null 2>&1 &
  echo $! > "$run/watchdog.pid"
  echo "export SLURM_CONF=$conf  # node $host, $cpus CPUs, slurmctld on port $ctld_port, until pid $watched exits"
}

case "$action" in
  start) start_cluster "${3:-}" ;;
  stop) stop_cluster ;;
  *) echo "$usage" >&2; exit 2 ;;
esac
