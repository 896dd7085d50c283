// What the generated matmul's kernels are built and launched with (private
// to libs/matmul): index arithmetic that folds constants, matrix operands
// read and written by logical (batch, row, column), the small builders the
// bodies share, the writer of C's elements through the epilogue, and the
// launch of a product kernel in any form (tiled_matmul.cpp,
// skinny_matmul.cpp, row_dot_matmul.cpp, tensor_core_matmul.cpp).
#pragma once

#include "matmul/matmul_config.h"

#include "codegen/kernel_factory.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/AffineMap.h"

#include <functional>
#include <string>

namespace mlpipe::emitters::generated_matmul {

using mlir::Value;

//===----------------------------------------------------------------------===//
// Building blocks of kernel bodies.
//===----------------------------------------------------------------------===//

// Index arithmetic that folds constants as it goes.
struct Ix {
  mlir::OpBuilder &b;
  mlir::Location loc;

  Value c(int64_t v) const { return mlir::arith::ConstantIndexOp::create(b, loc, v); }
  Value add(Value x, Value y) const { return b.createOrFold<mlir::arith::AddIOp>(loc, x, y); }
  Value add(Value x, int64_t y) const { return y == 0 ? x : add(x, c(y)); }
  Value sub(Value x, Value y) const { return b.createOrFold<mlir::arith::SubIOp>(loc, x, y); }
  Value mul(Value x, int64_t y) const { return y == 1 ? x : b.createOrFold<mlir::arith::MulIOp>(loc, x, c(y)); }
  Value div(Value x, int64_t y) const { return y == 1 ? x : b.createOrFold<mlir::arith::DivUIOp>(loc, x, c(y)); }
  Value rem(Value x, int64_t y) const { return y == 1 ? c(0) : b.createOrFold<mlir::arith::RemUIOp>(loc, x, c(y)); }
  Value min(Value x, Value y) const { return b.createOrFold<mlir::arith::MinSIOp>(loc, x, y); }
  Value min(Value x, int64_t y) const { return min(x, c(y)); }
  Value lt(Value x, Value y) const {
    return b.createOrFold<mlir::arith::CmpIOp>(loc, mlir::arith::CmpIPredicate::slt, x, y);
  }
  Value lt(Value x, int64_t y) const { return lt(x, c(y)); }
  Value both(Value x, Value y) const {
    if (!x)
      return y;
    if (!y)
      return x;
    return b.createOrFold<mlir::arith::AndIOp>(loc, x, y);
  }
};

// A matrix operand inside a kernel: loads and stores by logical (batch,
// row, column), vectors along either axis (along rows through a transposed
// view, made once, whose innermost dimension is the contiguous one).
class Matrix {
public:
  Matrix(Value value, int64_t elementBytes) : value_(value), elementBytes_(elementBytes) {
    type_ = mlir::cast<mlir::MemRefType>(value.getType());
  }

  mlir::Type element() const { return type_.getElementType(); }

  // `width` elements starting at (row, col), along columns or rows.
  Value load(const Ix &ix, Value batch, Value row, Value col, bool alongRows, int64_t width) {
    if (width == 1) {
      Value scalar = mlir::memref::LoadOp::create(ix.b, ix.loc, value_, indices(batch, row, col));
      return mlir::vector::BroadcastOp::create(ix.b, ix.loc, vectorType(1), scalar);
    }
    Value base = alongRows ? transposed(ix) : value_;
    auto at = alongRows ? indices(batch, col, row) : indices(batch, row, col);
    return mlir::vector::LoadOp::create(ix.b, ix.loc, vectorType(width), base, at, /*nontemporal=*/false,
                                        llvm::MaybeAlign(width * elementBytes_));
  }

  Value loadScalar(const Ix &ix, Value batch, Value row, Value col) {
    return mlir::memref::LoadOp::create(ix.b, ix.loc, value_, indices(batch, row, col));
  }
  void storeScalar(const Ix &ix, Value element, Value batch, Value row, Value col) {
    mlir::memref::StoreOp::create(ix.b, ix.loc, element, value_, indices(batch, row, col));
  }
  // A vector along columns (the caller checked the layout allows it).
  Value loadRowVector(const Ix &ix, Value batch, Value row, Value col, int64_t width) {
    return mlir::vector::LoadOp::create(ix.b, ix.loc, vectorType(width), value_, indices(batch, row, col), false,
                                        llvm::MaybeAlign(width * elementBytes_));
  }
  void storeRowVector(const Ix &ix, Value vector, Value batch, Value row, Value col, int64_t width) {
    mlir::vector::StoreOp::create(ix.b, ix.loc, vector, value_, indices(batch, row, col), false,
                                  llvm::MaybeAlign(width * elementBytes_));
  }

