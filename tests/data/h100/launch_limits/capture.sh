#!/usr/bin/env bash
# Makes the files in this folder on a machine with a GPU (an H100 here):
#
#   OUT=/some/folder bash tests/data/h100/launch_limits/capture.sh
#
# Builds launch_limits.cu for the GPU, runs each refused launch plain (the
# program's own output: <what>.txt, its exit code on the last line) and under
# the sweep's CUPTI injection library (sweep.profile.cupti.library(); the
# capture: <what>_cupti.txt), and keeps what cuobjdump says of the program's
# kernels (resource_usage.txt; the EIATTR_MAX_THREADS entries of `cuobjdump
# -elf`: launch_bounds.txt). Needs nvcc with CUPTI, cuobjdump and python3.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../../.." && pwd)
OUT=${OUT:?set OUT to the folder to write to}
mkdir -p "$OUT"
B=$(mktemp -d)
trap 'rm -rf "$B"' EXIT
ARCH=sm_$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n1 | tr -d ' .')
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
nvcc -O3 -arch="$ARCH" -o "$B/launch_limits" "$HERE/launch_limits.cu" || exit 1
ENV=$(PYTHONPATH="$ROOT" python3 -c '
import shlex, sys
from pathlib import Path
from sweep.profile import cupti
env = cupti.environment(cupti.library(Path(sys.argv[1])), Path(sys.argv[2]))
print(" ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()))' "$B/cache" "$B/CAPTURE") || exit 1
for what in bounds registers threads block_z grid_y smem smem_optin ok; do
    (cd "$B" && ./launch_limits "$what") > "$OUT/$what.txt" 2>&1
    echo "exit $?" >> "$OUT/$what.txt"
    env ${ENV//CAPTURE/$what.cupti} "$B/launch_limits" "$what" > /dev/null 2>&1
    cp "$B/$what.cupti" "$OUT/${what}_cupti.txt"
    echo "== $what"; cat "$OUT/$what.txt"; grep -E '^(fail|limits|end)' "$OUT/${what}_cupti.txt"
done
if command -v cuobjdump > /dev/null; then
    cuobjdump --dump-resource-usage "$B/launch_limits" | sed "s|$B|BUILD|g" > "$OUT/resource_usage.txt"
    cuobjdump -elf "$B/launch_limits" | grep -E 'nv\.info\.|EIATTR_MAX_THREADS|EIATTR_REQNTID' -A2 | sed "s|$B|BUILD|g" > "$OUT/launch_bounds.txt"
    cat "$OUT/resource_usage.txt" "$OUT/launch_bounds.txt"
fi
sed -i "s|$ROOT|ROOT|g; s|$B|BUILD|g" "$OUT"/*.txt
