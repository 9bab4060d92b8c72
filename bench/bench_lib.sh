# shellcheck shell=bash
# Sourced by the benchmarks that run meshtrain against a PyTorch peer (data_parallel.sh,
# gpt_throughput.sh, mixed_precision.sh, moe_peer.sh, tensor_parallel.sh, zero.sh): the parts they
# share. Running meshtrain: its command line (bench_mt_cmd, bench_mt_dp_flags), the run itself
# (bench_run: print the command, wait for idle CPUs, log, report a failure), its tokens/s from the
# metrics (bench_mt_metrics). Starting a PyTorch peer of bench/peers/ (bench_peer_cmd, bench_run_peer:
# the one launcher; bench_peer_model: the model and thread flags every peer takes). Recording
# (bench_results, bench_record) and the header lines (bench_cpu_model, bench_cpu_flags,
# bench_torch_version). Each script keeps its own knobs, labels, summary lines and report.
#
# The caller cds to the repository root and sets root (its path), OUT, MESHTRAIN, IDLE_WAIT and
# IDLE_PCT first, and VENV_PY where it runs peers; BENCH_PY is the python3 that reads and writes the
# JSON (default: python3). This sources bench/idle.sh (wait_idle). The functions hand their results
# back in variables the caller reads (results, mt_cmd, peer_cmd, peer_rc, peer_line).
# shellcheck disable=SC2034,SC2154  # those variables, and root, which the caller sets
# shellcheck source=bench/idle.sh
source "$root/bench/idle.sh"

# bench_threads N: the same thread-pool bounds for every runner, meshtrain included (the peers set
# them again for themselves from their --threads).
bench_threads() {
  export OMP_NUM_THREADS="$1" OPENBLAS_NUM_THREADS="$1" MKL_NUM_THREADS="$1"
}

# bench_results: starts an empty $OUT/results.jsonl and points results at it.
bench_results() {
  mkdir -p "$OUT"
  results="$OUT/results.jsonl"
  : > "$results"
}

bench_cpu_model() { grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'; }

# bench_cpu_flags FLAG...: those of FLAG... that /proc/cpuinfo lists, in its order, on one line.
bench_cpu_flags() {
  local re
  re="^($(IFS='|'; echo "$*"))\$"
  grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2- | tr ' ' '\n' | grep -E "$re" | paste -sd' '
}

# bench_torch_version PYTHON [IF_MISSING]: torch.__version__ under PYTHON, else IF_MISSING.
bench_torch_version() {
  "$1" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo "${2-}"
}

# bench_config NAME: the benchmark config NAME (examples/gpt-bench-NAME.toml): sets L D H C (layers,
# width, heads, context), B (its batch per process), V (vocabulary), PREC (its training.precision,
# which the peers match with --precision) and toml. a and b are the small fp32 configs on KJV bytes;
# gpt2 is GPT-2 small's shape in bf16 on GPT-2-sized random token ids (bench_gpt2_tokens).
bench_config() {
  case "$1" in
    a) read -r L D H C B V PREC <<< "4 256 4 128 8 256 fp32" ;;
    b) read -r L D H C B V PREC <<< "6 384 6 256 8 256 fp32" ;;
    gpt2) read -r L D H C B V PREC <<< "12 768 12 1024 4 50257 bf16"; bench_gpt2_tokens ;;
    *) echo "CONFIG must be a, b or gpt2"; exit 2 ;;
  esac
  toml="examples/gpt-bench-$1.toml"
}

# bench_gpt2_tokens: data/bench-gpt2.bin, the token file examples/gpt-bench-gpt2.toml reads: 4M random
# ids below 50257 (uint16, a fixed seed), written once.
bench_gpt2_tokens() {
  local f="$root/data/bench-gpt2.bin"
  [ -s "$f" ] && return
  mkdir -p "$root/data"
  "${BENCH_PY:-python3}" -c 'import array, random, sys
r = random.Random(5)
array.array("H", (r.randrange(50257) for _ in range(4_000_000))).tofile(open(sys.argv[1], "wb"))' "$f"
}

# bench_bf16_peak FILE: measures this machine's bf16 GEMM rate (build/bench/bench_gemm --bf16-peak, square
# 2048), prints its line and keeps it in FILE; sets bf16_peak_1 and bf16_peak_2 (GFLOP/s on 1 and on 2
# threads; empty where the tool is missing). The physical limit a bf16 run is measured against.
bench_bf16_peak() {
  bf16_peak_1="" bf16_peak_2=""
  [ -x "$root/build/bench/bench_gemm" ] || { echo "bf16 GEMM rate: n/a (no build/bench/bench_gemm)"; return; }
  "$root/build/bench/bench_gemm" --bf16-peak | tee "$1"
  bf16_peak_1=$(grep -o "1 thread [0-9.]*" "$1" | grep -o "[0-9.]*$")
  bf16_peak_2=$(grep -o "2 threads [0-9.]*" "$1" | grep -o "[0-9.]*$")
}

# bench_record JSON [KEY=VALUE | KEY:=INTEGER]...: appends JSON to $results with those keys set, in
# that order (a key JSON already has keeps its place).
bench_record() {
  "${BENCH_PY:-python3}" -c 'import json, sys
r = json.loads(sys.argv[1])
for kv in sys.argv[2:]:
    k, v = kv.split("=", 1)
    if k.endswith(":"):
        r[k[:-1]] = int(v)
    else:
        r[k] = v
print(json.dumps(r))' "$@" >> "$results"
}

