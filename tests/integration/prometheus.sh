# Live metrics (metrics.prometheus_port): a running `meshtrain train` serves
# /metrics in the Prometheus text format with the numbers of its
# metrics.jsonl records, and /healthz; a port in use stops the job before it
# trains, naming the key; under `meshtrain run --nproc 2` only worker 0
# serves. promtool (Debian's prometheus package) checks a scrape where it is
# installed.
source "$(dirname "$0")/lib.sh"
source "$SRC/tests/integration/netns_lib.sh"  # free_port
make_text data.txt 100000
tiny_config job.toml data.txt
pid=""
trap '[ -z "$pid" ] || kill "$pid" 2> /dev/null; rm -rf "$WORK"' EXIT  # no job left running on a failure

# http URL OUT: the body to OUT; prints the status (000: no answer) and the Content-Type.
if command -v curl > /dev/null; then
  http() { curl -s -m 5 -o "$2" -w '%{http_code} %{content_type}' "$1" || true; }
else
  echo "(no curl: python3's urllib scrapes)"
  http() {
    python3 - "$1" "$2" <<'PY'
import sys, urllib.error, urllib.request
try:
    r = urllib.request.urlopen(sys.argv[1], timeout=5)
    code, ctype, body = r.status, r.headers.get("Content-Type", ""), r.read()
except urllib.error.HTTPError as e:
    code, ctype, body = e.code, e.headers.get("Content-Type", ""), e.read()
except Exception:
    code, ctype, body = 0, "", b""
open(sys.argv[2], "wb").write(body)
print(f"{code:03d} {ctype}")
PY
  }
fi

# check_scrape SCRAPE METRICS_JSONL [CHECKPOINT_EVERY [RESTARTS]]: the scrape
# is in the text format (HELP and TYPE before each family's samples), and
# its logged step's values equal that step's record in metrics.jsonl
# exactly. Prints the step.
check_scrape() {
  python3 - "$@" <<'PY'
import json, re, sys
text, jsonl = open(sys.argv[1]).read(), sys.argv[2]
every = int(sys.argv[3]) if len(sys.argv) > 3 else 0
restarts = int(sys.argv[4]) if len(sys.argv) > 4 else 0
helped, types, samples = set(), {}, {}
for line in text.splitlines():
    if line.startswith("# HELP "):
        helped.add(line.split()[2])
    elif line.startswith("# TYPE "):
        _, _, name, kind = line.split()
        assert name in helped and kind in ("gauge", "counter"), line
        assert (kind == "counter") == name.endswith("_total"), line
        types[name] = kind
    else:
        m = re.fullmatch(r'(meshtrain_[a-z_]+)(\{rank="[0-9]+"\})? (\S+)', line)
        assert m and m[1] in types, f"not a sample of a declared family: {line!r}"
        samples[m[1] + (m[2] or "")] = float(m[3])
step = int(samples["meshtrain_logged_step"])
recs = [r for r in map(json.loads, open(jsonl)) if r.get("step") == step and "loss" in r]
assert recs, f"metrics.jsonl has no record of step {step}"
r = recs[-1]
pairs = {"meshtrain_loss": r["loss"], "meshtrain_learning_rate": r["lr"], "meshtrain_grad_norm": r["grad_norm"],
         "meshtrain_tokens_per_second": r["tokens_per_s"],
         'meshtrain_step_duration_seconds{rank="0"}': r["step_ms"] / 1e3}
for name, want in pairs.items():
    assert samples[name] == want, f"{name} {samples[name]!r} != metrics.jsonl's {want!r} (step {step})"
durations = [k for k in samples if k.startswith("meshtrain_step_duration_seconds")]
assert durations == ['meshtrain_step_duration_seconds{rank="0"}'], durations  # the lead knows its own
assert samples["meshtrain_step"] >= step, samples["meshtrain_step"]
assert samples["meshtrain_restarts_total"] == restarts, samples["meshtrain_restarts_total"]
assert samples["meshtrain_skipped_steps_total"] == 0
assert 0 <= samples["meshtrain_heartbeat_age_seconds"] < samples["meshtrain_heartbeat_timeout_seconds"]
if every and step > 2 * every:  # asynchronous saves are seen committed at the next save
    c = samples["meshtrain_last_checkpoint_step"]
    assert c % every == 0 and step - 2 * every <= c <= step, (c, step)
print(step)
PY
}

# scrape_running PORT PID OUT MIN_STEP [LINE]: scrapes /metrics until its
# logged step reaches MIN_STEP (and it has the line LINE) while the job PID
# runs; fails if the job ends first.
scrape_running() {
  local port="$1" pid="$2" out="$3" min="$4" line="${5:-}" status deadline=$(( $(date +%s) + 120 ))
  while :; do
    kill -0 "$pid" 2> /dev/null || fail "the job ended before it was scraped at step $min (too fast? raise the steps)"
    [ "$(date +%s)" -lt "$deadline" ] || fail "no scrape reached step $min in 120 s"
    status="$(http "http://127.0.0.1:$port/metrics" "$out")"
    if [ "${status%% *}" = 200 ] && { [ -z "$line" ] || grep -qx "$line" "$out"; } &&
      python3 -c 'import re,sys; m=re.search(r"^meshtrain_logged_step (\d+)$", open(sys.argv[1]).read(), re.M); sys.exit(0 if m and int(m[1]) >= int(sys.argv[2]) else 1)' \
        "$out" "$min"; then
      [ "${status#* }" = "text/plain; version=0.0.4; charset=utf-8" ] || fail "/metrics Content-Type: ${status#* }"
      return
    fi
    sleep 0.05
  done
}

