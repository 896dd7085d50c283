// L2 prefetches issued before a kernel's wait: see l2_prefetch.h.
#include "codegen/l2_prefetch.h"

#include "codegen/conditional_building.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include "llvm/Support/MathExtras.h"

namespace mlpipe::emitters {

namespace {

// The L2's line: a prefetch brings the line holding its address.
constexpr int64_t kL2LineBytes = 128;

} // namespace

void prefetchRowsToL2(mlir::OpBuilder &b, mlir::Location loc, const RowsToPrefetch &rows, mlir::Value tid,
                      int64_t threads) {
  using mlir::Value;
  auto c = [&](int64_t v) -> Value { return mlir::arith::ConstantIndexOp::create(b, loc, v); };
  auto add = [&](Value x, Value y) { return b.createOrFold<mlir::arith::AddIOp>(loc, x, y); };
  auto times = [&](Value x, Value y) { return b.createOrFold<mlir::arith::MulIOp>(loc, x, y); };
  auto max = [&](Value x, Value y) { return b.createOrFold<mlir::arith::MaxSIOp>(loc, x, y); };
  auto lt = [&](Value x, Value y) {
    return b.createOrFold<mlir::arith::CmpIOp>(loc, mlir::arith::CmpIPredicate::slt, x, y);
  };
  auto type = mlir::cast<mlir::MemRefType>(rows.matrix.getType());
  int64_t rank = type.getRank();
  auto metadata = mlir::memref::ExtractStridedMetadataOp::create(b, loc, rows.matrix);
  Value base = mlir::memref::ExtractAlignedPointerAsIndexOp::create(b, loc, rows.matrix);
  auto strides = metadata.getStrides();
  Value rowStride = strides[rank - 2], colStride = strides[rank - 1];
  Value start = metadata.getOffset();
  for (auto [i, index] : llvm::enumerate(rows.outer))
    start = add(start, times(index, strides[i]));
  auto pointerType = mlir::LLVM::LLVMPointerType::get(b.getContext());
  auto level = mlir::NVVM::PrefetchCacheLevelAttr::get(b.getContext(), mlir::NVVM::PrefetchCacheLevel::L2);
  auto prefetch = [&](Value address) {
    Value word = mlir::arith::IndexCastOp::create(b, loc, b.getI64Type(), address);
    Value pointer = mlir::LLVM::IntToPtrOp::create(b, loc, pointerType, word);
    mlir::NVVM::PrefetchOp::create(b, loc, level, /*evictPriority=*/nullptr, pointer, /*predicate=*/Value(),
                                   /*tensormap=*/false);
  };
  // The lines a row's segment may touch: its bytes, plus one where it
  // straddles a line's edge.
  const int64_t lines = llvm::divideCeilSigned(rows.maxColumns * rows.elementBytes, kL2LineBytes) + 1;
  auto loop = mlir::scf::ForOp::create(b, loc, c(0), c(llvm::divideCeilSigned(rows.maxRows, threads)), c(1));
  mlir::OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody()); // before its yield
  Value row = add(add(rows.rowBegin, times(loop.getInductionVar(), c(threads))), tid);
  buildUnder(b, loc, lt(row, rows.rowEnd), [&] {
    Value first = add(add(start, times(row, rowStride)), times(rows.colBegin, colStride));
    Value columns = b.createOrFold<mlir::arith::SubIOp>(loc, rows.colEnd, rows.colBegin);
    Value last = add(first, times(b.createOrFold<mlir::arith::SubIOp>(loc, columns, c(1)), colStride));
    Value firstByte = add(base, times(first, c(rows.elementBytes)));
    Value lastByte = add(add(base, times(last, c(rows.elementBytes))), c(rows.elementBytes - 1));
    prefetch(firstByte);
    Value line = times(b.createOrFold<mlir::arith::DivUIOp>(loc, firstByte, c(kL2LineBytes)), c(kL2LineBytes));
    for (int64_t l = 1; l < lines; ++l) {
      Value next = add(line, c(l * kL2LineBytes));
      buildUnder(b, loc, lt(next, add(lastByte, c(1))), [&] { prefetch(max(next, firstByte)); });
    }
  });
}

} // namespace mlpipe::emitters
