#!/bin/bash
# Where a CUDA program's start-up goes, and whether the node does it one program at a time
# (issue 33: a sweep of short programs on several GPUs). Needs nvcc and a GPU; writes to stdout.
#
#   bash bench/context_startup/run.sh
#
# Each line: per process, cuInit's seconds and the primary context's (cudaFree(0)); 6 in a row on
# GPU 0, then 8 at once on GPU 0, 16 at once spread over every GPU and 16 on GPU 0; then the same
# while a Python process holds NVML open, and while a process holds a context on every GPU.
set -u
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
nvcc -O2 -o "$tmp/startup" "$here/startup.cu" -lcuda || exit 1
nvcc -O2 -o "$tmp/hold" "$here/hold.cu" || exit 1
nvidia-smi --query-gpu=index,name,persistence_mode,driver_version,compute_mode --format=csv
ngpu=$(nvidia-smi -L | wc -l)
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
in_a_row() {
    local t0; t0=$(now)
    echo "$1, 6 in a row on GPU 0 (init/ctx s): $(for i in 1 2 3 4 5 6; do CUDA_VISIBLE_DEVICES=0 "$tmp/startup"; done \
        | awk '{ printf "%s/%s ", substr($2, 6), substr($3, 5) }')wall $(since "$t0") s"
}
at_once() {  # label, processes, GPUs
    local t0; t0=$(now)
    local pids=()     # wait for these alone: a holder runs in the background too
    for i in $(seq 1 "$2"); do CUDA_VISIBLE_DEVICES=$(( i % $3 )) "$tmp/startup" > "$tmp/out.$i" & pids+=($!); done
    wait "${pids[@]}"
    echo "$1, $2 at once over $3 GPU(s) (init/ctx s): $(cat "$tmp"/out.* | awk '{ printf "%s/%s ", substr($2, 6), substr($3, 5) }')wall $(since "$t0") s"
    rm -f "$tmp"/out.*
}
in_a_row plain; at_once plain 8 1; at_once plain 16 "$ngpu"; at_once plain 16 1
python3 -c "import pynvml, time; pynvml.nvmlInit(); [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range($ngpu)]; time.sleep(60)" &
nvml=$!; sleep 2
in_a_row "NVML held"; at_once "NVML held" 8 1; at_once "NVML held" 16 "$ngpu"
kill $nvml 2>/dev/null; wait $nvml 2>/dev/null
for g in $(seq 0 $((ngpu - 1))); do CUDA_VISIBLE_DEVICES=$g "$tmp/hold" 60 > /dev/null & done; sleep 3
in_a_row "a context held on every GPU"; at_once "a context held on every GPU" 8 1
at_once "a context held on every GPU" 16 "$ngpu"; at_once "a context held on every GPU" 16 1
