// The row reduction emitter: fusions whose heroes reduce the innermost
// (contiguous) dimensions of one shape — softmax, layer norm, a sum over
// rows — as one kernel that reads each row once.
//
// A causally masked softmax (softmax_analysis.h) whose row is held in
// registers reads only the chunks of keys up to the row's query: for a
// chunk wholly after it, x is taken as -inf, whose e = exp(x - m) and
// y = e / l are the same exact zeros the masked scores give, so the row's
// max, sum and outputs are bit for bit what reading it would give, from
// about half the reads of a [T, T] row set.
//
// A row of C elements is split into chunks of W (128 bits of elements) and
// handled by a group of G lanes (G a power of two): a part of a warp for
// short rows, a warp, or a whole block for long ones, the row's chunks
// dealt out so that neighbouring lanes read neighbouring chunks. In
// register mode every lane keeps its E chunks in registers: each reduction
// of the fusion, in program order, combines its lane's elements, then
// butterfly shuffles (and, for a block, shared memory) combine the group's,
// and the result is known to every lane; the epilogue then computes the
// outputs from the same registers, so the row is read from memory once.
// Rows too long for registers are streamed: each pass re-reads the row.
//
//   lane = tid % G, row = block * rowsPerBlock + tid / G
//   max:  x[c] for c in the lane's chunks -> maximumf -> shuffle xor 16..1
//   sum:  exp(x[c] - max) ...              -> addf    -> shuffle xor 16..1
//   y[c] = exp(x[c] - max) / sum            (vector.store per chunk)
#include "codegen/debug.h"
#include "emitters/fusion_emitter.h"
#include "fusion/softmax_analysis.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include "llvm/Support/MathExtras.h"

#include <limits>

namespace mlpipe::emitters {

namespace {

// Elements of its row slice a lane may hold in registers: beyond this the
// register file would spill (a lane also holds the epilogue's values).
constexpr int64_t kMaxRowElementsPerLane = 32;
// Threads per block when one block holds several rows.
constexpr int64_t kThreadsPerBlock = 256;
// Blocks per SM a grid of short rows should at least have: with fewer, some
// SMs idle while others hold several blocks (1024 rows of 768 at eight rows
// a block would be 128 blocks for 132 SMs); the rows then spread over
// smaller blocks.
constexpr int64_t kMinBlocksPerSm = 2;
// Reads the epilogue makes itself (a layer norm's weight and bias) wait,
// where they are used, for both reductions: a dependent round trip to L2
// after them. A grid that leaves the SMs' registers mostly unused (a
// 1024-row layer norm: about 8 warps an SM) issues them with the row's,
// at the start, where they cost registers only. Such a grid: at most the
// threads the register file holds at this many registers a thread.
constexpr int64_t kPrefetchRegistersPerThread = 128;

int64_t nextPowerOfTwo(int64_t n) {
  int64_t p = 1;
  while (p < n)
    p *= 2;
  return p;
}

class RowReductionEmitter final : public FusionEmitter {
public:
  using FusionEmitter::FusionEmitter;
  const char *name() const override { return "row_reduction"; }

