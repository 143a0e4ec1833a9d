#!/usr/bin/env bash
# Captures of the engine's decoding steps with and without programmatic dependent launches:
#
#   OUT=/some/folder GEN=/path/to/gpt2_generate WEIGHTS=/path/to/gpt2.bin bash tests/data/h100/overlap/capture.sh
#
# GEN: kernels' gpt2_generate (make -C kernels ARCH=sm_90 BUILD_DIR=... gpt2_generate); WEIGHTS: a weights
# file (python -m gpt2_engine.export, or bench/engine.py's). Overlap needs sm_90 or later.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../../.." && pwd)
OUT=${OUT:?set OUT to the folder to write the captures to}
GEN=${GEN:?set GEN to a gpt2_generate binary}
WEIGHTS=${WEIGHTS:?set WEIGHTS to a weights file}
mkdir -p "$OUT"
. "$ROOT/tests/data/h100/cupti/cuda_toolkit.sh"
[ -n "$INC" ] && [ -n "$LIB" ] || { echo "no CUPTI found"; exit 1; }
B=$(mktemp -d)
trap 'rm -rf "$B"' EXIT
nvcc -shared -std=c++17 -O2 -Xcompiler -fPIC,-fvisibility=hidden -I"$INC" -L"$LIB" -Xlinker -rpath="$LIB" \
    "$ROOT/sweep/profile/cupti_inject.cpp" -lcupti -o "$B/libsweep_cupti.so" || exit 1
RUN=("$GEN" --weights "$WEIGHTS" --new 4 -n 2 -w 1)
for variant in pdl no_overlap; do
    flag=(); [ "$variant" = no_overlap ] && flag=(--no-overlap)
    CUDA_INJECTION64_PATH="$B/libsweep_cupti.so" NVTX_INJECTION64_PATH="$LIB/libcupti.so" \
        SWEEP_CUPTI_OUT="$OUT/cupti_generate_$variant.txt" LD_LIBRARY_PATH="$LIB:${LD_LIBRARY_PATH:-}" \
        "${RUN[@]}" "${flag[@]}" > /dev/null || exit 1
done
NSYS=${NSYS:-$(command -v nsys)}
if [ -n "$NSYS" ]; then
    "$NSYS" profile --cuda-graph-trace=node -t cuda,nvtx --force-overwrite true -o "$B/pdl" "${RUN[@]}" > /dev/null || exit 1
    "$NSYS" export --type sqlite --force-overwrite true -o "$OUT/nsys_generate_pdl.sqlite" "$B/pdl.nsys-rep" > /dev/null
fi
ls -l "$OUT"
