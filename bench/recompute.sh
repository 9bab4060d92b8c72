#!/usr/bin/env bash
# The step-time cost of activation recomputation on this machine: both GPT benchmark configs (A and
# B), one process x 2 threads, with training.recompute = none, selective and full:
#   meshtrain train examples/gpt-bench-a.toml --training.recompute=full ...
# step time = the median step_ms after MT_SKIP steps; the three modes alternate within each round,
# ROUNDS rounds, and the costs (mode / none - 1) are taken within each round. Also printed: the
# activation peak of each mode beside the formula's (core/activation_memory.hpp). Expected (Korthikanti
# et al. 2022): full about +1/3 (a second forward of every block), selective a few percent.
#
# Knobs: ROUNDS [3]  MT_STEPS [8]  MT_SKIP [2]  THREADS [2]  CONFIGS [a b] (any of a b gpt2)
#   MESHTRAIN [build/src/meshtrain/meshtrain]  OUT [bench/out/recompute]  IDLE_WAIT [60] IDLE_PCT [15]
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root" || exit 1
ROUNDS="${ROUNDS:-3}"
MT_STEPS="${MT_STEPS:-8}"
MT_SKIP="${MT_SKIP:-2}"
THREADS="${THREADS:-2}"
CONFIGS="${CONFIGS:-a b}"
MESHTRAIN="${MESHTRAIN:-$root/build/src/meshtrain/meshtrain}"
OUT="${OUT:-$root/bench/out/recompute}"
IDLE_WAIT="${IDLE_WAIT:-60}"
IDLE_PCT="${IDLE_PCT:-15}"
mkdir -p "$OUT"
source bench/bench_lib.sh  # (sources bench/idle.sh)
[[ " $CONFIGS " == *" gpt2 "* ]] && bench_gpt2_tokens  # the token file examples/gpt-bench-gpt2.toml reads
data="$root/data/kjv.txt"
[ -s "$data" ] || { echo "recompute: prepare the corpus first (scripts/prepare-data.sh)" >&2; exit 1; }

cpu_flags="$(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2- | tr ' ' '\n' |
             grep -E '^(avx2|fma|avx512f|avx512_bf16|amx_bf16)$' | paste -sd' ')"
echo "recompute: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(getconf _NPROCESSORS_ONLN) CPUs," \
     "CPU: $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); flags: ${cpu_flags:-none};" \
     "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<unset>}; $THREADS threads, $MT_STEPS steps (first $MT_SKIP skipped)"

# run DIR ARGS...: prints the median step_ms after MT_SKIP steps, the activation peak and the formula's (MiB).
run() {
  local dir="$1"
  shift
  rm -rf "$dir"
  mkdir -p "$dir"
  wait_idle >&2
  "$MESHTRAIN" train "$@" --training.threads="$THREADS" --training.steps="$MT_STEPS" --training.log_every=1 \
    --training.eval_every=0 --checkpoint.every=0 --data.path="$data" --training.out_dir="$dir/run" \
    --metrics.path="$dir/metrics.jsonl" > "$dir/log" 2>&1 ||
    { echo "FAILED: ${dir#$root/}/log" >&2; tail -n 3 "$dir/log" >&2; echo 0 0 0; return; }
  python3 - "$dir/metrics.jsonl" "$MT_SKIP" <<'PY'
import json, statistics, sys
records = [json.loads(l) for l in open(sys.argv[1])]
steps = [r["step_ms"] for r in records if "step_ms" in r][int(sys.argv[2]):]
peak = [r for r in records if r.get("memory") == "peak"][-1]
print(statistics.median(steps), peak["peak_activations_mb"], peak.get("predicted_activations_mb", 0))
PY
}

for config in $CONFIGS; do
  toml="examples/gpt-bench-$config.toml"
  selective_costs=() full_costs=()
  for round in $(seq 1 "$ROUNDS"); do
    declare -A ms=() act=() formula=()
    for mode in none selective full; do
      read -r ms[$mode] act[$mode] formula[$mode] < <(run "$OUT/$config-$mode-r$round" "$toml" --training.recompute=$mode)
    done
    s=$(python3 -c "print(f'{${ms[selective]} / ${ms[none]} - 1:+.1%}' if ${ms[none]} > 0 else 'n/a')")
    f=$(python3 -c "print(f'{${ms[full]} / ${ms[none]} - 1:+.1%}' if ${ms[none]} > 0 else 'n/a')")
    selective_costs+=("$s")
    full_costs+=("$f")
    printf '  config %s round %d: none %.1f ms, selective %.1f ms (%s), full %.1f ms (%s); activations MiB (formula):' \
      "$config" "$round" "${ms[none]}" "${ms[selective]}" "$s" "${ms[full]}" "$f"
    printf ' none %.1f (%.1f), selective %.1f (%.1f), full %.1f (%.1f)\n' "${act[none]}" "${formula[none]}" \
      "${act[selective]}" "${formula[selective]}" "${act[full]}" "${formula[full]}"
  done
  echo "recompute config $config: step time selective ${selective_costs[*]}, full ${full_costs[*]} over none"
done
