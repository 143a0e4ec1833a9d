#!/usr/bin/env bash
# Makes the CUPTI captures in this folder, on a machine with a GPU (an H100 here):
#
#   OUT=/some/folder bash tests/data/h100/cupti/capture.sh
#
# It builds the injection library (the command sweep.profile.cupti.library()
# runs) and examples/tiled_gemm for sm_90 at two tile configurations, runs the
# example plain and under the library, and writes the capture files, the
# programs' output and the wall times to $OUT. Self-contained: needs bash,
# make, nvcc with CUPTI and nvidia-smi; no Python.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../../../.." && pwd)
OUT=${OUT:?set OUT to the folder to write the captures to}
mkdir -p "$OUT"
. "$(dirname "$0")/cuda_toolkit.sh"
echo "== machine"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
nvcc --version | tail -n 2
echo "CUDA $CUDA, CUPTI include $INC, lib $LIB"
[ -n "$INC" ] && [ -n "$LIB" ] || { echo "no CUPTI found"; exit 1; }

B=$(mktemp -d)
trap 'rm -rf "$B"' EXIT
echo "== build"
set -x
nvcc -shared -std=c++17 -O2 -Xcompiler -fPIC,-fvisibility=hidden -I"$INC" -L"$LIB" -Xlinker -rpath="$LIB" \
    "$ROOT/sweep/profile/cupti_inject.cpp" -lcupti -o "$B/libsweep_cupti.so" || exit 1
make -s -C "$ROOT/examples/tiled_gemm" BUILD_DIR="$B/default" ARCH=sm_90 || exit 1
mkdir -p "$B/conf_b"
printf '#define GEMM_BM 128\n#define GEMM_BN 64\n#define GEMM_BK 8\n#define GEMM_TM 8\n#define GEMM_TN 8\n' > "$B/conf_b/conf.cuh"
make -s -C "$ROOT/examples/tiled_gemm" CONF_DIR="$B/conf_b" BUILD_DIR="$B/b" ARCH=sm_90 || exit 1
set +x
GEMM=$B/default/tiled_gemm
GEMM_B=$B/b/tiled_gemm

# inject FILE CMD...: run CMD under the library, capturing to $OUT/FILE
inject() {
    local file=$1; shift
    CUDA_INJECTION64_PATH="$B/libsweep_cupti.so" NVTX_INJECTION64_PATH="$LIB/libcupti.so" \
        SWEEP_CUPTI_OUT="$OUT/$file" LD_LIBRARY_PATH="$LIB:${LD_LIBRARY_PATH:-}" "$@"
}
# ms CMD...: wall time of CMD in ms, its output discarded
ms() {
    local t0 t1
    t0=$(date +%s%N); "$@" >/dev/null 2>&1; local rc=$?; t1=$(date +%s%N)
    echo "$(( (t1 - t0) / 1000000 )) ms (exit $rc)"
}
records() {  # what a capture holds: record kinds and counts, then its first and last lines
    echo "-- $1: $(wc -c < "$OUT/$1") bytes"; cut -f1 "$OUT/$1" | sort | uniq -c | tr '\n' ' '; echo
    grep -v '^api' "$OUT/$1" | head -n 8; echo "..."; tail -n 3 "$OUT/$1"
}

echo "== plain runs (program output once), then wall times, plain and injected in turn"
"$GEMM" --iters 20 --warmup 2
for i in 1 2 3 4 5; do
    echo "plain:    $(ms "$GEMM" --iters 20 --warmup 2)   injected: $(ms inject timing.txt "$GEMM" --iters 20 --warmup 2)"
done
for i in 1 2 3 4 5; do
    echo "plain --nvtx:    $(ms "$GEMM" --nvtx --iters 20 --warmup 2)   injected --nvtx: $(ms inject timing.txt "$GEMM" --nvtx --iters 20 --warmup 2)"
