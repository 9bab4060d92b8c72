# Parameter-server failures end in a clear error, never a hang:
#   - a worker that cannot reach a server names the server's address;
#   - a server killed mid-run makes the workers exit non-zero naming it, and
#     the surviving server gives up after parallel.timeout_s without requests;
#   - a process started in the wrong role says so.
source "$(dirname "$0")/lib.sh"
source "$SRC/tests/integration/ps/ps_lib.sh"
make_text text.txt 100000
tiny_config job.toml "$WORK/text.txt"
ARGS=(--training.steps=100000 --training.log_every=50 --parallel.servers=2 --parallel.timeout_s=3
      --training.out_dir="$WORK/run")
mkdir -p "$WORK/run"

ps_env 2 2
addr1=${MESHTRAIN_SERVER_ADDRS#*,}
RANK=0 expect_failure "parameter server 0 at ${MESHTRAIN_SERVER_ADDRS%,*}" "$MESHTRAIN" train job.toml --parallel.data=parameter_server "${ARGS[@]}" --parallel.timeout_s=1
RANK=0 expect_failure "rank 0 of 4 is a worker rank" "$MESHTRAIN" ps-server job.toml "${ARGS[@]}"
RANK=3 expect_failure "is a server rank" "$MESHTRAIN" train job.toml --parallel.data=parameter_server "${ARGS[@]}"
RANK=0 expect_failure "parallel.servers = 1 but MESHTRAIN_NUM_SERVERS = 2" "$MESHTRAIN" train job.toml --parallel.data=parameter_server "${ARGS[@]}" --parallel.servers=1

ps_start_servers "$WORK/run" job.toml "${ARGS[@]}"
pids=()
for r in 0 1; do ps_start_worker "$WORK/run" $r job.toml "${ARGS[@]}"; pids+=($PS_PID); done
for _ in $(seq 600); do grep -q '"step":' "$WORK/run/server-0.jsonl" 2>/dev/null && break; sleep 0.05; done
kill -9 "${PS_SERVER_PIDS[1]}"
start=$SECONDS
for r in 0 1; do
  if wait "${pids[$r]}"; then fail "worker $r exited 0 after its server died"; fi
  grep -q "parameter server 1 at $addr1" "$WORK/run/worker-$r.log" ||
    { cat "$WORK/run/worker-$r.log"; fail "worker $r did not name the dead server"; }
done
if wait "${PS_SERVER_PIDS[0]}"; then fail "server 0 exited 0 without its workers"; fi
grep -q "no request from any worker for 3 s" "$WORK/run/server-0.log" || { cat "$WORK/run/server-0.log"; fail "server 0's message"; }
[ $((SECONDS - start)) -le 20 ] || fail "took $((SECONDS - start)) s to fail"
echo "ps failures"
