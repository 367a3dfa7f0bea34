#!/usr/bin/env bash
# gpu/check.sh: the GPU check of cas, run from a bundle made by
# `make gpu-bundle` (bin/gpu-bundle: this script, hf_check.py, the gzipped
# xla-tagged cas and test binaries, and the shared golden files they read).
#
#   bash check.sh [--backend xla|gocpu] [--out DIR] [--plugin PATH] [--dry-run]
#
# --backend xla (the default) locates the PJRT CUDA plugin of the jax
# package (xla_cuda_plugin.so) and the pip nvidia-* libraries, and runs on
# GOMLX_BACKEND=xla:<plugin>,preallocate=false with GOMLX_NO_AUTO_INSTALL=1.
# --backend gocpu is the CPU rehearsal (tiny shapes; a test runs it in CI).
# Parts, each under its own time limit, all within CAS_CHECK_BUDGET seconds
# (xla: 500, so that one 600 s device call returns with the report):
#   (a) golden tests: Qwen2/Qwen3 logits, greedy, bf16, cache vs full
#       forward, generation log-probs vs scoring, gradients; BERT; the GRPO
#       loss cases and learner steps incl. mixed precision
#   (b) hf_check.py: random-init Qwen2/Qwen3ForCausalLM saved by
#       transformers vs `cas logits` (skipped when torch/transformers are
#       absent, with a message)
#   (c) `cas bench gpu`: prefill and batch-1/batch-64 decode tok/s of the
#       Qwen2.5-0.5B and 3B shapes in bf16 against the HBM bound
#   (d) the same command: one GRPO+ACI step of the 0.5B shape (8 prompts
#       × 5, mixed precision): phase times and peak GPU memory
#   (e) everything in DIR/gpu_check.json (parts in DIR/*.json, logs in
#       DIR/*.log)
# Exit status: 0 when every part passed, 1 otherwise (the JSON says which).
set -u -o pipefail

BUNDLE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BACKEND=xla
OUTDIR=${OUT:-$PWD/gpu-check-out}
PLUGIN=""
DRY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --backend) BACKEND=$2; shift 2 ;;
    --backend=*) BACKEND=${1#*=}; shift ;;
    --out) OUTDIR=$2; shift 2 ;;
    --out=*) OUTDIR=${1#*=}; shift ;;
    --plugin) PLUGIN=$2; shift 2 ;;
    --plugin=*) PLUGIN=${1#*=}; shift ;;
    --dry-run) DRY=1; shift ;;
    -h|--help) sed -n '2,27p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "check.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$BACKEND" in
  xla|gocpu) ;;
  *) echo "check.sh: --backend $BACKEND: want xla or gocpu" >&2; exit 2 ;;
esac
mkdir -p "$OUTDIR" || exit 2
OUTDIR=$(cd "$OUTDIR" && pwd)
START=$(date +%s)
log() { echo "[check $(( $(date +%s) - START ))s] $*"; }
# within N: N seconds, or what is left of the whole check's budget (BUDGET
# seconds from the start, less 10 for the report), at least 5.
within() { local left=$(( BUDGET - ($(date +%s) - START) - 10 )); [ "$left" -lt "$1" ] && echo $(( left > 5 ? left : 5 )) || echo "$1"; }

