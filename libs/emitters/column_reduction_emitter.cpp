// The column reduction emitter: a fusion whose hero reduces outer
// dimensions and keeps the innermost ones (the sum over the rows of an N x C
// tensor), with elementwise producers and an elementwise epilogue on the
// reduced values.
//
// The reduced operand is seen as [A, R, C] (kept outer dimensions, reduced
// ones, kept inner ones). A block of 32 x 8 threads owns 32 neighbouring
// columns and a chunk of the rows: thread (tx, ty) combines rows ty, ty + 8,
// ... of column tx, so every warp reads 32 neighbouring elements of one row
// (coalesced); the eight partials of a column meet in a shared-memory tile
// (32 + 1 columns wide: no bank conflicts) and one thread combines them.
// With 16-bit inputs each thread owns four neighbouring columns (read as
// one 64-bit vector; kSixteenBitBytesPerThreadRead), so a block covers 128.
// When the columns alone give too few blocks to fill the GPU, the rows are
// split into chunks: each block writes its partials to a workspace, and a
// second kernel combines each column's partials and applies the epilogue.
#include "codegen/debug.h"
#include "emitters/fusion_emitter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include "llvm/Support/MathExtras.h"

namespace mlpipe::emitters {

namespace {

// Columns per block: one warp reads one row segment of this many columns.
constexpr int64_t kColumns = 32;
// Rows a block reads at once (threads in y).
constexpr int64_t kRowsAtOnce = 8;
// Blocks per SM the row split aims for, so that every SM has enough warps
// in flight to keep memory busy.
constexpr int64_t kBlocksPerSm = 8;
// ...and for 16-bit inputs (their rows half the bytes): measured on the
// H200 (bf16 column sum of 16384 x 768, one run, 2026-12-05), 16 blocks
// an SM 8.22-8.23 us against 8.47-8.48 at 8 (4: 9.02-9.08 with 16-byte
// reads; 16-byte reads alone 8.80-8.84).
constexpr int64_t kSixteenBitBlocksPerSm = 16;
// A chunk of rows is at least this many rows per thread: fewer and the
// partials' second pass costs more than it saves.
constexpr int64_t kMinRowsPerThread = 8;
// The second kernel is itself a column reduction, of the [chunks, columns]
// partials: a block of kColumns x R threads owns kColumns columns, thread
// (tx, ty) adding chunks ty, ty + R, ... of column tx, the block's rows
// then meeting in shared memory, in a fixed order. With one thread a
// column (3 blocks for 768 columns) each thread added 88 partials one
// after another: 4.4 us under the profiler, against 9.6 for the kernel
// reading the bf16 16384 x 768 input. R is the power of two, from
// kMinCombineRows to kMaxCombineRows (a block of 1024 threads), that gives
// a thread about kCombinePartialsPerThread partials: the bf16 sum's 256
// chunks took 10.59-10.60 us with R = 32 against 10.73-10.81 with 8; the
// f32 sum's 44 chunks 19.30-19.34 with 8 against 19.51-19.55 with 32
// (H100, 2026-12-05).
constexpr int64_t kCombinePartialsPerThread = 8, kMinCombineRows = 8, kMaxCombineRows = 32;
// A combining thread with at most this many partials loads them all before
// its first add, so that it waits on L2 once rather than once a loop
// iteration (the loop, unrolled by four, waited eight times for the 32
// partials a thread of the bf16 16384 x 768 sum adds).
constexpr int64_t kCombineLoadsAtOnce = 32;
// Bytes of the input a thread reads at once: a warp's 32 reads cover a
// 128-byte row segment, as 32 f32 columns do. Narrower elements (bf16,
// f16) give each thread that many neighbouring columns, read as one
// vector, so that a row costs as few load instructions as in f32.
constexpr int64_t kBytesPerThreadRead = 4;
// ...and 16-bit elements this many (four columns, a 256-byte row segment
// a warp): each load then brings twice the bytes for the conversions and
// adds it feeds. Measured on the H200 (bf16 column sum of 16384 x 768,
// alternated in one run): 8.48-8.50 us against 8.94-8.96 with 4 bytes.
constexpr int64_t kSixteenBitBytesPerThreadRead = 8;

class ColumnReductionEmitter final : public FusionEmitter {
public:
  using FusionEmitter::FusionEmitter;
  const char *name() const override { return "column_reduction"; }

