#!/usr/bin/env bash
# bad_inputs.sh CLI TABLE [FIRST LAST]: the bad-input contract, table-driven (issue 13). Every line of
# TABLE (tests/bad_inputs.tsv: CODE <tab> ENV <tab> ARGS) runs the CLI once as a real process under
# `timeout`, and must exit with CODE (2), write exactly one line to stderr ("dlbench: error: ..."), and
# no trace ("terminate called", "Aborted", sanitizer or Python tracebacks). ENV is "-" or VAR=VALUE
# words; ENV and ARGS are shell words in which @T@ is a temp folder of hostile files made here (FIFOs,
# a sparse 300 MB file, garbage and truncated JSON, results with bad times) and @D@ the fixture folder
# tests/data/compare. FIRST LAST (1-based, inclusive) run a slice of the table. Prints one line per
# failing input and a count; exits 1 if any input was mishandled.
set -u
cli=$1 table=$2 first=${3:-1} last=${4:-1000000}
limit=${DLB_BAD_INPUT_TIMEOUT:-20}
D=$(cd "$(dirname "$table")/data/compare" && pwd)
T=$(mktemp -d "${TMPDIR:-/tmp}/dlbench-bad.XXXXXX")
cleanup() {
  rm -rf "$T"
}
trap cleanup EXIT

# ---- hostile files ----
mkfifo "$T/fifo"
mkdir -p "$T/dir" "$T/fifo_run" "$T/huge_run" "$T/hist_fifo/run1" "$T/hist_huge/run1" "$T/hist_bad/run1" \
  "$T/mnist_fifo" "$T/mnist_huge" "$T/mnist_garbage" "$T/cifar_garbage" "$T/bl" "$T/bl_empty"