  mlir::LogicalResult emit(mlir::func::CallOp call, KernelFactory &kernels, std::string &why) override {
    if (mlir::failed(analyze(why)))
      return mlir::failure();
    const DeviceDescription &device = *options_.device;
    int64_t warp = device.warpSize;

    chooseChunks();
    mlir::Type elementType = mlir::cast<mlir::ShapedType>(reduced_->get().getType()).getElementType();
    // G: the fewest lanes that keep a lane's slice within the registers it
    // may use, a warp at least unless the row is shorter, at most a block.
    if (chunks_ <= warp) {
      lanes_ = nextPowerOfTwo(chunks_);
    } else {
      lanes_ = warp;
      while (llvm::divideCeilSigned(chunks_, lanes_) * width_ > kMaxRowElementsPerLane &&
             lanes_ < device.maxThreadsPerBlock)
        lanes_ *= 2;
    }
    perLane_ = llvm::divideCeilSigned(chunks_, lanes_);
    inRegisters_ = perLane_ * width_ <= kMaxRowElementsPerLane;
    // A block of one row when the row needs more than a warp; else several
    // rows share a block.
    int64_t threadsForEnoughBlocks =
        nextPowerOfTwo(llvm::divideCeilSigned(rows_ * lanes_, kMinBlocksPerSm * device.smCount));
    threads_ = lanes_ > warp
                   ? lanes_
                   : std::max<int64_t>({warp, lanes_, std::min<int64_t>(kThreadsPerBlock, threadsForEnoughBlocks)});
    rowsPerBlock_ = threads_ / lanes_;
    int64_t blocks = llvm::divideCeilSigned(rows_, rowsPerBlock_);
    int64_t warpsPerRow = lanes_ / warp;

    // A causally masked softmax held in registers reads only the keys up to
    // each row's query (the rest give exact zeros): half the reads of a
    // [T, T] score tensor.
    causalPrologue_ = inRegisters_ ? causalSoftmaxPrologue(call) : -1;
    int64_t threadsAtPrefetchRegisters = device.smCount * (device.registersPerSm / kPrefetchRegistersPerThread);
    prefetchEpilogue_ = inRegisters_ && blocks * threads_ <= threadsAtPrefetchRegisters;

    KernelSignature signature;
    signature.name = kernelName(graph_);
    signature.bytesMoved = fusionBytes(graph_);
    signature.blockSize = {static_cast<int32_t>(threads_), 1, 1};
    if (warpsPerRow > 1) {
      // One slot per warp of the row, per reduction: no barrier is needed
      // between reductions to reuse it.
      auto space = mlir::gpu::AddressSpaceAttr::get(graph_.function().getContext(), mlir::gpu::AddressSpace::Workgroup);
      signature.workgroupBuffers.push_back(
          mlir::MemRefType::get({static_cast<int64_t>(reductions_.size()) * warpsPerRow}, slotType(elementType),
                                mlir::MemRefLayoutAttrInterface{}, space));
    }
    auto kernel = buildFusionKernel(
        kernels, graph_, signature,
        [&](ElementalEmitter &elemental, mlir::gpu::GPUFuncOp kernel) { return emitBody(elemental, kernel); }, why);
    if (mlir::failed(kernel))
      return mlir::failure();
    MLPIPE_DEBUG(kDebugEmitters,
                 os << signature.name << ": row reduction emitter, " << rows_ << " rows of " << columns_ << " in "
                    << chunks_ << " chunks of " << width_ << ", " << lanes_ << " lanes per row ("
                    << (lanes_ < warp    ? "part of a warp"
                        : lanes_ == warp ? "a warp"
                                         : "a block")
                    << "), " << perLane_ << " chunks per lane " << (inRegisters_ ? "kept in registers" : "streamed")
                    << (causalPrologue_ >= 0 ? ", keys after the query not read (causal)" : "")
                    << (prefetchEpilogue_ ? ", epilogue reads issued first (small grid)" : "") << ", "
                    << reductions_.size() << " reductions, " << blocks << " blocks x " << threads_ << " threads\n");
    mlir::OpBuilder host(call);
    LaunchDims dims;
    dims.grid = {blocks, 1, 1};
    dims.block = {threads_, 1, 1};
    kernels.launch(host, call.getLoc(), *kernel, dims, call.getOperands());
    call.erase();
    return mlir::success();
  }

  // One row computed by a whole block of `threads` lanes inside another
  // kernel (emitRowInBlock): the row's elements go to `sink`, not to memory.
  mlir::LogicalResult emitInBlock(ElementalEmitter &elemental, mlir::Value slots, int64_t threads, const RowSink &sink,
                                  std::string &why) {
    if (mlir::failed(analyze(why)))
      return mlir::failure();
    if (rows_ != 1)
      return emitRowsInBlock(elemental, threads, sink, why);
    if (graph_.outputs().size() != 1 ||
        graph_.node(graph_.outputs().front().node).output.shape != llvm::ArrayRef<int64_t>(inputShape_))
      return why = "a row reduction whose output is not its one row", mlir::failure();
    int64_t warp = options_.device->warpSize;
    if (threads % warp != 0 || (threads & (threads - 1)) != 0)
      return why = "a block that is not a power of two of whole warps", mlir::failure();
    chooseChunks();
    lanes_ = threads;
    perLane_ = llvm::divideCeilSigned(chunks_, lanes_);
    inRegisters_ = perLane_ * width_ <= kMaxRowElementsPerLane;
    if (!inRegisters_)
      return why = "a row too long for the block's registers", mlir::failure();
    threads_ = threads;
    rowsPerBlock_ = 1;
    inBlock_ = true;
    slots_ = slots;
    sink_ = &sink;
    return emitBody(elemental, nullptr);
  }

