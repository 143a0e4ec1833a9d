# Sourced by the capture scripts here: the CUDA toolkit nvcc belongs to (CUDA) and the folders
# of its CUPTI header and library (INC, LIB; empty where not found), wherever the toolkit
# keeps them (targets/x86_64-linux, the top level, or extras/CUPTI in older toolkits).
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
CUDA=$(nvcc --dryrun -x cu -c /dev/null -o /dev/null 2>&1 | sed -n 's/^#\$ TOP=//p' | head -n1)
CUDA=$(cd "$CUDA" && pwd -P)
INC= LIB=
for d in "$CUDA/targets/x86_64-linux/include" "$CUDA/include" "$CUDA/extras/CUPTI/include"; do
    [ -z "$INC" ] && [ -f "$d/cupti.h" ] && INC=$d
done
for d in "$CUDA/targets/x86_64-linux/lib" "$CUDA/lib64" "$CUDA/lib" "$CUDA/extras/CUPTI/lib64"; do
    [ -z "$LIB" ] && [ -e "$d/libcupti.so" ] && LIB=$d
done
