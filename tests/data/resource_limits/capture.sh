#!/usr/bin/env bash
# Makes the build logs in this folder: each kernel built with the real nvcc (for
# sm_90; no GPU needed), make's whole output kept as <name>.log, the way a job's
# build.log holds it.   bash tests/data/resource_limits/capture.sh
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(mktemp -d)
trap 'rm -rf "$B"' EXIT
for name in shared constant regcount unsupported; do
    make --no-print-directory -C "$HERE" BUILD_DIR="$B" "$name" 2>&1 | sed "s|$B|BUILD|g; s|$HERE|SRC|g; s|/tmp/tmpxft[^ ,]*|/tmp/tmpxft.ptx|g" > "$HERE/$name.log"
    echo "== $name.log"; cat "$HERE/$name.log"
done
