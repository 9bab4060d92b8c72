# `meshtrain run` starts the pools a config names, prefixes their output,
# and fails when a worker fails.
source "$(dirname "$0")/lib.sh"
make_text data.txt 100000
tiny_config job.toml data.txt

# Two data-parallel workers (--nproc overrides parallel.workers).
"$MESHTRAIN" run job.toml --nproc 2 --parallel.data=allreduce > dp.txt 2>&1 || { cat dp.txt; fail "data-parallel run"; }
grep -q "^\[worker 0\] .*2 workers" dp.txt || { cat dp.txt; fail "no [worker 0] line of a 2-worker job"; }
[ -d "$WORK/run/checkpoints/step_00000020" ] || { cat dp.txt; fail "no final checkpoint"; }

# The Reduction Server: reducers (0: as many as workers) with the config's transport.
"$MESHTRAIN" run job.toml --parallel.workers=2 --parallel.data=allreduce --parallel.all_reduce=reduction_server \
  --parallel.reducers=1 --training.out_dir="$WORK/rs" > rs.txt 2>&1 || { cat rs.txt; fail "reduction-server run"; }
grep -q "^\[reducer 0\] .*served" rs.txt || { cat rs.txt; fail "no [reducer 0] output"; }
[ -d "$WORK/rs/checkpoints/step_00000020" ] || { cat rs.txt; fail "no final checkpoint (reduction server)"; }

# A worker failing on bad input fails the run, naming it, without restarts
# (they could not help).
start=$(date +%s)
expect_failure "worker [01] exited with status 3" \
  "$MESHTRAIN" run job.toml --nproc 2 --parallel.data=allreduce --data.path=/nonexistent.txt
[ $(( $(date +%s) - start )) -lt 20 ] || fail "the failed run took too long"

# Pools the config has no role for stop before anything starts.
expect_failure "2 workers need parallel.data" "$MESHTRAIN" run job.toml --nproc 2
echo "run ok"
