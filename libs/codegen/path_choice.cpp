#include "codegen/path_choice.h"

#include <algorithm>
#include <climits>

namespace mlpipe {

const char *matmulPathName(MatmulPath path) { return path == MatmulPath::Cublas ? "cublas" : "generated"; }

const char *attentionPathName(AttentionPath path) { return path == AttentionPath::Fused ? "fused" : "three kernels"; }

MatmulChoice chooseMatmulPath(const MatmulProblem &p, const MatmulPathOptions &options) {
  if (!options.cublas)
    return {MatmulPath::Generated, "--matmul generated"};
  if (!p.readableInPlace)
    return {MatmulPath::Generated, p.notReadableBecause};
  if (p.batch < 1 || p.m < 1 || p.n < 1 || p.k < 1)
    return {MatmulPath::Generated, "it has an empty dimension"};
  bool sixteenBit = p.elementBytes < 4;
  int64_t skinnyRows = options.skinnyMaxRows >= 0 ? options.skinnyMaxRows
                       : sixteenBit               ? kGeneratedSkinnyMaxRowsSixteenBit
                                                  : kGeneratedSkinnyMaxRows;
  if (p.m <= skinnyRows && p.batch == 1 && !p.bTransposed && p.n > 1)
    return {MatmulPath::Generated,
            std::to_string(p.m) + (p.m == 1 ? " row" : " rows") + ", at most " + std::to_string(skinnyRows) +
                (sixteenBit ? " of 16-bit operands: the generated kernels stream B faster "
                              "(kGeneratedSkinnyMaxRowsSixteenBit, option skinny-rows)"
                            : ": the skinny kernel streams B faster (kGeneratedSkinnyMaxRows, option skinny-rows)")};
  int64_t rowDotRows = options.rowDotMaxRows >= 0 ? options.rowDotMaxRows : kGeneratedRowDotMaxRows;
  if (p.m <= rowDotRows && p.batch == 1 && p.bTransposed && p.n >= kGeneratedRowDotMinColumns)
    return {MatmulPath::Generated, std::to_string(p.m) + (p.m == 1 ? " row" : " rows") + ", at most " +
                                       std::to_string(rowDotRows) + ", by " + std::to_string(p.n) +
                                       " columns of B stored [N, K]: the row-dot kernel streams B faster "
                                       "(kGeneratedRowDotMaxRows, option row-dot-rows)"};
  int64_t wideColumns = options.warpgroupMinColumns >= 0 ? options.warpgroupMinColumns : kGeneratedWarpgroupMinColumns;
  if (sixteenBit && options.warpgroupMma && wideColumns > 0 && p.batch == 1 && p.m >= kGeneratedWarpgroupMinRows &&
      p.n >= wideColumns && p.n % 8 != 0)
    return {MatmulPath::Generated,
            std::to_string(p.m) + " rows by " + std::to_string(p.n) +
                " columns, no multiple of 8: the warpgroup form writes C's unaligned rows faster "
                "(kGeneratedWarpgroupMinColumns, option warpgroup-min-columns)"};
  // Every other 16-bit product: cuBLASLt reads it as stored.
  if (sixteenBit)
    return {MatmulPath::Cublas, "cuBLASLt reads 16-bit operands in place"};
  // cublasDgemm takes int sizes and leading dimensions.
  if (p.f64 && std::max({p.batch, p.m, p.n, p.k, p.maxLeadingDimension}) > INT_MAX)
    return {MatmulPath::Generated, "an f64 dimension does not fit cublasDgemm's int"};
  return {MatmulPath::Cublas, "cuBLAS reads every operand in place"};
}

AttentionChoice chooseAttentionPath(int64_t queries, int64_t keys, int64_t maxKeys, bool tensorCores) {
  if (tensorCores)
    return {AttentionPath::Fused, "on tensor cores, fused at every length"};
  int64_t limit = maxKeys < 0 ? kFusedAttentionMaxKeys : maxKeys;
  if (limit > 0 && std::min(queries, keys) > limit)
    return {AttentionPath::ThreeKernels, std::to_string(keys) + " keys, more than the " + std::to_string(limit) +
                                             " the fused kernel is faster for (kFusedAttentionMaxKeys, option "
                                             "max-keys)"};
  return {AttentionPath::Fused, queries == 1 ? "one query row (a decode step)"
                                             : std::to_string(keys) + " keys, at most " + std::to_string(limit)};
}

} // namespace mlpipe