  mlir::VectorType vectorType(int64_t width) const { return mlir::VectorType::get({width}, element()); }

  // The operand as a view whose innermost dimension is its rows (itself)
  // or, `alongRows`, its columns (a transposed view, made once).
  Value along(const Ix &ix, bool alongRows) { return alongRows ? transposed(ix) : value_; }

private:
  llvm::SmallVector<Value> indices(Value batch, Value row, Value col) const {
    if (type_.getRank() == 3)
      return {batch, row, col};
    return {row, col};
  }
  Value transposed(const Ix &ix) {
    if (!transposed_) {
      mlir::OpBuilder::InsertionGuard guard(ix.b);
      // At the top of the kernel, so every use sees it.
      if (auto arg = mlir::dyn_cast<mlir::BlockArgument>(value_))
        ix.b.setInsertionPointToStart(arg.getOwner());
      int64_t rank = type_.getRank();
      llvm::SmallVector<unsigned> order;
      for (int64_t d = 0; d < rank; ++d)
        order.push_back(static_cast<unsigned>(d));
      std::swap(order[rank - 2], order[rank - 1]);
      auto permutation = mlir::AffineMap::getPermutationMap(order, ix.b.getContext());
      transposed_ = mlir::memref::TransposeOp::create(ix.b, ix.loc, value_, mlir::AffineMapAttr::get(permutation));
    }
    return transposed_;
  }

  Value value_;
  mlir::MemRefType type_;
  int64_t elementBytes_;
  Value transposed_;
};

Value zeroVector(const Ix &ix, mlir::Type element, int64_t width);
Value zeroScalar(const Ix &ix, mlir::Type element);
Value extract(const Ix &ix, Value vector, int64_t i);
Value insert(const Ix &ix, Value element, Value vector, int64_t i);
// An scf.for from 0 to `upper` carrying `init`, its body built by `body`
// with the same builder (so helpers that captured it build inside the loop).
mlir::scf::ForOp buildLoop(const Ix &ix, Value upper, mlir::ValueRange init,
                           const std::function<llvm::SmallVector<Value>(Value, llvm::SmallVector<Value>)> &body);
// `width` elements of `vector` from `offset`, as a vector of their own.
Value slice(const Ix &ix, Value vector, int64_t offset, int64_t width);
Value fma(const Ix &ix, Value a, Value b, Value acc);
// The sum of a split-K product's `splits` partial products at (row, col),
// `width` columns, in the order of the splits (as the split-sum kernel
// adds them): split s of batch b is slab s * batches + b of `partials`.
Value sumOfSplits(const Ix &ix, Matrix &partials, Value batch, Value row, Value col, int64_t width, int64_t splits,
                  int64_t batches);
// `value` (a float or a vector of floats) as elements of `to`: widened
// (extf) or rounded (truncf), unchanged where it already is.
Value convertFloat(const Ix &ix, Value value, mlir::Type to);
// The bytes of one element of a memref.
int64_t bytesOfElement(mlir::MemRefType type);
Value broadcast(const Ix &ix, Value scalar, int64_t width);
// Runs `body` under `condition` (unconditionally when it is null).
void guarded(const Ix &ix, Value condition, const std::function<void()> &body);

// griddepcontrol.wait: what follows runs once the kernel before this one has
// finished and its writes are visible. mlpipe-programmatic-launch lets the
// next kernel be scheduled right after it.
void waitForKernelBefore(const Ix &ix);
// Runs `then` or `otherwise` by `condition`.
void branch(const Ix &ix, Value condition, const std::function<void()> &then, const std::function<void()> &otherwise);

// The final value of one element of C: the product, plus C's old value when
// accumulating, through the epilogue.
struct OutputWriter {
  const Problem &p;
  Matrix &c;
  llvm::ArrayRef<Value> epilogueOperands;

  Value finish(const Ix &ix, Value product, Value batch, Value row, Value col) const {
    if (!p.epilogue)
      return product;
    llvm::SmallVector<Value> index;
    if (p.rank == 3)
      index.push_back(batch);
    index.push_back(row);
    index.push_back(col);
    return p.epilogue->apply(ix.b, ix.loc, epilogueOperands, index, product);
  }