  // W: a chunk is one 128-bit access when the innermost reduced extent
  // allows it (a chunk never straddles two rows); the row's chunks.
  void chooseChunks() {
    mlir::Type elementType = mlir::cast<mlir::ShapedType>(reduced_->get().getType()).getElementType();
    width_ = vectorWidthFor(elementType, graph_, options_);
    while (width_ > 1 && reducedShape_.back() % width_ != 0)
      width_ /= 2;
    chunks_ = columns_ / width_;
  }

  // Several rows computed by a block of `threads` lanes inside another
  // kernel, a warp a row, the warps taking rows w, w + warps, ... in turn
  // (a loop of passes); each reduction combines its warp's lanes by
  // shuffles alone (no slots, no barrier). The rows' elements go to `sink`.
  mlir::LogicalResult emitRowsInBlock(ElementalEmitter &elemental, int64_t threads, const RowSink &sink,
                                      std::string &why) {
    int64_t warp = options_.device->warpSize;
    if (graph_.outputs().size() != 1 ||
        graph_.node(graph_.outputs().front().node).output.shape != llvm::ArrayRef<int64_t>(inputShape_) ||
        keptShape_.size() != 1)
      return why = "a row reduction whose output is not its rows, or rows of more than one index", mlir::failure();
    if (threads % warp != 0)
      return why = "a block that is not whole warps", mlir::failure();
    chooseChunks();
    lanes_ = std::min(warp, nextPowerOfTwo(chunks_));
    perLane_ = llvm::divideCeilSigned(chunks_, lanes_);
    inRegisters_ = perLane_ * width_ <= kMaxRowElementsPerLane;
    if (!inRegisters_)
      return why = "a row too long for a warp's registers", mlir::failure();
    threads_ = threads;
    rowsPerBlock_ = threads / lanes_;
    inBlock_ = true;
    sink_ = &sink;
    mlir::OpBuilder &b = elemental.builder();
    mlir::Location loc = elemental.loc();
    int64_t passes = llvm::divideCeilSigned(rows_, rowsPerBlock_);
    auto loop = mlir::scf::ForOp::create(b, loc, elemental.index(0), elemental.index(passes), elemental.index(1));
    mlir::OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(loop.getBody()->getTerminator());
    elemental.pushScope();
    firstRow_ = elemental.mul(loop.getInductionVar(), rowsPerBlock_);
    mlir::LogicalResult body = emitBody(elemental, nullptr);
    elemental.popScope();
    return body;
  }

  // Workgroup elements emitInBlock needs for `threads` lanes: one per warp
  // per reduction (none for several rows, a warp each).
  // The element type of the warps' slots: the reduced elements' type, or
  // where the reductions' values differ in type (a greedy token's f32
  // maximum and i32 index), an integer as wide as the widest, each value
  // kept there as its bits (intoSlot, outOfSlot).
  mlir::Type slotType(mlir::Type elementType) const {
    unsigned widest = 0;
    bool alike = true;
    for (int node : reductions_) {
      mlir::Type type = mlir::getElementTypeOrSelf(graph_.node(node).op.getDpsInits()[0].getType());
      alike = alike && type == elementType;
      widest = std::max(widest, type.getIntOrFloatBitWidth());
    }
    if (alike)
      return elementType;
    return mlir::IntegerType::get(elementType.getContext(), widest <= 32 ? 32 : 64);
  }
  static mlir::Value intoSlot(mlir::OpBuilder &b, mlir::Location loc, mlir::Value value, mlir::Value slots) {
    mlir::Type slot = mlir::cast<mlir::MemRefType>(slots.getType()).getElementType();
    if (value.getType() == slot)
      return value;
    unsigned bits = value.getType().getIntOrFloatBitWidth();
    if (mlir::isa<mlir::FloatType>(value.getType()))
      value = mlir::arith::BitcastOp::create(b, loc, b.getIntegerType(bits), value);
    return bits == slot.getIntOrFloatBitWidth() ? value : mlir::arith::ExtUIOp::create(b, loc, slot, value).getResult();
  }
  static mlir::Value outOfSlot(mlir::OpBuilder &b, mlir::Location loc, mlir::Value value, mlir::Type type) {
    if (value.getType() == type)
      return value;
    unsigned bits = type.getIntOrFloatBitWidth();
    if (value.getType().getIntOrFloatBitWidth() != bits)
      value = mlir::arith::TruncIOp::create(b, loc, b.getIntegerType(bits), value);
    return mlir::isa<mlir::FloatType>(type) ? mlir::arith::BitcastOp::create(b, loc, type, value).getResult() : value;
  }

