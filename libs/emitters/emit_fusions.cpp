// mlpipe-emit-fusions: every call of a fusion function in host code becomes
// the kernel launches its emitter builds.
// Passes.td holds its description, with IR before and after.
//
// The classifier picks the emitter from the fusion's kind (the partitioner's
// mlpipe.fusion attribute, checked against the heroes the fusion holds, or
// inferred for hand-written IR). A fusion no emitter can take whole is
// emitted op by op: each of its linalg ops becomes a fusion of its own (with
// its temporaries allocated by the host), which is emitted the same way; a
// matmul left alone is inlined into the host function for the matmul
// passes that follow.
#include "codegen/debug.h"
#include "codegen/pass_support.h"
#include "emitters/fusion_emitter.h"
#include "emitters/passes.h"
#include "fusion/softmax_analysis.h"
#include "matmul/matmul_kernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#include "llvm/ADT/ScopeExit.h"

namespace mlpipe {

#define GEN_PASS_DEF_EMITFUSIONSPASS
#include "emitters/Passes.h.inc"

namespace {

using namespace emitters;

mlir::Value rootOf(mlir::Value value) { return rootBuffer(value); }

bool isFusionCall(mlir::Operation *op, mlir::SymbolTable &symbols, FusionKind kind) {
  auto call = mlir::dyn_cast<mlir::func::CallOp>(op);
  if (!call)
    return false;
  auto callee = symbols.lookup<mlir::func::FuncOp>(call.getCallee());
  auto attribute = callee ? callee->getAttrOfType<mlir::StringAttr>(kFusionAttrName) : nullptr;
  return attribute && parseFusionKind(attribute.getValue()) == kind;
}

// The row reduction call whose output `matmul` (a matmul fusion's call)
// may compute itself: the call just before it (nothing between but
// allocations, views and constants), each of whose outputs is read by
// nothing but `matmul`.
mlir::func::CallOp rowProducerOf(mlir::func::CallOp matmul, mlir::SymbolTable &symbols) {
  mlir::Operation *previous = matmul->getPrevNode();
  while (previous && (mlir::isa<mlir::memref::AllocOp, mlir::arith::ConstantOp>(previous) || isViewOp(previous)))
    previous = previous->getPrevNode();
  if (!previous || !isFusionCall(previous, symbols, FusionKind::RowReduction))
    return {};
  auto row = mlir::cast<mlir::func::CallOp>(previous);
  auto callee = symbols.lookup<mlir::func::FuncOp>(row.getCallee());
  for (mlir::BlockArgument argument : callee.getArguments()) {
    if (!callee.getArgAttr(argument.getArgNumber(), "bufferize.result"))
      continue;
    for (mlir::Operation *user : row.getOperand(argument.getArgNumber()).getUsers())
      if (user != row && user != matmul.getOperation() && !mlir::isa<mlir::memref::DeallocOp>(user))
        return {};
  }
  return row;
}

// The softmax row reductions among `calls` whose prologue adds a causal
// mask that another fusion computes into memory (fused mode computes it
// once for all layers): call -> the mask's argument. Asked before any call
// is emitted, while the mask's writer is still a call.
llvm::DenseMap<mlir::Operation *, unsigned> causalMaskArguments(llvm::ArrayRef<mlir::func::CallOp> calls,
                                                                mlir::SymbolTable &symbols) {
  llvm::DenseMap<mlir::Operation *, unsigned> found;
  for (mlir::func::CallOp call : calls) {
    if (!isFusionCall(call, symbols, FusionKind::RowReduction))
      continue;
    std::string ignored;
    bool looksLikeSoftmax = false;
    auto graph = FusionGraph::analyze(symbols.lookup<mlir::func::FuncOp>(call.getCallee()), ignored);
    if (mlir::failed(graph))
      continue;
    auto softmax = matchSoftmax(*graph, ignored, looksLikeSoftmax);
    if (mlir::failed(softmax) || softmax->causal)
      continue;
    if (matchCausalMaskWriter(*softmax, *graph, call, symbols))
      found[call] = static_cast<unsigned>(softmax->maskArgument);
  }
  return found;
}

struct EmitFusionsPass : impl::EmitFusionsPassBase<EmitFusionsPass> {
  using EmitFusionsPassBase::EmitFusionsPassBase;

