# mlpipe's front door.
#
#   make            build everything into build/
#   make test       build, then run every test (ctest: unit, lit; GPU tests skip without a GPU)
#   make demo       the main job: GPT-2 generates from a prompt, on the GPU when
#                   there is one, else on the CPU; synthetic 124M weights unless
#                   WEIGHTS=path/to/model.safetensors (config.json beside it)
#   make kernels    the six unit kernels through the pipeline to PTX checked by ptxas
#   make test-sanitized  the CPU test suite built with AddressSanitizer and
#                   UndefinedBehaviorSanitizer (in build-sanitized/)
#   make fuzz       every fuzz target for FUZZ_SECONDS each (clang, libFuzzer;
#                   in build-fuzz/)
#   make format-check  every C++ source and header as clang-format (.clang-format)
#                   writes it; make format rewrites them so
#   make roofline   bench --profile on the GPU, drawn as a roofline chart
#                   ($(OUT)/roofline.png, gnuplot); CSV=FILE draws an existing
#                   bench --profile --csv file instead (e.g. one from the GPU host)
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

SANITIZED ?= build-sanitized
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 30
FUZZERS := npy safetensors gpt2_config bpe_loader tokenizer_encode cli_syntax hlo

ROOFLINE_MODES ?= fused
ROOFLINE_SEQ ?= 1024
CSV ?=

.PHONY: all build test demo kernels roofline test-sanitized fuzz format format-check clean

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
	trace $* | fuse | bufferize | outline --chip $(CHIP) | lower-nvvm --chip $(CHIP) -o $@

$(OUT)/%.$(CHIP).ptx-check: $(OUT)/%.$(CHIP).mlir
	ptx-check --chip $(CHIP) $< > $@.tmp && mv $@.tmp $@

# One row per kernel from bench --profile, each kernel a point at its
# arithmetic intensity under the copy and matmul roofs measured in the same run.
roofline: build
	@mkdir -p $(OUT)
	$(if $(CSV),,bench --config 124M --weights $(WEIGHTS) --target gpu --modes $(ROOFLINE_MODES) --seq $(ROOFLINE_SEQ) --repeat 5 --warmup 1 --profile --csv $(OUT)/profile.csv)
	gnuplot -e "csv='$(if $(CSV),$(CSV),$(OUT)/profile.csv)'; png='$(OUT)/roofline.png'" tools/bench/roofline.gnuplot
	@echo "wrote $(OUT)/roofline.png"

# Everything but the GPU tests and the Python kernel simulator, built with
# ASan and UBSan: the CPU path, the JIT included, runs instrumented. -O1 with
# line tables only: stack traces keep file and line, the build takes less.
test-sanitized:
	cmake -S . -B $(SANITIZED) -G Ninja -DMLPIPE_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG"
	cmake --build $(SANITIZED) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(SANITIZED) --output-on-failure -j $(JOBS) -LE "gpu|simulator"

# Each fuzz target for FUZZ_SECONDS, starting from its corpus in
# testdata/fuzz (new inputs go to a scratch copy, not the source tree), with
# testdata/fuzz/TARGET.dict as its dictionary where there is one.
fuzz:
	CC=clang-14 CXX=clang++-14 cmake -S . -B $(FUZZ_BUILD) -G Ninja -DMLPIPE_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
	@for target in $(FUZZERS); do \
	  rm -rf $(FUZZ_BUILD)/corpus/$$target && mkdir -p $(FUZZ_BUILD)/corpus/$$target $(FUZZ_BUILD)/crashes && \
	  echo "fuzz-$$target: $(FUZZ_SECONDS) s" && \
	  $(FUZZ_BUILD)/bin/fuzz-$$target -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -print_final_stats=1 \
	    $$(test -f testdata/fuzz/$$target.dict && echo -dict=testdata/fuzz/$$target.dict) \
	    -artifact_prefix=$(FUZZ_BUILD)/crashes/$$target- $(FUZZ_BUILD)/corpus/$$target testdata/fuzz/$$target \
	    2>&1 | grep -E "stat::number_of_executed_units|ERROR|SUMMARY|Test unit written" || true; \
	  if ls $(FUZZ_BUILD)/crashes/$$target-* >/dev/null 2>&1; then echo "fuzz-$$target found a crash"; exit 1; fi; \
	done

# The C++ files under version control, formatted by the .clang-format beside
# them (clang-format from Debian, apt-get install clang-format).
FORMATTED = $(shell git ls-files '*.cpp' '*.h')

format-check:
	@clang-format --dry-run --Werror $(FORMATTED) && echo "format-check: $(words $(FORMATTED)) files as clang-format writes them"

format:
	clang-format -i $(FORMATTED)

.PRECIOUS: $(OUT)/%.$(CHIP).mlir

clean:
	rm -rf $(BUILD) $(SANITIZED) $(FUZZ_BUILD)