  int64_t slotsInBlock(int64_t threads) const {
    if (rows_ > 1)
      return 0;
    int64_t reductions = 0;
    for (const FusionNode &node : graph_.nodes())
      reductions += node.op.getNumReductionLoops() > 0;
    return reductions * (threads / options_.device->warpSize);
  }

private:
  // The prologue node (x) of a causally masked softmax over [heads,
  // queries, keys] (softmax_analysis.h), its penalty computed in its body
  // or read from a mask argument another fusion computes; -1 otherwise.
  int causalSoftmaxPrologue(mlir::func::CallOp call) const {
    std::string ignored;
    bool looksLikeSoftmax = false;
    auto softmax = matchSoftmax(graph_, ignored, looksLikeSoftmax);
    if (mlir::failed(softmax))
      return -1;
    if (!softmax->causal && options_.causalMaskArguments) {
      auto known = options_.causalMaskArguments->find(call.getOperation());
      if (known != options_.causalMaskArguments->end())
        matchCausalMaskInput(*softmax, graph_, [&](unsigned argument) { return argument == known->second; });
    }
    return softmax->causal ? softmax->prologue : -1;
  }

  mlir::LogicalResult analyze(std::string &why) {
    for (const FusionNode &node : graph_.nodes()) {
      if (node.op.getNumReductionLoops() == 0)
        continue;
      if (heroRole(node.op) != HeroRole::RowReduction)
        return why = "a reduction that is not over rows", mlir::failure();
      reductions_.push_back(node.order);
    }
    if (reductions_.empty())
      return why = "it holds no reduction", mlir::failure();
    reduced_ = reducedOperand(graph_.node(reductions_.front()).op);
    inputShape_ = llvm::to_vector(mlir::cast<mlir::ShapedType>(reduced_->get().getType()).getShape());
    mlir::linalg::LinalgOp first = graph_.node(reductions_.front()).op;
    size_t kept = first.getNumParallelLoops();
    keptShape_.assign(inputShape_.begin(), inputShape_.begin() + kept);
    reducedShape_.assign(inputShape_.begin() + kept, inputShape_.end());
    rows_ = elementCount(keptShape_);
    columns_ = elementCount(reducedShape_);
    // Row structure must agree across the reductions.
    for (int index : reductions_) {
      mlir::linalg::LinalgOp op = graph_.node(index).op;
      auto shape = mlir::cast<mlir::ShapedType>(reducedOperand(op)->get().getType()).getShape();
      if (llvm::to_vector(shape) != inputShape_ || op.getNumParallelLoops() != kept)
        return why = "its reductions reduce rows of different shapes", mlir::failure();
      if (!op.getMatchingIndexingMap(reducedOperand(op)).isPermutation() ||
          !op.getMatchingIndexingMap(op.getDpsInitOperand(0)).isProjectedPermutation())
        return why = "a reduction with non-permutation indexing", mlir::failure();
    }
    // The elemental emitter must be able to tree-reduce them (checked with a
    // throwaway emitter-free test of the body's shape).
    for (int index : reductions_) {
      mlir::linalg::LinalgOp op = graph_.node(index).op;
      mlir::Block *block = op.getBlock();
      mlir::BlockArgument accumulator = block->getArguments().back();
      if (!accumulator.hasOneUse())
        return why = "a reduction whose body reads its accumulator twice", mlir::failure();
      mlir::Operation *combining = *accumulator.getUsers().begin();
      if (!mlir::arith::getNeutralElement(combining) ||
          block->getTerminator()->getOperand(0) != combining->getResult(0))
        return why = "a reduction whose combining op has no neutral element", mlir::failure();
    }
    for (const FusionGraph::Output &output : graph_.outputs()) {
      llvm::ArrayRef<int64_t> shape = graph_.node(output.node).output.shape;
      if (shape != llvm::ArrayRef<int64_t>(inputShape_) && shape != llvm::ArrayRef<int64_t>(keptShape_))
        return why = "an output that is neither a row nor one value per row", mlir::failure();
    }
    return mlir::success();
  }

