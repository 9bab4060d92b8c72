# meshtrain's byte-level BPE encodes exactly as Hugging Face's `tokenizers`:
# a tokenizer trained by `tokenizers` on the Bible (ByteLevelBPETokenizer,
# vocab 1000) gives the same ids for the whole text through `meshtrain
# tokenize`; so does one built as Tokenizer(models.BPE()) with a ByteLevel
# pre-tokenizer that adds a prefix space and a special token cut out of the
# text; and `meshtrain tokenizer-train` learns the same vocabulary and merges
# as `tokenizers` does, its tokenizer.json loads there and both encode text
# identically (the first 500k characters: the whole text costs tokenizers
# seconds per encode).
source "$(dirname "$0")/lib.sh"
source "$SRC/tests/integration/python_tools_lib.sh"
require_python_modules tokenizers
make_text corpus.txt 5000000  # the whole Bible where it is prepared
echo "corpus: $(wc -c < corpus.txt) bytes"

# ids.bin: the ids as raw uint16, as `meshtrain tokenize --format nanogpt` writes them.
OMP_NUM_THREADS=2 "$TOOLS_PYTHON" - "$WORK" <<'PY' || fail "tokenizers"
import array, sys, time
from tokenizers import ByteLevelBPETokenizer, Tokenizer, decoders, models, pre_tokenizers, trainers
work = sys.argv[1]
text = open(f"{work}/corpus.txt", encoding="utf-8").read()
def save_ids(ids, path):
    array.array("H", ids).tofile(open(path, "wb"))

t0 = time.time()
hf = ByteLevelBPETokenizer()
hf.train([f"{work}/corpus.txt"], vocab_size=1000, min_frequency=2, show_progress=False)
hf.save(f"{work}/hf.json")
ids = Tokenizer.from_file(f"{work}/hf.json").encode(text).ids
save_ids(ids, f"{work}/hf-ids.bin")
print(f"tokenizers: ByteLevelBPETokenizer, {len(ids)} ids ({time.time() - t0:.1f} s)")

# A prefix space, and a special token between two parts of the text.
part = text[:400000]
open(f"{work}/part.txt", "w", encoding="utf-8").write(text[:500000])
mixed = part[:200000] + "<|endoftext|>" + part[200000:] + "<|endoftext|>"
open(f"{work}/mixed.txt", "w", encoding="utf-8").write(mixed)
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel()  # add_prefix_space=True
tok.decoder = decoders.ByteLevel()
tok.train_from_iterator([part], trainers.BpeTrainer(vocab_size=600, special_tokens=["<|endoftext|>"],
                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
tok.save(f"{work}/prefix.json")
save_ids(Tokenizer.from_file(f"{work}/prefix.json").encode(mixed).ids, f"{work}/prefix-ids.bin")
PY

"$MESHTRAIN" tokenize --tokenizer hf.json corpus.txt mt-ids.bin > tokenize.log 2>&1 || { cat tokenize.log; fail "tokenize"; }
cat tokenize.log
cmp hf-ids.bin mt-ids.bin || fail "meshtrain's ids differ from tokenizers' (ByteLevelBPETokenizer)"
echo "ids equal: $(($(wc -c < mt-ids.bin) / 2)) tokens"
"$MESHTRAIN" tokenize --tokenizer prefix.json --threads 1 mixed.txt mt-prefix.bin > /dev/null || fail "tokenize prefix"
cmp prefix-ids.bin mt-prefix.bin || fail "ids differ with add_prefix_space and a special token"
echo "ids equal with a prefix space and <|endoftext|>"

"$MESHTRAIN" tokenizer-train --vocab-size 1000 --min-frequency 2 corpus.txt mt.json > train.log 2>&1 ||
  { cat train.log; fail "tokenizer-train"; }
cat train.log
"$MESHTRAIN" tokenize --tokenizer mt.json part.txt mt-own.bin > /dev/null || fail "tokenize with our tokenizer"
OMP_NUM_THREADS=2 "$TOOLS_PYTHON" - "$WORK" <<'PY' || fail "meshtrain's tokenizer.json in tokenizers"
import array, json, sys
from tokenizers import Tokenizer
work = sys.argv[1]
text = open(f"{work}/part.txt", encoding="utf-8").read()
ours, theirs = json.load(open(f"{work}/mt.json")), json.load(open(f"{work}/hf.json"))
merges = lambda t: [m if isinstance(m, str) else " ".join(m) for m in t["model"]["merges"]]
assert ours["model"]["vocab"] == theirs["model"]["vocab"], "the vocabularies differ"
assert merges(ours) == merges(theirs), next((i, a, b) for i, (a, b) in enumerate(zip(merges(ours), merges(theirs))) if a != b)
ids = Tokenizer.from_file(f"{work}/mt.json").encode(text).ids
mt = array.array("H"); mt.frombytes(open(f"{work}/mt-own.bin", "rb").read())
assert list(mt) == ids, "tokenizers encodes with meshtrain's tokenizer.json differently"
print(f"tokenizer-train: same {len(ours['model']['vocab'])} tokens and {len(merges(ours))} merges as tokenizers; "
      f"{len(ids)} ids equal")
PY
