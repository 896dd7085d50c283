// The cuBLAS path's compiler half, checked by running it on the CPU:
// programs go through mlpipe-cublas-matmuls and the CPU lowering, and the
// JIT binds mlpipeGemm to a float64 host implementation of its contract
// (gemm_reference.h). So every transpose flag, leading dimension, batch
// stride, pointer offset, elided fill and folded epilogue the pass emits is
// checked numerically (against the float64 reference, or against the same
// module through the plain BLAS lowering) on any machine. The GPU test
// (gemm_gpu_test) holds cuBLAS to the same host implementation.
#define BOOST_TEST_MODULE gemm_lowering
#include <boost/test/unit_test.hpp>

#include "gemm_reference.h"
#include "test_support.h"

#include "compiler/compiler.h"
#include "driver/verify.h"
#include "frontend/mlir_emitter.h"
#include "jit/executable.h"
#include "models/gpt2.h"
#include "models/unit_kernels.h"
#include "reference/evaluator.h"
#include "support/compare.h"
#include "support/output_file.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <random>

using namespace mlpipe;

namespace {

using Tensors = std::map<std::string, HostTensor>;

// Every GEMM the compiled code asked for, in order.
std::vector<gpu::GemmProblem> &gemmLog() {
  static std::vector<gpu::GemmProblem> log;
  return log;
}

// mlpipeGemm's C signature (gemm_abi.h), computed on the host.
void hostGemm(int32_t element, int32_t compute, int32_t transposeA, int32_t transposeB, int64_t batch, int64_t m,
              int64_t n, int64_t k, double alpha, const void *a, int64_t lda, int64_t strideA, const void *b,
              int64_t ldb, int64_t strideB, double beta, const void *c, int64_t ldc, int64_t strideC, void *d,
              int64_t ldd, int64_t strideD, int32_t epilogue, const void *bias) {
  gpu::GemmProblem p;
  p.element = static_cast<gemm_abi::Element>(element);
  p.compute = static_cast<gemm_abi::Compute>(compute);
  p.transposeA = transposeA != 0;
  p.transposeB = transposeB != 0;
  p.batch = batch;
  p.m = m;
  p.n = n;
  p.k = k;
  p.alpha = alpha;
  p.a = a;
  p.lda = lda;
  p.strideA = strideA;
  p.b = b;
  p.ldb = ldb;
  p.strideB = strideB;
  p.beta = beta;
  p.c = c;
  p.ldc = ldc;
  p.strideC = strideC;
  p.d = d;
  p.ldd = ldd;
  p.strideD = strideD;
  p.epilogue = static_cast<gemm_abi::Epilogue>(epilogue);
  p.bias = bias;
  gemmLog().push_back(p);
  testing::referenceGemm(p);
}

// lower-cpu's pipeline with mlpipe-cublas-matmuls before the BLAS pass, in
// a file for StageOptions::pipelineFile. Every product goes through the GEMM
// call (skinny-rows=0: one-row products would otherwise be left to the
// generated kernel).
class CublasPipelineFile {
public:
  CublasPipelineFile() {
    std::string text = builtinPipeline("lower-cpu");
    size_t at = text.find("mlpipe-blas-matmuls,");
    BOOST_REQUIRE(at != std::string::npos);
    text.insert(at, "mlpipe-cublas-matmuls{skinny-rows=0 row-dot-rows=0}, ");
    path_ =
        (std::filesystem::temp_directory_path() / ("gemm_lowering_" + std::to_string(getpid()) + ".pipeline")).string();
    writeOutput(path_, text);
  }
  ~CublasPipelineFile() { std::filesystem::remove(path_); }
  const std::string &path() const { return path_; }

private:
  std::string path_;
};

// Lowers a bufferized module for the CPU, through the cuBLAS pass or not,
// and runs `entryName` on `inputs` (read in place); returns its outputs by
// name (poisoned with NaN first, so an element left unwritten shows).
Tensors runOnHost(const std::string &bufferized, const std::string &entryName, Tensors &inputs,
                  bool throughCublasPass) {
  MlirModule module = MlirModule::parse(bufferized, entryName + ".bufferized.mlir");
  StageOptions options;
  CublasPipelineFile pipeline;
  if (throughCublasPass)
    options.pipelineFile = pipeline.path();
  runStage(StageTool::LowerCpu, module, options);
  bool callsGemm = module.print().find(std::string("@") + gemm_abi::kEntryName) != std::string::npos;
  BOOST_TEST_INFO("entry " << entryName);
  if (!throughCublasPass)
    BOOST_TEST(!callsGemm);

  std::vector<EntrySignature> entries = entrySignatures(module);
  const EntrySignature &entry = selectEntry(entries, entryName);
  std::vector<HostTensor *> buffers;
  for (const TensorSpec &spec : entry.inputs) {
    HostTensor &input = inputs.at(spec.name);
    BOOST_REQUIRE(input.shape() == spec.shape);
    buffers.push_back(&input);
  }
  Tensors outputs;
  for (const TensorSpec &spec : entry.outputs) {
    outputs[spec.name] =
        HostTensor::fromDoubles(spec.dtype, spec.shape, std::vector<double>(size_t(numElements(spec.shape)), NAN));
    buffers.push_back(&outputs[spec.name]);
  }

  ExecutionOptions execution;
  execution.symbolOverrides = {{gemm_abi::kEntryName, reinterpret_cast<void *>(&hostGemm)}};
  execution.target = Target::Cpu;
  Executable executable = Executable::load(std::move(module), execution);
  std::vector<void *> pointers;
  for (HostTensor *buffer : buffers)
    pointers.push_back(buffer->data());
  executable.call(executable.entry(entryName), pointers);
  return outputs;
}

// fuse and bufferize, as the tools run them.
std::string bufferizedText(const fe::Program &program, const std::string &name) {
  MlirModule module = MlirModule::parse(fe::emitMlir(program), name + ".mlir");
  runStage(StageTool::Fuse, module, {});
  runStage(StageTool::Bufferize, module, {});
  return module.print();
}

Tensors asTensors(const std::vector<std::pair<std::string, HostTensor>> &named) {
  Tensors tensors;
  for (auto &[name, tensor] : named)
    tensors[name] = tensor;
  return tensors;
}

// Fresh uniform [-1, 1) values for every float input of a module's entry.
Tensors randomEntryInputs(const std::string &text, const std::string &entryName) {
  MlirModule module = MlirModule::parse(text, entryName + ".mlir");
  std::vector<EntrySignature> entries = entrySignatures(module);
  const EntrySignature &entry = selectEntry(entries, entryName);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  Tensors inputs;
  for (const TensorSpec &spec : entry.inputs) {
    HostTensor tensor(spec.dtype, spec.shape);
    for (int64_t i = 0; i < tensor.numel(); ++i)
      tensor.set(i, uniform(testing::rng()));
    inputs[spec.name] = tensor;
  }
  return inputs;
}

// ||actual - expected|| / ||expected|| within `tolerance`, nothing unwritten.
void checkClose(const HostTensor &actual, const HostTensor &expected, double tolerance, const std::string &what) {
  Comparison comparison = compareTensors(actual, expected, 0.0, 0.0);
  int64_t unwritten = 0;
  for (int64_t i = 0; i < actual.numel(); ++i)
    unwritten += std::isnan(actual.at(i)) ? 1 : 0;
  BOOST_TEST(unwritten == 0, what << ": " << unwritten << " elements unwritten");
  BOOST_TEST(comparison.relativeL2 < tolerance, what << ": relative L2 error " << comparison.relativeL2);
}

struct MatmulCase {
  std::string name;
  Shape a, b;
  int64_t batch = 0;
  bool transposeA = false, transposeB = false;
  std::string epilogue = "none";
  DType dtype = DType::f32;
  gemm_abi::Epilogue expectedEpilogue = gemm_abi::kNone;
};

} // namespace