  // The loop index of reduction `node` at an element of its reduced operand.
  llvm::SmallVector<mlir::Value> loopIndexAt(ElementalEmitter &elemental, int node,
                                             llvm::ArrayRef<mlir::Value> inputIndex) {
    mlir::linalg::LinalgOp op = graph_.node(node).op;
    mlir::AffineMap inputMap = op.getMatchingIndexingMap(reducedOperand(op));
    return elemental.applyMap(mlir::inversePermutation(inputMap), inputIndex);
  }

  struct Chunk {
    llvm::SmallVector<mlir::Value> base;                  // input index of its first element
    llvm::SmallVector<llvm::SmallVector<mlir::Value>> at; // input index of each lane of the chunk
    mlir::Value valid;                                    // null: always in the row
  };

  // Chunk `chunkOfLane` (a value) of this lane's row.
  Chunk chunk(ElementalEmitter &elemental, mlir::Value chunkIndex, llvm::ArrayRef<mlir::Value> keptIndex,
              bool mayOverrun) {
    mlir::OpBuilder &b = elemental.builder();
    Chunk result;
    mlir::Value clamped = chunkIndex;
    if (mayOverrun) {
      result.valid = mlir::arith::CmpIOp::create(b, elemental.loc(), mlir::arith::CmpIPredicate::ult, chunkIndex,
                                                 elemental.index(chunks_));
      clamped = elemental.minIndex(chunkIndex, chunks_ - 1);
    }
    llvm::SmallVector<mlir::Value> column = elemental.delinearize(elemental.mul(clamped, width_), reducedShape_);
    result.base.assign(keptIndex.begin(), keptIndex.end());
    result.base.append(column.begin(), column.end());
    llvm::SmallVector<mlir::Value> lanes = elemental.laneGroup(result.base.back(), width_);
    for (int64_t u = 0; u < width_; ++u) {
      llvm::SmallVector<mlir::Value> index = result.base;
      index.back() = lanes[u];
      result.at.push_back(index);
    }
    return result;
  }

  // This lane's contribution to reduction `node` from one chunk.
  mlir::Value contribute(ElementalEmitter &elemental, int node, const Chunk &c, mlir::Value partial) {
    mlir::OpBuilder &b = elemental.builder();
    for (const auto &index : c.at) {
      mlir::Value x = elemental.reductionInput(node, loopIndexAt(elemental, node, index));
      if (!x)
        return partial;
      if (c.valid)
        x = mlir::arith::SelectOp::create(b, elemental.loc(), c.valid, x, elemental.neutral(node));
      partial = elemental.combine(node, partial, x);
    }
    return partial;
  }

  void storeChunk(ElementalEmitter &elemental, const Chunk &c, mlir::Value rowValid) {
    mlir::OpBuilder &b = elemental.builder();
    mlir::Location loc = elemental.loc();
    struct Pending {
      mlir::Value target;
      llvm::SmallVector<mlir::Value> values;
    };
    llvm::SmallVector<Pending> pending;
    for (const FusionGraph::Output &output : graph_.outputs()) {
      const FusionNode &node = graph_.node(output.node);
      if (node.output.shape != llvm::ArrayRef<int64_t>(inputShape_))
        continue;
      Pending p{node.op.getDpsInits()[0], {}};
      for (const auto &index : c.at)
        p.values.push_back(elemental.node(output.node, index));
      pending.push_back(p);
    }
    if (pending.empty() || elemental.failed())
      return;
    if (sink_) {
      // In another kernel's block: the output rows go to the sink (one
      // row: index 0; several: the row's, where it is one).
      mlir::Value row = firstRow_ ? c.base.front() : elemental.index(0);
      auto give = [&] { (*sink_)(row, c.base.back(), pending.front().values); };
      mlir::Value condition = firstRow_ ? rowValid : mlir::Value();
      if (c.valid)
        condition = condition ? mlir::arith::AndIOp::create(b, loc, condition, c.valid).getResult() : c.valid;
      if (!condition)
        return give();
      auto guard = mlir::scf::IfOp::create(b, loc, condition, /*withElseRegion=*/false);
      mlir::OpBuilder::InsertionGuard insertion(b);
      b.setInsertionPoint(guard.thenBlock()->getTerminator());
      elemental.pushScope();
      give();
      elemental.popScope();
      return;
    }
    mlir::Value condition = rowValid;
    if (c.valid)
      condition = condition ? mlir::arith::AndIOp::create(b, loc, condition, c.valid).getResult() : c.valid;
    auto storeAll = [&] {
      for (Pending &p : pending) {
        if (width_ == 1)
          elemental.store(p.target, c.base, p.values.front());
        else
          elemental.storeGroup(p.target, c.base, p.values);
      }
    };
    if (!condition) {
      storeAll();
      return;
    }
    auto guard = mlir::scf::IfOp::create(b, loc, condition, /*withElseRegion=*/false);
    mlir::OpBuilder::InsertionGuard insertion(b);
    b.setInsertionPoint(guard.thenBlock()->getTerminator());
    elemental.pushScope();
    storeAll();
    elemental.popScope();
  }

