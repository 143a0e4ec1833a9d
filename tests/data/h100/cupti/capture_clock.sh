#!/usr/bin/env bash
# Captures that show, on a machine with a GPU (an H100 here), whether timed iterations land on
# the wall clock where the sweep stamps its GPU clock readings (sweep.node.clocks, sweep.node.sampling):
#
#   OUT=/some/folder bash tests/data/h100/cupti/capture_clock.sh
#
# 1. cupti: builds sweep/profile/cupti_inject.cpp (format sweep-cupti/2, with `clock` pairs) as
#    capture.sh does, and examples/tiled_gemm, and runs `tiled_gemm --nvtx --iters 20 --warmup 2
#    --pause-ms 30` under the library, reading the wall clock (date +%s%N) just before and after:
#    gemm_nvtx_clock.txt and gemm_nvtx_clock.wall. The pause spreads the 20 iterations over about
#    0.6 s, so NVML's polls (every 50 ms) fall inside and between them.
# 2. nsys, when found: the same run under `nsys profile`, exported: nsys_gemm_clock.sqlite, .wall.
# 3. With Python and the sweep's requirements (numpy; pynvml for the polls): the check. For each
#    capture, its windows must lie inside the run's wall-clock interval; the cupti pairs' offsets
#    and drift are printed; then the cupti run once more while sweep.node.clocks.Monitor polls the GPU
#    (gemm_monitored.txt, gemm_monitored_readings.json), printing each timed iteration's SM clock
#    as sweep.node.sampling judges it. Expect every window inside its run, a drift of microseconds at
#    most, and every iteration at the boost clock on a GPU that is not throttling.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../../.." && pwd)
OUT=${OUT:?set OUT to the folder to write the captures to}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
. "$HERE/cuda_toolkit.sh"
echo "== machine"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.default_applications.graphics --format=csv
nvcc --version | tail -n 2
[ -n "$INC" ] && [ -n "$LIB" ] || { echo "no CUPTI found"; exit 1; }
ARCH=sm_$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n1 | tr -d ' .')

B=$(mktemp -d)
trap 'rm -rf "$B"' EXIT
echo "== build"
nvcc -shared -std=c++17 -O2 -Xcompiler -fPIC,-fvisibility=hidden -I"$INC" -L"$LIB" -Xlinker -rpath="$LIB" \
    "$ROOT/sweep/profile/cupti_inject.cpp" -lcupti -o "$B/libsweep_cupti.so" || exit 1
make -s -C "$ROOT/examples/tiled_gemm" BUILD_DIR="$B/default" ARCH="$ARCH" || exit 1
G=("$B/default/tiled_gemm" --nvtx --iters 20 --warmup 2 --pause-ms 30)

# wall FILE CMD...: run CMD, its output discarded, with the wall clock (ns) before and after it in FILE
wall() {
    local file=$1; shift
    local t0 t1
    t0=$(date +%s%N); "$@" >/dev/null 2>&1; local rc=$?; t1=$(date +%s%N)
    echo "$t0 $t1" > "$OUT/$file"
    echo "$file: exit $rc, $(( (t1 - t0) / 1000000 )) ms"
}

echo "== cupti"
CUDA_INJECTION64_PATH="$B/libsweep_cupti.so" NVTX_INJECTION64_PATH="$LIB/libcupti.so" \
    SWEEP_CUPTI_OUT="$OUT/gemm_nvtx_clock.txt" LD_LIBRARY_PATH="$LIB:${LD_LIBRARY_PATH:-}" \
    wall gemm_nvtx_clock.wall "${G[@]}"
head -n 1 "$OUT/gemm_nvtx_clock.txt"; grep '^clock' "$OUT/gemm_nvtx_clock.txt"; tail -n 1 "$OUT/gemm_nvtx_clock.txt"