# One process: enough steps at log_every = 1 to run for a few seconds.
port="$(free_port)"
STEPS=12000
"$MESHTRAIN" train job.toml --training.steps=$STEPS --training.log_every=1 --training.eval_every=0 \
  --checkpoint.every=200 --metrics.prometheus_port="$port" > train.txt 2>&1 &
pid=$!
scrape_running "$port" "$pid" scrape1.txt 450
step1="$(check_scrape scrape1.txt "$WORK/run/metrics.jsonl" 200)" || { cat scrape1.txt; fail "scrape 1"; }
status="$(http "http://127.0.0.1:$port/healthz" health.txt)"
[ "${status%% *}" = 200 ] && [ "$(cat health.txt)" = ok ] || fail "/healthz while running: $status $(cat health.txt)"
status="$(http "http://127.0.0.1:$port/nope" nope.txt)"
[ "${status%% *}" = 404 ] || fail "/nope answered $status"
if command -v promtool > /dev/null; then
  promtool check metrics < scrape1.txt || fail "promtool check metrics"
  echo "promtool check metrics: clean"
else
  echo "SKIP (part): no promtool (Debian's prometheus package) to check the scrape"
fi

# The same port while the job holds it: a second job stops before training, naming the key.
start=$(date +%s)
set +e
"$MESHTRAIN" train job.toml --training.out_dir="$WORK/second" --metrics.prometheus_port="$port" > second.txt 2>&1
code=$?
set -e
[ $code -eq 3 ] || { cat second.txt; fail "a port in use exited with status $code, not 3"; }
grep -q "metrics.prometheus_port $port on metrics.prometheus_address '127.0.0.1'.*in use" second.txt ||
  { cat second.txt; fail "the error does not name the key and the address"; }
[ ! -e "$WORK/second/metrics.jsonl" ] || fail "the second job trained"
[ $(( $(date +%s) - start )) -lt 30 ] || fail "the port clash took too long to report"

scrape_running "$port" "$pid" scrape2.txt $(( step1 + 1 ))
step2="$(check_scrape scrape2.txt "$WORK/run/metrics.jsonl" 200)" || { cat scrape2.txt; fail "scrape 2"; }
wait "$pid" || { cat train.txt; fail "the scraped job failed"; }
pid=""
grep -q "^done: $STEPS steps" train.txt || { tail train.txt; fail "the job did not finish"; }
status="$(http "http://127.0.0.1:$port/healthz" gone.txt)"
[ "${status%% *}" = 000 ] || fail "the endpoint still answers after the job ended ($status)"
echo "train: scraped steps $step1 and $step2, equal to metrics.jsonl; /healthz ok; port clash named"

# `meshtrain run` with two workers: worker 0 serves, worker 1 does not try
# (it would fail on the port in use and fail the job). Worker 1 killed, the
# whole job restarts and the new worker 0 serves on the same port, counting
# the restart.
port="$(free_port)"
"$MESHTRAIN" run job.toml --nproc 2 --parallel.data=allreduce --training.steps=3000 --training.log_every=1 \
  --training.eval_every=0 --checkpoint.every=1000 --training.out_dir="$WORK/dp" \
  --metrics.prometheus_port="$port" > dp.txt 2>&1 &
pid=$!
scrape_running "$port" "$pid" scrape_dp.txt 20
step_dp="$(check_scrape scrape_dp.txt "$WORK/dp/metrics.jsonl")" || { cat scrape_dp.txt; fail "scrape of the 2-worker job"; }
status="$(http "http://127.0.0.1:$port/healthz" health_dp.txt)"
[ "${status%% *}" = 200 ] || fail "/healthz of the 2-worker job: $status"
victim=""
for child in $(pgrep -P "$pid"); do
  if tr '\0' '\n' < "/proc/$child/environ" 2> /dev/null | grep -qx "RANK=1"; then victim=$child; fi
done
[ -n "$victim" ] || { cat dp.txt; fail "no worker 1 to kill"; }
kill -KILL "$victim"
scrape_running "$port" "$pid" scrape_restarted.txt 1 "meshtrain_restarts_total 1"
step_restarted="$(check_scrape scrape_restarted.txt "$WORK/dp/metrics.jsonl" 0 1)" ||
  { cat scrape_restarted.txt; fail "scrape after the restart"; }
wait "$pid" || { cat dp.txt; fail "the 2-worker job failed"; }
pid=""
grep -q "^\[worker 0\] .*2 workers" dp.txt || { cat dp.txt; fail "not a 2-worker job"; }
grep -q "restarting the whole job" dp.txt || { cat dp.txt; fail "no restart"; }
echo "run --nproc 2: worker 0 served (scraped step $step_dp), no port clash; after a restart, step $step_restarted"
echo "prometheus ok"