  // Writes `width` consecutive columns of one row; `vectorC` says C's layout
  // allows a vector of `width` there. The caller checked bounds. `values`
  // are in the accumulator's type; C may be stored in a narrower one.
  void write(const Ix &ix, Value values, Value batch, Value row, Value col, int64_t width, bool vectorC) const {
    if (mlir::cast<mlir::VectorType>(values.getType()).getElementType() != c.element()) {
      writeConverted(ix, values, batch, row, col, width, vectorC);
      return;
    }
    if (vectorC) {
      Value v = values;
      if (p.accumulate)
        v = mlir::arith::AddFOp::create(ix.b, ix.loc, v, c.loadRowVector(ix, batch, row, col, width));
      if (p.epilogue)
        for (int64_t j = 0; j < width; ++j)
          v = insert(ix, finish(ix, extract(ix, v, j), batch, row, ix.add(col, j)), v, j);
      c.storeRowVector(ix, v, batch, row, col, width);
      return;
    }
    for (int64_t j = 0; j < width; ++j) {
      Value colJ = ix.add(col, j);
      Value v = extract(ix, values, j);
      if (p.accumulate)
        v = mlir::arith::AddFOp::create(ix.b, ix.loc, v, c.loadScalar(ix, batch, row, colJ));
      c.storeScalar(ix, finish(ix, v, batch, row, colJ), batch, row, colJ);
    }
  }

  // write() for a C stored in another type than the accumulator's: each
  // element goes through the epilogue in the accumulator's type and is
  // rounded to C's once, as it is stored.
  void writeConverted(const Ix &ix, Value values, Value batch, Value row, Value col, int64_t width,
                      bool vectorC) const {
    mlir::Type accumulator = mlir::cast<mlir::VectorType>(values.getType()).getElementType();
    Value stored = vectorC ? zeroVector(ix, c.element(), width) : Value();
    for (int64_t j = 0; j < width; ++j) {
      Value colJ = ix.add(col, j);
      Value v = extract(ix, values, j);
      if (p.accumulate)
        v = mlir::arith::AddFOp::create(ix.b, ix.loc, v,
                                        convertFloat(ix, c.loadScalar(ix, batch, row, colJ), accumulator));
      v = convertFloat(ix, finish(ix, v, batch, row, colJ), c.element());
      if (vectorC)
        stored = insert(ix, v, stored, j);
      else
        c.storeScalar(ix, v, batch, row, colJ);
    }
    if (vectorC)
      c.storeRowVector(ix, stored, batch, row, col, width);
  }
};

// A warp's accumulators as mma.sync lays out C (m16n8 tiles; wgmma's
// m64nN result is the same layout, a warp's 16 rows and N/8 tiles): lane l
// (g = l / 4, t = l % 4) holds rows g and g+8 of each m16 tile at columns
// 2t and 2t+1 of each n8 tile, value (i * tilesN + j) * 4 + r * 2 + e for
// m16 tile i, n8 tile j, row g + 8r, column 2t + e.
struct AccumulatorTiles {
  Value rowOrigin, colOrigin; // C's row and column of the warp's first tile
  Value group, inGroup;       // g and t
  int64_t tilesM = 1, tilesN = 1;
  bool rowEdge = false, colEdge = false; // whether tiles may pass C's last row or column
};
// Writes the tiles' accumulators (`accumulator(i)`: value i) through
// `writer`, two columns a store where C's layout allows (N even, and
// `widthCAllowed` at least 2), masked at the edges.
void writeAccumulatorTiles(const Ix &ix, const OutputWriter &writer, const AccumulatorTiles &tiles,
                           const std::function<Value(int64_t)> &accumulator, Value batchOfC, int64_t widthCAllowed);

// Shared tiles are read and written 128 bits at a time: ask for that
// alignment (the default is the element's).
void alignWorkgroupBuffers(mlir::OpBuilder &b, mlir::gpu::GPUFuncOp f);
// A buffer of workgroup (shared) memory.
mlir::MemRefType workgroupType(llvm::ArrayRef<int64_t> shape, mlir::Type element);
// The kernel's arguments: A and B (`withAB`), C, the epilogue's operands,
// the prologue's.
llvm::SmallVector<mlir::Type> argumentTypes(const Problem &p, bool withAB);

//===----------------------------------------------------------------------===//
// Launching a product kernel (matmul_kernel.cpp) in either form.
//===----------------------------------------------------------------------===//

// The host side of one emitGeneratedMatmul call: where its kernels go, and
// what every launch of the product reads.
struct ProductLaunch {
  ProductLaunch(mlir::OpBuilder &host, mlir::Location loc, const MatmulOperands &operands, KernelFactory &kernels,
                const DeviceDescription &device, const std::string &name, const GeneratedMatmulOptions &options)
      : host(host), loc(loc), operands(operands), kernels(kernels), device(device), name(name), options(options) {}

