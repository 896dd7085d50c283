// The transpose emitter: fusions whose hero reads an input across its
// innermost dimension (a transpose that moves the innermost dimension), with
// elementwise producers of that input and an elementwise epilogue.
//
// The two dimensions that matter are the output's innermost one (dO) and
// the one the input is contiguous along (dI). The loops are tiled 32x32 over
// (dI, dO), the other dimensions spread over the grid. A block of 32x8
// threads reads its tile along dI (coalesced: neighbouring threads read
// neighbouring input addresses, computing any producers there), stores it
// in a 32x33 shared-memory tile (the padding column keeps the transposed
// reads free of bank conflicts), waits at a barrier, then reads the tile
// transposed and computes and writes the output along dO (coalesced again).
//
//   tile[ty + 8k][tx] = x(.., i0 + tx, .., o0 + ty + 8k)      k = 0..3
//   gpu.barrier
//   y(.., i0 + ty + 8k, .., o0 + tx) = epilogue(tile[tx][ty + 8k])
//
// With 16-bit data each thread moves two neighbours at once, read and
// written as one 32-bit vector (kBytesPerThreadAccess), so a row costs as
// few instructions as in f32: the tile is 64 x 64 (65 elements a row:
// the transposed reads still hit 32 banks), thread tx reading inner
// positions 2tx, 2tx + 1 and writing outer positions 2tx, 2tx + 1.
#include "codegen/debug.h"
#include "emitters/fusion_emitter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/AffineExpr.h"

#include "llvm/Support/MathExtras.h"

namespace mlpipe::emitters {

namespace {

// A tile is one warp wide: a warp reads 32 neighbours on either side.
constexpr int64_t kTile = 32;
// Threads per tile column: each thread moves kTile / kRowsOfThreads elements.
constexpr int64_t kRowsOfThreads = 8;
// Bytes a thread reads or writes at once: 4, a warp's 32 accesses a
// 128-byte row segment, as f32 elements give. Narrower elements (bf16,
// f16) give each thread that many neighbours (and the tile as many times
// kTile on a side).
constexpr int64_t kBytesPerThreadAccess = 4;

// The loop dimension an input index expression moves along with unit
// stride (d_k in "d_k", "d_j * 64 + d_k", ...), if there is one.
std::optional<unsigned> unitStrideDim(mlir::AffineExpr expr) {
  if (auto dim = mlir::dyn_cast<mlir::AffineDimExpr>(expr))
    return dim.getPosition();
  if (expr.getKind() == mlir::AffineExprKind::Add) {
    auto binary = mlir::cast<mlir::AffineBinaryOpExpr>(expr);
    if (auto found = unitStrideDim(binary.getRHS()))
      return found;
    return unitStrideDim(binary.getLHS());
  }
  return std::nullopt;
}

std::string formatExtents(llvm::ArrayRef<int64_t> shape) {
  std::string text;
  for (int64_t extent : shape)
    text += (text.empty() ? "" : "x") + std::to_string(extent);
  return text;
}

class TransposeEmitter final : public FusionEmitter {
public:
  using FusionEmitter::FusionEmitter;
  const char *name() const override { return "transpose"; }

