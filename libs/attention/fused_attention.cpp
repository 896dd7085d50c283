// mlpipe-fused-attention: causal attention as one kernel whose T x T scores
// never reach memory (the flash-attention scheme).
// Passes.td holds its description, with IR before and after.
//
// The pass finds attention's scores matmul, softmax and values matmul calls
// in host code (attention_matching.h) and replaces them with one launch of
// the fused kernel (attention_kernel.h), plus, where a decode step's keys
// are split over blocks, a launch of the kernel combining the splits.
#include "attention/attention_kernel.h"
#include "attention/attention_matching.h"
#include "attention/passes.h"
#include "codegen/debug.h"
#include "codegen/device_description.h"
#include "codegen/kernel_factory.h"
#include "codegen/pass_support.h"
#include "codegen/path_choice.h"
#include "fusion/fusion_graph.h"
#include "fusion/hero_analysis.h"
#include "fusion/softmax_analysis.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/ADT/SetVector.h"
#include "llvm/Support/MathExtras.h"

#include <functional>
#include <optional>

namespace mlpipe {

#define GEN_PASS_DEF_FUSEDATTENTIONPASS
#include "attention/Passes.h.inc"

namespace {

using namespace emitters;
using namespace emitters::fused_attention;
using mlir::Value;

// Query rows one block handles: the K and V tiles it stages are shared by
// all of them, so more rows read K and V from L2 fewer times.
constexpr int64_t kQueryRowsPerBlock = 64;
// Fewer rows per block (down to this) when the grid would otherwise leave
// SMs idle: kMinBlocksPerSm blocks per SM at least.
constexpr int64_t kMinQueryRowsPerBlock = 16;
constexpr int64_t kMinBlocksPerSm = 2;
// Keys per K/V tile: each lane keeps one score per key of the tile in
// registers, at most this many 32-bit registers of them (32 f32 keys, 16
// f64 keys); fewer keys when the two tiles would not fit shared memory.
constexpr int64_t kScoreRegistersPerLane = 32;
constexpr int64_t kMinKeysPerTile = 8;
// Elements of the head dimension one lane holds (of q, and of the output
// accumulator): beyond this the lane group grows, so that q, the
// accumulator and a tile's scores fit the registers without spilling.
constexpr int64_t kHeadElementsPerLane = 16;
// Few query rows against many keys (a decode step: one row per head
// against the KV cache) leave most SMs idle with a block per (head, query
// tile): the keys are then split over blocks, each writing its rows'
// partial max, sum and weighted values, and a second kernel combines the
// splits exactly. Splits until kSplitBlocksPerSm blocks per SM (a split's
// block is about one warp staging its K and V tiles: several per SM keep
// enough loads in flight to stream the cache), keeping at least
// kMinKeyTilesPerSplit tiles of keys in each.
constexpr int64_t kSplitBlocksPerSm = 4;
constexpr int64_t kMinKeyTilesPerSplit = 1;

// ---- The pass --------------------------------------------------------------

struct FusedAttentionPass : impl::FusedAttentionPassBase<FusedAttentionPass> {
  using FusedAttentionPassBase::FusedAttentionPassBase;