// The unit matmul over awkward shapes, views, batches, epilogues and both
// float types: one GEMM each, computing what the float64 reference does.
BOOST_AUTO_TEST_CASE(unit_matmuls_through_gemm_calls_match_the_float64_reference) {
  using gemm_abi::kBias;
  using gemm_abi::kBiasGelu;
  using gemm_abi::kNone;
  std::vector<MatmulCase> cases = {
      {"1x1x1", {1, 1}, {1, 1}},
      {"17x33x65", {17, 33}, {33, 65}},
      {"4097x3x5", {4097, 3}, {3, 5}},
      {"1x768x50257", {1, 768}, {768, 50257}},
      {"batched 3x(33x17 @ 17x50)", {33, 17}, {17, 50}, 3},
      {"transposed b", {17, 33}, {65, 33}, 0, false, true},
      {"transposed a", {33, 17}, {33, 65}, 0, true, false},
      {"both transposed, batched", {33, 17}, {65, 33}, 2, true, true},
      {"f64", {17, 33}, {33, 65}, 0, false, false, "none", DType::f64},
      {"f64 batched transposed b", {9, 7}, {5, 7}, 2, false, true, "none", DType::f64},
      {"bias", {17, 33}, {33, 65}, 0, false, false, "bias", DType::f32, kBias},
      {"bias + gelu", {17, 33}, {33, 65}, 0, false, false, "bias-gelu", DType::f32, kBiasGelu},
      {"residual + bias", {17, 33}, {33, 65}, 0, false, false, "bias-residual", DType::f32, kBias},
      {"bias + gelu, transposed b, batched", {5, 33}, {65, 33}, 3, false, true, "bias-gelu", DType::f32, kBiasGelu},
      {"tanh stays elementwise", {17, 33}, {33, 65}, 0, false, false, "bias-tanh", DType::f32, kNone},
      {"f64 bias + gelu stays elementwise", {17, 33}, {33, 65}, 0, false, false, "bias-gelu", DType::f64, kNone},
  };
  std::mt19937_64 seeds(testing::rng()());
  for (const MatmulCase &c : cases) {
    BOOST_TEST_CONTEXT("case " << c.name) {
      KernelOptions options;
      options.shapes = {c.a, c.b};
      options.batch = c.batch;
      options.transposeA = c.transposeA;
      options.transposeB = c.transposeB;
      options.epilogue = c.epilogue;
      options.dtype = c.dtype;
      fe::Program program = traceUnitKernel("matmul", options);
      const fe::Graph &graph = *program.functions.front();
      Tensors inputs = asTensors(randomInputs(graph, seeds()));
      ref::Values referenceInputs;
      for (auto &[name, tensor] : inputs)
        referenceInputs[name] = ref::fromHost(tensor);
      HostTensor expected = ref::toHost(*ref::evaluate(graph, referenceInputs).at("y"), DType::f64);

      gemmLog().clear();
      Tensors outputs = runOnHost(bufferizedText(program, "matmul"), "matmul", inputs, /*throughCublasPass=*/true);
      checkClose(outputs.at("y"), expected, c.dtype == DType::f64 ? 1e-12 : 1e-5, c.name);

      BOOST_REQUIRE_EQUAL(gemmLog().size(), 1u);
      const gpu::GemmProblem &gemm = gemmLog().front();
      BOOST_TEST(gemm.element == (c.dtype == DType::f64 ? gemm_abi::kF64 : gemm_abi::kF32));
      BOOST_TEST(gemm.compute == gemm_abi::kExact);
      BOOST_TEST(gemm.transposeA == c.transposeA);
      BOOST_TEST(gemm.transposeB == c.transposeB);
      BOOST_TEST(gemm.batch == std::max<int64_t>(1, c.batch));
      // The zero fill became beta = 0 (or the residual's beta = 1).
      BOOST_TEST(gemm.beta == (c.epilogue == "bias-residual" ? 1.0 : 0.0));
      BOOST_TEST(gemm.epilogue == c.expectedEpilogue);
    }
  }
}