  mlir::LogicalResult emit(mlir::func::CallOp call, KernelFactory &kernels, std::string &why) override {
    for (const FusionNode &node : graph_.nodes())
      if (heroRole(node.op) == HeroRole::Transpose) {
        if (hero_ >= 0)
          return why = "it holds two transposes", mlir::failure();
        hero_ = node.order;
      }
    if (hero_ < 0)
      return why = "it holds no transpose", mlir::failure();
    mlir::linalg::LinalgOp op = graph_.node(hero_).op;
    transposed_ = transposedOperand(op);
    shape_ = op.getStaticLoopRanges();
    for (const FusionGraph::Output &output : graph_.outputs())
      if (graph_.node(output.node).output.shape != llvm::ArrayRef<int64_t>(shape_))
        return why = "an output of another shape than the transpose's", mlir::failure();
    rank_ = shape_.size();
    outerDim_ = rank_ - 1;
    std::optional<unsigned> inner = unitStrideDim(op.getMatchingIndexingMap(transposed_).getResults().back());
    if (!inner || *inner == outerDim_)
      return why = "no dimension the transposed input is contiguous along", mlir::failure();
    innerDim_ = *inner;
    chooseWidth();
    side_ = kTile * width_;
    tilesOuter_ = llvm::divideCeilSigned(shape_[outerDim_], side_);
    tilesInner_ = llvm::divideCeilSigned(shape_[innerDim_], side_);
    for (unsigned d = 0; d < rank_; ++d)
      if (d != innerDim_ && d != outerDim_)
        otherShape_.push_back(shape_[d]);
    int64_t others = 1;
    for (int64_t extent : otherShape_)
      others *= extent;
    int64_t blocks = others * tilesInner_ * tilesOuter_;

    mlir::Type elementType = mlir::cast<mlir::ShapedType>(transposed_->get().getType()).getElementType();
    auto space = mlir::gpu::AddressSpaceAttr::get(graph_.function().getContext(), mlir::gpu::AddressSpace::Workgroup);
    KernelSignature signature;
    signature.name = kernelName(graph_);
    signature.bytesMoved = fusionBytes(graph_);
    signature.blockSize = {static_cast<int32_t>(kTile), static_cast<int32_t>(kRowsOfThreads), 1};
    signature.workgroupBuffers.push_back(
        mlir::MemRefType::get({side_, side_ + 1}, elementType, mlir::MemRefLayoutAttrInterface{}, space));
    auto kernel = buildFusionKernel(
        kernels, graph_, signature,
        [&](ElementalEmitter &elemental, mlir::gpu::GPUFuncOp kernel) { return emitBody(elemental, kernel); }, why);
    if (mlir::failed(kernel))
      return mlir::failure();
    MLPIPE_DEBUG(kDebugEmitters, os << signature.name << ": transpose emitter, loops " << formatExtents(shape_)
                                    << ", tiles of " << side_ << "x" << side_ << " (" << width_
                                    << " elements a thread access, kBytesPerThreadAccess) over d" << innerDim_
                                    << " (input "
                                    << "contiguous) and d" << outerDim_ << " (output contiguous), " << blocks
                                    << " blocks x " << kTile << "x" << kRowsOfThreads << " threads\n");
    mlir::OpBuilder host(call);
    LaunchDims dims;
    dims.grid = {blocks, 1, 1};
    dims.block = {kTile, kRowsOfThreads, 1};
    kernels.launch(host, call.getLoc(), *kernel, dims, call.getOperands());
    call.erase();
    return mlir::success();
  }

private:
  // Neighbours per thread access: kBytesPerThreadAccess of the narrowest
  // element the fusion reads or writes (16 bits or more), where both
  // tiled extents hold whole groups of them.
  void chooseWidth() {
    int64_t bytes = kBytesPerThreadAccess;
    for (mlir::BlockArgument argument : graph_.function().getArguments()) {
      auto memref = mlir::dyn_cast<mlir::MemRefType>(argument.getType());
      if (!memref || !memref.getElementType().isIntOrFloat())
        continue;
      unsigned bits = memref.getElementType().getIntOrFloatBitWidth();
      if (bits % 8 == 0 && bits >= 16)
        bytes = std::min<int64_t>(bytes, bits / 8);
    }
    width_ = std::max<int64_t>(1, kBytesPerThreadAccess / bytes);
    while (width_ > 1 && (shape_[innerDim_] % width_ != 0 || shape_[outerDim_] % width_ != 0))
      width_ /= 2;
  }

  // The loop index at (inner, outer) within this block's tile; out-of-range
  // positions are clamped (their loads stay in bounds; their stores are
  // skipped): along `groupDim`, where the position is the first of width_
  // neighbours, to the first of the last whole group.
  llvm::SmallVector<mlir::Value> loopIndex(ElementalEmitter &elemental, llvm::ArrayRef<mlir::Value> others,
                                           mlir::Value inner, mlir::Value outer, unsigned groupDim) {
    llvm::SmallVector<mlir::Value> index(rank_);
    size_t next = 0;
    for (unsigned d = 0; d < rank_; ++d) {
      if (d == innerDim_)
        index[d] = shape_[d] % side_ ? elemental.minIndex(inner, shape_[d] - (d == groupDim ? width_ : 1)) : inner;
      else if (d == outerDim_)
        index[d] = shape_[d] % side_ ? elemental.minIndex(outer, shape_[d] - (d == groupDim ? width_ : 1)) : outer;
      else
        index[d] = others[next++];
    }
    return index;
  }