done
echo "-- launch-heavy: 2000 iterations at 256 (6000 timed launches), plain and injected in turn, then each one's own timing"
for i in 1 2 3; do
    echo "plain:    $(ms "$GEMM" --nvtx --iters 2000 --sizes 256)   injected: $(ms inject timing.txt "$GEMM" --nvtx --iters 2000 --sizes 256)"
done
"$GEMM" --nvtx --iters 2000 --sizes 256 | tail -n 1
inject timing.txt "$GEMM" --nvtx --iters 2000 --sizes 256 | tail -n 1
echo "capture of the launch-heavy run: $(wc -c < "$OUT/timing.txt") bytes, $(grep -c '^kern' "$OUT/timing.txt") kernels, last line: $(tail -n 1 "$OUT/timing.txt")"
rm -f "$OUT/timing.txt"
echo "-- SWEEP_CUPTI_OUT unset: the program runs as usual"
CUDA_INJECTION64_PATH="$B/libsweep_cupti.so" LD_LIBRARY_PATH="$LIB" "$GEMM" --iters 2 | tail -n 1; echo "exit $?"
echo "-- %p in SWEEP_CUPTI_OUT"
inject 'pid_%p.txt' "$GEMM" --iters 2 > /dev/null; ls "$OUT" | grep pid_ && rm -f "$OUT"/pid_*.txt

echo "== captures"
inject gemm_shapes.txt "$GEMM" --iters 20 --warmup 2; echo "exit $?"
inject gemm_nvtx.txt "$GEMM" --nvtx --iters 20 --warmup 2; echo "exit $?"
inject gemm_tiles_b_nvtx.txt "$GEMM_B" --nvtx --iters 10 --warmup 2; echo "exit $?"
inject gemm_abort.txt "$GEMM" --nvtx --iters 20 --warmup 2 --crash-after 7 --crash-how abort; echo "exit $?"
inject gemm_segv.txt "$GEMM" --nvtx --iters 20 --warmup 2 --crash-after 7 --crash-how segv; echo "exit $?"
# Killed from outside, as Slurm does at a time limit: SIGTERM while it runs.
inject gemm_sigterm.txt timeout -s TERM 2 "$GEMM" --nvtx --iters 1000 --warmup 2 --pause-ms 20 > /dev/null; echo "exit $?"
for f in gemm_shapes.txt gemm_nvtx.txt gemm_tiles_b_nvtx.txt gemm_abort.txt gemm_segv.txt gemm_sigterm.txt; do
    records "$f"
done
if ! grep -q '^mark' "$OUT/gemm_nvtx.txt"; then
    echo "== no NVTX marks: retry with NVTX_INJECTION64_PATH at the real file"
    NVTX_INJECTION64_PATH=$(readlink -f "$LIB/libcupti.so") CUDA_INJECTION64_PATH="$B/libsweep_cupti.so" \
        SWEEP_CUPTI_OUT="$OUT/gemm_nvtx_retry.txt" LD_LIBRARY_PATH="$LIB" "$GEMM" --nvtx --iters 20 --warmup 2
    records gemm_nvtx_retry.txt
fi
NSYS=$(command -v nsys || ls /opt/nvidia/nsight-systems/*/bin/nsys /usr/local/cuda/bin/nsys 2>/dev/null | head -n1)
if [ -n "$NSYS" ]; then
    echo "== nsys, for comparison ($NSYS)"
    echo "nsys profile: $(ms timeout 120 "$NSYS" profile --capture-range=cudaProfilerApi --capture-range-end=stop \
        -t cuda,nvtx --force-overwrite true -o "$B/ns" "$GEMM" --nvtx --iters 20 --warmup 2)"
    echo "nsys export: $(ms timeout 60 "$NSYS" export --type sqlite --force-overwrite true -o "$OUT/nsys_gemm_nvtx.sqlite" "$B/ns.nsys-rep")"
fi
ls -la "$OUT"
