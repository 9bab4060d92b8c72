# `meshtrain run` with parallel.data = "parameter_server": servers get
# MESHTRAIN_SERVER_ADDRS and the workers train through them; a worker killed
# with SIGKILL is restarted alone and rejoins while the others go on.
source "$(dirname "$0")/lib.sh"
make_text data.txt 100000
tiny_config job.toml data.txt
"$MESHTRAIN" run job.toml --nproc 2 --parallel.data=parameter_server --parallel.servers=1 \
  --parallel.timeout_s=10 > ps.txt 2>&1 || { cat ps.txt; fail "parameter-server run"; }
grep -q "^\[server 0\] " ps.txt || { cat ps.txt; fail "no [server 0] output"; }
grep -q "^\[worker 1\] " ps.txt || grep -q "^\[worker 0\] " ps.txt || { cat ps.txt; fail "no worker output"; }

# A long job; kill worker 1 once it trains, and the job still finishes.
"$MESHTRAIN" run job.toml --nproc 3 --parallel.data=parameter_server --parallel.servers=1 --parallel.timeout_s=20 \
  --training.steps=3000 --training.log_every=100 --training.out_dir="$WORK/long" > long.txt 2>&1 &
run_pid=$!
for _ in $(seq 100); do
  grep -q "^\[worker 1\] .*step" long.txt 2> /dev/null && break
  sleep 0.1
done
victim=$(pgrep -f -- "--training.out_dir=$WORK/long" | while read -r pid; do
  if tr '\0' '\n' < "/proc/$pid/environ" 2> /dev/null | grep -qx "RANK=1"; then echo "$pid"; fi; done | head -n 1 || true)
[ -n "$victim" ] || { cat long.txt; fail "could not find worker 1"; }
kill -9 "$victim"
wait "$run_pid" || { cat long.txt; fail "the job failed after a worker died"; }
grep -q "worker 1 killed by signal 9 .*; restarting it alone (1 of 3)" long.txt || { cat long.txt; fail "no restart"; }
grep -q "worker rank 1 rejoined" long.txt || { cat long.txt; fail "the restarted worker did not rejoin"; }
echo "run parameter server ok"
