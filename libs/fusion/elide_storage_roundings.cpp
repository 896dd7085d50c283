// mlpipe-elide-storage-roundings: inside a fused elementwise body, an f32
// value rounded to its 16-bit storage type and widened straight back is
// used unrounded. Passes.td holds its description, with IR before and after.
#include "codegen/debug.h"
#include "fusion/passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Pass/Pass.h"

namespace mlpipe {

#define GEN_PASS_DEF_ELIDESTORAGEROUNDINGSPASS
#include "fusion/Passes.h.inc"

namespace {

// The mark the front end puts on the rounding of an op's f32 result to the
// 16-bit type it is stored as (frontend/emitter/function_emitter.cpp).
constexpr llvm::StringLiteral kStorageRounding = "mlpipe.storage_rounding";
constexpr const char *kDebugStorageRoundings = "mlpipe-storage-roundings";

// The value `widen` gives back unrounded: the f32 operand of a marked
// rounding of the same width, or null.
mlir::Value unroundedSource(mlir::arith::ExtFOp widen) {
  auto round = widen.getIn().getDefiningOp<mlir::arith::TruncFOp>();
  if (!round || !round->hasAttr(kStorageRounding))
    return {};
  mlir::Value source = round.getIn();
  return source.getType() == widen.getType() ? source : mlir::Value();
}

struct ElideStorageRoundingsPass : impl::ElideStorageRoundingsPassBase<ElideStorageRoundingsPass> {
  void runOnOperation() override {
    int elided = 0;
    getOperation()->walk([&](mlir::linalg::GenericOp generic) {
      generic.getBody()->walk([&](mlir::arith::ExtFOp widen) {
        if (mlir::Value source = unroundedSource(widen)) {
          widen.replaceAllUsesWith(source);
          widen.erase();
          ++elided;
        }
      });
      // Roundings left without users (their value now flows unrounded).
      generic.getBody()->walk([&](mlir::arith::TruncFOp round) {
        if (round->hasAttr(kStorageRounding) && round->use_empty())
          round.erase();
      });
    });
    MLPIPE_DEBUG(kDebugStorageRoundings, os << elided << " storage roundings kept in f32\n");
  }
};

} // namespace
} // namespace mlpipe
