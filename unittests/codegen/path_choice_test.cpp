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
  MatmulChoice choice = chooseMatmulPath(problem(1024, 2304, 768), {});
  BOOST_TEST(choice.path == MatmulPath::Cublas);
  // One row past the skinny bound.
  BOOST_TEST(chooseMatmulPath(problem(kGeneratedSkinnyMaxRows + 1, 2304, 768), {}).path == MatmulPath::Cublas);
}

BOOST_AUTO_TEST_CASE(few_rows_go_to_the_skinny_kernel) {
  // One row, 16 rows, the bound, and a K deeper than one staged slice (the
  // kernel splits it, and adds the splits in a fixed order).
  for (int64_t m : {int64_t(1), int64_t(16), kGeneratedSkinnyMaxRows}) {
    MatmulChoice few = chooseMatmulPath(problem(m, 2304, 768), {});
    BOOST_TEST(few.path == MatmulPath::Generated, m << " rows");
    BOOST_TEST(few.why.find("skinny kernel") != std::string::npos);
  }
  BOOST_TEST(chooseMatmulPath(problem(1, 2304, 48 * 1024), {}).path == MatmulPath::Generated);
  // Not when it is batched, reads B transposed, or has one column.
  MatmulProblem batched = problem(1, 64, 64);
  batched.batch = 12;
  BOOST_TEST(chooseMatmulPath(batched, {}).path == MatmulPath::Cublas);
  MatmulProblem transposed = problem(1, 2304, 768);
  transposed.bTransposed = true;
  BOOST_TEST(chooseMatmulPath(transposed, {}).path == MatmulPath::Cublas);
  BOOST_TEST(chooseMatmulPath(problem(4, 1, 768), {}).path == MatmulPath::Cublas);
  // The option moves the bound: 16 rows, and 0 (cuBLAS for every shape).
  MatmulPathOptions sixteen;
  sixteen.skinnyMaxRows = 16;
  BOOST_TEST(chooseMatmulPath(problem(16, 2304, 768), sixteen).path == MatmulPath::Generated);
  BOOST_TEST(chooseMatmulPath(problem(17, 2304, 768), sixteen).path == MatmulPath::Cublas);
  MatmulPathOptions none;
  none.skinnyMaxRows = 0;
  BOOST_TEST(chooseMatmulPath(problem(1, 2304, 768), none).path == MatmulPath::Cublas);
}

