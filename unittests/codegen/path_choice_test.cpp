// The path rules: which matmuls go to cuBLAS and which to the generated
// kernel, and which attentions are fused.
#define BOOST_TEST_MODULE path_choice
#include <boost/test/unit_test.hpp>

#include <tuple>

#include "codegen/device_description.h"
#include "codegen/path_choice.h"

#include <ostream>

using namespace mlpipe;

namespace mlpipe {
std::ostream &operator<<(std::ostream &os, MatmulPath path) { return os << matmulPathName(path); }
std::ostream &operator<<(std::ostream &os, AttentionPath path) { return os << attentionPathName(path); }
} // namespace mlpipe

namespace {

// The skinny kernel's one-launch rule, as the generated-kernel layer
// answers it for an H100-class chip: one row whose K fits 48 KB.
bool oneLaunch(int64_t m, int64_t k, int64_t elementBytes) { return m == 1 && k * elementBytes <= 48 * 1024; }
bool never(int64_t, int64_t, int64_t) { return false; }

MatmulProblem problem(int64_t m, int64_t n, int64_t k) {
  MatmulProblem p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.maxLeadingDimension = std::max(n, k);
  return p;
}

} // namespace

BOOST_AUTO_TEST_CASE(cublas_takes_what_it_reads_in_place) {
  MatmulChoice choice = chooseMatmulPath(problem(1024, 2304, 768), {}, oneLaunch);
  BOOST_TEST(choice.path == MatmulPath::Cublas);
  // 16 rows: cuBLAS (the skinny kernel would split K, with atomics).
  BOOST_TEST(chooseMatmulPath(problem(16, 2304, 768), {}, oneLaunch).path == MatmulPath::Cublas);
}

BOOST_AUTO_TEST_CASE(one_row_goes_to_the_skinny_kernel_when_it_is_one_launch) {
  MatmulChoice gemv = chooseMatmulPath(problem(1, 2304, 768), {}, oneLaunch);
  BOOST_TEST(gemv.path == MatmulPath::Generated);
  BOOST_TEST(gemv.why.find("skinny kernel") != std::string::npos);
  // Not when it would take several launches, is batched, or reads B transposed.
  BOOST_TEST(chooseMatmulPath(problem(1, 2304, 768), {}, never).path == MatmulPath::Cublas);
  MatmulProblem batched = problem(1, 64, 64);
  batched.batch = 12;
  BOOST_TEST(chooseMatmulPath(batched, {}, oneLaunch).path == MatmulPath::Cublas);
  MatmulProblem transposed = problem(1, 50257, 768);
  transposed.bTransposed = true;
  BOOST_TEST(chooseMatmulPath(transposed, {}, oneLaunch).path == MatmulPath::Cublas);
  // The option moves the bound: 16 rows, and 0 (cuBLAS for every shape).
  MatmulPathOptions sixteen;
  sixteen.skinnyMaxRows = 16;
  BOOST_TEST(chooseMatmulPath(problem(16, 2304, 768), sixteen, [](int64_t m, int64_t, int64_t) {
               return m <= 16;
             }).path == MatmulPath::Generated);
  MatmulPathOptions none;
  none.skinnyMaxRows = 0;
  BOOST_TEST(chooseMatmulPath(problem(1, 2304, 768), none, oneLaunch).path == MatmulPath::Cublas);
}

BOOST_AUTO_TEST_CASE(the_generated_kernel_takes_the_rest) {
  MatmulPathOptions generated;
  generated.cublas = false;
  BOOST_TEST(chooseMatmulPath(problem(1024, 1024, 1024), generated, oneLaunch).why == "--matmul generated");
  MatmulProblem copied = problem(64, 64, 64);
  copied.readableInPlace = false;
  copied.notReadableBecause = "A is not readable in place";
  MatmulChoice choice = chooseMatmulPath(copied, {}, oneLaunch);
  BOOST_TEST(choice.path == MatmulPath::Generated);
  BOOST_TEST(choice.why == "A is not readable in place");
  BOOST_TEST(chooseMatmulPath(problem(0, 64, 64), {}, never).path == MatmulPath::Generated);
  MatmulProblem huge = problem(4, 4, int64_t(1) << 32);
  huge.f64 = true;
  huge.elementBytes = 8;
  BOOST_TEST(chooseMatmulPath(huge, {}, never).why == "an f64 dimension does not fit cublasDgemm's int");
  huge.f64 = false;
  huge.elementBytes = 4;
  BOOST_TEST(chooseMatmulPath(huge, {}, never).path == MatmulPath::Cublas);
}