  mlir::LogicalResult emit(mlir::func::CallOp call, KernelFactory &kernels, std::string &why) override {
    if (mlir::failed(analyze(why)))
      return mlir::failure();
    const DeviceDescription &device = *options_.device;
    chooseColumnsPerThread();
    int64_t columnTiles = llvm::divideCeilSigned(columns_, kColumns * columnsPerThread_);
    int64_t base = outer_ * columnTiles;
    int64_t blocksPerSm = options_.columnBlocksPerSm > 0 ? options_.columnBlocksPerSm
                          : sixteenBitInput()            ? kSixteenBitBlocksPerSm
                                                         : kBlocksPerSm;
    int64_t wanted = llvm::divideCeilSigned(device.smCount * blocksPerSm, base);
    int64_t mostChunks = std::max<int64_t>(1, rows_ / (kRowsAtOnce * kMinRowsPerThread));
    chunks_ = std::clamp<int64_t>(wanted, 1, mostChunks);
    rowsPerChunk_ = llvm::divideCeilSigned(rows_, chunks_);
    chunks_ = llvm::divideCeilSigned(rows_, rowsPerChunk_);
    combineRows_ =
        options_.columnCombineRows > 0
            ? options_.columnCombineRows
            : std::clamp<int64_t>(llvm::PowerOf2Ceil(llvm::divideCeilSigned(chunks_, kCombinePartialsPerThread)),
                                  kMinCombineRows, kMaxCombineRows);
    int64_t blocks = base * chunks_;
    columnTiles_ = columnTiles;

    mlir::Type elementType = elementType_;
    auto space = mlir::gpu::AddressSpaceAttr::get(graph_.function().getContext(), mlir::gpu::AddressSpace::Workgroup);
    auto workspaceType = mlir::MemRefType::get({outer_, chunks_, columns_}, elementType);
    KernelSignature signature;
    signature.name = kernelName(graph_) + (chunks_ > 1 ? "_partials" : "");
    signature.bytesMoved = fusionBytes(graph_);
    signature.blockSize = {static_cast<int32_t>(kColumns), static_cast<int32_t>(kRowsAtOnce), 1};
    signature.workgroupBuffers.push_back(mlir::MemRefType::get({kRowsAtOnce, columnsPerThread_ * (kColumns + 1)},
                                                               elementType, mlir::MemRefLayoutAttrInterface{}, space));
    if (chunks_ > 1)
      signature.arguments.push_back(workspaceType);
    auto first = buildFusionKernel(
        kernels, graph_, signature,
        [&](ElementalEmitter &elemental, mlir::gpu::GPUFuncOp kernel) { return emitPartials(elemental, kernel); }, why);
    if (mlir::failed(first))
      return mlir::failure();
    mlir::FailureOr<mlir::gpu::GPUFuncOp> second = mlir::failure();
    int64_t combineBlocks = outer_ * llvm::divideCeilSigned(columns_, kColumns);
    if (chunks_ > 1) {
      KernelSignature combine;
      combine.name = kernelName(graph_);
      combine.bytesMoved = bytesOf(workspaceType) + outputBytes();
      combine.blockSize = {static_cast<int32_t>(kColumns), static_cast<int32_t>(combineRows_), 1};
      combine.arguments.push_back(workspaceType);
      combine.workgroupBuffers.push_back(
          mlir::MemRefType::get({combineRows_, kColumns + 1}, elementType, mlir::MemRefLayoutAttrInterface{}, space));
      second = buildFusionKernel(
          kernels, graph_, combine,
          [&](ElementalEmitter &elemental, mlir::gpu::GPUFuncOp kernel) { return emitCombine(elemental, kernel); },
          why);
      if (mlir::failed(second))
        return mlir::failure();
    }
    MLPIPE_DEBUG(kDebugEmitters,
                 os << kernelName(graph_) << ": column reduction emitter, " << outer_ << " x " << rows_ << " rows x "
                    << columns_ << " columns, tiles of " << kColumns * columnsPerThread_ << " columns ("
                    << columnsPerThread_ << " a thread, kBytesPerThreadRead or kSixteenBitBytesPerThreadRead), rows in "
                    << chunks_ << " chunks of " << rowsPerChunk_ << ", " << blocks << " blocks x " << kColumns << "x"
                    << kRowsAtOnce << " threads"
                    << (chunks_ > 1 ? ", then a kernel combining the partials (" + std::to_string(combineRows_) +
                                          " threads a column, kCombinePartialsPerThread)"
                                    : std::string())
                    << " (" << device.smCount << " SMs)\n");
    mlir::OpBuilder host(call);
    llvm::SmallVector<mlir::Value> operands(call.getOperands());
    mlir::Value workspace;
    if (chunks_ > 1) {
      workspace = mlir::memref::AllocOp::create(host, call.getLoc(), workspaceType);
      operands.push_back(workspace);
    }
    LaunchDims dims;
    dims.grid = {blocks, 1, 1};
    dims.block = {kColumns, kRowsAtOnce, 1};
    kernels.launch(host, call.getLoc(), *first, dims, operands);
    if (chunks_ > 1) {
      LaunchDims combineDims;
      combineDims.grid = {combineBlocks, 1, 1};
      combineDims.block = {kColumns, combineRows_, 1};
      kernels.launch(host, call.getLoc(), *second, combineDims, operands);
      mlir::memref::DeallocOp::create(host, call.getLoc(), workspace);
    }
    call.erase();
    return mlir::success();
  }

private:
  int64_t outputBytes() const {
    int64_t bytes = 0;
    for (const FusionGraph::Output &output : graph_.outputs())
      bytes += bytesOf(graph_.function().getArgument(output.argument).getType());
    return bytes;
  }