  mlir::OpBuilder &host;
  mlir::Location loc;
  const MatmulOperands &operands;
  KernelFactory &kernels;
  const DeviceDescription &device;
  const std::string &name;
  const GeneratedMatmulOptions &options;
  llvm::SmallVector<Value> epilogueOperands; // the epilogue's host operands
  // Whether K may be split across blocks: not where every block computes
  // A's row, nor where an epilogue operand may be C itself.
  bool splitAllowed = true;
  // The whole product's work, for the kernel's signature.
  int64_t flops = 0, bytes = 0;
  // The widest vector (in elements) C's rows are stored with.
  int64_t widthC = 1;
};

using KernelBody = std::function<mlir::LogicalResult(mlir::OpBuilder &, mlir::gpu::GPUFuncOp)>;

// Where K is split `splits` ways, each split's partial product goes to its
// own slab of a temporary: [splits x batch, M, N] in the accumulator's
// type, split s of batch b at s * batch + b.
mlir::MemRefType partialSumsType(const Problem &p, int64_t splits);

// The problem the product kernel computes when K is split `splits` ways:
// with more than one it writes its split's partial product, plain, to the
// slab of partialSumsType its "C" is (the sum, C's old value and the
// epilogue follow as a kernel of their own).
Problem productProblem(const Problem &p, int64_t splits);

// Builds the product kernel (its body by `body`) and launches it, with
// `dynamicSharedBytes` of dynamic shared memory; with split K it is
// launched on a temporary of partial products, and a second kernel adds
// them in a fixed order into C (no atomics: the same bits run after run),
// or, `lastSplitCompletes`, the kernel's last block of a tile to finish
// does (codegen/split_completion.h): it is then also given C and the
// epilogue's operands, after the temporary.
mlir::LogicalResult launchProduct(const ProductLaunch &launch, const Problem &p, int64_t splits,
                                  const KernelSignature &signature, const LaunchDims &dims, const KernelBody &body,
                                  int64_t dynamicSharedBytes = 0, bool lastSplitCompletes = false);

// The tiled form (tiled_matmul.cpp): its configuration chosen, built and
// launched.
mlir::LogicalResult emitTiledMatmul(const ProductLaunch &launch, const Problem &p);

// The skinny form (skinny_matmul.cpp) with configuration `cfg`, built and
// launched.
mlir::LogicalResult emitSkinnyMatmul(const ProductLaunch &launch, const Problem &p, const SkinnyConfig &cfg);

// The row-dot form (row_dot_matmul.cpp) with configuration `cfg`, built
// and launched.
mlir::LogicalResult emitRowDotMatmul(const ProductLaunch &launch, const Problem &p, const RowDotConfig &cfg);

// Whether the tensor-core form (tensor_core_matmul.cpp) takes the product
// on this device: A and B in bf16 or f16, and mma.sync m16n8k16 on the chip
// (sm_80 and later; sm_75's f16 mma.sync is m16n8k8 only, and it has no
// bf16 at all).
bool tensorCoresTake(const Problem &p, const DeviceDescription &device);
// Whether the tensor-core form takes a product of at most 16 rows in the
// shape measured faster than the skinny form: K split across blocks
// (kFewRowsSplitsK), both operands staged by cp.async.
bool tensorCoresSplitFewRows(const Problem &p, const GeneratedMatmulOptions &options, const DeviceDescription &device,
                             bool splitAllowed);

// The tensor-core form: its configuration chosen, built and launched.
mlir::LogicalResult emitTensorCoreMatmul(const ProductLaunch &launch, const Problem &p);
// Whether the warpgroup form (wgmma, sm_90a; warpgroup_matmul.cpp) can
// compute the product: 16-bit A read along K and B read, both in 16-byte
// vectors.
bool warpgroupTakes(const Problem &p, const DeviceDescription &device);
mlir::LogicalResult emitWarpgroupMatmul(const ProductLaunch &launch, const Problem &p);

} // namespace mlpipe::emitters::generated_matmul
