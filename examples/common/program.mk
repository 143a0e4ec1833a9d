# program.mk: the build every example's Makefile includes, following the target contract.
#
# The including Makefile sets PROGRAM (the program's name, and its one source PROGRAM.cu
# beside that Makefile), DIR (that Makefile's folder) and, for a program that includes
# another example's kernels, SOURCE_DIRS (their folders), then includes this file:
#
#   make                                    # the defaults in the example's own .cuh, build/PROGRAM
#   make CONF_DIR=jobs/x/T64_ BUILD_DIR=/tmp/b ARCH="sm_80 sm_90"
#
# CONF_DIR    folder holding conf.cuh, put FIRST on the include path (empty: the
#             example's defaults); keep no conf.cuh in the example's folder, or it would
#             shadow the sweep's
# BUILD_DIR   where objects and the program go
# NVCC        the compiler; a sweep puts its object cache in front ("objcache ... -- nvcc"),
#             so it may be several words and the link uses its last one
# ARCH        one or more sm_XY targets, e.g. "sm_90" or "sm_80 sm_90"
# NVCCFLAGS   optimisation and extra flags
COMMON_DIR := $(patsubst %/,%,$(dir $(abspath $(lastword $(MAKEFILE_LIST)))))
CONF_DIR  ?=
BUILD_DIR ?= $(DIR)/build
NVCC      ?= nvcc
ARCH      ?= sm_90
NVCCFLAGS ?= -O3 -lineinfo

GENCODE  := $(foreach a,$(ARCH),-gencode arch=compute_$(a:sm_%=%),code=$(a))
INCLUDES := $(if $(CONF_DIR),-I$(abspath $(CONF_DIR))) -I$(DIR) $(foreach d,$(SOURCE_DIRS),-I$(d)) -I$(COMMON_DIR)
FLAGS    := -std=c++17 $(NVCCFLAGS) $(GENCODE) $(INCLUDES)

.PHONY: all clean FORCE
.SECONDARY:
all: $(BUILD_DIR)/$(PROGRAM)

# Rebuild when the flags change (a new ARCH or CONF_DIR), not only when a file does.
FLAGS_STAMP := $(BUILD_DIR)/flags.txt
$(FLAGS_STAMP): FORCE | $(BUILD_DIR)
	@echo '$(FLAGS)' | cmp -s - $@ || echo '$(FLAGS)' > $@

$(BUILD_DIR)/$(PROGRAM).o: $(DIR)/$(PROGRAM).cu $(FLAGS_STAMP) | $(BUILD_DIR)
	$(NVCC) $(FLAGS) -MMD -MP -c $< -o $@

$(BUILD_DIR)/$(PROGRAM): $(BUILD_DIR)/$(PROGRAM).o
	$(lastword $(NVCC)) $(GENCODE) $^ -o $@

$(BUILD_DIR):
	mkdir -p $@

clean:
	rm -rf $(BUILD_DIR)

-include $(wildcard $(BUILD_DIR)/*.d)