  // Whether the narrowest float input has 16 bits (bf16, f16).
  bool sixteenBitInput() const {
    for (mlir::BlockArgument argument : graph_.function().getArguments())
      if (auto memref = mlir::dyn_cast<mlir::MemRefType>(argument.getType()))
        if (mlir::isa<mlir::FloatType>(memref.getElementType()) &&
            memref.getElementType().getIntOrFloatBitWidth() == 16)
          return true;
    return false;
  }

  // Neighbouring columns per thread: kBytesPerThreadRead of the narrowest
  // input elements (of 16 bits or more), where a row's innermost extent
  // holds whole groups of them.
  void chooseColumnsPerThread() {
    int64_t bytes = kBytesPerThreadRead;
    for (mlir::BlockArgument argument : graph_.function().getArguments()) {
      auto memref = mlir::dyn_cast<mlir::MemRefType>(argument.getType());
      if (!memref || !memref.getElementType().isIntOrFloat())
        continue;
      unsigned bits = memref.getElementType().getIntOrFloatBitWidth();
      if (bits % 8 == 0 && bits >= 16)
        bytes = std::min<int64_t>(bytes, bits / 8);
    }
    int64_t perRead = options_.columnReadBytes > 0 ? options_.columnReadBytes
                      : bytes == 2                 ? kSixteenBitBytesPerThreadRead
                                                   : kBytesPerThreadRead;
    columnsPerThread_ = std::max<int64_t>(1, perRead / bytes);
    int64_t innermost = innerShape_.empty() ? 1 : innerShape_.back();
    while (columnsPerThread_ > 1 && innermost % columnsPerThread_ != 0)
      columnsPerThread_ /= 2;
  }