mkfifo "$T/fifo_run/results.json" "$T/hist_fifo/run1/results.json" "$T/mnist_fifo/train-images-idx3-ubyte"
truncate -s 300M "$T/huge.json" "$T/huge_run/results.json" "$T/hist_huge/run1/results.json"
truncate -s 1100M "$T/mnist_huge/train-images-idx3-ubyte"  # sparse: over the 1 GiB dataset-file cap
# MNIST folders: a valid label file beside the hostile image file, so the image file is what is read;
# mnist_ok: 10 valid 28x28 images and labels (train and t10k).
mkdir -p "$T/mnist_ok"
be32() { printf "$(printf '\\x%02x\\x%02x\\x%02x\\x%02x' $(($1 >> 24 & 255)) $(($1 >> 16 & 255)) $(($1 >> 8 & 255)) $(($1 & 255)))"; }
idx() {  # idx FILE MAGIC COUNT [ROWS COLS]: an IDX header (big-endian) + a zero payload
  local f=$1 magic=$2 n=$3 r=${4:-} c=${5:-}
  { be32 "$magic"; be32 "$n"
    if [ -n "$r" ]; then be32 "$r"; be32 "$c"; head -c $((n * r * c)) /dev/zero; else head -c "$n" /dev/zero; fi
  } > "$f"
}
for d in mnist_fifo mnist_huge mnist_garbage mnist_ok; do idx "$T/$d/train-labels-idx1-ubyte" 2049 10; done
idx "$T/mnist_ok/train-images-idx3-ubyte" 2051 10 28 28
idx "$T/mnist_ok/t10k-images-idx3-ubyte" 2051 10 28 28
idx "$T/mnist_ok/t10k-labels-idx1-ubyte" 2049 10
: > "$T/empty.json"
head -c 4096 /dev/urandom > "$T/garbage.json"
head -c 4096 /dev/urandom > "$T/mnist_garbage/train-images-idx3-ubyte"
head -c 4096 /dev/urandom > "$T/cifar_garbage/data_batch_1.bin"
head -c 700 "$D/base.json" > "$T/trunc.json"
echo "hello" > "$T/file.txt"
# text datasets (suite seq --dataset text:FILE): empty, binary, over the 64 MiB cap (sparse), not UTF-8
: > "$T/empty.txt"
printf 'ab\000cd' > "$T/nul.txt"
truncate -s 65M "$T/huge.txt"
printf 'ab\377\376cd' > "$T/latin1.txt"
# a history folder with a good run and a FIFO beside it (history --html refuses it)
mkdir -p "$T/hist_pipe/run1" && cp "$D/base.json" "$T/hist_pipe/run1/results.json" && mkfifo "$T/hist_pipe/pipe"
{ printf '{"context": {}, "benchmarks": ['; head -c 500000 /dev/zero | tr '\0' '['; head -c 500000 /dev/zero | tr '\0' ']'; printf ']}'; } > "$T/deep.json"
head -c 2000000 /dev/zero | tr '\0' '[' > "$T/deep_open.json"
mkdir -p "$T/dir_run/results.json" "$T/zero_link_run"
ln -s /dev/zero "$T/zero_link.json"
ln -s /dev/zero "$T/zero_link_run/results.json"
ln -s "$T/loop" "$T/loop"
chmod -x "$T/file.txt"
echo '[]' > "$T/array.json"
echo '{"context": {}, "benchmarks": {}}' > "$T/bench_not_array.json"
echo '{"context": {}, "benchmarks": [1, 2]}' > "$T/entry_not_object.json"
echo '{"context": "x", "benchmarks": []}' > "$T/ctx_str.json"
# One results file per wrong field: sed on the fixture (first entry, or the context).
variant() {  # variant NAME SED-EXPRESSION
  sed "$2" "$D/base.json" > "$T/$1.json"
}
variant dirty_str '0,/"dirty": false/s//"dirty": "yes"/'
variant git_str '0,/"git": {/s//"git": "abc", "x": {/'
variant zero_time '0,/"real_time": 100,/s//"real_time": 0,/'
variant neg_time '0,/"real_time": 100,/s//"real_time": -100,/'
variant null_time '0,/"real_time": 100,/s//"real_time": null,/'
variant str_time '0,/"real_time": 100,/s//"real_time": "100",/'
variant big_time '0,/"real_time": 100,/s//"real_time": 1e999,/'
variant neg_cpu '0,/"cpu_time": 100,/s//"cpu_time": -1,/'
variant err_str '0,/"verified": true/s//"verified": true, "error_occurred": "yes"/'
variant verified_str '0,/"verified": true/s//"verified": "yes"/'
variant unit_bad '0,/"time_unit": "us"/s//"time_unit": "parsec"/'
variant reps_str '0,/"repetitions": 5,/s//"repetitions": "five",/'
variant runtype_num '0,/"run_type": "iteration"/s//"run_type": 7/'
jvariant() {  # results.jsonl variants of the fixture's one-line entries
  sed "$2" "$D/base_only.jsonl" > "$T/$1.jsonl"
}
jvariant zero_time '1s/"real_time": 100,/"real_time": 0,/'
jvariant neg_time '1s/"real_time": 100,/"real_time": -5,/'
jvariant bad_line '2s/.*/{"name": "fix\/same", "real_/'
jvariant dirty_line '1s/"verified": true/"verified": 1/'
cp "$T/zero_time.json" "$T/hist_bad/run1/results.json"
# history: runs whose dates are impossible (month 13, hour 99; February 30) are no dates
mkdir -p "$T/hist_date/run1" "$T/hist_date/run2"
sed 's/"date": "[^"]*"/"date": "2026-13-01T99:00:00+0000"/' "$D/base.json" > "$T/hist_date/run1/results.json"
sed 's/"date": "[^"]*"/"date": "2026-02-30T12:00:00+0000"/' "$D/base.json" > "$T/hist_date/run2/results.json"
"$cli" baseline save "$D/base.json" --dir "$T/bl_fifo" >/dev/null 2>&1 &&
  for f in "$T"/bl_fifo/*/results.json; do rm -f "$f"; mkfifo "$f"; done
"$cli" baseline save "$D/base.json" --dir "$T/bl_zero" >/dev/null 2>&1 &&
  for f in "$T"/bl_zero/*/results.json; do cp "$T/zero_time.json" "$f"; done
mkdir -p "$T/bl_fifo" "$T/bl_zero"
# Issue 27 (files): a valid results file whose context holds a value 150,000 deep; --resume folders
# whose results.jsonl is a FIFO or a link to /dev/zero, or whose run header stores options out of the
# flags' ranges; baselines whose key.txt is a FIFO or /dev/zero; a run folder whose lock is a symlink
# (to a file that must stay as it is) or a FIFO.
{ echo '{'; printf ' "context": {"deep": '; head -c 150000 /dev/zero | tr '\0' '['; head -c 150000 /dev/zero | tr '\0' ']'
  echo ','; tail -n +3 "$D/base.json"; } > "$T/deep_ctx.json"