  // Causal: this lane's chunks wholly after the row's query (the last kept
  // index) are not read. Each chunk's x is computed in an scf.if on its
  // first key, -inf otherwise, and defined for the reductions and the
  // epilogue that follow.
  void readUpToTheQuery(ElementalEmitter &elemental, llvm::ArrayRef<Chunk> chunks, mlir::Value query) {
    mlir::OpBuilder &b = elemental.builder();
    mlir::Location loc = elemental.loc();
    mlir::Type element = mlir::cast<mlir::ShapedType>(reduced_->get().getType()).getElementType();
    mlir::Value negInf = mlir::arith::ConstantOp::create(
        b, loc, element, b.getFloatAttr(element, -std::numeric_limits<double>::infinity()));
    llvm::SmallVector<mlir::Type> types(width_, element);
    for (const Chunk &c : chunks) {
      mlir::Value before = mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::ule, c.base.back(), query);
      auto ifRead = mlir::scf::IfOp::create(b, loc, types, before, /*withElseRegion=*/true);
      {
        mlir::OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(ifRead.thenBlock());
        elemental.pushScope();
        llvm::SmallVector<mlir::Value> x;
        for (const auto &index : c.at)
          x.push_back(elemental.node(causalPrologue_, index));
        elemental.popScope();
        if (elemental.failed())
          return;
        mlir::scf::YieldOp::create(b, loc, x);
        b.setInsertionPointToStart(ifRead.elseBlock());
        mlir::scf::YieldOp::create(b, loc, llvm::SmallVector<mlir::Value>(width_, negInf));
      }
      for (auto [u, index] : llvm::enumerate(c.at))
        elemental.define(causalPrologue_, index, ifRead.getResult(u));
    }
  }

  // Where this thread is: its lane of the row's group, the row (clamped
  // inside the rows, with whether it is one) and the row's kept index.
  struct RowPlace {
    mlir::Value tid, lane, rowValid;
    llvm::SmallVector<mlir::Value> keptIndex;
  };

  RowPlace placeRow(ElementalEmitter &elemental) {
    mlir::OpBuilder &b = elemental.builder();
    mlir::Location loc = elemental.loc();
    RowPlace place;
    place.tid = threadIdX(b, loc);
    mlir::Value tid = place.tid;
    place.lane = lanes_ == 1 ? elemental.index(0) : mlir::arith::RemUIOp::create(b, loc, tid, elemental.index(lanes_));
    mlir::Value rowInBlock =
        rowsPerBlock_ == 1 ? elemental.index(0) : mlir::arith::DivUIOp::create(b, loc, tid, elemental.index(lanes_));
    mlir::Value row = inBlock_ ? (firstRow_ ? elemental.add(firstRow_, rowInBlock) : elemental.index(0))
                               : elemental.add(elemental.mul(blockIdX(b, loc), rowsPerBlock_), rowInBlock);
    mlir::Value rowClamped = row;
    if (rows_ % rowsPerBlock_ != 0) {
      place.rowValid =
          mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::ult, row, elemental.index(rows_));
      rowClamped = elemental.minIndex(row, rows_ - 1);
    }
    place.keptIndex = elemental.delinearize(rowClamped, keptShape_);
    return place;
  }