# --- unpack the bundle into a scratch folder ---------------------------------
WORK=$(mktemp -d "${TMPDIR:-/tmp}/cas-gpu-check.XXXXXX") || exit 2
trap 'rm -rf "$WORK"' EXIT
gunzip_to() { # src.gz dst
  if command -v gzip >/dev/null 2>&1; then gzip -dc "$1" >"$2"
  else python3 -c 'import gzip,shutil,sys; shutil.copyfileobj(gzip.open(sys.argv[1]), open(sys.argv[2],"wb"))' "$1" "$2"; fi
}
mkdir -p "$WORK/bin"
for f in "$BUNDLE"/bin/*; do
  [ -e "$f" ] || { echo "check.sh: $BUNDLE/bin is empty: not a bundle (make gpu-bundle)" >&2; exit 2; }
  name=$(basename "$f")
  case "$name" in
    *.gz) gunzip_to "$f" "$WORK/bin/${name%.gz}" || { echo "check.sh: cannot unpack $f" >&2; exit 2; } ;;
    *) cp "$f" "$WORK/bin/$name" ;;
  esac
done
chmod +x "$WORK"/bin/*
cp -r "$BUNDLE/shared" "$WORK/shared" || { echo "check.sh: $BUNDLE/shared missing" >&2; exit 2; }
find "$WORK/shared" -name '*.gz' | while read -r gz; do gunzip_to "$gz" "${gz%.gz}" && rm "$gz"; done
export CAS_SHARED="$WORK/shared" CI=true
CAS="$WORK/bin/cas"
for b in cas qwen.test bert.test train.test; do
  [ -x "$WORK/bin/$b" ] || { echo "check.sh: bundle lacks bin/$b" >&2; exit 2; }
done
if ! "$CAS" version >/dev/null 2>"$WORK/start.err"; then
  echo "check.sh: the bundled cas does not start here: $(cat "$WORK/start.err")" >&2
  echo "check.sh: (the cgo binaries need glibc >= 2.34; this machine has: $(ldd --version 2>&1 | head -n 1))" >&2
  exit 2
fi

# --- backend -------------------------------------------------------------------
if [ "$BACKEND" = xla ]; then
  if [ -z "$PLUGIN" ] && command -v python3 >/dev/null 2>&1; then
    # The jax_plugins namespace package of jax-cuda*-pjrt, on python3's path.
    PLUGIN=$(python3 - <<'PY' 2>/dev/null
import glob, os, sys
for p in sys.path:
    for f in sorted(glob.glob(os.path.join(p, "jax_plugins", "*", "xla_cuda_plugin.so")), reverse=True):
        print(f); sys.exit(0)
PY
)
  fi
  if [ -z "$PLUGIN" ]; then
    PRUNE=(\( -path /proc -o -path /sys -o -path /dev -o -path /run \) -prune -o)
    PLUGIN=$(find / "${PRUNE[@]}" -name xla_cuda_plugin.so -path '*jax_plugins*' -print 2>/dev/null | head -n 1)
    [ -n "$PLUGIN" ] || PLUGIN=$(find / "${PRUNE[@]}" \( -name xla_cuda_plugin.so -o -name pjrt_c_api_cuda_plugin.so \) -print 2>/dev/null | head -n 1)
  fi
  if [ -z "$PLUGIN" ] || [ ! -f "$PLUGIN" ]; then
    echo "check.sh: no xla_cuda_plugin.so found (pip install jax-cuda13-pjrt, or pass --plugin PATH)" >&2
    exit 2
  fi
  # The plugin's RPATH expects the pip nvidia-* packages two levels up
  # (site-packages/nvidia/*/lib); put them on the loader path and point XLA
  # at the CUDA data dir (libdevice, ptxas) explicitly: go-xla v0.1.4
  # otherwise writes a wrong --xla_gpu_cuda_data_dir into XLA_FLAGS.
  SITE=$(dirname "$(dirname "$(dirname "$PLUGIN")")")
  NV=""
  for d in "$SITE/nvidia" "$(dirname "$(dirname "$PLUGIN")")/nvidia"; do [ -d "$d" ] && NV=$d && break; done
  if [ -n "$NV" ]; then
    LIBS=$(find "$NV" -type d -name lib 2>/dev/null | tr '\n' ':')
    export LD_LIBRARY_PATH="${LIBS}${LD_LIBRARY_PATH:-}"
    BINS=$(find "$NV" -type d -name bin 2>/dev/null | tr '\n' ':')
    export PATH="${BINS}${PATH}"
    LIBDEVICE=$(find "$NV" -name 'libdevice.10.bc' 2>/dev/null | head -n 1)
    if [ -n "$LIBDEVICE" ]; then
      CUDA_DATA=$(dirname "$(dirname "$(dirname "$LIBDEVICE")")")
      export XLA_FLAGS="${XLA_FLAGS:+$XLA_FLAGS }--xla_gpu_cuda_data_dir=$CUDA_DATA"
    fi
  fi
  export GOMLX_BACKEND="xla:$PLUGIN,preallocate=false" GOMLX_NO_AUTO_INSTALL=1 GOPJRT_CUDA_CHECKS=0
  BENCH_ARGS=(--shapes qwen2.5-0.5b,qwen2.5-3b --batches 1,64 --prompt-len 512 --new-tokens 64
    --grpo-shape qwen2.5-0.5b --grpo-precision bf16 --prompts 8 --group 5
    --tokenizer "$CAS_SHARED/tokenizers/qwen3/tokenizer.json"
    --decode-timeout 120s --grpo-timeout 200s)
  T_TEST=75; T_HF=120; BUDGET=${CAS_CHECK_BUDGET:-500}