  void runOnOperation() final {
    mlir::ModuleOp module = getOperation();
    EmitterOptions options;
    options.device = passDeviceDescription(module, chip);
    if (!options.device)
      return signalPassFailure();
    options.matmul = matmul == "cublas" ? MatmulBackend::Cublas : MatmulBackend::Generated;
    if (!matmulBlockTile.empty()) {
      if (matmulBlockTile.size() != 3)
        return module.emitError("mlpipe-emit-fusions: matmul-block-tile takes M,N,K"), signalPassFailure();
      options.matmulBlockTile = {matmulBlockTile[0], matmulBlockTile[1], matmulBlockTile[2]};
    }
    if (!matmulWarpTile.empty()) {
      if (matmulWarpTile.size() != 2)
        return module.emitError("mlpipe-emit-fusions: matmul-warp-tile takes M,N"), signalPassFailure();
      options.matmulWarpTile = {matmulWarpTile[0], matmulWarpTile[1]};
    }
    options.matmulStages = matmulStages;
    if (matmulSplitK < 0)
      return module.emitError("mlpipe-emit-fusions: matmul-split-k must be 0 or more, not ")
                 << static_cast<int64_t>(matmulSplitK),
             signalPassFailure();
    options.matmulSplitK = matmulSplitK;
    options.matmulForm = matmulForm;
    options.matmulPrefetchFragments = matmulPrefetchFragments;
    if (precision != "f32" && precision != "tf32")
      return module.emitError("mlpipe-emit-fusions: precision must be f32 or tf32, not '") << precision << "'",
             signalPassFailure();
    options.matmulTf32 = precision == "tf32";
    options.matmulLastSplitCompletes = matmulLastSplitCompletes;
    if (matmulStagedEpilogue < -1 || matmulStagedEpilogue > 1)
      return module.emitError("mlpipe-emit-fusions: matmul-staged-epilogue must be -1, 0 or 1, not ")
                 << int64_t(matmulStagedEpilogue),
             signalPassFailure();
    options.matmulStagedEpilogue = matmulStagedEpilogue;
    options.rowPrologueMaxRows = rowPrologueRows >= 0 ? rowPrologueRows : kRowPrologueMaxRows;
    if (columnReadBytes != 0 && columnReadBytes != 4 && columnReadBytes != 8 && columnReadBytes != 16)
      return module.emitError("mlpipe-emit-fusions: column-read-bytes must be 4, 8 or 16, not ")
                 << static_cast<int64_t>(columnReadBytes),
             signalPassFailure();
    options.columnReadBytes = columnReadBytes;
    if (columnBlocksPerSm < 0)
      return module.emitError("mlpipe-emit-fusions: column-blocks-per-sm must be 0 or more, not ")
                 << static_cast<int64_t>(columnBlocksPerSm),
             signalPassFailure();
    options.columnBlocksPerSm = columnBlocksPerSm;
    if (columnCombineRows < 0 || columnCombineRows > 32)
      return module.emitError("mlpipe-emit-fusions: column-combine-rows must be 0 to 32, not ")
                 << static_cast<int64_t>(columnCombineRows),
             signalPassFailure();
    options.columnCombineRows = columnCombineRows;
    if (columnCombineAtOnce < -1 || columnCombineAtOnce > 64)
      return module.emitError("mlpipe-emit-fusions: column-combine-at-once must be -1 to 64, not ")
                 << static_cast<int64_t>(columnCombineAtOnce),
             signalPassFailure();
    options.columnCombineLoadsAtOnce = columnCombineAtOnce;
    MLPIPE_DEBUG(kDebugEmitters, if (options.rowPrologueMaxRows != kRowPrologueMaxRows) os
                                     << "row reductions of at most " << options.rowPrologueMaxRows
                                     << " rows computed in the matmul after them (row-prologue-rows; "
                                        "kRowPrologueMaxRows is "
                                     << kRowPrologueMaxRows << ")\n");
    KernelFactory kernels(module);
    mlir::SymbolTable symbols(module);
    symbols_ = &symbols;
    wrapHostOps(module);

    llvm::SmallVector<mlir::func::CallOp> calls;
    module.walk([&](mlir::func::CallOp call) {
      if (call->getParentOfType<mlir::func::FuncOp>()->hasAttr(kFusionAttrName))
        return;
      if (auto callee = symbols_->lookup<mlir::func::FuncOp>(call.getCallee());
          callee && callee->hasAttr(kFusionAttrName))
        calls.push_back(call);
    });
    llvm::DenseMap<mlir::Operation *, unsigned> causalMasks = causalMaskArguments(calls, symbols);
    options.causalMaskArguments = &causalMasks;
    // Row reductions a GEMV after them computes itself wait for it. A
    // one-row row reduction (a decode step's layer norm) whose output only
    // the GEMV right after it reads costs a launch and a round trip through
    // memory of a few microseconds, more than the GEMV takes to recompute
    // the row in each of its blocks: where the GEMV is one launch of the
    // skinny kernel, the row reduction goes into it
    // (emitMatmulWithRowPrologue).
    llvm::DenseMap<mlir::Operation *, mlir::func::CallOp> rowOf;
    llvm::DenseSet<mlir::Operation *> waiting;
    for (mlir::func::CallOp call : calls)
      if (isFusionCall(call, symbols, FusionKind::Matmul))
        if (mlir::func::CallOp row = rowProducerOf(call, symbols)) {
          rowOf[call] = row;
          waiting.insert(row);
        }
    for (mlir::func::CallOp call : calls) {
      if (waiting.contains(call))
        continue;
      // (An emitted call is erased, and a call made later may take its
      // address: its entry goes once it is emitted.)
      llvm::scope_exit forget([&, op = call.getOperation()] { causalMasks.erase(op); });
      if (mlir::func::CallOp row = rowOf.lookup(call)) {
        llvm::scope_exit forgetRow([&, op = row.getOperation()] { causalMasks.erase(op); });
        if (succeeded(emitWithRow(call, row, kernels, options)))
          continue;
        if (mlir::failed(emitCall(row, kernels, options, /*depth=*/0)))
          return signalPassFailure();
      }
      if (mlir::failed(emitCall(call, kernels, options, /*depth=*/0)))
        return signalPassFailure();
    }
    // Fusion functions nothing calls any more.
    for (auto function : llvm::make_early_inc_range(module.getOps<mlir::func::FuncOp>()))
      if (function->hasAttr(kFusionAttrName) && mlir::SymbolTable::symbolKnownUseEmpty(function, module))
        function.erase();
    MLPIPE_DEBUG(kDebugEmitters, os << kernels.kernelsBuilt() << " distinct kernels, " << kernels.kernelsShared()
                                    << " launches sharing an identical kernel\n");
  }

