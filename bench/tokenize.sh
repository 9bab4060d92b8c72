#!/usr/bin/env bash
# Tokenizing speed: `meshtrain tokenize` against Hugging Face's `tokenizers`
# on the King James Bible (data/kjv.txt, 4.4 MB), in one run.
#
# Setup, untimed: `tokenizers` trains a byte-level BPE on the text
# (ByteLevelBPETokenizer, vocab $VOCAB) and saves tokenizer.json. Then
# $ROUNDS rounds, alternating in each:
#   * meshtrain tokenize --tokenizer tokenizer.json --threads $THREADS kjv.txt out.bin
#     (the whole process, wall clock: loading the tokenizer, reading, encoding,
#     writing; and the encoding alone, as the command prints it)
#   * tokenizers, Tokenizer.from_file(...).encode(text): the call alone, the
#     whole text as one string (one thread: a single input is not split)
#   * tokenizers, encode_batch(lines): the call alone, the text's lines as a
#     batch on RAYON_NUM_THREADS = $THREADS threads (its parallel mode)
# Every round checks that all three give the same ids. Prints each time and
# the ratio of each tokenizers figure to meshtrain's whole process (> 1:
# meshtrain is faster), medians over the rounds. Results: bench/RESULTS.md,
# row 36 (bench/log/16-tokenize.md).
#
# Environment knobs (defaults in brackets):
#   VOCAB [8192]  ROUNDS [3]  THREADS [2]  TEXT [data/kjv.txt]
#   VENV_PY [bench/.venv/bin/python]  MESHTRAIN [build/src/meshtrain/meshtrain]
#   IDLE_WAIT [60] IDLE_PCT [15]  before each run, wait up to IDLE_WAIT s for the
#                CPUs to be under IDLE_PCT % busy (other work skews figures)
#   OUT [bench/out/tokenize]
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
VOCAB="${VOCAB:-8192}"
ROUNDS="${ROUNDS:-3}"
THREADS="${THREADS:-2}"
TEXT="${TEXT:-data/kjv.txt}"
VENV_PY="${VENV_PY:-bench/.venv/bin/python}"
MESHTRAIN="${MESHTRAIN:-build/src/meshtrain/meshtrain}"
IDLE_WAIT="${IDLE_WAIT:-60}"
IDLE_PCT="${IDLE_PCT:-15}"
OUT="${OUT:-bench/out/tokenize}"
source bench/idle.sh

[ -s "$TEXT" ] || { echo "no $TEXT (scripts/prepare-data.sh writes it)" >&2; exit 1; }
[ -x "$MESHTRAIN" ] || { echo "no $MESHTRAIN (scripts/build.sh)" >&2; exit 1; }
"$VENV_PY" -c "import tokenizers" 2>/dev/null || { echo "no tokenizers in $VENV_PY (bench/setup-venv.sh)" >&2; exit 1; }
mkdir -p "$OUT"
echo "text: $TEXT ($(wc -c < "$TEXT") bytes); vocab $VOCAB; $THREADS threads; $ROUNDS rounds"
echo "tokenizers $("$VENV_PY" -c 'import tokenizers; print(tokenizers.__version__)'); meshtrain $(git rev-parse --short HEAD)"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
echo "flags: $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2- | tr ' ' '\n' | grep -E '^(avx|avx2|avx512f|avx512bw|bmi2|sse4_2)$' | tr '\n' ' ')"

"$VENV_PY" - "$TEXT" "$VOCAB" "$OUT/tokenizer.json" <<'PY' || exit 1
import sys
from tokenizers import ByteLevelBPETokenizer
t = ByteLevelBPETokenizer()
t.train([sys.argv[1]], vocab_size=int(sys.argv[2]), min_frequency=2, show_progress=False)
t.save(sys.argv[3])
PY

: > "$OUT/times.tsv"
for round in $(seq 1 "$ROUNDS"); do
  wait_idle
  start=$(date +%s.%N)
  line=$("$MESHTRAIN" tokenize --tokenizer "$OUT/tokenizer.json" --threads "$THREADS" "$TEXT" "$OUT/meshtrain.bin" | head -1)
  end=$(date +%s.%N)
  whole=$(echo "$end - $start" | bc -l)
  encode=$(echo "$line" | sed -E 's/.* in ([0-9.]+) s .*/\1/')
  printf "round %d meshtrain: %.3f s whole process, %.3f s encoding\n" "$round" "$whole" "$encode"
  printf "meshtrain_process\t%s\nmeshtrain_encode\t%s\n" "$whole" "$encode" >> "$OUT/times.tsv"
  wait_idle
  RAYON_NUM_THREADS="$THREADS" "$VENV_PY" - "$TEXT" "$OUT/tokenizer.json" "$OUT/meshtrain.bin" "$OUT/times.tsv" "$round" <<'PY' || exit 1
import array, sys, time
from tokenizers import Tokenizer
text_path, tok_path, mt_path, times, rnd = sys.argv[1:]
text = open(text_path, encoding="utf-8").read()
tok = Tokenizer.from_file(tok_path)
t0 = time.perf_counter(); ids = tok.encode(text).ids; t1 = time.perf_counter()
lines = text.splitlines(keepends=True)
t2 = time.perf_counter(); batch = tok.encode_batch(lines); t3 = time.perf_counter()
mt = array.array("H"); mt.frombytes(open(mt_path, "rb").read())
assert list(mt) == ids, "meshtrain's ids differ from tokenizers' encode"
assert [i for e in batch for i in e.ids] == ids, "encode_batch of the lines differs from encode"
print(f"round {rnd} tokenizers: {t1 - t0:.3f} s encode(text), {t3 - t2:.3f} s encode_batch(lines); {len(ids)} ids, equal")
open(times, "a").write(f"tokenizers_encode\t{t1 - t0}\ntokenizers_batch\t{t3 - t2}\n")
PY
done

python3 - "$OUT/times.tsv" <<'PY'
import statistics, sys
t = {}
for line in open(sys.argv[1]):
    k, v = line.split("\t"); t.setdefault(k, []).append(float(v))
m = {k: statistics.median(v) for k, v in t.items()}
print("medians: " + ", ".join(f"{k} {v:.3f} s" for k, v in m.items()))
for peer in ("tokenizers_encode", "tokenizers_batch"):
    print(f"{peer} / meshtrain: {m[peer] / m['meshtrain_process']:.1f}x (whole process), "
          f"{m[peer] / m['meshtrain_encode']:.1f}x (encoding alone); per round: " +
          ", ".join(f"{p / q:.1f}x" for p, q in zip(t[peer], t["meshtrain_process"])))
PY