  mlir::LogicalResult analyze(std::string &why) {
    for (const FusionNode &node : graph_.nodes()) {
      if (node.op.getNumReductionLoops() == 0)
        continue;
      if (heroRole(node.op) != HeroRole::ColumnReduction)
        return why = "a reduction that is not over columns", mlir::failure();
      if (hero_ >= 0)
        return why = "it holds two column reductions", mlir::failure();
      hero_ = node.order;
    }
    if (hero_ < 0)
      return why = "it holds no reduction", mlir::failure();
    mlir::linalg::LinalgOp op = graph_.node(hero_).op;
    mlir::Block *block = op.getBlock();
    mlir::BlockArgument accumulator = block->getArguments().back();
    if (!accumulator.hasOneUse() || !mlir::arith::getNeutralElement(*accumulator.getUsers().begin()))
      return why = "a reduction whose combining op has no neutral element", mlir::failure();
    mlir::OpOperand *reduced = reducedOperand(op);
    mlir::AffineMap inputMap = op.getMatchingIndexingMap(reduced);
    if (!inputMap.isPermutation())
      return why = "a reduction with non-permutation indexing", mlir::failure();
    inputShape_ = llvm::to_vector(mlir::cast<mlir::ShapedType>(reduced->get().getType()).getShape());
    // Partials are of the accumulator's type (f32 for a 16-bit input).
    elementType_ = accumulator.getType();
    // Which input dimensions are reduced: one block in the middle.
    llvm::SmallVector<mlir::utils::IteratorType> iterators = op.getIteratorTypesArray();
    for (auto [position, expr] : llvm::enumerate(inputMap.getResults())) {
      bool isReduced =
          iterators[mlir::cast<mlir::AffineDimExpr>(expr).getPosition()] == mlir::utils::IteratorType::reduction;
      if (isReduced)
        reducedShape_.push_back(inputShape_[position]);
      else if (reducedShape_.empty())
        outerShape_.push_back(inputShape_[position]);
      else
        innerShape_.push_back(inputShape_[position]);
    }
    outer_ = elementCount(outerShape_);
    rows_ = elementCount(reducedShape_);
    columns_ = elementCount(innerShape_);
    keptShape_ = outerShape_;
    keptShape_.append(innerShape_.begin(), innerShape_.end());
    for (const FusionGraph::Output &output : graph_.outputs())
      if (graph_.node(output.node).output.shape != llvm::ArrayRef<int64_t>(keptShape_))
        return why = "an output that is not one value per column", mlir::failure();
    return mlir::success();
  }

  llvm::SmallVector<mlir::Value> inputIndex(ElementalEmitter &elemental, mlir::Value outer, mlir::Value row,
                                            mlir::Value column) {
    llvm::SmallVector<mlir::Value> index = elemental.delinearize(outer, outerShape_);
    llvm::SmallVector<mlir::Value> rows = elemental.delinearize(row, reducedShape_);
    llvm::SmallVector<mlir::Value> columns = elemental.delinearize(column, innerShape_);
    index.append(rows.begin(), rows.end());
    index.append(columns.begin(), columns.end());
    return index;
  }

  llvm::SmallVector<mlir::Value> loopIndexAt(ElementalEmitter &elemental, llvm::ArrayRef<mlir::Value> input) {
    mlir::linalg::LinalgOp op = graph_.node(hero_).op;
    return elemental.applyMap(mlir::inversePermutation(op.getMatchingIndexingMap(reducedOperand(op))), input);
  }

  llvm::SmallVector<mlir::Value> outputIndex(ElementalEmitter &elemental, mlir::Value outer, mlir::Value column) {
    mlir::linalg::LinalgOp op = graph_.node(hero_).op;
    return elemental.applyMap(op.getMatchingIndexingMap(op.getDpsInitOperand(0)),
                              loopIndexAt(elemental, inputIndex(elemental, outer, elemental.index(0), column)));
  }