  mlir::LogicalResult emitBody(ElementalEmitter &elemental, mlir::gpu::GPUFuncOp kernel) {
    mlir::OpBuilder &b = elemental.builder();
    mlir::Location loc = elemental.loc();
    mlir::Value tile = kernel.getWorkgroupAttributions()[0];
    mlir::Value tx = threadIdX(b, loc);
    mlir::Value ty = mlir::gpu::ThreadIdOp::create(b, loc, mlir::gpu::Dimension::y);
    // Block -> (other dimensions, inner tile, outer tile).
    mlir::Value block = blockIdX(b, loc);
    mlir::Value tileOuter = mlir::arith::RemUIOp::create(b, loc, block, elemental.index(tilesOuter_));
    mlir::Value rest = mlir::arith::DivUIOp::create(b, loc, block, elemental.index(tilesOuter_));
    mlir::Value tileInner = mlir::arith::RemUIOp::create(b, loc, rest, elemental.index(tilesInner_));
    mlir::Value otherLinear = mlir::arith::DivUIOp::create(b, loc, rest, elemental.index(tilesInner_));
    llvm::SmallVector<mlir::Value> others = elemental.delinearize(otherLinear, otherShape_);
    mlir::Value innerBase = elemental.mul(tileInner, side_);
    mlir::Value outerBase = elemental.mul(tileOuter, side_);
    mlir::Value first = elemental.mul(tx, width_); // the thread's first neighbour along a tile row
    const int64_t rowSteps = side_ / kRowsOfThreads;

    // Read along the input's contiguous dimension into the tile.
    for (int64_t k = 0; k < rowSteps; ++k) {
      mlir::Value row = elemental.add(ty, elemental.index(k * kRowsOfThreads));
      mlir::Value inner = elemental.add(innerBase, first);
      mlir::Value outer = elemental.add(outerBase, row);
      llvm::SmallVector<mlir::Value> index = loopIndex(elemental, others, inner, outer, innerDim_);
      llvm::SmallVector<mlir::Value> lanes = laneIndices(elemental, index, innerDim_);
      for (int64_t u = 0; u < width_; ++u) {
        index[innerDim_] = lanes[u];
        mlir::Value value = elemental.operand(hero_, *transposed_, index);
        if (!value)
          return mlir::success();
        mlir::memref::StoreOp::create(b, loc, value, tile,
                                      mlir::ValueRange{row, elemental.add(first, elemental.index(u))});
      }
    }
    mlir::gpu::BarrierOp::create(b, loc);
    // Write along the output's contiguous dimension from the tile.
    mlir::linalg::LinalgOp op = graph_.node(hero_).op;
    for (int64_t k = 0; k < rowSteps; ++k) {
      mlir::Value row = elemental.add(ty, elemental.index(k * kRowsOfThreads));
      mlir::Value inner = elemental.add(innerBase, row);
      mlir::Value outer = elemental.add(outerBase, first);
      llvm::SmallVector<mlir::Value> index = loopIndex(elemental, others, inner, outer, outerDim_);
      llvm::SmallVector<mlir::Value> lanes = laneIndices(elemental, index, outerDim_);
      llvm::SmallVector<llvm::SmallVector<mlir::Value>> values(graph_.outputs().size());
      for (int64_t u = 0; u < width_; ++u) {
        llvm::SmallVector<mlir::Value> laneIndex = index;
        laneIndex[outerDim_] = lanes[u];
        mlir::Value staged =
            mlir::memref::LoadOp::create(b, loc, tile, mlir::ValueRange{elemental.add(first, elemental.index(u)), row});
        elemental.defineRead(hero_, *transposed_, elemental.applyMap(op.getMatchingIndexingMap(transposed_), laneIndex),
                             staged);
        for (auto [i, output] : llvm::enumerate(graph_.outputs()))
          values[i].push_back(elemental.node(output.node, laneIndex));
      }
      if (elemental.failed())
        return mlir::success();
      mlir::Value inside;
      for (auto [dim, position] : {std::pair<unsigned, mlir::Value>{innerDim_, inner}, {outerDim_, outer}})
        if (shape_[dim] % side_) {
          mlir::Value in = mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::ult, position,
                                                       elemental.index(shape_[dim]));
          inside = inside ? mlir::arith::AndIOp::create(b, loc, inside, in).getResult() : in;
        }
      mlir::OpBuilder::InsertionGuard guard(b);
      if (inside) {
        auto ifInside = mlir::scf::IfOp::create(b, loc, inside, false);
        b.setInsertionPoint(ifInside.thenBlock()->getTerminator());
      }
      elemental.pushScope();
      for (auto [output, laneValues] : llvm::zip(graph_.outputs(), values)) {
        mlir::Value target = graph_.node(output.node).op.getDpsInits()[0];
        if (width_ == 1)
          elemental.store(target, index, laneValues.front());
        else
          elemental.storeGroup(target, index, laneValues);
      }
      elemental.popScope();
    }
    return mlir::success();
  }

  // The index values of a thread's width_ neighbours along `dim` from
  // `index` (registered as one group where there are several, so that
  // their loads and stores along the innermost dimension are vectors).
  llvm::SmallVector<mlir::Value> laneIndices(ElementalEmitter &elemental, llvm::ArrayRef<mlir::Value> index,
                                             unsigned dim) {
    if (width_ == 1)
      return {index[dim]};
    return elemental.laneGroup(index[dim], static_cast<int>(width_));
  }

  int hero_ = -1;
  mlir::OpOperand *transposed_ = nullptr;
  llvm::SmallVector<int64_t> shape_, otherShape_;
  unsigned rank_ = 0, innerDim_ = 0, outerDim_ = 0;
  int64_t tilesInner_ = 1, tilesOuter_ = 1;
  int64_t width_ = 1, side_ = kTile; // neighbours a thread access; the tile's side, kTile * width_
};

} // namespace

std::unique_ptr<FusionEmitter> makeTransposeEmitter(const FusionGraph &graph, const EmitterOptions &options) {
  return std::make_unique<TransposeEmitter>(graph, options);
}

} // namespace mlpipe::emitters