else
  export GOMLX_BACKEND=gocpu
  BENCH_ARGS=(--shapes tiny --batches 1,4 --prompt-len 64 --new-tokens 8
    --grpo-shape tiny --grpo-precision bf16 --prompts 2 --group 2 --max-turn-tokens 16
    --decode-timeout 60s --grpo-timeout 90s)
  T_TEST=120; T_HF=120; BUDGET=${CAS_CHECK_BUDGET:-400}
fi
BENCH_ARGS+=(${CAS_BENCH_ARGS:-})

log "bundle $BUNDLE, backend $GOMLX_BACKEND, output $OUTDIR, budget ${BUDGET}s"
log "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-} XLA_FLAGS=${XLA_FLAGS:-}"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUTDIR/device.txt"
else
  echo "no nvidia-smi: $(nproc) CPU cores" | tee "$OUTDIR/device.txt"
fi
"$CAS" version

# Test selections: golden and device-sensitive tests only.
QWEN_RUN='TestGolden|TestBF16Logits|TestCacheMatchesFullForward|TestGenerateLogProbsMatchScore|TestScoreGradient|TestBatchMatchesSingle|TestWriteSlots'
BERT_RUN='TestGolden|TestBatchInvariance|TestReference'
TRAIN_RUN='TestGRPOLossGolden|TestGroupAdvantagesGolden|TestMixedPrecision|TestLearnerTwoSteps|TestGradientAccumulationExact|TestFastDotGeneralVJP'

if [ $DRY = 1 ]; then
  echo "dry run: would run"
  for t in "qwen.test:$QWEN_RUN" "bert.test:$BERT_RUN" "train.test:$TRAIN_RUN"; do
    echo "  timeout $T_TEST $WORK/bin/${t%%:*} -test.v -test.count=1 -test.run '${t#*:}'"
  done
  echo "  timeout $T_HF python3 $BUNDLE/hf_check.py --cas $CAS --out $OUTDIR/hf_check.json"
  echo "  timeout <left of ${BUDGET}s> $CAS bench gpu ${BENCH_ARGS[*]} --timeout <that, less 10>s --out $OUTDIR/bench.json"
  exit 0
fi