  void runOnOperation() final {
    mlir::ModuleOp module = getOperation();
    const DeviceDescription *device = passDeviceDescription(module, chip);
    if (!device)
      return signalPassFailure();
    mlir::SymbolTable symbols(module);
    KernelFactory kernels(module);
    llvm::SmallVector<mlir::func::CallOp> softmaxCalls;
    module.walk([&](mlir::func::CallOp call) {
      auto caller = call->getParentOfType<mlir::func::FuncOp>();
      auto callee = symbols.lookup<mlir::func::FuncOp>(call.getCallee());
      if (!caller->hasAttr(kFusionAttrName) && callee && callee->hasAttr(kFusionAttrName))
        softmaxCalls.push_back(call);
    });
    int fused = 0;
    for (mlir::func::CallOp call : softmaxCalls) {
      std::string why;
      looksLikeSoftmax_ = false;
      if (mlir::succeeded(fuse(call, symbols, kernels, *device, why)))
        ++fused;
      else if (looksLikeSoftmax_)
        MLPIPE_DEBUG(kDebugEmitters, os << call.getCallee() << ": not fused attention: " << why << "\n");
    }
    // Masks every reader of which now computes its elements itself: their
    // fusion (which writes nothing else) goes.
    for (Value mask : masks_) {
      llvm::SmallVector<mlir::Operation *> users(mask.getUsers().begin(), mask.getUsers().end());
      int writers = 0;
      bool onlyWritten = llvm::all_of(users, [&](mlir::Operation *user) {
        if (mlir::isa<mlir::memref::DeallocOp>(user))
          return true;
        auto call = mlir::dyn_cast<mlir::func::CallOp>(user);
        auto callee = call ? symbols.lookup<mlir::func::FuncOp>(call.getCallee()) : mlir::func::FuncOp();
        std::string ignored;
        auto graph = callee ? FusionGraph::analyze(callee, ignored) : mlir::FailureOr<FusionGraph>(mlir::failure());
        ++writers;
        return mlir::succeeded(graph) && graph->outputs().size() == 1 &&
               call.getOperand(graph->outputs().front().argument) == mask && call.getNumOperands() == 1;
      });
      if (!onlyWritten || writers != 1)
        continue;
      for (mlir::Operation *user : users)
        user->erase();
      mask.getDefiningOp()->erase();
    }
    masks_.clear();
    // Fusion functions nothing calls any more.
    for (auto function : llvm::make_early_inc_range(module.getOps<mlir::func::FuncOp>()))
      if (function->hasAttr(kFusionAttrName) && mlir::SymbolTable::symbolKnownUseEmpty(function, module))
        function.erase();
    if (fused > 0)
      MLPIPE_DEBUG(kDebugEmitters, os << fused << " attentions fused\n");
  }

  // The other call using a buffer, besides `call` and deallocations.
  static mlir::func::CallOp otherCall(Value buffer, mlir::func::CallOp call) {
    mlir::func::CallOp other;
    for (mlir::Operation *user : buffer.getUsers()) {
      if (user == call.getOperation() || mlir::isa<mlir::memref::DeallocOp>(user))
        continue;
      auto userCall = mlir::dyn_cast<mlir::func::CallOp>(user);
      if (!userCall || other)
        return {};
      other = userCall;
    }
    return other;
  }

