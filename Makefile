# mlpipe's front door.
#
#   make            build everything into build/
#   make test       build, then run every test (ctest: unit, lit; GPU tests skip without a GPU)
#   make demo       the main job: GPT-2 generates from a prompt, on the GPU when
#                   there is one, else on the CPU; synthetic 124M weights unless
#                   WEIGHTS=path/to/model.safetensors (config.json beside it)
#   make kernels    the six unit kernels through the pipeline to PTX checked by ptxas
#
# The kernel recipes are the tools' own shell pipelines.

BUILD ?= build
CHIP ?= sm_90
JOBS ?= $(shell nproc)
OUT ?= $(BUILD)/out
BIN := $(abspath $(BUILD))/bin
export PATH := $(BIN):$(PATH)

KERNELS := gelu softmax layernorm matmul gather attention
PROMPT ?= The meaning of life is
TOKENS ?= 20
WEIGHTS ?= synthetic
MODE ?= sublayer
CONFIG ?=

.PHONY: all build test demo kernels clean

all: build

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja

build: $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

demo: build
	generate "$(PROMPT)" --tokens $(TOKENS) --weights $(WEIGHTS) --mode $(MODE) $(if $(CONFIG),--config $(CONFIG))

kernels: build $(foreach k,$(KERNELS),$(OUT)/$(k).$(CHIP).ptx-check)
	@cat $(foreach k,$(KERNELS),$(OUT)/$(k).$(CHIP).ptx-check)

# trace -> fuse -> bufferize -> outline -> lower-nvvm, then ptxas on every kernel.
$(OUT)/%.$(CHIP).mlir: build
	@mkdir -p $(OUT)
	trace $* | fuse | bufferize | outline | lower-nvvm --chip $(CHIP) -o $@

$(OUT)/%.$(CHIP).ptx-check: $(OUT)/%.$(CHIP).mlir
	ptx-check --chip $(CHIP) $< > $@.tmp && mv $@.tmp $@

.PRECIOUS: $(OUT)/%.$(CHIP).mlir

clean:
	rm -rf $(BUILD)
