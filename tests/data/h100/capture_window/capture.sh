#!/usr/bin/env bash
# What nsys and ncu do with a program that never calls cudaProfilerStart, on a
# machine with a GPU (an H100 here):
#
#   OUT=/some/folder bash tests/data/h100/capture_window/capture.sh
#
# examples/tiled_gemm --no-profiler-range under the sweep's own profile commands
# (sweep/profile/nsys.py, ncu.py): over the cudaProfilerApi window (what they
# print: nsys_no_start.txt, ncu_no_start.log; exit codes: *.exit) and over the
# whole run (nsys_whole_run.txt; ncu_whole_run.csv, which the ncu parser reads).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../../.." && pwd)
OUT=${OUT:?set OUT to the folder to write to}
mkdir -p "$OUT"
B=$(mktemp -d)
trap 'rm -rf "$B"' EXIT
ARCH=sm_$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n1 | tr -d ' .')
make -s -C "$ROOT/examples/tiled_gemm" BUILD_DIR="$B" ARCH="$ARCH" || exit 1
G=("$B/tiled_gemm" --no-profiler-range --nvtx --iters 3 --warmup 1)
NSYS=${NSYS:-nsys}
NCU=${NCU:-ncu}
"$NSYS" --version; "$NCU" --version | tail -n1
(cd "$B" && "$NSYS" profile --capture-range=cudaProfilerApi --capture-range-end=stop -t cuda,nvtx --force-overwrite true \
    -o "$B/window" "${G[@]}") > "$OUT/nsys_no_start.txt" 2>&1
echo $? > "$OUT/nsys_no_start.exit"
echo "report written: $(ls "$B"/window.nsys-rep 2>/dev/null || echo none)" >> "$OUT/nsys_no_start.exit.note"
(cd "$B" && "$NSYS" profile -t cuda,nvtx --force-overwrite true -o "$B/whole" "${G[@]}") > "$OUT/nsys_whole_run.txt" 2>&1
echo "exit $?; report written: $(ls "$B"/whole.nsys-rep 2>/dev/null || echo none)" >> "$OUT/nsys_whole_run.txt"
"$NCU" --csv --log-file "$OUT/ncu_no_start.log" --metrics gpu__time_duration.sum --clock-control none \
    --profile-from-start off --nvtx "${G[@]}" > "$OUT/ncu_no_start.out" 2>&1
echo $? > "$OUT/ncu_no_start.exit"
"$NCU" --csv --log-file "$OUT/ncu_whole_run.csv" --metrics gpu__time_duration.sum --clock-control none \
    --nvtx "${G[@]}" > /dev/null 2>&1
echo "ncu whole run: exit $?"
for f in nsys_no_start.txt nsys_no_start.exit nsys_no_start.exit.note nsys_whole_run.txt ncu_no_start.log ncu_no_start.exit ncu_no_start.out; do
    echo "== $f"; cat "$OUT/$f"
done
sed "s|$B|BUILD|g" -i "$OUT"/*.txt "$OUT"/*.log "$OUT"/*.out "$OUT"/*.csv "$OUT"/*.note 2>/dev/null