  // The matmul fusion `call` with its row reduction `row` computed in its
  // blocks; fails, changing nothing, where that cannot be done.
  mlir::LogicalResult emitWithRow(mlir::func::CallOp call, mlir::func::CallOp row, KernelFactory &kernels,
                                  const EmitterOptions &options) {
    auto matmulFusion = symbols_->lookup<mlir::func::FuncOp>(call.getCallee());
    auto rowFusion = symbols_->lookup<mlir::func::FuncOp>(row.getCallee());
    std::string why;
    auto matmulGraph = FusionGraph::analyze(matmulFusion, why);
    mlir::FailureOr<FusionGraph> rowGraph = mlir::failure();
    if (mlir::succeeded(matmulGraph))
      rowGraph = FusionGraph::analyze(rowFusion, why);
    if (mlir::succeeded(rowGraph) &&
        mlir::succeeded(emitMatmulWithRowPrologue(*matmulGraph, call, *rowGraph, row, options, kernels, why)))
      return mlir::success();
    MLPIPE_DEBUG(kDebugEmitters, os << matmulFusion.getName() << ": @" << rowFusion.getName()
                                    << " stays a kernel of its own: " << why << "\n");
    return mlir::failure();
  }

  mlir::LogicalResult emitCall(mlir::func::CallOp call, KernelFactory &kernels, const EmitterOptions &options,
                               int depth) {
    auto fusion = symbols_->lookup<mlir::func::FuncOp>(call.getCallee());
    std::string why;
    auto graph = FusionGraph::analyze(fusion, why);
    if (mlir::succeeded(graph)) {
      auto attribute = fusion->getAttrOfType<mlir::StringAttr>(kFusionAttrName);
      std::optional<FusionKind> kind = attribute ? parseFusionKind(attribute.getValue()) : std::nullopt;
      if (!kind)
        kind = inferFusionKind(*graph);
      if (auto emitter = getFusionEmitter(*kind, *graph, options, why)) {
        if (mlir::succeeded(emitter->emit(call, kernels, why)))
          return mlir::success();
      }
      // A transpose the tiled emitter cannot tile (no axis its input is
      // contiguous along, as a kernel relayout that also reshapes) is still
      // correct as a loop: each thread reads its element where it lies.
      if (*kind == FusionKind::Transpose) {
        MLPIPE_DEBUG(kDebugEmitters, os << fusion.getName() << ": emitted as a loop: " << why << "\n");
        std::string loopWhy;
        if (auto emitter = getFusionEmitter(FusionKind::Loop, *graph, options, loopWhy))
          if (mlir::succeeded(emitter->emit(call, kernels, loopWhy)))
            return mlir::success();
        why += "; as a loop: " + loopWhy;
      }
    }
    MLPIPE_DEBUG(kDebugEmitters, os << fusion.getName() << ": emitted op by op: " << why << "\n");
    return emitOpByOp(call, fusion, kernels, options, depth, why);
  }