  mlir::LogicalResult emitBody(ElementalEmitter &elemental, mlir::gpu::GPUFuncOp kernel) {
    RowPlace place = placeRow(elemental);
    bool mayOverrun = chunks_ % lanes_ != 0;

    // This lane's chunks, in register mode.
    llvm::SmallVector<Chunk> mine;
    if (inRegisters_)
      for (int64_t j = 0; j < perLane_; ++j) {
        mlir::Value chunkIndex = elemental.add(elemental.index(j * lanes_), place.lane);
        bool last = j == perLane_ - 1;
        mine.push_back(chunk(elemental, chunkIndex, place.keptIndex, mayOverrun && last));
      }

    if (causalPrologue_ >= 0) {
      readUpToTheQuery(elemental, mine, place.keptIndex.back());
      if (elemental.failed())
        return mlir::success();
    }
    if (prefetchEpilogue_)
      for (const Chunk &c : mine)
        for (const FusionGraph::Output &output : graph_.outputs())
          if (graph_.node(output.node).output.shape == llvm::ArrayRef<int64_t>(inputShape_))
            for (const auto &index : c.at)
              elemental.prefetchArgumentReads(output.node, index);

    for (auto [position, node] : llvm::enumerate(reductions_))
      if (!reduce(elemental, kernel, place, mine, position, node))
        return mlir::success();
    if (!storeRowValues(elemental, place))
      return mlir::success();
    storeRows(elemental, place, mine);
    return mlir::success();
  }