  // The reduction's result for one column is known: store every output there.
  void finish(ElementalEmitter &elemental, mlir::Value outer, mlir::Value column, mlir::Value total,
              mlir::Value columnValid) {
    mlir::OpBuilder &b = elemental.builder();
    llvm::SmallVector<mlir::Value> index = outputIndex(elemental, outer, column);
    mlir::Value result = elemental.combine(hero_, elemental.reductionInit(hero_, index), total);
    elemental.define(hero_, index, result);
    llvm::SmallVector<std::pair<mlir::Value, mlir::Value>> stores;
    for (const FusionGraph::Output &output : graph_.outputs()) {
      llvm::SmallVector<mlir::Value> keptIndex = elemental.delinearize(outer, outerShape_);
      llvm::SmallVector<mlir::Value> inner = elemental.delinearize(column, innerShape_);
      keptIndex.append(inner.begin(), inner.end());
      stores.push_back({graph_.node(output.node).op.getDpsInits()[0], elemental.node(output.node, keptIndex)});
      if (elemental.failed())
        return;
      mlir::OpBuilder::InsertionGuard guard(b);
      if (columnValid) {
        auto ifValid = mlir::scf::IfOp::create(b, elemental.loc(), columnValid, false);
        b.setInsertionPoint(ifValid.thenBlock()->getTerminator());
      }
      elemental.pushScope();
      elemental.store(stores.back().first, keptIndex, stores.back().second);
      elemental.popScope();
    }
  }