BOOST_AUTO_TEST_CASE(the_generated_kernel_takes_the_rest) {
  MatmulPathOptions generated;
  generated.cublas = false;
  BOOST_TEST(chooseMatmulPath(problem(1024, 1024, 1024), generated).why == "--matmul generated");
  MatmulProblem copied = problem(64, 64, 64);
  copied.readableInPlace = false;
  copied.notReadableBecause = "A is not readable in place";
  MatmulChoice choice = chooseMatmulPath(copied, {});
  BOOST_TEST(choice.path == MatmulPath::Generated);
  BOOST_TEST(choice.why == "A is not readable in place");
  BOOST_TEST(chooseMatmulPath(problem(0, 64, 64), {}).path == MatmulPath::Generated);
  MatmulProblem huge = problem(64, 4, int64_t(1) << 32);
  huge.f64 = true;
  huge.elementBytes = 8;
  BOOST_TEST(chooseMatmulPath(huge, {}).why == "an f64 dimension does not fit cublasDgemm's int");
  huge.f64 = false;
  huge.elementBytes = 4;
  BOOST_TEST(chooseMatmulPath(huge, {}).path == MatmulPath::Cublas);
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

// wgmma is sm_90a's alone: code for "sm_90" must run on later chips too,
// and Blackwell (sm_100a) has none. sm_90a keeps sm_90's numbers.
BOOST_AUTO_TEST_CASE(warpgroup_mma_on_sm_90a_only) {
  BOOST_TEST(deviceDescription("sm_90a").warpgroupMma);
  BOOST_TEST(!deviceDescription("sm_90").warpgroupMma);
  BOOST_TEST(!deviceDescription("sm_100a").warpgroupMma);
  BOOST_TEST(!deviceDescription("sm_80").warpgroupMma);
  BOOST_TEST(deviceDescription("sm_90a").chip == "sm_90a");
  BOOST_TEST(deviceDescription("sm_90a").smCount == deviceDescription("sm_90").smCount);
  BOOST_TEST(deviceDescription("sm_90a").sharedMemoryPerBlockOptIn ==
             deviceDescription("sm_90").sharedMemoryPerBlockOptIn);
}

BOOST_AUTO_TEST_CASE(few_rows_by_b_stored_n_by_k_go_to_the_row_dot_kernel) {
  // The logits' shape, f32 and bf16: one row, 16, and the bound.
  for (int64_t bytes : {4, 2})
    for (int64_t m : {int64_t(1), int64_t(16), kGeneratedRowDotMaxRows}) {
      MatmulProblem p = problem(m, 50257, 768);
      p.bTransposed = true;
      p.elementBytes = bytes;
      MatmulChoice choice = chooseMatmulPath(p, {});
      BOOST_TEST(choice.path == MatmulPath::Generated, m << " rows of " << bytes << " bytes");
      BOOST_TEST(choice.why.find("row-dot kernel") != std::string::npos);
    }
  // Not past the bound, below kGeneratedRowDotMinColumns, batched (the
  // attention scores' Q·Kᵀ), or with B stored [K, N] (the skinny kernel's).
  auto pathOf = [](int64_t m, int64_t n, int64_t batch, bool transposed) {
    MatmulProblem p = problem(m, n, 768);
    p.batch = batch;
    p.bTransposed = transposed;
    return chooseMatmulPath(p, {});
  };
  BOOST_TEST(pathOf(kGeneratedRowDotMaxRows + 1, 50257, 1, true).path == MatmulPath::Cublas);
  BOOST_TEST(pathOf(8, kGeneratedRowDotMinColumns - 1, 1, true).path == MatmulPath::Cublas);
  BOOST_TEST(pathOf(8, kGeneratedRowDotMinColumns, 1, true).path == MatmulPath::Generated);
  BOOST_TEST(pathOf(1, 50257, 12, true).path == MatmulPath::Cublas);
  BOOST_TEST(pathOf(8, 50257, 1, false).why.find("skinny kernel") != std::string::npos);
  // The option moves the bound: 8 rows, and 0 (cuBLAS for every shape).
  MatmulProblem logits = problem(8, 50257, 768);
  logits.bTransposed = true;
  MatmulPathOptions eight, none;
  eight.rowDotMaxRows = 8;
  none.rowDotMaxRows = 0;
  BOOST_TEST(chooseMatmulPath(logits, eight).path == MatmulPath::Generated);
  logits.m = 9;
  BOOST_TEST(chooseMatmulPath(logits, eight).path == MatmulPath::Cublas);
  logits.m = 1;
  BOOST_TEST(chooseMatmulPath(logits, none).path == MatmulPath::Cublas);
}

BOOST_AUTO_TEST_CASE(sixteen_bit_operands_take_the_skinny_kernel_or_cublas) {
  // Few rows of bf16 go to the skinny kernel, which reads them as stored.
  for (int64_t m : {int64_t(1), int64_t(2), kGeneratedSkinnyMaxRowsSixteenBit}) {
    MatmulProblem p = problem(m, 2304, 768);
    p.elementBytes = 2;
    MatmulChoice few = chooseMatmulPath(p, {});
    BOOST_TEST(few.path == MatmulPath::Generated, m << " rows");
    BOOST_TEST(few.why.find("16-bit") != std::string::npos);
  }
  // More rows, a batch, or B transposed: cuBLASLt reads them as stored.
  for (auto [m, batch, transposed] : {std::tuple{kGeneratedSkinnyMaxRowsSixteenBit + 1, int64_t(1), false},
                                      {int64_t(1), int64_t(4), false},
                                      {int64_t(1), int64_t(1), true}}) {
    MatmulProblem q = problem(m, 2304, 768);
    q.elementBytes = 2;
    q.batch = batch;
    q.bTransposed = transposed;
    MatmulChoice choice = chooseMatmulPath(q, {});
    BOOST_TEST(choice.path == MatmulPath::Cublas);
    BOOST_TEST(choice.why.find("16-bit") != std::string::npos);
  }
  // Without cuBLAS, the generated path is the only one.
  MatmulPathOptions off;
  off.cublas = false;
  MatmulProblem many = problem(1024, 2304, 768);
  many.elementBytes = 2;
  BOOST_TEST(chooseMatmulPath(many, off).path == MatmulPath::Generated);
}

BOOST_AUTO_TEST_CASE(wide_unaligned_sixteen_bit_products_go_to_the_warpgroup_form_on_sm_90a) {
  MatmulPathOptions sm90a;
  sm90a.warpgroupMma = deviceDescription("sm_90a").warpgroupMma;
  MatmulPathOptions sm90;
  sm90.warpgroupMma = deviceDescription("sm_90").warpgroupMma;
  // GPT-2's logits at T = 1024 (x·wteᵀ, N = 50257), and the bounds.
  for (auto [m, n, transposed] : {std::tuple{int64_t(1024), int64_t(50257), true},
                                  {kGeneratedWarpgroupMinRows, kGeneratedWarpgroupMinColumns + 1, false},
                                  {int64_t(4097), kGeneratedWarpgroupMinColumns + 3, true}}) {
    MatmulProblem logits = problem(m, n, 768);
    logits.elementBytes = 2;
    logits.bTransposed = transposed;
    MatmulChoice choice = chooseMatmulPath(logits, sm90a);
    BOOST_TEST(choice.path == MatmulPath::Generated, m << " x " << n);
    BOOST_TEST(choice.why.find("kGeneratedWarpgroupMinColumns") != std::string::npos);
    // No wgmma (sm_90): cuBLASLt.
    BOOST_TEST(chooseMatmulPath(logits, sm90).path == MatmulPath::Cublas);
  }
  // cuBLASLt keeps: f32; N a multiple of 8; too narrow; too few rows (past
  // the row-dot kernel's); a batch; the option at 0.
  auto withBytes = [](MatmulProblem p, int64_t bytes) {
    p.elementBytes = bytes;
    return p;
  };
  MatmulProblem f32 = withBytes(problem(1024, 50257, 768), 4);
  MatmulProblem aligned = withBytes(problem(1024, 50264, 768), 2);
  MatmulProblem narrow = withBytes(problem(1024, kGeneratedWarpgroupMinColumns - 1, 768), 2);
  MatmulProblem fewRows = withBytes(problem(kGeneratedWarpgroupMinRows - 1, 50257, 768), 2);
  MatmulProblem batched = withBytes(problem(1024, 50257, 768), 2);
  batched.batch = 2;
  for (const MatmulProblem &p : {f32, aligned, narrow, fewRows, batched})
    BOOST_TEST(chooseMatmulPath(p, sm90a).path == MatmulPath::Cublas, p.m << " x " << p.n << " x " << p.batch);
  MatmulPathOptions off = sm90a;
  off.warpgroupMinColumns = 0;
  BOOST_TEST(chooseMatmulPath(withBytes(problem(1024, 50257, 768), 2), off).path == MatmulPath::Cublas);
  // The option lowers the bound.
  MatmulPathOptions lower = sm90a;
  lower.warpgroupMinColumns = 1001;
  BOOST_TEST(chooseMatmulPath(withBytes(problem(1024, 1001, 768), 2), lower).path == MatmulPath::Generated);
}