  // Reduction `node` (the `position`th) over this thread's row: the lane's
  // chunks, then the row's lanes, then (where a row has several warps) the
  // warps through shared memory; the value is defined for what follows.
  // False where the elemental emitter failed.
  bool reduce(ElementalEmitter &elemental, mlir::gpu::GPUFuncOp kernel, const RowPlace &place,
              llvm::ArrayRef<Chunk> mine, int64_t position, int node) {
    mlir::OpBuilder &b = elemental.builder();
    mlir::Location loc = elemental.loc();
    int64_t warp = options_.device->warpSize;
    int64_t warpsPerRow = lanes_ / warp;
    bool mayOverrun = chunks_ % lanes_ != 0;
    mlir::Value partial = elemental.neutral(node);
    if (inRegisters_) {
      for (const Chunk &c : mine)
        partial = contribute(elemental, node, c, partial);
    } else {
      auto loop = mlir::scf::ForOp::create(b, loc, elemental.index(0), elemental.index(perLane_), elemental.index(1),
                                           mlir::ValueRange{partial});
      {
        mlir::OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(loop.getBody());
        elemental.pushScope();
        mlir::Value chunkIndex = elemental.add(elemental.mul(loop.getInductionVar(), lanes_), place.lane);
        Chunk c = chunk(elemental, chunkIndex, place.keptIndex, mayOverrun);
        mlir::Value next = contribute(elemental, node, c, loop.getRegionIterArgs()[0]);
        elemental.popScope();
        mlir::scf::YieldOp::create(b, loc, next);
      }
      partial = loop.getResult(0);
    }
    if (elemental.failed())
      return false;
    mlir::Value total = butterflyReduce(elemental, node, partial, std::min<int64_t>(lanes_, warp));
    if (warpsPerRow > 1) {
      // Each warp's total through shared memory; every lane then combines
      // them all (reading the same slot, a broadcast without conflicts).
      mlir::Value tid = place.tid;
      mlir::Value slots = inBlock_ ? slots_ : mlir::Value(kernel.getWorkgroupAttributions()[0]);
      mlir::Value warpOfRow = mlir::arith::DivUIOp::create(b, loc, tid, elemental.index(warp));
      mlir::Value laneOfWarp = mlir::arith::RemUIOp::create(b, loc, tid, elemental.index(warp));
      mlir::Value first =
          mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::eq, laneOfWarp, elemental.index(0));
      auto ifFirst = mlir::scf::IfOp::create(b, loc, first, false);
      {
        mlir::OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(ifFirst.thenBlock()->getTerminator());
        mlir::Value slot = elemental.add(elemental.index(position * warpsPerRow), warpOfRow);
        mlir::memref::StoreOp::create(b, loc, intoSlot(b, loc, total, slots), slots, mlir::ValueRange{slot});
      }
      mlir::gpu::BarrierOp::create(b, loc);
      mlir::Type totalType = total.getType();
      total = elemental.neutral(node);
      for (int64_t w = 0; w < warpsPerRow; ++w) {
        mlir::Value value =
            mlir::memref::LoadOp::create(b, loc, slots, mlir::ValueRange{elemental.index(position * warpsPerRow + w)});
        total = elemental.combine(node, total, outOfSlot(b, loc, value, totalType));
      }
    }
    // The reduction's value for this row: its init combined with the rest.
    mlir::linalg::LinalgOp op = graph_.node(node).op;
    llvm::SmallVector<mlir::Value> anyElement = place.keptIndex;
    for (size_t i = 0; i < reducedShape_.size(); ++i)
      anyElement.push_back(elemental.index(0));
    llvm::SmallVector<mlir::Value> outputIndex = elemental.applyMap(op.getMatchingIndexingMap(op.getDpsInitOperand(0)),
                                                                    loopIndexAt(elemental, node, anyElement));
    mlir::Value result = elemental.combine(node, elemental.reductionInit(node, outputIndex), total);
    elemental.define(node, outputIndex, result);
    return true;
  }

  // One value per row: lane 0 stores it. False where the elemental emitter
  // failed.
  bool storeRowValues(ElementalEmitter &elemental, const RowPlace &place) {
    mlir::OpBuilder &b = elemental.builder();
    mlir::Location loc = elemental.loc();
    for (const FusionGraph::Output &output : graph_.outputs()) {
      const FusionNode &node = graph_.node(output.node);
      if (node.output.shape != llvm::ArrayRef<int64_t>(keptShape_))
        continue;
      mlir::Value value = elemental.node(output.node, place.keptIndex);
      if (!value)
        return false;
      mlir::Value isFirst =
          mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::eq, place.lane, elemental.index(0));
      mlir::Value condition =
          place.rowValid ? mlir::arith::AndIOp::create(b, loc, isFirst, place.rowValid).getResult() : isFirst;
      auto guard = mlir::scf::IfOp::create(b, loc, condition, false);
      mlir::OpBuilder::InsertionGuard insertion(b);
      b.setInsertionPoint(guard.thenBlock()->getTerminator());
      elemental.store(node.op.getDpsInits()[0], place.keptIndex, value);
    }
    return true;
  }

  // Whole rows: from the registers, or streamed once more.
  void storeRows(ElementalEmitter &elemental, const RowPlace &place, llvm::ArrayRef<Chunk> mine) {
    mlir::OpBuilder &b = elemental.builder();
    mlir::Location loc = elemental.loc();
    if (inRegisters_) {
      for (const Chunk &c : mine)
        storeChunk(elemental, c, place.rowValid);
      return;
    }
    bool mayOverrun = chunks_ % lanes_ != 0;
    auto loop = mlir::scf::ForOp::create(b, loc, elemental.index(0), elemental.index(perLane_), elemental.index(1));
    mlir::OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(loop.getBody()->getTerminator());
    elemental.pushScope();
    mlir::Value chunkIndex = elemental.add(elemental.mul(loop.getInductionVar(), lanes_), place.lane);
    storeChunk(elemental, chunk(elemental, chunkIndex, place.keptIndex, mayOverrun), place.rowValid);
    elemental.popScope();
  }

  llvm::SmallVector<int> reductions_;
  mlir::OpOperand *reduced_ = nullptr;
  llvm::SmallVector<int64_t> inputShape_, keptShape_, reducedShape_;
  int64_t rows_ = 0, columns_ = 0;
  int64_t width_ = 1, chunks_ = 0, lanes_ = 1, perLane_ = 1, threads_ = 0, rowsPerBlock_ = 1;
  bool inRegisters_ = true;
  int causalPrologue_ = -1; // the causal softmax's x node: keys after the query not read
  bool prefetchEpilogue_ = false;
  // emitInBlock: the row is the block's, its slots and its output's sink
  // are the host kernel's.
  bool inBlock_ = false;
  mlir::Value slots_;
  // emitRowsInBlock: the first row of the pass (warp w takes this + w).
  mlir::Value firstRow_;
  const RowSink *sink_ = nullptr;
};

} // namespace

std::unique_ptr<FusionEmitter> makeRowReductionEmitter(const FusionGraph &graph, const EmitterOptions &options) {
  return std::make_unique<RowReductionEmitter>(graph, options);
}

int64_t rowInBlockSlots(const FusionGraph &graph, const EmitterOptions &options, int64_t threads) {
  return RowReductionEmitter(graph, options).slotsInBlock(threads);
}

mlir::LogicalResult emitRowInBlock(const FusionGraph &graph, const EmitterOptions &options, ElementalEmitter &elemental,
                                   mlir::Value slots, int64_t threads, const RowSink &sink, std::string &why) {
  return RowReductionEmitter(graph, options).emitInBlock(elemental, slots, threads, sink, why);
}

} // namespace mlpipe::emitters