// GPT-2's four sublayer functions (and the fused form) through GEMM calls
// compute what the plain BLAS lowering does: bias, bias + GELU and residual
// + bias epilogues folded, the attention's strided heads and transposed
// keys read in place, the tied logits through wte's transposed view.
BOOST_AUTO_TEST_CASE(gpt2_through_gemm_calls_matches_the_blas_lowering) {
  Gpt2Config config = Gpt2Config::tiny();
  std::mt19937_64 seeds(testing::rng()());
  // Per function: the GEMMs it makes, with their epilogues.
  std::map<std::string, std::vector<gemm_abi::Epilogue>> expected = {
      {"embed", {}},
      {"attend", {gemm_abi::kBias, gemm_abi::kNone, gemm_abi::kNone, gemm_abi::kBias}},
      {"feedforward", {gemm_abi::kBiasGelu, gemm_abi::kBias}},
      {"project", {gemm_abi::kNone}},
  };
  for (Gpt2Mode mode : {Gpt2Mode::Sublayer, Gpt2Mode::Fused}) {
    fe::Program program = traceGpt2(config, mode, 8);
    std::string text = bufferizedText(program, "gpt2");
    for (const auto &graph : program.functions) {
      BOOST_TEST_CONTEXT("function " << graph->name()) {
        Tensors inputs = asTensors(randomInputs(*graph, seeds()));
        Tensors plain = runOnHost(text, graph->name(), inputs, /*throughCublasPass=*/false);
        gemmLog().clear();
        Tensors gemms = runOnHost(text, graph->name(), inputs, /*throughCublasPass=*/true);
        for (auto &[name, tensor] : plain)
          checkClose(gemms.at(name), tensor, 1e-5, name);
        std::vector<gemm_abi::Epilogue> epilogues;
        for (const gpu::GemmProblem &gemm : gemmLog())
          epilogues.push_back(gemm.epilogue);
        if (mode == Gpt2Mode::Sublayer) {
          BOOST_TEST(epilogues == expected.at(graph->name()), boost::test_tools::per_element());
        } else {
          // Per block as attend and feedforward, then the logits; but the
          // last block's residual add is partitioned with ln_f, not with its
          // matmul, and the first block's c_proj computes the embedding (8
          // rows of 64: kDuplicatedProducerMaxElements) in its residual add,
          // an epilogue no GEMM call folds (the generated kernel's).
          BOOST_TEST(epilogues.size() == size_t(4 * config.nLayer + 2 * config.nLayer));
          BOOST_TEST(std::count(epilogues.begin(), epilogues.end(), gemm_abi::kBiasGelu) == config.nLayer);
          BOOST_TEST(std::count(epilogues.begin(), epilogues.end(), gemm_abi::kBias) == 3 * config.nLayer - 2);
        }
      }
    }
  }
}