  // The fallback: every linalg op of the fusion in a fusion of its own,
  // temporaries allocated by the host around the call.
  mlir::LogicalResult emitOpByOp(mlir::func::CallOp call, mlir::func::FuncOp fusion, KernelFactory &kernels,
                                 const EmitterOptions &options, int depth, const std::string &why) {
    mlir::Block &body = fusion.getBody().front();
    llvm::SmallVector<mlir::Operation *> ops;
    for (mlir::Operation &op : body.without_terminator())
      if (mlir::isa<mlir::linalg::LinalgOp>(op))
        ops.push_back(&op);
    if (depth > 0 || (ops.size() == 1 && !mlir::isa<mlir::linalg::MatmulOp, mlir::linalg::BatchMatmulOp>(ops[0])))
      return call.emitError() << "no emitter can take fusion @" << fusion.getName() << ": " << why;

    mlir::OpBuilder host(call);
    mlir::IRMapping mapping;
    for (auto [argument, operand] : llvm::zip(fusion.getArguments(), call.getOperands()))
      mapping.map(argument, operand);
    llvm::SmallVector<mlir::Value> temporaries;
    llvm::SmallVector<mlir::func::CallOp> pieces;
    int piece = 0;
    for (mlir::Operation &op : body.without_terminator()) {
      if (auto alloc = mlir::dyn_cast<mlir::memref::AllocOp>(op)) {
        // Temporaries live on the host side, around the call.
        auto hostAlloc = mlir::memref::AllocOp::create(host, alloc.getLoc(), alloc.getType());
        mapping.map(alloc.getResult(), hostAlloc.getResult());
        temporaries.push_back(hostAlloc);
        continue;
      }
      if (mlir::isa<mlir::memref::DeallocOp>(op))
        continue;
      if (!mlir::isa<mlir::linalg::LinalgOp>(op)) {
        // Views and constants: rebuilt on the host.
        host.clone(op, mapping);
        continue;
      }
      if (mlir::isa<mlir::linalg::MatmulOp, mlir::linalg::BatchMatmulOp>(op)) {
        // For the matmul passes that follow: the generated kernel reads
        // 16-bit operands as stored where it takes them (on tensor cores);
        // otherwise, as they read f32 and f64, a 16-bit operand is widened
        // into an f32 temporary first.
        auto typeOf = [&](unsigned i) {
          return mlir::cast<mlir::MemRefType>(mapping.lookup(op.getOperand(i)).getType());
        };
        if (emitters::generatedMatmulTakesSixteenBit(typeOf(0), typeOf(1), typeOf(2), *options.device,
                                                     /*accumulate=*/true)) {
          host.clone(op, mapping);
          continue;
        }
        llvm::SmallVector<mlir::Value, 2> inputs;
        bool widened = false;
        for (unsigned i = 0; i < 2; ++i) {
          inputs.push_back(mapping.lookup(op.getOperand(i)));
          std::string name = (fusion.getName() + "_" + std::to_string(piece)).str();
          if (mlir::Value wide = widenedOnHost(host, inputs.back(), name, fusion, temporaries, pieces)) {
            inputs.back() = wide;
            widened = true;
            ++piece;
          }
        }
        if (!widened) {
          host.clone(op, mapping);
          continue;
        }
        // A new op (not a clone): its body's arguments take the f32 types.
        mlir::Value output = mapping.lookup(op.getOperand(2));
        if (mlir::isa<mlir::linalg::MatmulOp>(op))
          mlir::linalg::MatmulOp::create(host, op.getLoc(), mlir::ValueRange{inputs}, mlir::ValueRange{output});
        else
          mlir::linalg::BatchMatmulOp::create(host, op.getLoc(), mlir::ValueRange{inputs}, mlir::ValueRange{output});
        continue;
      }
      std::string name = (fusion.getName() + "_" + std::to_string(piece++)).str();
      pieces.push_back(outlineSingleOp(host, op, mapping, name, fusion));
    }
    for (mlir::Value temporary : temporaries)
      mlir::memref::DeallocOp::create(host, call.getLoc(), temporary);
    call.erase();
    for (mlir::func::CallOp pieceCall : pieces)
      if (mlir::failed(emitCall(pieceCall, kernels, options, depth + 1)))
        return mlir::failure();
    return mlir::success();
  }

