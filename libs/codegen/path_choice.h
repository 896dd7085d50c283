// Which path each matmul and each attention takes: one named, tested place
// for the rules, instead of the order of passes in outline's pipeline.
//
// Passes describe what they found (a problem's shape, its element type,
// whether a library reads its operands in place) and ask; each answer says
// why, and the passes print it under --debug-only=mlpipe-emitters.
//
//   MatmulChoice choice = chooseMatmulPath(problem, options);
//   if (choice.path != MatmulPath::Cublas) leave it; // choice.why says why
#pragma once

#include <cstdint>
#include <string>

namespace mlpipe {

// ---- Matmuls ----------------------------------------------------------------

enum class MatmulPath {
  Cublas,    // a call of the runtime's cuBLAS(Lt) GEMM, epilogues folded in
  Generated, // mlpipe's generated kernel (tiled, or skinny for few rows)
};
const char *matmulPathName(MatmulPath path);

// What a matmul is, as the passes see it: C (m x n) = A (m x k) B (k x n),
// `batch` times.
struct MatmulProblem {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  int64_t elementBytes = 4;
  bool f64 = false;
  bool bTransposed = false;        // B stored [N, K], read transposed
  int64_t maxLeadingDimension = 0; // the largest leading dimension of A, B and C
  // Whether a library reads every operand in place (with C row-major), and
  // if not, why not.
  bool readableInPlace = true;
  std::string notReadableBecause;
};

struct MatmulPathOptions {
  // --matmul cublas (the default where cuBLAS loads) or generated.
  bool cublas = true;
  // Products of at most this many rows go to the skinny kernel (< 0: the
  // default, kGeneratedSkinnyMaxRows or for 16-bit operands
  // kGeneratedSkinnyMaxRowsSixteenBit).
  int64_t skinnyMaxRows = -1;
  // Products of at most this many rows with B stored [N, K] go to the
  // row-dot kernel (< 0: kGeneratedRowDotMaxRows).
  int64_t rowDotMaxRows = -1;
  // The chip has wgmma (sm_90a): the generated warpgroup form may take
  // 16-bit products (kGeneratedWarpgroupMinColumns).
  bool warpgroupMma = false;
  // 16-bit products at least this wide whose rows of C are not 16-byte
  // aligned go to the warpgroup form on such a chip (< 0:
  // kGeneratedWarpgroupMinColumns; 0: none).
  int64_t warpgroupMinColumns = -1;
};

// Products of at most this many rows, B read row by row and unbatched, go
// to the generated skinny kernel: on the H200 cuBLAS's small-M kernels read
// the weights at 0.2-0.9 TB/s (GPT-2 decode-step GEMVs of 2.4-9.5 MB in
// 7.9-13.5 us) where the skinny kernel streams them at about a copy's rate
// (2.1-3.8 us). It splits K across blocks where the grid would not fill the
// GPU, the splits added in a fixed order by a second kernel (no atomics), so
// a forward replayed as a graph gives the bits of direct launches. GPT-2's
// four layer products in f32 at 8, 16 and 32 rows: 1.26-2.27x cuBLAS's
// speed, both launches counted (`bench matmul`, 2026-12-03); at 64 rows
// 1.08-1.35x too, left for a later change.
constexpr int64_t kGeneratedSkinnyMaxRows = 32;
// The same bound for 16-bit operands, against cuBLASLt on tensor cores:
// bf16 at 8 rows 1.03-1.39x; at 16 rows 0.76-2.01x, 33 us for the four
// against cuBLASLt's 37; at 32 rows 0.65-1.11x, 42 us against 35 (the
// skinny kernel; products of 2 to 16 rows now take the generated
// tensor-core kernel with K split across blocks, kFewRowTensorCoreMinRows,
// faster still: GPT-2's bf16 forward at T=16 0.43 ms against 0.52). That
// kernel takes 17 to 32 rows too (tiles of two m16 rows), where cuBLASLt
// took 4.5-7.5 us on each of GPT-2's four products of a batched step of
// 32 (its split-K reduce a kernel of its own). Measured on the H200
// (2026-12-05, `bench matmul --dtype bf16 --shapes 32x768x2304,...`):
// the generated kernel 1.04-1.56x cuBLAS on GPT-2's four products at 32
// rows (mlpipe's cuBLASLt call 0.69-0.96x); the batched step of 32
// 0.384-0.388 ms against 0.430-0.435 with cuBLASLt, alternated in one run
// (20.7-21.4x the tokens/s of one sequence, against 18.6x).
constexpr int64_t kGeneratedSkinnyMaxRowsSixteenBit = 32;

// Products of at most this many rows whose B is stored [N, K] (read
// transposed: GPT-2's tied logits, x·wteᵀ), unbatched and at least
// kGeneratedRowDotMinColumns wide, go to the generated row-dot kernel,
// which streams B's storage row by row. cuBLAS(Lt) takes its GEMM kernels
// for them: at 16 rows the logits (16 x 768 by 50257) took 96 us in bf16
// (77 MB, 0.8 TB/s) and 83 us in f32 (154 MB) of a 0.53 ms forward on the
// H200 (kernel timeline of `bench --seq 16`, 2026-12-03). The row-dot
// kernel on the logits, cuBLAS's time over its own (`bench matmul --shapes
// 1x768x50257t,...`, same run): 1 row 1.09x f32 / 1.58x bf16, 8 rows
// 1.58x / 3.60x, 16 rows 1.28x / 1.82x (12 rows 1.53x / 2.17x, a run
// before); at 32 rows (the generated path) 0.54x / 0.91x.
constexpr int64_t kGeneratedRowDotMaxRows = 16;
// Below this many columns the row-dot grid (128 columns a block, K not
// split) leaves most SMs idle.
constexpr int64_t kGeneratedRowDotMinColumns = 4096;

// 16-bit products of at least kGeneratedWarpgroupMinRows rows and this
// many columns, unbatched, whose N is no multiple of 8 (C's rows not
// 16-byte aligned), go to the generated warpgroup form where the chip has
// wgmma (sm_90a). mlpipe's cuBLASLt call cannot write such rows in place:
// it computes N rounded down to a multiple of 8 into a temporary with
// aligned rows, the rest by a second GEMM, and a copy compacts them; the
// warpgroup form writes C's rows as they are, through shared memory.
// GPT-2's logits (M x 768 by wteᵀ, N = 50257) on an H100
// (bench/scripts/sweep-matmul.sh bf16 Mx768x50257t, 2026-12-05), the
// warpgroup form against that call: 1024 rows 154.4-154.9 us against
// 222.2 (1.43-1.44x), 512 rows 88.8 against 121.2 (1.36x), 256 53.6
// against 73.4 (1.37x), 128 49.0 against 53.1 (1.08x), 64 39.1 against
// 46.9 (1.20x); the bf16 forward at T=1024 0.943-0.956 ms against
// 1.006-1.021 with the logits on cuBLASLt (check-new-paths.sh logits).
// GPT-2's other products (N a multiple of 64) stay faster on cuBLASLt
// (the warpgroup form 0.62-0.89x its speed in the same runs). Fewer rows
// go to the row-dot kernel (up to kGeneratedRowDotMaxRows) or stay
// cuBLASLt's (17 to 63 rows: not measured).
constexpr int64_t kGeneratedWarpgroupMinColumns = 16384;
constexpr int64_t kGeneratedWarpgroupMinRows = 64;
struct MatmulChoice {
  MatmulPath path;
  std::string why;
};

// The path for `problem`: cuBLAS when it is enabled and can compute the
// product in place, unless the skinny kernel (few rows, B read row by row)
// or the row-dot kernel (few rows, B stored [N, K]) streams it faster; the
// generated kernel otherwise.
MatmulChoice chooseMatmulPath(const MatmulProblem &problem, const MatmulPathOptions &options);

// ---- Attention --------------------------------------------------------------

enum class AttentionPath {
  Fused,       // one online-softmax kernel; the scores never reach memory
  ThreeKernels // scores matmul, softmax row reduction, values matmul
};
const char *attentionPathName(AttentionPath path);

// Longest sequence fused by default. The fused kernel gives each query row a
// group of lanes that walks every key with no reuse of a K/V tile across
// several rows per lane, so it runs at a few TFLOP/s: on the H200 it saves
// launches and the score tensor's traffic at 16 keys (GPT-2 124M forward
// 1.056 -> 1.010 ms) but loses to cuBLAS's batched GEMMs and the row
// reduction at 1024 keys (8.39 -> 9.14 ms). Longer sequences keep the three
// kernels until it reuses tiles across rows.
constexpr int64_t kFusedAttentionMaxKeys = 128;

struct AttentionChoice {
  AttentionPath path;
  std::string why;
};

// The path for attention over `queries` query rows and `keys` keys;
// `maxKeys` is the pass option (< 0: kFusedAttentionMaxKeys; 0: any length).
// A decode step (one query row against the cache) always fuses; so does
// attention the tensor-core kernel takes (`tensorCores`): its warps share
// each K and V tile across 16-row mma tiles, and the scores never reach
// memory, at every length.
AttentionChoice chooseAttentionPath(int64_t queries, int64_t keys, int64_t maxKeys, bool tensorCores = false);

} // namespace mlpipe