namespace {

// Matmul fusions as fuse's partitioner makes them (bufferized), each called
// from an entry: the cuBLAS pass's other input form.
const char *const kFusionPrelude = R"mlir(
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
)mlir";

struct FusionCase {
  std::string name;
  std::string module; // after kFusionPrelude; its entry is @entry
  std::vector<gemm_abi::Epilogue> epilogues;
  bool transposedB = false;
};

std::vector<FusionCase> fusionCases() {
  return {
      {"bias, called twice",
       R"mlir(
func.func private @proj(%x: memref<8x64xf32>, %w: memref<64x96xf32>, %b: memref<96xf32>,
                        %y: memref<8x96xf32> {bufferize.result}) attributes {mlpipe.fusion = "matmul"} {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%y : memref<8x96xf32>)
  linalg.matmul ins(%x, %w : memref<8x64xf32>, memref<64x96xf32>) outs(%y : memref<8x96xf32>)
  linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y, %b : memref<8x96xf32>, memref<96xf32>) outs(%y : memref<8x96xf32>) {
  ^bb0(%p: f32, %bias: f32, %out: f32):
    %s = arith.addf %p, %bias : f32
    linalg.yield %s : f32
  }
  return
}
func.func @entry(%x: memref<8x64xf32> {mlpipe.name = "x"}, %x2: memref<8x64xf32> {mlpipe.name = "x2"},
                 %w: memref<64x96xf32> {mlpipe.name = "w"}, %b: memref<96xf32> {mlpipe.name = "b"},
                 %y: memref<8x96xf32> {mlpipe.name = "y"}, %y2: memref<8x96xf32> {mlpipe.name = "y2"})
    attributes {llvm.emit_c_interface,
                mlpipe.inputs = [{name = "x", type = tensor<8x64xf32>}, {name = "x2", type = tensor<8x64xf32>},
                                 {name = "w", type = tensor<64x96xf32>}, {name = "b", type = tensor<96xf32>}],
                mlpipe.outputs = [{name = "y", type = tensor<8x96xf32>}, {name = "y2", type = tensor<8x96xf32>}]} {
  call @proj(%x, %w, %b, %y) : (memref<8x64xf32>, memref<64x96xf32>, memref<96xf32>, memref<8x96xf32>) -> ()
  call @proj(%x2, %w, %b, %y2) : (memref<8x64xf32>, memref<64x96xf32>, memref<96xf32>, memref<8x96xf32>) -> ()
  return
}
)mlir",
       {gemm_abi::kBias, gemm_abi::kBias}},
      {"bias + gelu (tanh form)",
       R"mlir(
func.func private @fc(%x: memref<8x64xf32>, %w: memref<64x96xf32>, %b: memref<96xf32>,
                      %y: memref<8x96xf32> {bufferize.result}) attributes {mlpipe.fusion = "matmul"} {
  %zero = arith.constant 0.0 : f32
  %half = arith.constant 0.5 : f32
  %one = arith.constant 1.0 : f32
  %k = arith.constant 0.797884583 : f32
  %c = arith.constant 0.044715 : f32
  linalg.fill ins(%zero : f32) outs(%y : memref<8x96xf32>)
  linalg.matmul ins(%x, %w : memref<8x64xf32>, memref<64x96xf32>) outs(%y : memref<8x96xf32>)
  linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y, %b : memref<8x96xf32>, memref<96xf32>) outs(%y : memref<8x96xf32>) {
  ^bb0(%p: f32, %bias: f32, %out: f32):
    %v = arith.addf %bias, %p : f32
    %v2 = arith.mulf %v, %v : f32
    %v3 = arith.mulf %v2, %v : f32
    %cv3 = arith.mulf %c, %v3 : f32
    %inner = arith.addf %v, %cv3 : f32
    %scaled = arith.mulf %k, %inner : f32
    %t = math.tanh %scaled : f32
    %onePlus = arith.addf %one, %t : f32
    %halfV = arith.mulf %half, %v : f32
    %g = arith.mulf %halfV, %onePlus : f32
    linalg.yield %g : f32
  }
  return
}
func.func @entry(%x: memref<8x64xf32> {mlpipe.name = "x"}, %w: memref<64x96xf32> {mlpipe.name = "w"},
                 %b: memref<96xf32> {mlpipe.name = "b"}, %y: memref<8x96xf32> {mlpipe.name = "y"})
    attributes {llvm.emit_c_interface,
                mlpipe.inputs = [{name = "x", type = tensor<8x64xf32>}, {name = "w", type = tensor<64x96xf32>},
                                 {name = "b", type = tensor<96xf32>}],
                mlpipe.outputs = [{name = "y", type = tensor<8x96xf32>}]} {
  call @fc(%x, %w, %b, %y) : (memref<8x64xf32>, memref<64x96xf32>, memref<96xf32>, memref<8x96xf32>) -> ()
  return
}
)mlir",
       {gemm_abi::kBiasGelu}},
      {"residual + bias, weight read transposed",
       R"mlir(
func.func private @proj(%x: memref<8x64xf32>, %w: memref<32x64xf32>, %b: memref<32xf32>, %r: memref<8x32xf32>,
                        %y: memref<8x32xf32> {bufferize.result}) attributes {mlpipe.fusion = "matmul"} {
  %zero = arith.constant 0.0 : f32
  %wT = memref.alloc() : memref<64x32xf32>
  linalg.transpose ins(%w : memref<32x64xf32>) outs(%wT : memref<64x32xf32>) permutation = [1, 0]
  linalg.fill ins(%zero : f32) outs(%y : memref<8x32xf32>)
  linalg.matmul ins(%x, %wT : memref<8x64xf32>, memref<64x32xf32>) outs(%y : memref<8x32xf32>)
  memref.dealloc %wT : memref<64x32xf32>
  linalg.generic {indexing_maps = [#id, #id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%r, %y, %b : memref<8x32xf32>, memref<8x32xf32>, memref<32xf32>) outs(%y : memref<8x32xf32>) {
  ^bb0(%res: f32, %p: f32, %bias: f32, %out: f32):
    %s = arith.addf %p, %bias : f32
    %t = arith.addf %res, %s : f32
    linalg.yield %t : f32
  }
  return
}
func.func @entry(%x: memref<8x64xf32> {mlpipe.name = "x"}, %w: memref<32x64xf32> {mlpipe.name = "w"},
                 %b: memref<32xf32> {mlpipe.name = "b"}, %r: memref<8x32xf32> {mlpipe.name = "r"},
                 %y: memref<8x32xf32> {mlpipe.name = "y"})
    attributes {llvm.emit_c_interface,
                mlpipe.inputs = [{name = "x", type = tensor<8x64xf32>}, {name = "w", type = tensor<32x64xf32>},
                                 {name = "b", type = tensor<32xf32>}, {name = "r", type = tensor<8x32xf32>}],
                mlpipe.outputs = [{name = "y", type = tensor<8x32xf32>}]} {
  call @proj(%x, %w, %b, %r, %y)
      : (memref<8x64xf32>, memref<32x64xf32>, memref<32xf32>, memref<8x32xf32>, memref<8x32xf32>) -> ()
  return
}
)mlir",
       {gemm_abi::kBias},
       true},
      {"bias folded, tanh left as a loop fusion",
       R"mlir(
func.func private @f(%x: memref<8x64xf32>, %w: memref<64x96xf32>, %b: memref<96xf32>,
                     %y: memref<8x96xf32> {bufferize.result}) attributes {mlpipe.fusion = "matmul"} {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%y : memref<8x96xf32>)
  linalg.matmul ins(%x, %w : memref<8x64xf32>, memref<64x96xf32>) outs(%y : memref<8x96xf32>)
  linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y, %b : memref<8x96xf32>, memref<96xf32>) outs(%y : memref<8x96xf32>) {
  ^bb0(%p: f32, %bias: f32, %out: f32):
    %s = arith.addf %p, %bias : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y : memref<8x96xf32>) outs(%y : memref<8x96xf32>) {
  ^bb0(%v: f32, %out: f32):
    %t = math.tanh %v : f32
    linalg.yield %t : f32
  }
  return
}
func.func @entry(%x: memref<8x64xf32> {mlpipe.name = "x"}, %w: memref<64x96xf32> {mlpipe.name = "w"},
                 %b: memref<96xf32> {mlpipe.name = "b"}, %y: memref<8x96xf32> {mlpipe.name = "y"})
    attributes {llvm.emit_c_interface,
                mlpipe.inputs = [{name = "x", type = tensor<8x64xf32>}, {name = "w", type = tensor<64x96xf32>},
                                 {name = "b", type = tensor<96xf32>}],
                mlpipe.outputs = [{name = "y", type = tensor<8x96xf32>}]} {
  call @f(%x, %w, %b, %y) : (memref<8x64xf32>, memref<64x96xf32>, memref<96xf32>, memref<8x96xf32>) -> ()
  return
}
)mlir",
       {gemm_abi::kBias}},
      {"product in a temporary the caller allocates",
       R"mlir(
func.func private @f(%x: memref<8x64xf32>, %w: memref<64x96xf32>, %b: memref<96xf32>,
                     %y: memref<8x96xf32> {bufferize.result}) attributes {mlpipe.fusion = "matmul"} {
  %zero = arith.constant 0.0 : f32
  %t = memref.alloc() : memref<8x96xf32>
  linalg.fill ins(%zero : f32) outs(%t : memref<8x96xf32>)
  linalg.matmul ins(%x, %w : memref<8x64xf32>, memref<64x96xf32>) outs(%t : memref<8x96xf32>)
  linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%t, %b : memref<8x96xf32>, memref<96xf32>) outs(%y : memref<8x96xf32>) {
  ^bb0(%p: f32, %bias: f32, %out: f32):
    %s = arith.subf %p, %bias : f32
    linalg.yield %s : f32
  }
  memref.dealloc %t : memref<8x96xf32>
  return
}
func.func @entry(%x: memref<8x64xf32> {mlpipe.name = "x"}, %w: memref<64x96xf32> {mlpipe.name = "w"},
                 %b: memref<96xf32> {mlpipe.name = "b"}, %y: memref<8x96xf32> {mlpipe.name = "y"})
    attributes {llvm.emit_c_interface,
                mlpipe.inputs = [{name = "x", type = tensor<8x64xf32>}, {name = "w", type = tensor<64x96xf32>},
                                 {name = "b", type = tensor<96xf32>}],
                mlpipe.outputs = [{name = "y", type = tensor<8x96xf32>}]} {
  call @f(%x, %w, %b, %y) : (memref<8x64xf32>, memref<64x96xf32>, memref<96xf32>, memref<8x96xf32>) -> ()
  return
}
)mlir",
       {gemm_abi::kNone}},
      {"heads: a slice split and transposed, scaled",
       R"mlir(
func.func private @scores(%qkv: memref<8x192xf32>, %k: memref<2x32x8xf32>,
                          %s: memref<2x8x8xf32> {bufferize.result}) attributes {mlpipe.fusion = "matmul"} {
  %zero = arith.constant 0.0 : f32
  %scale = arith.constant 0.176776692 : f32
  %q = memref.subview %qkv[0, 64] [8, 64] [1, 1] : memref<8x192xf32> to memref<8x64xf32, strided<[192, 1], offset: 64>>
  %q3 = memref.expand_shape %q [[0], [1, 2]] output_shape [8, 2, 32]
      : memref<8x64xf32, strided<[192, 1], offset: 64>> into memref<8x2x32xf32, strided<[192, 32, 1], offset: 64>>
  %qh = memref.transpose %q3 (d0, d1, d2) -> (d1, d0, d2)
      : memref<8x2x32xf32, strided<[192, 32, 1], offset: 64>> to memref<2x8x32xf32, strided<[32, 192, 1], offset: 64>>
  linalg.fill ins(%zero : f32) outs(%s : memref<2x8x8xf32>)
  linalg.batch_matmul ins(%qh, %k : memref<2x8x32xf32, strided<[32, 192, 1], offset: 64>>, memref<2x32x8xf32>)
      outs(%s : memref<2x8x8xf32>)
  linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s : memref<2x8x8xf32>) outs(%s : memref<2x8x8xf32>) {
  ^bb0(%p: f32, %out: f32):
    %v = arith.mulf %p, %scale : f32
    linalg.yield %v : f32
  }
  return
}
func.func @entry(%qkv: memref<8x192xf32> {mlpipe.name = "qkv"}, %k: memref<2x32x8xf32> {mlpipe.name = "k"},
                 %s: memref<2x8x8xf32> {mlpipe.name = "s"})
    attributes {llvm.emit_c_interface,
                mlpipe.inputs = [{name = "qkv", type = tensor<8x192xf32>}, {name = "k", type = tensor<2x32x8xf32>}],
                mlpipe.outputs = [{name = "s", type = tensor<2x8x8xf32>}]} {
  call @scores(%qkv, %k, %s) : (memref<8x192xf32>, memref<2x32x8xf32>, memref<2x8x8xf32>) -> ()
  return
}
)mlir",
       {gemm_abi::kNone}},
  };
}

} // namespace