  // A 16-bit float operand copied into a new f32 temporary by a one-op
  // fusion called at the host builder; null for another element type.
  mlir::Value widenedOnHost(mlir::OpBuilder &host, mlir::Value operand, const std::string &name,
                            mlir::Operation *before, llvm::SmallVectorImpl<mlir::Value> &temporaries,
                            llvm::SmallVectorImpl<mlir::func::CallOp> &pieces) {
    auto type = mlir::cast<mlir::MemRefType>(operand.getType());
    if (!type.getElementType().isBF16() && !type.getElementType().isF16())
      return {};
    mlir::Location loc = operand.getLoc();
    mlir::Type f32 = host.getF32Type();
    auto wide = mlir::memref::AllocOp::create(host, loc, mlir::MemRefType::get(type.getShape(), f32));
    temporaries.push_back(wide);
    auto identity = mlir::AffineMap::getMultiDimIdentityMap(type.getRank(), host.getContext());
    llvm::SmallVector<mlir::utils::IteratorType> iterators(type.getRank(), mlir::utils::IteratorType::parallel);
    auto widen =
        mlir::linalg::GenericOp::create(host, loc, mlir::ValueRange{operand}, mlir::ValueRange{wide.getResult()},
                                        llvm::ArrayRef<mlir::AffineMap>{identity, identity}, iterators,
                                        [&](mlir::OpBuilder &b, mlir::Location l, mlir::ValueRange args) {
                                          mlir::Value extended = mlir::arith::ExtFOp::create(b, l, f32, args[0]);
                                          mlir::linalg::YieldOp::create(b, l, extended);
                                        });
    mlir::IRMapping onHost; // the generic's operands are host values already
    pieces.push_back(outlineSingleOp(host, *widen, onHost, name, before));
    widen.erase();
    return wide.getResult();
  }