# --- (a) golden tests ------------------------------------------------------------
FAILED=()
TESTS_JSON=""
run_tests() { # name regex
  local name=$1 re=$2 rc t0
  t0=$(date +%s)
  log "(a) $name -test.run '$re'"
  (cd "$WORK" && timeout "$(within "$T_TEST")" "$WORK/bin/$name.test" -test.v -test.count=1 -test.run "$re") >"$OUTDIR/test_$name.log" 2>&1
  rc=$?
  local pass fail skip
  pass=$(grep -c -- '^--- PASS' "$OUTDIR/test_$name.log")
  fail=$(grep -c -- '^--- FAIL' "$OUTDIR/test_$name.log")
  skip=$(grep -c -- '^--- SKIP' "$OUTDIR/test_$name.log")
  grep -E -- '^(--- |    --- )(FAIL)|max \|Δ|rel diff|bf16 vs|cosine|golden_test' "$OUTDIR/test_$name.log" | head -n 40
  log "(a) $name: exit $rc, $pass passed, $fail failed, $skip skipped ($(( $(date +%s) - t0 ))s)"
  [ $rc = 0 ] || FAILED+=("tests $name (exit $rc)")
  TESTS_JSON="$TESTS_JSON${TESTS_JSON:+,}\"$name\":{\"exit\":$rc,\"passed\":$pass,\"failed\":$fail,\"skipped\":$skip,\"seconds\":$(( $(date +%s) - t0 ))}"
}
run_tests qwen "$QWEN_RUN"
run_tests bert "$BERT_RUN"
run_tests train "$TRAIN_RUN"

# --- (b) Hugging Face transformers -------------------------------------------------
HF_STATUS=skipped
if python3 -c 'import torch, transformers, safetensors' >/dev/null 2>&1; then
  log "(b) hf_check.py (torch $(python3 -c 'import torch; print(torch.__version__)'), transformers $(python3 -c 'import transformers; print(transformers.__version__)'))"
  DEV=cpu; [ "$BACKEND" = xla ] && DEV=cuda
  timeout "$(within "$T_HF")" python3 "$BUNDLE/hf_check.py" --cas "$CAS" --out "$OUTDIR/hf_check.json" --work "$WORK/hf" --torch-device "$DEV" 2>&1 | tee "$OUTDIR/hf_check.log"
  rc=$?
  if [ $rc = 0 ]; then HF_STATUS=passed; else HF_STATUS="failed (exit $rc)"; FAILED+=("hf_check (exit $rc)"); fi
else
  log "(b) skipped: python3 with torch, transformers and safetensors is not available here (the GPU machine has them)"
fi

# --- (c, d) decode and GRPO figures --------------------------------------------------
T_BENCH=$(within 100000)
BENCH_ARGS+=(--timeout "$(( T_BENCH > 15 ? T_BENCH - 10 : 5 ))s")
log "(c,d) cas bench gpu ${BENCH_ARGS[*]}"
timeout "$T_BENCH" "$CAS" bench gpu "${BENCH_ARGS[@]}" --out "$OUTDIR/bench.json" 2>&1 | tee "$OUTDIR/bench.log"
rc=$?
[ $rc = 0 ] || FAILED+=("bench gpu (exit $rc)")

# --- (e) one JSON -------------------------------------------------------------------
json_or_null() { if [ -s "$1" ]; then cat "$1"; else echo null; fi; }
esc() { printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g' | tr '\n' ' '; }
FAILED_JSON=""
for f in "${FAILED[@]+"${FAILED[@]}"}"; do FAILED_JSON="$FAILED_JSON${FAILED_JSON:+,}\"$(esc "$f")\""; done
{
  echo "{"
  echo "\"backend\": \"$(esc "$GOMLX_BACKEND")\","
  echo "\"device\": \"$(esc "$(cat "$OUTDIR/device.txt")")\","
  echo "\"cas_version\": \"$(esc "$("$CAS" version)")\","
  echo "\"tests\": {$TESTS_JSON},"
  echo "\"hf_status\": \"$(esc "$HF_STATUS")\","
  echo "\"hf\": $(json_or_null "$OUTDIR/hf_check.json"),"
  echo "\"bench\": $(json_or_null "$OUTDIR/bench.json"),"
  echo "\"failed\": [$FAILED_JSON],"
  echo "\"wall_s\": $(( $(date +%s) - START ))"
  echo "}"
} >"$OUTDIR/gpu_check.json"
log "(e) wrote $OUTDIR/gpu_check.json"
if [ ${#FAILED[@]} -gt 0 ]; then
  log "FAILED: ${FAILED[*]}"
  exit 1
fi
log "all parts passed"