// Matmul fusions through GEMM calls compute what the BLAS lowering of the
// same fusions does: epilogues folded or left as a loop fusion, a
// transposed weight, a temporary hoisted to the caller, slices and
// reshaped heads read in place, a scale folded as alpha.
BOOST_AUTO_TEST_CASE(matmul_fusions_through_gemm_calls_match_the_blas_lowering) {
  for (const FusionCase &fusion : fusionCases()) {
    BOOST_TEST_CONTEXT("fusion " << fusion.name) {
      std::string text = std::string(kFusionPrelude) + "module {\n" + fusion.module + "}\n";
      Tensors inputs = randomEntryInputs(text, "entry");
      Tensors plain = runOnHost(text, "entry", inputs, /*throughCublasPass=*/false);
      gemmLog().clear();
      Tensors gemms = runOnHost(text, "entry", inputs, /*throughCublasPass=*/true);
      for (auto &[name, tensor] : plain)
        checkClose(gemms.at(name), tensor, 1e-5, name);
      std::vector<gemm_abi::Epilogue> epilogues;
      for (const gpu::GemmProblem &gemm : gemmLog()) {
        epilogues.push_back(gemm.epilogue);
        BOOST_TEST(gemm.transposeB == fusion.transposedB);
      }
      BOOST_TEST(epilogues == fusion.epilogues, boost::test_tools::per_element());
    }
  }
}