BOOST_AUTO_TEST_CASE(attention_fuses_up_to_the_key_limit) {
  BOOST_TEST(chooseAttentionPath(16, 16, -1).path == AttentionPath::Fused);
  BOOST_TEST(chooseAttentionPath(128, 128, -1).path == AttentionPath::Fused);
  AttentionChoice long_ = chooseAttentionPath(1024, 1024, -1);
  BOOST_TEST(long_.path == AttentionPath::ThreeKernels);
  BOOST_TEST(long_.why.find("kFusedAttentionMaxKeys") != std::string::npos);
  // A decode step (one row against a long cache) fuses; max-keys=0 fuses all.
  BOOST_TEST(chooseAttentionPath(1, 1024, -1).path == AttentionPath::Fused);
  BOOST_TEST(chooseAttentionPath(1024, 1024, 0).path == AttentionPath::Fused);
  BOOST_TEST(chooseAttentionPath(64, 64, 32).path == AttentionPath::ThreeKernels);
}

BOOST_AUTO_TEST_CASE(attention_on_tensor_cores_fuses_at_every_length) {
  BOOST_TEST(chooseAttentionPath(1024, 1024, -1, true).path == AttentionPath::Fused);
  BOOST_TEST(chooseAttentionPath(4096, 4096, 32, true).path == AttentionPath::Fused);
  BOOST_TEST(chooseAttentionPath(1024, 1024, -1, false).path == AttentionPath::ThreeKernels);
}

BOOST_AUTO_TEST_CASE(sixteen_bit_mma_from_sm_80) {
  BOOST_TEST(!deviceDescription("sm_75").sixteenBitMma);
  BOOST_TEST(deviceDescription("sm_80").sixteenBitMma);
  BOOST_TEST(deviceDescription("sm_90a").sixteenBitMma);
}

BOOST_AUTO_TEST_CASE(sixteen_bit_operands_take_the_skinny_kernel_or_cublas) {
  // One row of bf16 goes to the skinny kernel, which reads it as stored, in
  // one launch.
  MatmulProblem p = problem(1, 2304, 768);
  p.elementBytes = 2;
  MatmulChoice one = chooseMatmulPath(p, {}, oneLaunch);
  BOOST_TEST(one.path == MatmulPath::Generated);
  BOOST_TEST(one.why.find("16-bit") != std::string::npos);
  // Two rows, a batch, or B transposed: cuBLASLt reads them as stored (the
  // tiled kernel would widen them first).
  for (auto [m, batch, transposed] : {std::tuple{2, 1, false}, {1, 4, false}, {1, 1, true}}) {
    MatmulProblem q = problem(m, 2304, 768);
    q.elementBytes = 2;
    q.batch = batch;
    q.bTransposed = transposed;
    MatmulChoice choice = chooseMatmulPath(q, {}, oneLaunch);
    BOOST_TEST(choice.path == MatmulPath::Cublas);
    BOOST_TEST(choice.why.find("16-bit") != std::string::npos);
  }
  // K past one launch's staged slice: cuBLASLt.
  MatmulProblem deep = problem(1, 2304, 48 * 1024);
  deep.elementBytes = 2;
  BOOST_TEST(chooseMatmulPath(deep, {}, oneLaunch).path == MatmulPath::Cublas);
  // Without cuBLAS, the generated path (which widens them) is the only one.
  MatmulPathOptions off;
  off.cublas = false;
  MatmulProblem two = problem(2, 2304, 768);
  two.elementBytes = 2;
  BOOST_TEST(chooseMatmulPath(two, off, oneLaunch).path == MatmulPath::Generated);
}
