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

# --nproc is parallel.workers before the config is checked: the file says 2
# workers, which tensor 2 x pipeline 2 could not split, but 4 run it. The
# children get it too (each checks the same config), and so do ranks of
# `meshtrain launch`, whose world is their workers whatever the file says.
cp job.toml two.toml
printf '[parallel]\ndata = "allreduce"\nworkers = 2\n' >> two.toml
layout=(--parallel.tensor=2 --parallel.pipeline=2 --parallel.micro_batches=2 --training.steps=2
        --schedule.warmup_steps=1)
"$MESHTRAIN" run two.toml --nproc 4 "${layout[@]}" --training.out_dir="$WORK/nproc" > nproc.txt 2>&1 ||
  { cat nproc.txt; fail "run --nproc 4 over a file of 2 workers"; }
grep -Eq '"workers":4[,}]' "$WORK/nproc/metrics.jsonl" || { cat nproc.txt; fail "not a job of 4 workers"; }
grep -q "^\[worker 0\] pipeline parallel: 2 stages" nproc.txt || { cat nproc.txt; fail "no pipeline of 2 stages"; }
[ -d "$WORK/nproc/checkpoints/step_00000002" ] || { cat nproc.txt; fail "no final checkpoint (--nproc 4)"; }
"$MESHTRAIN" launch --nproc 4 -- "$MESHTRAIN" train two.toml "${layout[@]}" --training.out_dir="$WORK/launched" \
  > launched.txt 2>&1 || { cat launched.txt; fail "launch --nproc 4 over a file of 2 workers"; }
[ -d "$WORK/launched/checkpoints/step_00000002" ] || { cat launched.txt; fail "no final checkpoint (launch)"; }
# A count that does not fit the layout is still refused before anything starts, naming --nproc's value.
expect_failure "parallel.workers = 6 is not a multiple of pipeline 2 x tensor 2" \
  "$MESHTRAIN" run two.toml --nproc 6 "${layout[@]}" --training.out_dir="$WORK/nproc6"
[ ! -e "$WORK/nproc6" ] || fail "a refused run wrote its directory"

# A worker failing on bad input fails the run, naming it, without restarts
# (they could not help).
start=$(date +%s)
expect_failure "worker [01] exited with status 3" \
  "$MESHTRAIN" run job.toml --nproc 2 --parallel.data=allreduce --data.path=/nonexistent.txt
[ $(( $(date +%s) - start )) -lt 20 ] || fail "the failed run took too long"

# Pools the config has no role for stop before anything starts.
expect_failure "2 workers need parallel.data" "$MESHTRAIN" run job.toml --nproc 2
echo "run ok"
