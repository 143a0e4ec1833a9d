# Build of R128_G128_E8x8x8_L128_P128_F16 (sweep seed), generated from <ROOT>/spaces/seed.yaml at commit 0123456789ab.
# `make` here builds gpt2-engine with this folder's conf.cuh into ./build. Compiles go
# through the sweep's object cache, so objects whose preprocessed source, flags and compiler
# match an earlier build are reused; `make OBJCACHE=` compiles everything afresh. Variables
# are set with := so that the environment (an exported NVCCFLAGS) cannot replace them; the
# command line can (make ARCH=sm_80).
JOB_DIR    := $(patsubst %/,%,$(dir $(abspath $(lastword $(MAKEFILE_LIST)))))
TARGET_DIR := <ROOT>/kernels
NVCC_BIN   := nvcc
OBJCACHE   := <PYTHON> -I <ROOT>/sweep/node/objcache.py --dir <JOBS>/_cache/objects --
# The GPU's own architecture, read on the node that builds (sm_90 on an H100).
ARCH       := $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d ' .' | sed 's/^/sm_/')
NVCCFLAGS  := -O3 -lineinfo --resource-usage

.PHONY: all clean
all:
	@test -n "$(ARCH)" -a "$(ARCH)" != "sm_" || { echo "no GPU here to detect ARCH from: run make ARCH=sm_90 (or your GPU's)"; exit 2; }
	$(MAKE) -C $(TARGET_DIR) all CONF_DIR=$(JOB_DIR) BUILD_DIR=$(JOB_DIR)/build \
		NVCC="$(strip $(OBJCACHE) $(NVCC_BIN))" ARCH="$(ARCH)" NVCCFLAGS="$(NVCCFLAGS)"

clean:
	rm -rf $(JOB_DIR)/build