  mlir::LogicalResult emitPartials(ElementalEmitter &elemental, mlir::gpu::GPUFuncOp kernel) {
    mlir::OpBuilder &b = elemental.builder();
    mlir::Location loc = elemental.loc();
    mlir::Value tile = kernel.getWorkgroupAttributions()[0];
    mlir::Value tx = threadIdX(b, loc);
    mlir::Value ty = mlir::gpu::ThreadIdOp::create(b, loc, mlir::gpu::Dimension::y);
    // Block -> (outer index, row chunk, column tile).
    mlir::Value block = blockIdX(b, loc);
    mlir::Value columnTile = mlir::arith::RemUIOp::create(b, loc, block, elemental.index(columnTiles_));
    mlir::Value rest = mlir::arith::DivUIOp::create(b, loc, block, elemental.index(columnTiles_));
    mlir::Value chunk = mlir::arith::RemUIOp::create(b, loc, rest, elemental.index(chunks_));
    mlir::Value outer = mlir::arith::DivUIOp::create(b, loc, rest, elemental.index(chunks_));
    // The thread's first column: it owns columnsPerThread_ neighbours.
    const int64_t perThread = columnsPerThread_;
    mlir::Value column = elemental.add(elemental.mul(columnTile, kColumns * perThread), elemental.mul(tx, perThread));
    mlir::Value columnValid;
    mlir::Value columnClamped = column;
    if (columns_ % (kColumns * perThread)) {
      columnValid =
          mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::ult, column, elemental.index(columns_));
      columnClamped = elemental.minIndex(column, columns_ - perThread);
    }
    // Rows ty, ty + 8, ... of this chunk.
    mlir::Value firstRow = elemental.add(elemental.mul(chunk, rowsPerChunk_), ty);
    int64_t steps = llvm::divideCeilSigned(rowsPerChunk_, kRowsAtOnce);
    llvm::SmallVector<mlir::Value> neutrals(perThread, elemental.neutral(hero_));
    auto loop =
        mlir::scf::ForOp::create(b, loc, elemental.index(0), elemental.index(steps), elemental.index(1), neutrals);
    {
      mlir::OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(loop.getBody());
      elemental.pushScope();
      mlir::Value row = elemental.add(firstRow, elemental.mul(loop.getInductionVar(), kRowsAtOnce));
      // The chunk's end, and the last row: rows past either add nothing.
      mlir::Value chunkEnd = elemental.add(elemental.mul(chunk, rowsPerChunk_), elemental.index(rowsPerChunk_));
      mlir::Value inChunk = mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::ult, row, chunkEnd);
      mlir::Value inRows =
          mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::ult, row, elemental.index(rows_));
      mlir::Value valid = mlir::arith::AndIOp::create(b, loc, inChunk, inRows);
      if (columnValid)
        valid = mlir::arith::AndIOp::create(b, loc, valid, columnValid);
      mlir::Value rowClamped = elemental.minIndex(row, rows_ - 1);
      // The thread's columns as one group of innermost indices: their
      // elements load as one vector.
      llvm::SmallVector<mlir::Value> index = inputIndex(elemental, outer, rowClamped, columnClamped);
      llvm::SmallVector<mlir::Value> lanes{index.back()};
      if (perThread > 1)
        lanes = elemental.laneGroup(index.back(), static_cast<int>(perThread));
      llvm::SmallVector<mlir::Value> next;
      for (int64_t u = 0; u < perThread; ++u) {
        llvm::SmallVector<mlir::Value> laneIndex = index;
        laneIndex.back() = lanes[u];
        mlir::Value x = elemental.reductionInput(hero_, loopIndexAt(elemental, laneIndex));
        if (!x) {
          elemental.popScope();
          mlir::scf::YieldOp::create(b, loc, loop.getRegionIterArgs());
          return mlir::success();
        }
        x = mlir::arith::SelectOp::create(b, loc, valid, x, elemental.neutral(hero_));
        next.push_back(elemental.combine(hero_, loop.getRegionIterArgs()[u], x));
      }
      elemental.popScope();
      mlir::scf::YieldOp::create(b, loc, next);
    }
    // The eight partials of each column meet in shared memory: column u of
    // each thread in its own row segment of kColumns + 1 (no bank conflicts).
    auto tileColumn = [&](int64_t u) { return elemental.add(tx, elemental.index(u * (kColumns + 1))); };
    for (int64_t u = 0; u < perThread; ++u)
      mlir::memref::StoreOp::create(b, loc, loop.getResult(u), tile, mlir::ValueRange{ty, tileColumn(u)});
    mlir::gpu::BarrierOp::create(b, loc);
    mlir::Value isFirst = mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::eq, ty, elemental.index(0));
    auto ifFirst = mlir::scf::IfOp::create(b, loc, isFirst, false);
    mlir::OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(ifFirst.thenBlock()->getTerminator());
    for (int64_t u = 0; u < perThread; ++u) {
      elemental.pushScope();
      mlir::Value total = elemental.neutral(hero_);
      for (int64_t r = 0; r < kRowsAtOnce; ++r)
        total = elemental.combine(
            hero_, total,
            mlir::memref::LoadOp::create(b, loc, tile, mlir::ValueRange{elemental.index(r), tileColumn(u)}));
      mlir::Value thisColumn = u == 0 ? columnClamped : elemental.add(columnClamped, elemental.index(u));
      if (chunks_ == 1) {
        finish(elemental, outer, thisColumn, total, columnValid);
      } else {
        mlir::Value workspace = kernel.getArgument(graph_.function().getNumArguments());
        mlir::OpBuilder::InsertionGuard inner(b);
        if (columnValid) {
          auto ifValid = mlir::scf::IfOp::create(b, loc, columnValid, false);
          b.setInsertionPoint(ifValid.thenBlock()->getTerminator());
        }
        mlir::memref::StoreOp::create(b, loc, total, workspace, mlir::ValueRange{outer, chunk, thisColumn});
      }
      elemental.popScope();
    }
    return mlir::success();
  }

  // A block per (outer, tile of kColumns columns): thread (tx, ty) adds
  // chunks ty, ty + R, ... of its column (R = combineRows_); the R sums
  // meet in shared memory, and row 0 adds them in order and applies the
  // epilogue.
  mlir::LogicalResult emitCombine(ElementalEmitter &elemental, mlir::gpu::GPUFuncOp kernel) {
    mlir::OpBuilder &b = elemental.builder();
    mlir::Location loc = elemental.loc();
    mlir::Value workspace = kernel.getArgument(graph_.function().getNumArguments());
    mlir::Value tile = kernel.getWorkgroupAttributions()[0];
    mlir::Value tx = threadIdX(b, loc);
    mlir::Value ty = mlir::gpu::ThreadIdOp::create(b, loc, mlir::gpu::Dimension::y);
    int64_t tiles = llvm::divideCeilSigned(columns_, kColumns);
    mlir::Value block = blockIdX(b, loc);
    mlir::Value outer = mlir::arith::DivUIOp::create(b, loc, block, elemental.index(tiles));
    mlir::Value column =
        elemental.add(elemental.mul(mlir::arith::RemUIOp::create(b, loc, block, elemental.index(tiles)), kColumns), tx);
    mlir::Value valid;
    mlir::Value clamped = column;
    if (columns_ % kColumns) {
      valid = mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::ult, column, elemental.index(columns_));
      clamped = elemental.minIndex(column, columns_ - 1);
    }
    int64_t steps = llvm::divideCeilSigned(chunks_, combineRows_);
    // Partial `step` of this thread's column (the neutral value past the
    // last chunk).
    auto loadPartial = [&](mlir::Value step) {
      mlir::Value chunk = elemental.add(elemental.mul(step, combineRows_), ty);
      mlir::Value partial = mlir::memref::LoadOp::create(
          b, loc, workspace, mlir::ValueRange{outer, elemental.minIndex(chunk, chunks_ - 1), clamped});
      if (chunks_ % combineRows_) {
        mlir::Value inside =
            mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::ult, chunk, elemental.index(chunks_));
        partial = mlir::arith::SelectOp::create(b, loc, inside, partial, elemental.neutral(hero_));
      }
      return partial;
    };
    mlir::Value sum;
    const int64_t atOnce =
        options_.columnCombineLoadsAtOnce >= 0 ? options_.columnCombineLoadsAtOnce : kCombineLoadsAtOnce;
    if (steps <= atOnce) {
      // Every load first, then the adds in the loop's order (the same bits):
      // one trip to L2 instead of one for each few partials.
      llvm::SmallVector<mlir::Value> partials;
      for (int64_t step = 0; step < steps; ++step)
        partials.push_back(loadPartial(elemental.index(step)));
      sum = elemental.neutral(hero_);
      for (mlir::Value partial : partials)
        sum = elemental.combine(hero_, sum, partial);
    } else {
      auto loop = mlir::scf::ForOp::create(b, loc, elemental.index(0), elemental.index(steps), elemental.index(1),
                                           mlir::ValueRange{elemental.neutral(hero_)});
      mlir::OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(loop.getBody());
      mlir::scf::YieldOp::create(
          b, loc, elemental.combine(hero_, loop.getRegionIterArgs()[0], loadPartial(loop.getInductionVar())));
      sum = loop.getResult(0);
    }
    mlir::memref::StoreOp::create(b, loc, sum, tile, mlir::ValueRange{ty, tx});
    mlir::gpu::BarrierOp::create(b, loc);
    mlir::Value isFirst = mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::eq, ty, elemental.index(0));
    auto ifFirst = mlir::scf::IfOp::create(b, loc, isFirst, false);
    mlir::OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(ifFirst.thenBlock()->getTerminator());
    elemental.pushScope();
    mlir::Value total = elemental.neutral(hero_);
    for (int64_t r = 0; r < combineRows_; ++r)
      total = elemental.combine(hero_, total,
                                mlir::memref::LoadOp::create(b, loc, tile, mlir::ValueRange{elemental.index(r), tx}));
    finish(elemental, outer, clamped, total, valid);
    elemental.popScope();
    return mlir::success();
  }

  int hero_ = -1;
  mlir::Type elementType_;
  llvm::SmallVector<int64_t> inputShape_, outerShape_, reducedShape_, innerShape_, keptShape_;
  int64_t outer_ = 1, rows_ = 1, columns_ = 1, chunks_ = 1, rowsPerChunk_ = 1, columnTiles_ = 1;
  int64_t columnsPerThread_ = 1;
  int64_t combineRows_ = kMinCombineRows;
};

} // namespace

std::unique_ptr<FusionEmitter> makeColumnReductionEmitter(const FusionGraph &graph, const EmitterOptions &options) {
  return std::make_unique<ColumnReductionEmitter>(graph, options);
}

} // namespace mlpipe::emitters
