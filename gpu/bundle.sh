#!/usr/bin/env bash
# gpu/bundle.sh: build the GPU check bundle (`make gpu-bundle` runs it).
#
#   gpu/bundle.sh [--out bin/gpu-bundle] [--tags xla|none]
#
# Builds, stripped (-ldflags "-s -w"), the cas binary and the test binaries
# (go test -c) of model/qwen, model/bert and train; gzips them into
# OUT/bin; copies the shared files those tests and `cas bench gpu` read
# (golden/{qwen2-tiny,qwen3-tiny,bert-tiny,grpo}, the Qwen tokenizer,
# gzipped) into OUT/shared, which check.sh points CAS_SHARED at; copies
# gpu/check.sh and gpu/hf_check.py; prints the size and fails above 64 MiB
# (what one device call carries).
#
# --tags xla (the default) builds with CGO_ENABLED=1 -tags xla: the binaries
# that run on xla:cuda. --tags none builds the same layout with the pure-Go
# backends only (CGO_ENABLED=0), which is what the CPU rehearsal test uses:
# the first cgo build of go-xla takes minutes on two cores.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=$ROOT/bin/gpu-bundle
TAGS=xla
GO=${GO:-go}
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    --tags) TAGS=$2; shift 2 ;;
    *) echo "bundle.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
SHARED=${CAS_SHARED:-$(dirname "$ROOT")/shared}
case "$TAGS" in
  xla) export CGO_ENABLED=1; TAGFLAGS=(-tags xla); GZ=-9 ;;
  none) export CGO_ENABLED=0; TAGFLAGS=(); GZ=-1 ;; # the rehearsal: size matters less than time
  *) echo "bundle.sh: --tags $TAGS: want xla or none" >&2; exit 2 ;;
esac
for d in golden/qwen2-tiny golden/qwen3-tiny golden/bert-tiny golden/grpo tokenizers/qwen3/tokenizer.json; do
  [ -e "$SHARED/$d" ] || { echo "bundle.sh: $SHARED/$d missing (set CAS_SHARED)" >&2; exit 1; }
done
OUT=$(mkdir -p "$OUT" && cd "$OUT" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
rm -rf "$OUT/bin" "$OUT/shared"
mkdir -p "$OUT/bin" "$OUT/shared/golden" "$OUT/shared/tokenizers/qwen3"
LDFLAGS=(-ldflags '-s -w')
cd "$ROOT"
echo "bundle: building cas (${TAGS}) …"
$GO build "${TAGFLAGS[@]}" "${LDFLAGS[@]}" -o "$TMP/cas" ./cmd/cas
for pkg in model/qwen model/bert train; do
  name=$(basename "$pkg")
  echo "bundle: building $name.test …"
  $GO test -c "${TAGFLAGS[@]}" "${LDFLAGS[@]}" -o "$TMP/$name.test" "./$pkg"
done
for f in "$TMP"/*; do gzip $GZ -n -c "$f" >"$OUT/bin/$(basename "$f").gz"; done
for d in qwen2-tiny qwen3-tiny bert-tiny grpo; do cp -r "$SHARED/golden/$d" "$OUT/shared/golden/$d"; done
gzip $GZ -n -c "$SHARED/tokenizers/qwen3/tokenizer.json" >"$OUT/shared/tokenizers/qwen3/tokenizer.json.gz"
cp gpu/check.sh gpu/hf_check.py "$OUT/"
chmod +x "$OUT/check.sh"
{
  echo "cas GPU bundle"
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (dirty)')"
  echo "tags: $TAGS  go: $($GO env GOVERSION)  built: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "run: bash check.sh --backend $([ "$TAGS" = xla ] && echo xla || echo gocpu) --out \$OUT"
  (cd "$OUT" && find . -type f ! -name MANIFEST -printf '%s\t%p\n' | sort -k2)
} >"$OUT/MANIFEST"
BYTES=$(du -sb "$OUT" | cut -f1)
awk -v o="$OUT" -v b="$BYTES" 'BEGIN { printf "bundle: %s: %.1f MiB (%d bytes)\n", o, b / 1048576, b }'
if [ "$BYTES" -gt $((64 << 20)) ]; then
  echo "bundle: over 64 MiB, too large to carry in one device call" >&2
  exit 1
fi
