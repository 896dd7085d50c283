// --pass-option: a pass's options added where a stage's pipeline runs it,
// so one build can be timed under another choice of a heuristic.
#define BOOST_TEST_MODULE pass_options
#include <boost/test/unit_test.hpp>

#include "compiler/compiler.h"
#include "frontend/mlir_emitter.h"
#include "models/unit_kernels.h"
#include "support/error.h"

#include <string>
#include <vector>

using namespace mlpipe;

BOOST_AUTO_TEST_CASE(options_join_the_pass_own_or_open_braces_of_their_own) {
  std::string pipeline = "builtin.module(mlpipe-fused-attention{chip=sm_90}, mlpipe-cublas-matmuls, "
                         "func.func(canonicalize), mlpipe-cublas-matmuls-extra{}, mlpipe-fused-attention{})";
  std::string result = withPassOptions(
      pipeline, {"mlpipe-fused-attention:tc-key-groups=1", "mlpipe-cublas-matmuls:skinny-rows=0 precision=tf32"});
  BOOST_TEST(result == "builtin.module(mlpipe-fused-attention{chip=sm_90 tc-key-groups=1}, "
                       "mlpipe-cublas-matmuls{skinny-rows=0 precision=tf32}, func.func(canonicalize), "
                       "mlpipe-cublas-matmuls-extra{}, mlpipe-fused-attention{tc-key-groups=1})");
  // A pass the pipeline does not run leaves it as it was.
  BOOST_TEST(withPassOptions(pipeline, {"mlpipe-generated-matmuls:stages=3"}) == pipeline);
}

BOOST_AUTO_TEST_CASE(entries_not_of_the_form_or_of_no_pass_are_refused) {
  for (std::string entry : {"tc-key-groups=1", ":x=1", "mlpipe-fused-attention:"})
    BOOST_CHECK_THROW(withPassOptions("builtin.module(cse)", {entry}), Error);
  BOOST_CHECK_THROW(checkPassOptions({"mlpipe-no-such-pass:x=1"}), Error);
  BOOST_CHECK_NO_THROW(checkPassOptions({"mlpipe-fused-attention:tc-key-groups=1", "mlpipe-cublas-matmuls:enabled=0"}));
}

// A one-row f32 matmul goes to the generated skinny kernel by default; with
// mlpipe-cublas-matmuls:skinny-rows=0 the outline stage leaves it to cuBLAS
// (a call, no kernel of its own).
BOOST_AUTO_TEST_CASE(the_outline_stage_runs_a_pass_with_the_options_given) {
  auto launches = [](const std::vector<std::string> &passOptions) {
    KernelOptions kernel;
    kernel.shapes = {{1, 64}, {64, 96}};
    MlirModule module = MlirModule::parse(fe::emitMlir(traceUnitKernel("matmul", kernel)), "matmul.mlir");
    StageOptions options;
    options.passOptions = passOptions;
    runStage(StageTool::Fuse, module, options);
    runStage(StageTool::Bufferize, module, options);
    runStage(StageTool::Outline, module, options);
    return countOps(module, "gpu.launch_func");
  };
  int generated = launches({}), cublas = launches({"mlpipe-cublas-matmuls:skinny-rows=0"});
  BOOST_TEST(generated >= 1);
  BOOST_TEST(cublas < generated);
}