mkdir -p "$T/res_fifo" "$T/res_zero" "$T/lock_sym" "$T/lock_fifo" "$T/hist_deep/run1"
cp "$T/deep_ctx.json" "$T/hist_deep/run1/results.json"
mkfifo "$T/res_fifo/results.jsonl" "$T/lock_fifo/.dlbench.lock"
ln -s /dev/zero "$T/res_zero/results.jsonl"
echo precious > "$T/lock_target" && ln -s "$T/lock_target" "$T/lock_sym/.dlbench.lock"
hdr() {  # hdr NAME REPETITIONS MIN_TIME: a resume folder whose header stores these options
  mkdir -p "$T/$1"
  printf '{"dlbench_run": {"format": 1, "planned": [], "options": {"suites": ["matmul"], "devices": ["cpu"], "quick": true, "repetitions": %s, "min_time": %s, "max_cv": 0.05, "filter": "", "overrides": {}, "extra": {}, "interleave": true}}}\n' "$2" "$3" > "$T/$1/results.jsonl"
}
hdr hdr_reps_huge 2000000000 0 && hdr hdr_reps_neg -5 0 && hdr hdr_min_huge 0 1e9 && hdr hdr_reps_str '"5"' 0
# cifar_big: six gzip CIFAR batches (one file, hard-linked), each 4.5 MB inflating to valid records
# just under the 1 GiB per-file cap: ~24 GiB as floats, refused before any is inflated.
mkdir -p "$T/cifar_big"
head -c $((349406 * 3073)) /dev/zero | gzip -1 > "$T/cifar_big/data_batch_1.bin"
for b in 2 3 4 5; do ln "$T/cifar_big/data_batch_1.bin" "$T/cifar_big/data_batch_$b.bin"; done
ln "$T/cifar_big/data_batch_1.bin" "$T/cifar_big/test_batch.bin"
"$cli" baseline save "$D/base.json" --dir "$T/bl_keyfifo" >/dev/null 2>&1 &&
  for f in "$T"/bl_keyfifo/*/key.txt; do rm -f "$f"; mkfifo "$f"; done
"$cli" baseline save "$D/base.json" --dir "$T/bl_keyzero" >/dev/null 2>&1 &&
  for f in "$T"/bl_keyzero/*/key.txt; do rm -f "$f"; ln -s /dev/zero "$f"; done

# The data loader's datasets (dlbench data load): each made by `data make`, then spoiled one way.
# ld_empty: no class folders; ld_noimg: a class folder without images; ld_label: a binary batch with
# label 12; ld_pylabel: a python batch with label 10; ld_corrupt / ld_trunc / ld_unreadable: the
# first image of class cat flipped in the middle / cut in half / a dangling link; ld_bmp: a .bmp file.
mkdir -p "$T/ld_empty" "$T/ld_noimg/cat"
echo "not an image" > "$T/ld_noimg/cat/readme.txt"
for d in ld_label ld_pylabel ld_corrupt ld_trunc ld_unreadable ld_bmp; do
  "$cli" data make cifar10 "$T/$d" --format binary,python,png --images 100 >/dev/null 2>&1
done
printf '\x0c' | dd of="$T/ld_label/cifar-10-batches-bin/data_batch_1.bin" bs=1 seek=$((3073 * 4)) conv=notrunc 2>/dev/null
/usr/bin/python3 - "$T/ld_pylabel/cifar-10-batches-py/data_batch_2" <<'PY' 2>/dev/null
import pickle, sys
d = pickle.load(open(sys.argv[1], "rb"), encoding="latin1")
d["labels"][3] = 10
pickle.dump(d, open(sys.argv[1], "wb"), protocol=2)
PY
first_cat() { find "$T/$1/cifar10-png/train/cat" -name '*.png' | sort | head -1; }
f=$(first_cat ld_corrupt) && size=$(stat -c %s "$f") &&
  printf '\xff\xff\xff\xff' | dd of="$f" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
f=$(first_cat ld_trunc) && truncate -s 200 "$f"
f=$(first_cat ld_unreadable) && rm -f "$f" && ln -s "$T/ld_unreadable/nowhere.png" "$f"
head -c 100 /dev/urandom > "$T/ld_bmp/cifar10-png/train/cat/0.bmp"