// The scale of the heads case became alpha, the slice an offset pointer with
// its parent's leading dimension, the heads a batch stride.
BOOST_AUTO_TEST_CASE(views_become_offsets_leading_dimensions_and_batch_strides) {
  FusionCase heads = fusionCases().back();
  std::string text = std::string(kFusionPrelude) + "module {\n" + heads.module + "}\n";
  Tensors inputs = randomEntryInputs(text, "entry");
  gemmLog().clear();
  runOnHost(text, "entry", inputs, /*throughCublasPass=*/true);
  BOOST_REQUIRE_EQUAL(gemmLog().size(), 1u);
  const gpu::GemmProblem &gemm = gemmLog().front();
  BOOST_TEST(gemm.batch == 2);
  BOOST_TEST(std::abs(gemm.alpha - 0.176776692) < 1e-7);
  BOOST_TEST(gemm.lda == 192);
  BOOST_TEST(gemm.strideA == 32);
  BOOST_TEST(static_cast<const float *>(gemm.a) == inputs.at("qkv").as<float>() + 64);
  BOOST_TEST(gemm.ldb == 8);
  BOOST_TEST(gemm.strideB == 256);
  BOOST_TEST(gemm.ldd == 8);
  BOOST_TEST(gemm.strideD == 64);
}