  mlir::LogicalResult fuse(mlir::func::CallOp softmaxCall, mlir::SymbolTable &symbols, KernelFactory &kernels,
                           const DeviceDescription &device, std::string &why) {
    auto softmaxFn = symbols.lookup<mlir::func::FuncOp>(softmaxCall.getCallee());
    auto kind = softmaxFn->getAttrOfType<mlir::StringAttr>(kFusionAttrName);
    if (!kind || kind.getValue() != "row_reduction")
      return mlir::failure();
    auto softmaxGraph = FusionGraph::analyze(softmaxFn, why);
    if (mlir::failed(softmaxGraph))
      return mlir::failure();
    // Which argument is read, which written.
    if (softmaxGraph->outputs().size() != 1)
      return why = "not one output", mlir::failure();
    auto softmax = matchSoftmax(*softmaxGraph, why, looksLikeSoftmax_);
    if (mlir::failed(softmax))
      return mlir::failure();
    unsigned outArg = softmaxGraph->outputs().front().argument;
    unsigned inArg =
        mlir::cast<mlir::BlockArgument>(softmaxGraph->node(softmax->prologue).op.getDpsInputs()[softmax->scoresInput])
            .getArgNumber();
    Value scores = softmaxCall.getOperand(inArg), probs = softmaxCall.getOperand(outArg);
    if (!scores.getDefiningOp<mlir::memref::AllocOp>() || !probs.getDefiningOp<mlir::memref::AllocOp>())
      return why = "scores or probabilities are not temporaries of the host", mlir::failure();
    for (unsigned argument : softmax->extraArguments)
      if (softmaxCall.getOperand(argument) == scores || softmaxCall.getOperand(argument) == probs)
        return why = "the softmax reads its own buffers twice", mlir::failure();
    // A mask read from memory, added to the scaled scores at [query, key].
    mlir::func::FuncOp maskWriter;
    if (!softmax->causal && (maskWriter = matchCausalMaskWriter(*softmax, *softmaxGraph, softmaxCall, symbols)))
      masks_.insert(softmaxCall.getOperand(softmax->maskArgument));
    // A decode step's mask past a run-time position (positionMaskSource)
    // makes those keys' weights exact zeros: tiles of keys wholly after it
    // are not read, and a split holding none writes an empty partial (max
    // -inf, sum 0), which the combining kernel skips. A step early in a long
    // cache then reads the keys it has, not the whole cache.
    Value position = !softmax->causal ? maskingPosition(*softmax, *softmaxGraph, softmaxCall, symbols) : Value();
    std::optional<FusionGraph> maskGraph;
    if (maskWriter) {
      auto analyzed = FusionGraph::analyze(maskWriter, why);
      if (mlir::failed(analyzed))
        return mlir::failure();
      maskGraph = std::move(*analyzed);
    }
    mlir::func::CallOp scoresCall = otherCall(scores, softmaxCall), valuesCall = otherCall(probs, softmaxCall);
    if (!scoresCall || !valuesCall || scoresCall->getBlock() != softmaxCall->getBlock() ||
        valuesCall->getBlock() != softmaxCall->getBlock() || !scoresCall->isBeforeInBlock(softmaxCall) ||
        !softmaxCall->isBeforeInBlock(valuesCall))
      return why = "the scores or probabilities have other users", mlir::failure();
    auto scoresFn = symbols.lookup<mlir::func::FuncOp>(scoresCall.getCallee());
    auto valuesFn = symbols.lookup<mlir::func::FuncOp>(valuesCall.getCallee());
    if (!scoresFn || !valuesFn)
      return why = "a callee is missing", mlir::failure();
    auto scoresGraph = FusionGraph::analyze(scoresFn, why);
    auto valuesGraph = FusionGraph::analyze(valuesFn, why);
    if (mlir::failed(scoresGraph) || mlir::failed(valuesGraph))
      return mlir::failure();
    int scoresProduct = plainBatchMatmul(*scoresGraph), valuesProduct = plainBatchMatmul(*valuesGraph);
    if (scoresProduct < 0 || valuesProduct < 0)
      return why = "the products are not plain batch matmuls", mlir::failure();
    // The scores call writes `scores` (its output argument), and nothing else.
    unsigned scoresOut = scoresGraph->outputs().front().argument;
    unsigned valuesOut = valuesGraph->outputs().front().argument;
    if (scoresCall.getOperand(scoresOut) != scores)
      return why = "the scores matmul does not write the scores", mlir::failure();
    for (auto [i, operand] : llvm::enumerate(scoresCall.getOperands()))
      if (i != scoresOut && operand == scores)
        return why = "the scores matmul reads the scores", mlir::failure();
    mlir::linalg::LinalgOp scoresOp = scoresGraph->node(scoresProduct).op;
    mlir::linalg::LinalgOp valuesOp = valuesGraph->node(valuesProduct).op;
    // The values product reads the probabilities as its A operand, as they are.
    auto probsArg = mlir::dyn_cast<mlir::BlockArgument>(valuesOp.getDpsInputs()[0]);
    if (!probsArg || probsArg.getOwner() != &valuesFn.front() ||
        valuesCall.getOperand(probsArg.getArgNumber()) != probs)
      return why = "the values matmul does not read the probabilities directly", mlir::failure();
    for (auto [i, operand] : llvm::enumerate(valuesCall.getOperands()))
      if (i != probsArg.getArgNumber() && operand == probs)
        return why = "the values matmul reads the probabilities twice", mlir::failure();

    // Types and shapes: Q [H, Tq, D], K^T [H, D, Tk], V [H, Tk, D], out [H, Tq, D].
    auto qType = mlir::dyn_cast<mlir::MemRefType>(scoresOp.getDpsInputs()[0].getType());
    auto ktType = mlir::dyn_cast<mlir::MemRefType>(scoresOp.getDpsInputs()[1].getType());
    auto vType = mlir::dyn_cast<mlir::MemRefType>(valuesOp.getDpsInputs()[1].getType());
    auto oType = mlir::dyn_cast<mlir::MemRefType>(valuesCall.getOperand(valuesOut).getType());
    if (!qType || !ktType || !vType || !oType || !qType.hasStaticShape() || !ktType.hasStaticShape() ||
        !vType.hasStaticShape() || !oType.hasStaticShape())
      return why = "operands of dynamic shape", mlir::failure();
    mlir::Type element = qType.getElementType();
    if (!(element.isF32() || element.isF64()) || ktType.getElementType() != element ||
        vType.getElementType() != element || oType.getElementType() != element ||
        mlir::cast<mlir::MemRefType>(scores.getType()).getElementType() != element)
      return why = "operands that are not all f32 or all f64", mlir::failure();
    Config cfg;
    cfg.heads = qType.getDimSize(0);
    cfg.length = qType.getDimSize(1);
    cfg.headSize = qType.getDimSize(2);
    cfg.element = element;
    cfg.elementBytes = element.getIntOrFloatBitWidth() / 8;
    cfg.causal = softmax->causal;
    cfg.keys = ktType.getRank() == 3 ? ktType.getDimSize(2) : 0;
    llvm::SmallVector<int64_t> hdk{cfg.heads, cfg.headSize, cfg.keys}, hkd{cfg.heads, cfg.keys, cfg.headSize},
        hqd{cfg.heads, cfg.length, cfg.headSize};
    if (llvm::to_vector(ktType.getShape()) != hdk || llvm::to_vector(vType.getShape()) != hkd ||
        llvm::to_vector(oType.getShape()) != hqd || cfg.keys < 1)
      return why = "Q, K, V and the output do not have matching head shapes", mlir::failure();
    if (cfg.causal && cfg.keys != cfg.length)
      return why = "a causal mask over more keys than queries", mlir::failure();
    if (!oType.getLayout().isIdentity())
      return why = "an output that is a view", mlir::failure();
    // The limit is on query rows walking every key: a decode step's one
    // row per head is split over the keys instead.
    AttentionChoice choice = chooseAttentionPath(cfg.length, cfg.keys, maxKeys);
    if (choice.path != AttentionPath::Fused)
      return why = choice.why, mlir::failure();

    // The launch configuration, from the device description.
    cfg.lanes = 1;
    // A query row alone per head (a decode step) is alone in its block,
    // whose other lanes would idle: it gets a whole warp's lanes (as many as
    // divide the head size), so each key's dot product is a few instructions
    // per lane and a butterfly, not a long chain of fused multiply-adds on
    // four lanes. The split block's single warp runs latency-bound, one
    // instruction at a time, so fewer instructions on its path shorten it.
    bool aloneRow = cfg.length == 1;
    while (cfg.lanes < device.warpSize && (aloneRow || cfg.headSize / cfg.lanes > kHeadElementsPerLane) &&
           cfg.headSize % (cfg.lanes * 2) == 0)
      cfg.lanes *= 2;
    cfg.width = kVectorBytes / cfg.elementBytes;
    while (cfg.width > 1 && cfg.headSize % (cfg.lanes * cfg.width) != 0)
      cfg.width /= 2;
    cfg.chunks = cfg.headSize / (cfg.lanes * cfg.width);
    // Rows per block: as many as fill the GPU with kMinBlocksPerSm blocks
    // per SM, from kQueryRowsPerBlock down.
    cfg.rowsPerBlock = kQueryRowsPerBlock;
    while (cfg.rowsPerBlock > kMinQueryRowsPerBlock &&
           cfg.heads * llvm::divideCeilSigned(cfg.length, cfg.rowsPerBlock) < kMinBlocksPerSm * device.smCount)
      cfg.rowsPerBlock /= 2;
    // Never more rows than the sequence (rounded to a warp's worth of rows).
    int64_t rowsPerWarp = std::max<int64_t>(1, device.warpSize / cfg.lanes);
    while (cfg.rowsPerBlock > rowsPerWarp && cfg.rowsPerBlock / 2 >= cfg.length)
      cfg.rowsPerBlock /= 2;
    cfg.threads = cfg.rowsPerBlock * cfg.lanes;
    while (cfg.threads > device.maxThreadsPerBlock) {
      cfg.rowsPerBlock /= 2;
      cfg.threads = cfg.rowsPerBlock * cfg.lanes;
    }
    cfg.queryTiles = llvm::divideCeilSigned(cfg.length, cfg.rowsPerBlock);
    cfg.keysPerTile = kScoreRegistersPerLane * 4 / cfg.elementBytes;
    auto sharedBytes = [&] { return 2 * cfg.keysPerTile * cfg.headSize * cfg.elementBytes; };
    while (sharedBytes() > device.sharedMemoryPerBlock && cfg.keysPerTile > kMinKeysPerTile)
      cfg.keysPerTile /= 2;
    if (sharedBytes() > device.sharedMemoryPerBlock)
      return why = "the K and V tiles do not fit shared memory", mlir::failure();
    int64_t maxWidth = kVectorBytes / cfg.elementBytes;
    cfg.keyTiles = llvm::divideCeilSigned(cfg.keys, cfg.keysPerTile);
    // Split the keys when the blocks would leave SMs idle (never causal
    // attention: its blocks' key ranges differ by design).
    if (!cfg.causal) {
      int64_t blocks = cfg.heads * cfg.queryTiles;
      int64_t wanted = llvm::divideCeilSigned(kSplitBlocksPerSm * device.smCount, blocks);
      int64_t most = std::max<int64_t>(1, cfg.keyTiles / kMinKeyTilesPerSplit);
      cfg.splits = std::clamp<int64_t>(wanted, 1, most);
      cfg.tilesPerSplit = llvm::divideCeilSigned(cfg.keyTiles, cfg.splits);
      cfg.splits = llvm::divideCeilSigned(cfg.keyTiles, cfg.tilesPerSplit);
    }
    cfg.partialStride = cfg.headSize + maxWidth;

    // The operands on the host: the fusions' view chains rebuilt over the
    // calls' operands; K^T transposed back to [H, T, D].
    // (At the values call: every operand of the three calls is defined by then.)
    mlir::OpBuilder host(valuesCall);
    llvm::SmallVector<mlir::Operation *> cloned;
    auto hostValue = [&](mlir::func::CallOp call, mlir::func::FuncOp fn, Value value) -> Value {
      mlir::IRMapping mapping;
      for (auto [argument, operand] : llvm::zip(fn.getArguments(), call.getOperands()))
        mapping.map(argument, operand);
      std::function<Value(Value)> bring = [&](Value inner) -> Value {
        if (Value mapped = mapping.lookupOrNull(inner))
          return mapped;
        mlir::Operation *definer = inner.getDefiningOp();
        if (!definer || !(isViewOp(definer) || mlir::isa<mlir::arith::ConstantOp>(definer)))
          return {};
        for (Value operand : definer->getOperands())
          if (!bring(operand))
            return {};
        cloned.push_back(host.clone(*definer, mapping));
        return mapping.lookup(inner);
      };
      return bring(value);
    };
    Value qHost = hostValue(scoresCall, scoresFn, scoresOp.getDpsInputs()[0]);
    Value ktHost = hostValue(scoresCall, scoresFn, scoresOp.getDpsInputs()[1]);
    Value vHost = hostValue(valuesCall, valuesFn, valuesOp.getDpsInputs()[1]);
    Value oHost = valuesCall.getOperand(valuesOut);
    if (!qHost || !ktHost || !vHost) {
      for (mlir::Operation *op : llvm::reverse(cloned))
        op->erase();
      return why = "an operand that is not a view of an argument", mlir::failure();
    }
    auto swap = mlir::AffineMap::getPermutationMap(llvm::ArrayRef<unsigned>{0, 2, 1}, host.getContext());
    Value kHost = mlir::memref::TransposeOp::create(host, softmaxCall.getLoc(), ktHost, mlir::AffineMapAttr::get(swap));
    cfg.widthQ = vectorWidthAlongLast(mlir::cast<mlir::MemRefType>(qHost.getType()), maxWidth);
    cfg.widthK = vectorWidthAlongLast(mlir::cast<mlir::MemRefType>(kHost.getType()), maxWidth);
    cfg.widthV = vectorWidthAlongLast(mlir::cast<mlir::MemRefType>(vHost.getType()), maxWidth);
    cfg.widthO = vectorWidthAlongLast(oType, maxWidth);

    // attn_scores_matmul_3 -> attn_attention
    std::string name = scoresFn.getName().str();
    if (size_t at = name.find("_scores_matmul"); at != std::string::npos)
      name = name.substr(0, at);
    name += "_attention";
    KernelSignature signature;
    signature.name = name;
    // With split keys the kernel writes partials to a host temporary, and a
    // second kernel combines them into the output.
    Value partials;
    auto partialsType = mlir::MemRefType::get({cfg.heads, cfg.length, cfg.splits, cfg.partialStride}, element);
    if (cfg.splits > 1)
      partials =
          mlir::memref::AllocOp::create(host, softmaxCall.getLoc(), partialsType, host.getI64IntegerAttr(kVectorBytes));
    signature.arguments = {qHost.getType(), kHost.getType(), vHost.getType(), partials ? partialsType : oType};
    llvm::SmallVector<Value> launchOperands{qHost, kHost, vHost, partials ? partials : oHost};
    for (unsigned argument : softmax->extraArguments) {
      Value operand = softmaxCall.getOperand(argument);
      signature.arguments.push_back(operand.getType());
      launchOperands.push_back(operand);
    }
    if (position) {
      // (Sublayer mode's prologue loads it itself: an extra argument already.)
      auto known = llvm::find(launchOperands, position);
      cfg.positionArgument = known - launchOperands.begin();
      if (known == launchOperands.end()) {
        signature.arguments.push_back(position.getType());
        launchOperands.push_back(position);
      }
    }
    // A decode step writes its token's keys and values into the cache with a
    // copy just before the attention reads the cache: a kernel of its own, a
    // launch a layer on a step's critical path. The attention kernel does it
    // instead: the block whose split holds the key the copy writes copies the
    // step's keys and values for its head into the cache first, then reads
    // the cache as before; no other block reads that key.
    std::optional<CacheWrite> cacheWrite;
    if (position && !cfg.causal && cfg.queryTiles == 1)
      cacheWrite = matchCacheWrite(scoresCall, softmaxCall, valuesCall, kHost, vHost, cfg.heads, cfg.headSize, element);
    if (cacheWrite) {
      cfg.cacheWrite = &*cacheWrite;
      cfg.cacheSourceArgument = static_cast<int64_t>(launchOperands.size());
      signature.arguments.push_back(cacheWrite->source.getType());
      launchOperands.push_back(cacheWrite->source);
      // The position the key is computed from is often an argument already.
      for (Value input : cacheWrite->keyInputs) {
        auto known = llvm::find(launchOperands, input);
        cfg.cacheKeyInputArguments.push_back(known - launchOperands.begin());
        if (known == launchOperands.end()) {
          signature.arguments.push_back(input.getType());
          launchOperands.push_back(input);
        }
      }
    }
    auto space = mlir::gpu::AddressSpaceAttr::get(host.getContext(), mlir::gpu::AddressSpace::Workgroup);
    auto tileType =
        mlir::MemRefType::get({cfg.keysPerTile, cfg.headSize}, element, mlir::MemRefLayoutAttrInterface{}, space);
    signature.workgroupBuffers = {tileType, tileType};
    int64_t rowBytes = cfg.heads * cfg.headSize * cfg.elementBytes;
    int64_t partialBytes = cfg.splits > 1 ? partialsType.getNumElements() * cfg.elementBytes : 0;
    signature.bytesMoved = rowBytes * (cfg.length + 2 * cfg.keys) + (partials ? partialBytes : rowBytes * cfg.length) +
                           (cacheWrite ? 4 * rowBytes : 0);
    int64_t pairs = cfg.causal ? cfg.heads * cfg.length * (cfg.length + 1) / 2 : cfg.heads * cfg.length * cfg.keys;
    signature.flops = 4 * pairs * cfg.headSize;
    signature.blockSize = {static_cast<int32_t>(cfg.threads), 1, 1};
    auto kernel = kernels.tryBuild(signature, [&](mlir::OpBuilder &b, mlir::gpu::GPUFuncOp f) {
      for (unsigned i = 0; i < f.getNumWorkgroupAttributions(); ++i)
        f.setWorkgroupAttributionAttr(i, "llvm.align", b.getI64IntegerAttr(kVectorBytes));
      return buildAttentionBody(b, f, cfg, *softmaxGraph, *softmax, maskGraph ? &*maskGraph : nullptr);
    });
    mlir::FailureOr<mlir::gpu::GPUFuncOp> combine = mlir::failure();
    if (mlir::succeeded(kernel) && partials) {
      KernelSignature combining;
      combining.name = name + "_combine";
      combining.arguments = {partialsType, oType};
      if (position)
        combining.arguments.push_back(position.getType());
      combining.bytesMoved = partialBytes + rowBytes * cfg.length;
      combining.blockSize = {static_cast<int32_t>(kCombineThreads), 1, 1};
      combine = kernels.tryBuild(
          combining, [&](mlir::OpBuilder &b, mlir::gpu::GPUFuncOp f) { return buildCombineBody(b, f, cfg); });
    }
    if (mlir::failed(kernel) || (partials && mlir::failed(combine))) {
      if (partials)
        partials.getDefiningOp()->erase();
      kHost.getDefiningOp()->erase();
      for (mlir::Operation *op : llvm::reverse(cloned))
        op->erase();
      return why = "the kernel could not be built", mlir::failure();
    }
    std::string splitText =
        cfg.splits > 1 ? ", keys split " + std::to_string(cfg.splits) + " ways (" + std::to_string(cfg.tilesPerSplit) +
                             " tiles each; kSplitBlocksPerSm, kMinKeyTilesPerSplit), then a combining kernel"
                       : "";
    MLPIPE_DEBUG(kDebugEmitters,
                 os << name << ": fused attention, " << cfg.heads << " heads of " << cfg.length << " queries x "
                    << cfg.keys << " keys x " << cfg.headSize
                    << (cfg.causal                  ? ", causal (tiles past the diagonal skipped)"
                        : cfg.positionArgument >= 0 ? ", masked past a run-time position (tiles after it skipped)"
                                                    : ", not causal (every tile)")
                    << ", " << cfg.rowsPerBlock << " query rows per block, " << cfg.lanes << " lanes per row holding "
                    << cfg.chunks << " chunks of " << cfg.width << ", " << cfg.keysPerTile
                    << "-key tiles of K and V in shared memory, vectors q " << cfg.widthQ << " k " << cfg.widthK
                    << " v " << cfg.widthV << " out " << cfg.widthO << ", " << cfg.heads * cfg.queryTiles * cfg.splits
                    << " blocks x " << cfg.threads << " threads" << splitText
                    << (cacheWrite ? ", writing the step's keys and values into the cache first" : "") << "\n");
    LaunchDims dims;
    dims.grid = {cfg.heads * cfg.queryTiles * cfg.splits, 1, 1};
    dims.block = {cfg.threads, 1, 1};
    kernels.launch(host, valuesCall.getLoc(), *kernel, dims, launchOperands);
    if (partials) {
      LaunchDims combineDims;
      combineDims.grid = {llvm::divideCeilSigned(cfg.heads * cfg.length * cfg.headSize, kCombineThreads), 1, 1};
      combineDims.block = {kCombineThreads, 1, 1};
      llvm::SmallVector<Value> combineOperands{partials, oHost};
      if (position)
        combineOperands.push_back(position);
      kernels.launch(host, valuesCall.getLoc(), *combine, combineDims, combineOperands);
      mlir::memref::DeallocOp::create(host, valuesCall.getLoc(), partials);
    }
    // The three calls go (and the cache write the kernel does); the
    // temporaries they shared with nobody else too.
    if (cacheWrite)
      cacheWrite->copy.erase();
    valuesCall.erase();
    softmaxCall.erase();
    scoresCall.erase();
    for (Value buffer : {scores, probs}) {
      for (mlir::Operation *user : llvm::make_early_inc_range(buffer.getUsers()))
        user->erase();
      buffer.getDefiningOp()->erase();
    }
    return mlir::success();
  }

  // Whether the fusion being looked at started like a softmax (two
  // reductions, the first a max): only then does debug output say why it
  // was not fused.
  bool looksLikeSoftmax_ = false;
  // Causal masks in memory whose elements fused kernels now compute.
  llvm::SetVector<Value> masks_;
};

} // namespace

} // namespace mlpipe