NSYS=${NSYS:-$(command -v nsys || ls /opt/nvidia/nsight-systems/*/bin/nsys /usr/local/cuda/bin/nsys 2>/dev/null \
    | head -n1)}
if [ -n "$NSYS" ]; then
    echo "== nsys ($NSYS)"
    wall nsys_gemm_clock.wall "$NSYS" profile -t cuda,nvtx --force-overwrite true -o "$B/ns" "${G[@]}"
    "$NSYS" export --type sqlite --force-overwrite true -o "$OUT/nsys_gemm_clock.sqlite" "$B/ns.nsys-rep" >/dev/null
    sqlite3 "$OUT/nsys_gemm_clock.sqlite" "SELECT * FROM TARGET_INFO_SESSION_START_TIME" 2>/dev/null
fi

PY=${PYTHON:-python3}
if ! PYTHONPATH="$ROOT" "$PY" -c "import sweep.node.clocks, sweep.profile.cupti" 2>/dev/null; then
    echo "== no Python with the sweep's requirements ($PY): the check is skipped; the captures are in $OUT"
    exit 0
fi
echo "== check"
OUT="$OUT" CACHE="$B/cache" PYTHONPATH="$ROOT" "$PY" - "${G[@]}" <<'EOF'
import json, os, subprocess, sys
from pathlib import Path

from sweep import clocks
from sweep.profile import cupti, nsys
from sweep.profile.cupti_file import read_capture

out = Path(os.environ["OUT"])


def inside(name, windows, wall_file):
    before, after = (int(x) for x in (out / wall_file).read_text().split())
    ok = bool(windows) and before <= windows[0][0] and windows[-1][1] <= after
    print(f"{name}: {len(windows or ())} windows; the first starts {(windows[0][0] - before) / 1e6:.1f} ms after "
          f"the run began, the last ends {(after - windows[-1][1]) / 1e6:.1f} ms before it ended: "
          f"{'inside the run' if ok else 'OUTSIDE the run: the mapping to the wall clock is wrong'}")


pairs = read_capture(out / "gemm_nvtx_clock.txt").clock_pairs
offsets = [p.realtime_ns - p.cupti_ns for p in pairs]
print(f"cupti clock pairs: {len(pairs)}; wall minus CUPTI clock {offsets} ns; drift over the run "
      f"{offsets[-1] - offsets[0] if offsets else 'unknown'} ns")
inside("cupti", cupti.parse(out / "gemm_nvtx_clock.txt").windows, "gemm_nvtx_clock.wall")
if (out / "nsys_gemm_clock.sqlite").is_file():
    inside("nsys", nsys.read_export(out / "nsys_gemm_clock.sqlite").windows, "nsys_gemm_clock.wall")

reader = clocks.reader()
if reader is None:
    sys.exit("no clock reader (pynvml or nvidia-smi): the monitored run is skipped")
default = clocks.default_clock(clocks.fingerprint(reader))
lib = cupti.library(Path(os.environ["CACHE"]))
env = {**os.environ, **cupti.environment(lib, out / "gemm_monitored.txt")}
with clocks.Monitor(reader) as mon:
    subprocess.run(sys.argv[1:], env=env, stdout=subprocess.DEVNULL, check=True)
series = mon.series()
(out / "gemm_monitored_readings.json").write_text(json.dumps(
    {"reader": type(reader).__name__, "interval_s": series.interval_s, "default_mhz": default,
     "readings": [{"t_ns": s.t_ns, **s.reading.to_dict()} for s in series.readings]}, indent=1))
windows = cupti.parse(out / "gemm_monitored.txt").windows
if not windows:
    sys.exit("the monitored capture has no clock pairs: the library was not built from this checkout's source")
sm = series.iteration_clocks(windows)
first = windows[0][0]
print(f"monitored run ({type(reader).__name__}, a poll every {series.interval_s} s, default clock {default} MHz, "
      f"threshold {clocks.threshold(default)} MHz): {len(series.readings)} readings, "
      f"{sum(s.t_ns < first for s in series.readings)} before the first iteration "
      f"({[s.reading.sm_mhz for s in series.readings if s.t_ns < first]} MHz)")
for i, ((start, end), mhz) in enumerate(zip(windows, sm)):
    print(f"  iteration {i:2d}: {(start - first) / 1e6:8.2f} ms +{(end - start) / 1e3:7.1f} us  SM {mhz} MHz"
          f"{'  THROTTLED' if clocks.throttled(mhz, default) else ''}")
EOF
ls -la "$OUT"