# bench_need LABEL PROGRAM HINT: false, after a line that says so, when PROGRAM is neither an
# executable file nor a command on PATH.
bench_need() {
  [ -x "$2" ] || command -v "$2" > /dev/null && return 0
  echo "  $1: SKIPPED: $2 not found ($3)"
  return 1
}

# bench_show LABEL WORD...: the line "  LABEL: WORD..." with the repository root cut from every path.
bench_show() {
  local label="$1"
  shift
  echo "  $label: ${*//$root\//}"
}

# bench_failed FILE [LINES [WHAT]]: "    FAILED WHAT, see FILE:" and FILE's last LINES (default 5)
# lines, leaving out blank ones and the empty "[rankN]:" prefixes torch.distributed writes.
bench_failed() {
  local file="$1" lines="${2:-5}" what="${3:+ $3}"
  echo "    FAILED$what, see ${file#"$root"/}:"
  grep -v '^\[rank[0-9]*\]:\? *$' "$file" | grep -v '^\s*$' | tail -n "$lines" | sed 's/^/      /'
}

# bench_elapsed: seconds since the last bench_run or bench_run_peer started its command.
bench_elapsed() { echo $((SECONDS - bench_t0)); }

# bench_run [--rss FILE] LABEL LOG COMMAND...: prints the command, waits for idle CPUs, runs it with
# its output in LOG; on failure says so with LOG's last lines and returns 1. --rss FILE: run it under
# GNU time, which writes the largest resident set (KiB) among the command and the processes it waited
# for (meshtrain launch: the ranks) to FILE, where /usr/bin/time exists. Environment assignments
# before the call (VAR=value bench_run ...) reach the command.
bench_run() {
  local timer=()
  if [ "$1" = --rss ]; then
    [ -x /usr/bin/time ] && timer=(/usr/bin/time -f %M -o "$2")
    shift 2
  fi
  local label="$1" log="$2"
  shift 2
  bench_show "$label" "$@"
  wait_idle
  bench_t0=$SECONDS
  "${timer[@]}" "$@" > "$log" 2>&1 && return 0
  bench_failed "$log"
  return 1
}

# bench_mt_cmd NPROC TRANSPORT TRAIN...: sets mt_cmd to the meshtrain train command TRAIN..., under
# `meshtrain launch --nproc NPROC --transport TRANSPORT` when NPROC > 1.
bench_mt_cmd() {
  local nproc="$1" transport="$2"
  shift 2
  mt_cmd=("$@")
  [ "$nproc" -gt 1 ] && mt_cmd=("$MESHTRAIN" launch --nproc "$nproc" --transport "$transport" -- "$@")
  return 0
}

# bench_mt_dp_flags TRANSPORT BUCKET_MB ALGO: the synchronous data-parallel flags of the benchmarks'
# 2-worker runs (data_parallel.sh, zero.sh, mixed_precision.sh), one a line (read them with mapfile).
bench_mt_dp_flags() {
  printf '%s\n' --parallel.data=allreduce "--parallel.transport=$1" "--parallel.bucket_mb=$2" \
    "--parallel.all_reduce=$3"
}

# bench_mt_metrics METRICS SKIP L D CTX [KEY=VALUE...]: one JSON line from a meshtrain metrics.jsonl:
# medians over the step records after SKIP of tokens/s (global), step_ms and the communication
# figures, GFLOP/s by the benchmarks' FLOP count (bench/dp_metrics.py says which); KEY=VALUE pairs
# are copied in. (tensor_parallel.sh counts its tokens from step_ms instead: its own mt_summary.)
bench_mt_metrics() { "${BENCH_PY:-python3}" "$root/bench/dp_metrics.py" "$@"; }

# bench_peer_model L D HEADS CTX BATCH THREADS WAIT ATTN [OPTIM]: the model and thread flags every
# peer of bench/peers/ takes (--wait: OMP_WAIT_POLICY, set before torch loads), one a line (read them
# with mapfile). --optim only when OPTIM is given: the peers' default is auto.
bench_peer_model() {
  printf '%s\n' --layers "$1" --d "$2" --heads "$3" --ctx "$4" --batch "$5" --threads "$6" --wait "$7" --attn "$8"
  [ -z "${9:-}" ] || printf '%s\n' --optim "$9"
}

# bench_peer_cmd PYTHON PEER ARGS...: sets peer_cmd to the command that starts the PyTorch peer PEER
# (a file of bench/peers/, or a path) under PYTHON. A peer given --nproc N starts N ranks of itself
# with the variables torchrun sets (bench/peers/peer_launch.py) and bounds its thread pools from
# --threads before torch loads; under torchrun each copy is a rank directly.
bench_peer_cmd() {
  local py="$1" peer="$2"
  shift 2
  [[ "$peer" == */* ]] || peer="bench/peers/$peer"
  peer_cmd=("$py" "$peer" "$@")
}

# bench_run_peer LABEL OUT_BASE PYTHON PEER ARGS...: prints the peer's command (bench_peer_cmd),
# waits for idle CPUs, runs it with its stdout in OUT_BASE.out and its stderr in OUT_BASE.err, and
# sets peer_rc (its exit status) and peer_line (its last JSON line). True when it succeeded with a
# JSON line; the caller reports a failure (bench_failed OUT_BASE.err) or a status of its own.
bench_run_peer() {
  local label="$1" base="$2"
  shift 2
  bench_peer_cmd "$@"
  bench_show "$label" "${peer_cmd[@]}"
  wait_idle
  bench_t0=$SECONDS
  "${peer_cmd[@]}" > "$base.out" 2> "$base.err"
  peer_rc=$?
  peer_line="$(grep '^{' "$base.out" | tail -n 1)"
  [ "$peer_rc" = 0 ] && [ -n "$peer_line" ]
}