  // Puts one op in a fusion function of its own (inserted before
  // `before`), its arguments the buffers it touches (their roots); calls it
  // at the host builder with the operands `mapping` gives those buffers.
  mlir::func::CallOp outlineSingleOp(mlir::OpBuilder &host, mlir::Operation &op, mlir::IRMapping &mapping,
                                     const std::string &name, mlir::Operation *before) {
    // The buffers it touches, including those the scalars it needs (a
    // run-time position in a view's offset) are read from.
    llvm::SetVector<mlir::Value> roots;
    llvm::DenseSet<mlir::Value> seen;
    std::function<void(mlir::Value)> collect = [&](mlir::Value value) {
      if (!seen.insert(value).second)
        return;
      if (mlir::isa<mlir::MemRefType>(value.getType()) && !rootOf(value).getDefiningOp<mlir::memref::GetGlobalOp>())
        roots.insert(rootOf(value));
      mlir::Operation *definer = value.getDefiningOp();
      if (definer && (isViewOp(definer) || isScalarWork(definer)))
        for (mlir::Value operand : definer->getOperands())
          collect(operand);
    };
    op.walk([&](mlir::Operation *nested) {
      for (mlir::Value operand : nested->getOperands())
        if (!op.isAncestor(operand.getParentBlock()->getParentOp()))
          collect(operand);
    });
    mlir::OpBuilder moduleBuilder(before);
    llvm::SmallVector<mlir::Type> types;
    for (mlir::Value root : roots)
      types.push_back(root.getType());
    auto single =
        mlir::func::FuncOp::create(moduleBuilder, op.getLoc(), name, moduleBuilder.getFunctionType(types, {}));
    single.setPrivate();
    symbols_->insert(single);
    mlir::Block *singleBody = single.addEntryBlock();
    mlir::OpBuilder inner = mlir::OpBuilder::atBlockEnd(singleBody);
    mlir::IRMapping local;
    for (auto [root, argument] : llvm::zip(roots, singleBody->getArguments()))
      local.map(root, argument);
    // Views and constants the op uses, rebuilt inside.
    std::function<mlir::Value(mlir::Value)> bring = [&](mlir::Value value) -> mlir::Value {
      if (mlir::Value mapped = local.lookupOrNull(value))
        return mapped;
      mlir::Operation *definer = value.getDefiningOp();
      if (!definer || !(isViewOp(definer) || isScalarWork(definer)))
        return value;
      for (mlir::Value operand : definer->getOperands())
        bring(operand);
      inner.clone(*definer, local);
      return local.lookup(value);
    };
    op.walk([&](mlir::Operation *nested) {
      for (mlir::Value operand : nested->getOperands())
        if (!op.isAncestor(operand.getParentBlock()->getParentOp()))
          bring(operand);
    });
    mlir::Operation *copy;
    if (auto memrefCopy = mlir::dyn_cast<mlir::memref::CopyOp>(op))
      copy = mlir::linalg::CopyOp::create(inner, op.getLoc(), local.lookup(memrefCopy.getSource()),
                                          local.lookup(memrefCopy.getTarget()));
    else
      copy = inner.clone(op, local);
    // (Never a matmul: those stay in host code for the matmul passes.)
    HeroRole role = heroRole(mlir::cast<mlir::linalg::LinalgOp>(copy));
    single->setAttr(kFusionAttrName, moduleBuilder.getStringAttr(fusionKindName(fusionKindFor(role))));
    mlir::func::ReturnOp::create(inner, op.getLoc());
    llvm::SmallVector<mlir::Value> operands;
    for (mlir::Value root : roots)
      operands.push_back(mapping.lookupOrDefault(root));
    return mlir::func::CallOp::create(host, op.getLoc(), single, operands);
  }

  // Linalg ops and copies left in host code (hand-written IR, copies that
  // bufferization added) become one-op fusions too.
  void wrapHostOps(mlir::ModuleOp module) {
    llvm::SmallVector<mlir::Operation *> loose;
    for (auto function : module.getOps<mlir::func::FuncOp>()) {
      if (function.isExternal() || function->hasAttr(kFusionAttrName))
        continue;
      function.walk([&](mlir::Operation *op) {
        auto linalgOp = mlir::dyn_cast<mlir::linalg::LinalgOp>(op);
        bool matmul = mlir::isa<mlir::linalg::MatmulOp, mlir::linalg::BatchMatmulOp>(op);
        if ((linalgOp && !matmul && linalgOp.hasPureBufferSemantics()) || mlir::isa<mlir::memref::CopyOp>(op))
          loose.push_back(op);
      });
    }
    for (mlir::Operation *op : loose) {
      auto function = op->getParentOfType<mlir::func::FuncOp>();
      mlir::OpBuilder host(op);
      mlir::IRMapping identity;
      std::string name = (function.getName() + "_" + op->getName().stripDialect()).str();
      for (char &c : name)
        c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      std::string unique = name;
      for (int suffix = 1; symbols_->lookup(unique); ++suffix)
        unique = name + "_" + std::to_string(suffix);
      outlineSingleOp(host, *op, identity, unique, function);
      op->erase();
    }
  }

  // Constants, scalar arithmetic and scalar reads: what a view's run-time
  // offset is computed from.
  static bool isScalarWork(mlir::Operation *op) {
    if (mlir::isa<mlir::memref::GetGlobalOp>(op)) // a constant array
      return true;
    return op->getNumRegions() == 0 &&
           ((op->getDialect() && op->getDialect()->getNamespace() == "arith") || mlir::isa<mlir::memref::LoadOp>(op));
  }

  mlir::SymbolTable *symbols_ = nullptr; // the module's, while the pass runs
};

} // namespace

} // namespace mlpipe
