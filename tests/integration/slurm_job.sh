# A real Slurm job: the test starts its own munged, slurmctld and slurmd on
# this host (its own key, slurm.conf, ports and directories under $WORK), then
# `sbatch --wait` runs examples/slurm/one-node.sbatch, whose srun starts 2
# workers. The job must succeed and end with parameters bitwise equal to the
# reference run of `meshtrain launch --nproc 2` (launcher_lib.sh).
# Skipped (77) when not root, when Slurm or munge is not installed, or when
# the daemons cannot start here (the reason and their logs are printed).
HERE="$(cd "$(dirname "$0")" && pwd)"
# lib.sh changes directory: relative paths (as typed by hand) made absolute.
if [ $# -ge 2 ] && [ -e "$1" ] && [ -e "$2" ]; then set -- "$(readlink -f "$1")" "$(readlink -f "$2")" "${@:3}"; fi
source "$HERE/lib.sh"

skip() { echo "SKIP: $*"; exit 77; }
# Run inside a Slurm allocation, this script must not hand its own job's
# variables to the test cluster's commands.
for v in $(compgen -e | grep -E '^(SLURM|SBATCH|SRUN|SALLOC)_' || true); do unset "$v"; done
[ "$(id -u)" = 0 ] || skip "not root (slurmd must run as root)"
for tool in munged mungekey slurmctld slurmd sbatch srun scontrol sinfo squeue scancel; do
  PATH="$PATH:/usr/sbin:/sbin" command -v "$tool" > /dev/null || skip "$tool is not installed"
done
export PATH="$PATH:/usr/sbin:/sbin"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# munged refuses a socket whose directories are not searchable by everyone.
chmod 755 "$WORK"
M="$WORK/munge"
S="$WORK/slurm"
mkdir -p "$M" "$S/state" "$S/spool" "$S/log"
export SLURM_CONF="$WORK/slurm.conf"  # every Slurm command, daemons included, reads this one
PIDS=()                               # daemons started here, in start order

alive() { local s; s="$(ps -o stat= -p "$1" 2> /dev/null)" && [[ "$s" != Z* ]]; }
# Stops pid $1: SIGTERM, up to 5 s, then SIGKILL.
stop_pid() {
  alive "$1" || return 0
  kill -TERM "$1" 2> /dev/null || true
  for _ in $(seq 50); do alive "$1" || return 0; sleep 0.1; done
  kill -KILL "$1" 2> /dev/null || true
}
# Processes whose environment names this test's slurm.conf: slurmstepd and
# the job's tasks, which outlive slurmd when a job hangs.
job_pids() {
  local p
  for p in /proc/[0-9]*; do
    case "${p#/proc/}" in "$$" | "$BASHPID") continue ;; esac
    { tr '\0' '\n' < "$p/environ"; } 2> /dev/null | grep -xF -e "SLURM_CONF=$SLURM_CONF" > /dev/null || continue
    # Not this script's own helpers: a task has a job id, slurmstepd its name.
    { tr '\0' '\n' < "$p/environ"; } 2> /dev/null | grep '^SLURM_JOB_ID=' > /dev/null ||
      [ "$(cat "$p/comm" 2> /dev/null)" = slurmstepd ] || continue
    echo "${p#/proc/}"
  done
  return 0
}
dump_logs() {
  local f
  # A daemon in the foreground writes its log to stderr (*.out) as well;
  # *.out alone holds what it printed before it opened its log file.
  for f in "$M"/munged.log "$S"/log/slurmctld.log "$S"/log/slurmd.log "$WORK"/job.out; do
    [ -s "$f" ] || f="${f%.log}.out"
    [ -s "$f" ] || continue
    echo "----- $f (last 60 lines)"
    tail -n 60 "$f"
  done
}
cleanup() {
  local rc=$? p i
  set +e
  trap - EXIT
  [ "$rc" = 0 ] || [ "$rc" = 77 ] || dump_logs
  # Every job of this test's own cluster.
  alive "${PIDS[1]:-0}" && timeout 5 scancel --partition=test > /dev/null 2>&1
  # The daemons, newest first (slurmd before slurmctld before munged).
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    stop_pid "${PIDS[$i]}"
  done
  for p in $(job_pids); do kill -KILL "$p" 2> /dev/null; done
  # pid files, should a daemon have forked away from the pid we started.
  for p in "$S/slurmd.pid" "$S/slurmctld.pid" "$M/munged.pid"; do
    [ -s "$p" ] && stop_pid "$(cat "$p")"
  done
  wait 2> /dev/null
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP  # through cleanup

# Skips with the daemons' logs: the sandbox cannot run this part of Slurm.
skip_with_logs() { dump_logs; skip "$*"; }

# --- munge: its own key, socket, pid, seed and log files.
mungekey --create --keyfile="$M/munge.key" --bits=1024 > "$M/mungekey.out" 2>&1 ||
  { cat "$M/mungekey.out"; skip "mungekey could not create a key"; }
munged --foreground --socket="$M/socket" --key-file="$M/munge.key" --pid-file="$M/munged.pid" \
  --seed-file="$M/munged.seed" --log-file="$M/munged.log" < /dev/null > "$M/munged.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do
  [ -S "$M/socket" ] && break
  alive "${PIDS[0]}" || break
  sleep 0.1
done
timeout 5 munge --socket="$M/socket" --no-input 2> "$M/check.err" |
  timeout 5 unmunge --socket="$M/socket" > /dev/null 2>> "$M/check.err" ||
  { cat "$M/check.err" "$M/munged.out"; skip_with_logs "munged did not start (credential round trip failed)"; }

# --- slurm.conf: one node, "localhost", with this host's CPU count.
ncpu="$(nproc)"
[ "$ncpu" -ge 2 ] || ncpu=2
ctld_port="$(free_port)"
slurmd_port="$(free_port)"
while [ "$slurmd_port" = "$ctld_port" ]; do slurmd_port="$(free_port)"; done
: > "$WORK/plugstack.conf"
cat > "$SLURM_CONF" <<CONF
# Written by tests/integration/slurm_job.sh; lives and dies with $WORK.
ClusterName=mttest$$
SlurmctldHost=localhost
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$M/socket
CredType=cred/munge
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# No system-wide SPANK plugins, no mail.
PlugStackConfig=$WORK/plugstack.conf
MailProg=/bin/true
# No cgroups: processes are tracked through /proc, tasks are not bound.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
# The node's layout is the one written here (every CPU a core), whatever the
# hardware's sockets and threads, so 2 one-CPU tasks fit under CR_Core.
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=5
# sbatch --wait polls every 2 s, 4 times longer each time while that stays
# under MinJobAge/2 (which keeps the job's record until it looks): 5 keeps
# it at 2 s, so a 3 s job does not wait 10 s.
MinJobAge=5
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$ncpu RealMemory=256 State=UNKNOWN
PartitionName=test Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF

# --- slurmctld, then slurmd (in the foreground, as children of this script).
slurmctld -D < /dev/null > "$S/log/slurmctld.out" 2>&1 &
PIDS+=($!)
ctld_up() { [[ "$(timeout 2 scontrol ping 2> /dev/null)" == *"is UP"* ]]; }
deadline=$((SECONDS + 20))
while ((SECONDS < deadline)); do
  ctld_up && break
  alive "${PIDS[1]}" || break
  sleep 0.2
done
ctld_up || skip_with_logs "slurmctld did not come up"
slurmd -D -N localhost < /dev/null > "$S/log/slurmd.out" 2>&1 &
PIDS+=($!)
state=""
deadline=$((SECONDS + 30))
while ((SECONDS < deadline)); do
  state="$(timeout 2 sinfo --noheader --nodes=localhost --format=%T 2> /dev/null || true)"
  [ "$state" = idle ] && break
  alive "${PIDS[2]}" || break
  sleep 0.2
done
[ "$state" = idle ] || { timeout 2 scontrol show node localhost || true; skip_with_logs "node never became idle (state '$state')"; }

# --- the reference run under `meshtrain launch`, then the Slurm job.
source "$HERE/launcher_lib.sh"
start=$SECONDS
# MASTER_ADDR: the script's default (the job's first node, "localhost").
# MASTER_PORT: a free port rather than the default derived from the job id.
submit_out="$(MESHTRAIN="$MESHTRAIN" CONFIG=job.toml MASTER_PORT="$(free_port)" \
  timeout 120 sbatch --wait --parsable --chdir="$WORK" --output="$WORK/job.out" \
  --cpus-per-task=1 --time=5 --job-name=meshtrain-test \
  "$SRC/examples/slurm/one-node.sbatch" --parallel.timeout_s=30 --training.out_dir="$WORK/slurm" 2>&1)" &&
  job_rc=0 || job_rc=$?
JOB_ID="$(echo "$submit_out" | grep -o '^[0-9]*' | head -n 1)"
echo "slurm job ${JOB_ID:-?} ended with status $job_rc after $((SECONDS - start)) s"
[ "$job_rc" = 0 ] || { echo "$submit_out"; fail "sbatch --wait: job failed (status $job_rc)"; }
# A job whose slurmstepd cannot start (a plugin failing) still "completes"
# with status 0 and drains the node: its output file tells.
[ -s job.out ] || fail "the job wrote no output: its batch script never ran (see slurmd.log)"
grep -q "2 workers on localhost" job.out || fail "the batch script did not see 2 tasks on localhost"
check_run job.out "$WORK/slurm"
ref="$(params_file "$WORK/ref/checkpoints/step_00000020")"
got="$(params_file "$WORK/slurm/checkpoints/step_00000020")"
cmp "$ref" "$got" || fail "parameters after the Slurm job differ from meshtrain launch's"
echo "slurm job ok"