# llm.c's GPT-2 files (dlbench data show, issue 31): a tiny valid checkpoint (T=2, V=3 padded to 4, L=1,
# H=1, C=2: 90 floats) and token file, then one spoiled field each.
/usr/bin/python3 - "$T" <<'PY' 2>/dev/null
import struct, sys
T = sys.argv[1]
def ckpt(name, h=(20240326, 3, 2, 3, 1, 1, 2, 4), n=90, body=None):
    b = struct.pack("<256i", *(list(h) + [0] * (256 - len(h)))) + (body if body is not None else struct.pack("<%df" % n, *([0.5] * n)))
    open(T + "/" + name, "wb").write(b)
def toks(name, h=(20240520, 1, 5), ids=(0, 1, 2, 3, 4)):
    open(T + "/" + name, "wb").write(struct.pack("<256i", *(list(h) + [0] * (256 - len(h)))) + struct.pack("<%dH" % len(ids), *ids))
ckpt("g2_magic.bin", h=(20240327, 3, 2, 3, 1, 1, 2, 4))
ckpt("g2_bf16.bin", h=(20240326, 5, 2, 3, 1, 1, 2, 4))
ckpt("g2_heads.bin", h=(20240326, 3, 2, 3, 1, 3, 2, 4))
ckpt("g2_vp.bin", h=(20240326, 3, 2, 3, 1, 1, 2, 2))
ckpt("g2_layers.bin", h=(20240326, 3, 2, 3, -1, 1, 2, 4))
ckpt("g2_claim.bin", h=(20240326, 3, 65536, 1048576, 1024, 1, 32768, 1048576))
ckpt("g2_trunc.bin", n=89)
ckpt("g2_over.bin", n=91)
ckpt("g2_nan.bin", body=struct.pack("<90f", *([0.5] * 89 + [float("nan")])))
open(T + "/g2_head.bin", "wb").write(struct.pack("<100i", 20240326, 3, *([0] * 98)))
toks("tok_zero.bin", h=(20240520, 1, 0), ids=())
toks("tok_trunc.bin", h=(20240520, 1, 6))
toks("tok_over.bin", h=(20240520, 1, 4))
toks("tok_version.bin", h=(20240520, 2, 5))
PY

# ---- the table ----
n=0 bad=0 tried=0
while IFS= read -r line || [ -n "$line" ]; do
  n=$((n + 1))
  case "$line" in ''|'#'*) continue ;; esac
  [ "$n" -ge "$first" ] && [ "$n" -le "$last" ] || continue
  IFS=$'\t' read -r want envs args <<<"$line"
  envs=${envs//@T@/$T} envs=${envs//@D@/$D}
  args=${args//@T@/$T} args=${args//@D@/$D}
  eval "set -- $args"
  env_words=()
  [ "$envs" = "-" ] || eval "env_words=($envs)"
  tried=$((tried + 1))
  start=${EPOCHREALTIME/./}
  env ${env_words[@]+"${env_words[@]}"} timeout -k 2 "$limit" "$cli" "$@" >/dev/null 2>"$T/err" </dev/null
  got=$?
  ms=$(( (${EPOCHREALTIME/./} - start) / 1000 ))
  lines=$(grep -c '' "$T/err")
  why=""
  if [ "$got" = 124 ] || [ "$got" = 137 ]; then why="hangs (killed after ${limit}s)"
  elif [ "$got" != "$want" ]; then why="exit $got, expected $want"
  elif [ "$lines" != 1 ]; then why="$lines lines on stderr, expected 1"
  elif ! grep -q '^dlbench: error: ' "$T/err"; then why="stderr line does not start with 'dlbench: error: '"
  fi
  if grep -qiE 'terminate called|Aborted|core dumped|Traceback|AddressSanitizer|runtime error:|LeakSanitizer' "$T/err"; then
    why="${why:+$why; }trace on stderr"
  fi
  if [ -n "$why" ]; then
    bad=$((bad + 1))
    echo "MISHANDLED line $n: [$envs] dlbench $args -> $why; stderr: $(head -c 300 "$T/err" | tr '\n' '|')"
  elif [ -n "${DLB_BAD_INPUT_VERBOSE:-}" ]; then
    printf 'ok   line %d (%d ms): %s\n' "$n" "$ms" "$(cat "$T/err")"
  fi
done < "$table"
echo "bad inputs tried: $tried, handled: $((tried - bad)), mishandled: $bad"
[ "$bad" = 0 ]
