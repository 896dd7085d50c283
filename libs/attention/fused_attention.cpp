// mlpipe-fused-attention: causal attention as one kernel whose T x T scores
// never reach memory (the flash-attention scheme).
// Passes.td holds its description, with IR before and after.
//
// The pass finds attention's scores matmul, softmax and values matmul calls
// in host code (attention_matching.h) and replaces them with one launch of
// the fused kernel (attention_kernel.h); where a decode step's keys are
// split over blocks, the last split of each query tile combines them.
#include "attention/attention_kernel.h"
#include "attention/attention_matching.h"
#include "attention/passes.h"
#include "codegen/debug.h"
#include "codegen/kernel_factory.h"
#include "codegen/pass_support.h"
#include "codegen/path_choice.h"
#include "fusion/fusion_graph.h"
#include "fusion/hero_analysis.h"

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

#include "llvm/ADT/SetVector.h"
#include "llvm/Support/MathExtras.h"

#include <functional>
#include <optional>

namespace mlpipe {

#define GEN_PASS_DEF_FUSEDATTENTIONPASS
#include "attention/Passes.h.inc"

namespace {

// The batched decode step (a run-time position per sequence) is fused only
// while each row's keys split over blocks: chooseLaunch keeps at least
// kBatchedStepMinSplits splits a row there, so this fails only for a cache
// of a single tile of keys. With one split a row (before that minimum),
// GPT-2 124M's f32 step took 10.2 ms at batch 44 and 18.1 ms at batch 64
// on the H200, its attention kernel 10 us a layer (not profiled further).
// The generic path is no better at those batches: it copies each
// sequence's keys and values into the cache with a kernel of its own (768
// kernels a step at batch 64) and reads the whole cache every layer.
bool batchedStepKeysSplit(const emitters::fused_attention::Config &cfg) { return cfg.splits > 1; }

using namespace emitters;
using namespace emitters::fused_attention;
using mlir::Value;

// The fused kernel's operands on the host, and the views cloned there to
// make them (taken back where the fusion gives up).
struct HostOperands {
  Value q, k, v, out;
  llvm::SmallVector<mlir::Operation *> cloned;
};

// The fused kernel's launch, prepared on the host: its name and signature,
// what it is launched with, the temporary holding split keys' partials
// (null where the keys are not split), and the decode step's cache write
// the kernel does (Config::cacheWrite points to it).
struct PreparedLaunch {
  std::string name;
  KernelSignature signature;
  llvm::SmallVector<Value> operands;
  Value partials;
  mlir::MemRefType partialsType;
  int64_t rowBytes = 0, partialBytes = 0;
  std::optional<CacheWrite> cacheWrite;
  std::optional<BatchedCacheWrite> batchedCacheWrite;
};

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
    // fusion (which writes nothing else, and reads at most what the kernels
    // read too: a decode step's position) goes.
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
               call.getOperand(graph->outputs().front().argument) == mask && llvm::count(call.getOperands(), mask) == 1;
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

  mlir::LogicalResult fuse(mlir::func::CallOp softmaxCall, mlir::SymbolTable &symbols, KernelFactory &kernels,
                           const DeviceDescription &device, std::string &why) {
    AttentionMatch match;
    mlir::LogicalResult matched = matchAttention(softmaxCall, symbols, match, why, looksLikeSoftmax_);
    // A causal mask the softmax reads is noted even where the rest does not
    // match: its writer goes only once no call reads the mask any more.
    if (match.mask)
      masks_.insert(match.mask);
    if (mlir::failed(matched))
      return mlir::failure();
    if (foldHeadsMerge)
      matchHeadsMerge(match, symbols);
    mlir::FailureOr<Config> cfg = configFor(match, why);
    if (mlir::failed(cfg))
      return mlir::failure();
    // The limit is on query rows walking every key: a decode step's one
    // row per head is split over the keys instead. On tensor cores the
    // kernel reuses its tiles across rows and fuses at every length.
    std::string noTensorCores = "the pass's option tensor-cores=false";
    bool tensorCores = allowTensorCores && tensorCoresFit(*cfg, device, noTensorCores);
    AttentionChoice choice = chooseAttentionPath(cfg->length, cfg->keys, maxKeys, tensorCores);
    if (choice.path != AttentionPath::Fused)
      return why = choice.why + " (not on tensor cores: " + noTensorCores + ")", mlir::failure();
    LaunchOverrides overrides{tcRowsPerBlock, tcKeyGroups,     tcKeysPerTile, tcBlocksPerSm,    tcStages,
                              asyncCopy,      tcDynamicShared, tcSnakeOrder,  batchedMinSplits, tcScoresAhead};
    cfg->rowsPerPosition = match.rowsPerPosition;
    if (mlir::failed(chooseLaunch(*cfg, device, tensorCores, why, overrides)))
      return mlir::failure();
    if (match.rowsPerPosition > 0 && !batchedStepKeysSplit(*cfg))
      return why = "a batched decode step whose rows' keys would not split over blocks (batchedStepKeysSplit)",
             mlir::failure();

    // (At the values call: every operand of the three calls is defined by then.)
    mlir::OpBuilder host(match.valuesCall);
    HostOperands operands;
    if (mlir::failed(rebuildOperandsOnHost(match, host, operands, why)))
      return mlir::failure();
    auto qType = mlir::cast<mlir::MemRefType>(operands.q.getType());
    cfg->queryHeads = qType.getRank() == 4 ? qType.getDimSize(1) : 0;
    int64_t maxWidth = kVectorBytes / cfg->storageBytes; // 128-bit accesses of the stored type
    cfg->widthQ = vectorWidthAlongLast(mlir::cast<mlir::MemRefType>(operands.q.getType()), maxWidth);
    cfg->widthK = vectorWidthAlongLast(mlir::cast<mlir::MemRefType>(operands.k.getType()), maxWidth);
    cfg->widthV = vectorWidthAlongLast(mlir::cast<mlir::MemRefType>(operands.v.getType()), maxWidth);
    cfg->widthO =
        vectorWidthAlongLast(mlir::cast<mlir::MemRefType>(operands.out.getType()), kVectorBytes / cfg->outBytes);
    // cp.async needs K and V read as vectors: otherwise through registers.
    // (The launch chosen again for registers where it can be; else the
    // same tiles through registers, which take less shared memory.)
    if (cfg->asyncStages > 0 && !asyncCopiesFit(*cfg, std::min(cfg->widthK, cfg->widthV), device.warpSize)) {
      overrides.asyncCopy = false;
      Config throughRegisters = *cfg;
      std::string ignored;
      if (mlir::succeeded(chooseLaunch(throughRegisters, device, tensorCores, ignored, overrides)))
        *cfg = throughRegisters;
      cfg->asyncStages = 0;
      cfg->scoresAhead = false;
    }

    PreparedLaunch launch;
    prepareLaunch(match, *cfg, host, operands, launch);
    choosePrefetch(*cfg, device, prefetchedTiles);
    mlir::FailureOr<mlir::gpu::GPUFuncOp> kernel = mlir::failure();
    if (mlir::failed(buildKernel(match, *cfg, kernels, launch, kernel))) {
      if (launch.partials)
        launch.partials.getDefiningOp()->erase();
      operands.k.getDefiningOp()->erase();
      for (mlir::Operation *op : llvm::reverse(operands.cloned))
        op->erase();
      return why = "the kernel could not be built", mlir::failure();
    }
    describe(*cfg, launch, host.getContext());
    if (match.mergeCall)
      MLPIPE_DEBUG(kDebugEmitters, os << launch.name << ": writes the heads merged, through a view of @"
                                      << match.mergeCall.getCallee() << "'s output, which goes (fold-heads-merge)\n");
    launchAndReplace(match, *cfg, host, operands, launch, kernels, *kernel);
    return mlir::success();
  }

  // The operands on the host: the fusions' view chains rebuilt over the
  // calls' operands; K^T transposed back to [H, T, D].
  static mlir::LogicalResult rebuildOperandsOnHost(AttentionMatch &match, mlir::OpBuilder &host, HostOperands &operands,
                                                   std::string &why) {
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
        operands.cloned.push_back(host.clone(*definer, mapping));
        return mapping.lookup(inner);
      };
      return bring(value);
    };
    Value qHost = match.queryCopy ? copiedQueriesOnHost(match, host, hostValue)
                                  : hostValue(match.scoresCall, match.scoresFn, match.scoresOp.getDpsInputs()[0]);
    if (match.queryCopy && qHost)
      operands.cloned.push_back(qHost.getDefiningOp());
    Value ktHost = hostValue(match.scoresCall, match.scoresFn, match.scoresOp.getDpsInputs()[1]);
    Value vHost = hostValue(match.valuesCall, match.valuesFn, match.valuesOp.getDpsInputs()[1]);
    if (!qHost || !ktHost || !vHost) {
      for (mlir::Operation *op : llvm::reverse(operands.cloned))
        op->erase();
      return why = "an operand that is not a view of an argument", mlir::failure();
    }
    auto swap = mlir::AffineMap::getPermutationMap(llvm::ArrayRef<unsigned>{0, 2, 1}, host.getContext());
    operands.q = qHost;
    operands.k =
        mlir::memref::TransposeOp::create(host, match.softmaxCall.getLoc(), ktHost, mlir::AffineMapAttr::get(swap));
    operands.v = vHost;
    operands.out = match.valuesCall.getOperand(match.valuesOut);
    if (match.mergeCall) {
      // The merged buffer [T, H * D] seen as [H, T, D].
      mlir::Location loc = match.mergeCall.getLoc();
      Value merged = match.mergeCall.getOperand(1);
      auto mergedType = mlir::cast<mlir::MemRefType>(merged.getType());
      int64_t heads = match.mergedOutType.getDimSize(0), headSize = match.mergedOutType.getDimSize(2);
      llvm::SmallVector<mlir::ReassociationIndices> groups{{0}, {1, 2}};
      auto expanded = mlir::memref::ExpandShapeOp::create(
          host, loc, llvm::ArrayRef<int64_t>{mergedType.getDimSize(0), heads, headSize}, merged, groups);
      auto headsFirst = mlir::AffineMap::getPermutationMap(llvm::ArrayRef<unsigned>{1, 0, 2}, host.getContext());
      auto view = mlir::memref::TransposeOp::create(host, loc, expanded, mlir::AffineMapAttr::get(headsFirst));
      operands.cloned.push_back(expanded);
      operands.cloned.push_back(view);
      operands.out = view;
    }
    return mlir::success();
  }

  // Batched decoding's queries: the scores fusion copies a view [B, H * D]
  // of c_attn's output into a buffer it reads as [B * H, 1, D] (collapsed,
  // then expanded); the kernel reads the view in place instead, as [B, H,
  // 1, D] (row r = b * H + h at [b, h]), so no copy runs. Null where the
  // copy is not that.
  static Value
  copiedQueriesOnHost(AttentionMatch &match, mlir::OpBuilder &host,
                      const std::function<Value(mlir::func::CallOp, mlir::func::FuncOp, Value)> &hostValue) {
    mlir::linalg::CopyOp copy = match.queryCopy;
    auto expand = match.scoresOp.getDpsInputs()[0].getDefiningOp<mlir::memref::ExpandShapeOp>();
    auto collapse = expand ? expand.getSrc().getDefiningOp<mlir::memref::CollapseShapeOp>() : nullptr;
    if (!collapse || copy.getOutputs().size() != 1 || collapse.getSrc() != copy.getOutputs()[0] ||
        !copy.getOutputs()[0].getDefiningOp<mlir::memref::AllocOp>())
      return {};
    auto copied = mlir::cast<mlir::MemRefType>(copy.getOutputs()[0].getType());
    auto queries = mlir::cast<mlir::MemRefType>(expand.getType());
    if (copied.getRank() != 2 || !copied.getLayout().isIdentity() || queries.getRank() != 3 ||
        collapse.getReassociationIndices().size() != 1 || expand.getReassociationIndices().size() != 1)
      return {};
    int64_t batch = copied.getDimSize(0), width = copied.getDimSize(1);
    int64_t rows = queries.getDimSize(0), headSize = queries.getDimSize(2);
    if (queries.getDimSize(1) != 1 || width % headSize != 0 || rows != batch * (width / headSize))
      return {};
    Value source = hostValue(match.scoresCall, match.scoresFn, copy.getInputs()[0]);
    if (!source)
      return {};
    auto sourceType = mlir::cast<mlir::MemRefType>(source.getType());
    llvm::SmallVector<mlir::ReassociationIndices> groups{{0}, {1, 2, 3}};
    llvm::SmallVector<int64_t> shape{batch, width / headSize, 1, headSize};
    mlir::FailureOr<mlir::MemRefType> viewType =
        mlir::memref::ExpandShapeOp::computeExpandedType(sourceType, shape, groups);
    if (mlir::failed(viewType))
      return {};
    return mlir::memref::ExpandShapeOp::create(host, match.softmaxCall.getLoc(), *viewType, source, groups);
  }

  // The kernel's name, signature and operands: Q, K, V and the output (or,
  // with split keys, a host temporary for the partials, the output coming
  // after the softmax's extra arguments), the softmax's extra arguments,
  // the run-time position and what the cache write reads.
  static void prepareLaunch(AttentionMatch &match, Config &cfg, mlir::OpBuilder &host, const HostOperands &operands,
                            PreparedLaunch &launch) {
    mlir::func::CallOp softmaxCall = match.softmaxCall;
    mlir::Type element = cfg.element;
    auto oType = mlir::cast<mlir::MemRefType>(operands.out.getType());
    // attn_scores_matmul_3 -> attn_attention
    std::string name = match.scoresFn.getName().str();
    if (size_t at = name.find("_scores_matmul"); at != std::string::npos)
      name = name.substr(0, at);
    name += "_attention";
    launch.name = name;
    KernelSignature &signature = launch.signature;
    signature.name = name;
    llvm::SmallVector<Value> &launchOperands = launch.operands;
    launch.partialsType = mlir::MemRefType::get({cfg.heads, cfg.length, cfg.splits, cfg.partialStride}, element);
    if (cfg.splits > 1)
      launch.partials = mlir::memref::AllocOp::create(host, softmaxCall.getLoc(), launch.partialsType,
                                                      host.getI64IntegerAttr(kVectorBytes));
    Value partials = launch.partials;
    signature.arguments = {operands.q.getType(), operands.k.getType(), operands.v.getType(),
                           partials ? launch.partialsType : oType};
    launchOperands = {operands.q, operands.k, operands.v, partials ? partials : operands.out};
    for (unsigned argument : match.softmax.extraArguments) {
      Value operand = softmaxCall.getOperand(argument);
      signature.arguments.push_back(operand.getType());
      launchOperands.push_back(operand);
    }
    if (partials) {
      cfg.outArgument = static_cast<int64_t>(launchOperands.size());
      signature.arguments.push_back(oType);
      launchOperands.push_back(operands.out);
    }
    if (Value position = match.position) {
      // (Sublayer mode's prologue loads it itself: an extra argument already.)
      auto known = llvm::find(launchOperands, position);
      cfg.positionArgument = known - launchOperands.begin();
      if (known == launchOperands.end()) {
        signature.arguments.push_back(position.getType());
        launchOperands.push_back(position);
      }
    }
    // What the mask's fusion reads (a decode step's position): arguments
    // of the kernel too, so that it computes the mask's elements itself.
    if (mlir::func::CallOp writer = match.maskWriterCall) {
      for (auto [index, operand] : llvm::enumerate(writer.getOperands())) {
        if (operand == match.mask)
          continue;
        auto known = llvm::find(launchOperands, operand);
        cfg.maskArguments.push_back({static_cast<unsigned>(index), known - launchOperands.begin()});
        if (known == launchOperands.end()) {
          signature.arguments.push_back(operand.getType());
          launchOperands.push_back(operand);
        }
      }
    }
    prepareCacheWrite(match, cfg, operands, launch);
    // Causal query tiles on tensor cores, longest first, several blocks an
    // SM: launched early, the kernel's first (longest) blocks stacked up to
    // four an SM on the SMs the kernel before freed first. At GPT-2 124M's
    // T=1024 in bf16 on the H200 (bench/scripts/forward-timeline.sh), the
    // attention added 27.6 µs a layer to the forward so, 17.8 launched after
    // its predecessor (with every kernel so).
    signature.launchAfterPredecessor = cfg.tensorCores && cfg.causal && cfg.queryTiles > 1;
    if (!cfg.dynamicShared)
      for (mlir::MemRefType buffer : workgroupBuffers(cfg, host.getContext()))
        signature.workgroupBuffers.push_back(buffer);
    launch.rowBytes = cfg.heads * cfg.headSize * cfg.storageBytes;
    launch.partialBytes = cfg.splits > 1 ? launch.partialsType.getNumElements() * cfg.elementBytes : 0;
    int64_t rowBytes = launch.rowBytes;
    signature.bytesMoved = rowBytes * (cfg.length + 2 * cfg.keys) +
                           (partials ? 2 * launch.partialBytes + rowBytes * cfg.length : rowBytes * cfg.length) +
                           (launch.cacheWrite || launch.batchedCacheWrite ? 4 * rowBytes : 0);
    int64_t pairs = cfg.causal ? cfg.heads * cfg.length * (cfg.length + 1) / 2 : cfg.heads * cfg.length * cfg.keys;
    signature.flops = 4 * pairs * cfg.headSize;
    signature.blockSize = {static_cast<int32_t>(cfg.threads), 1, 1};
  }

  // A decode step writes its token's keys and values into the cache with a
  // copy just before the attention reads the cache: a kernel of its own, a
  // launch a layer on a step's critical path. The attention kernel does it
  // instead: the block whose split holds the key the copy writes copies the
  // step's keys and values for its head into the cache first, then reads
  // the cache as before; no other block reads that key.
  static void prepareCacheWrite(AttentionMatch &match, Config &cfg, const HostOperands &operands,
                                PreparedLaunch &launch) {
    bool oneRowPerHead = match.position && !cfg.causal && cfg.queryTiles == 1 && !cfg.tensorCores;
    if (oneRowPerHead && match.rowsPerPosition == 0)
      launch.cacheWrite = matchCacheWrite(match.scoresCall, match.softmaxCall, match.valuesCall, operands.k, operands.v,
                                          cfg.heads, cfg.headSize, cfg.storage);
    if (oneRowPerHead && match.rowsPerPosition > 0 && cfg.length == 1 && cfg.positionArgument >= 0)
      launch.batchedCacheWrite =
          matchBatchedCacheWrite(match.scoresCall, match.softmaxCall, match.valuesCall, operands.k, operands.v,
                                 match.position, cfg.heads, match.rowsPerPosition, cfg.headSize, cfg.storage);
    if (launch.batchedCacheWrite) {
      // Every sequence's source is one buffer (c_attn's output).
      cfg.batchedCacheWrite = &*launch.batchedCacheWrite;
      cfg.cacheSourceArgument = static_cast<int64_t>(launch.operands.size());
      launch.signature.arguments.push_back(launch.batchedCacheWrite->sourceRoot.getType());
      launch.operands.push_back(launch.batchedCacheWrite->sourceRoot);
      return;
    }
    if (!launch.cacheWrite)
      return;
    std::optional<CacheWrite> &cacheWrite = launch.cacheWrite;
    KernelSignature &signature = launch.signature;
    llvm::SmallVector<Value> &launchOperands = launch.operands;
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

  // The fused kernel.
  static mlir::LogicalResult buildKernel(AttentionMatch &match, const Config &cfg, KernelFactory &kernels,
                                         const PreparedLaunch &launch, mlir::FailureOr<mlir::gpu::GPUFuncOp> &kernel) {
    const FusionGraph *maskGraph = match.maskGraph ? &*match.maskGraph : nullptr;
    kernel = kernels.tryBuild(launch.signature, [&](mlir::OpBuilder &b, mlir::gpu::GPUFuncOp f) {
      for (unsigned i = 0; i < f.getNumWorkgroupAttributions(); ++i)
        f.setWorkgroupAttributionAttr(i, "llvm.align", b.getI64IntegerAttr(kVectorBytes));
      if (cfg.tensorCores)
        return buildTensorCoreAttentionBody(b, f, cfg, match.softmaxGraph, match.softmax, maskGraph);
      return buildAttentionBody(b, f, cfg, match.softmaxGraph, match.softmax, maskGraph);
    });
    return mlir::success(mlir::succeeded(kernel));
  }

  static void describe(const Config &cfg, const PreparedLaunch &launch, mlir::MLIRContext *context) {
    std::string splitText =
        cfg.splits > 1
            ? ", keys split " + std::to_string(cfg.splits) + " ways (" + std::to_string(cfg.tilesPerSplit) +
                  " tiles each; kSplitBlocksPerSm, kMinKeyTilesPerSplit" +
                  (cfg.rowsPerPosition > 0 ? ", kBatchedStepMinSplits" : "") + "), the last to finish combining"
            : "";
    MLPIPE_DEBUG(
        kDebugEmitters,
        os << launch.name << ": fused attention, " << cfg.heads << " heads of " << cfg.length << " queries x "
           << cfg.keys << " keys x " << cfg.headSize
           << (cfg.causal                ? ", causal (tiles past the diagonal skipped)"
               : cfg.rowsPerPosition > 0 ? ", masked past each sequence's run-time position (a sequence's " +
                                               std::to_string(cfg.rowsPerPosition) + " rows: tiles after it skipped)"
               : cfg.positionArgument >= 0 ? ", masked past a run-time position (tiles after it skipped)"
                                           : ", not causal (every tile)")
           << ", " << cfg.rowsPerBlock << " query rows per block, "
           << (cfg.tensorCores ? "on tensor cores (mma.sync m16n8k16, a warp per 16 rows)"
                               : std::to_string(cfg.lanes) + " lanes per row holding " + std::to_string(cfg.chunks) +
                                     " chunks of " + std::to_string(cfg.width))
           << (cfg.keyGroups > 1 ? ", key tiles dealt to " + std::to_string(cfg.keyGroups) +
                                       " groups of warps (kTensorCoreWarpsPerSm), combined in shared memory"
                                 : "")
           << ", " << cfg.keysPerTile << "-key tiles of K and V in shared memory"
           << (cfg.asyncStages > 0 ? " (" + std::to_string(cfg.asyncStages) + " stages by cp.async of " +
                                         std::to_string(cfg.asyncWidth) + " elements, read by ldmatrix" +
                                         (cfg.dynamicShared ? ", " + std::to_string(dynamicSharedBytes(cfg, context)) +
                                                                  " bytes of dynamic shared memory"
                                                            : "") +
                                         (cfg.scoresAhead ? ", the next tile's scores ahead of the softmax" : "") + ")"
                                   : "")
           << (cfg.blocksPerSm > 0 ? ", registers bounded for " + std::to_string(cfg.blocksPerSm) + " blocks an SM"
                                   : "")
           << (cfg.snakeRoundBlocks > 0 ? ", causal tiles longest first in snake order, rounds of " +
                                              std::to_string(cfg.snakeRoundBlocks) + " blocks (tc-snake-order)"
                                        : "")
           << ", vectors q " << cfg.widthQ << " k " << cfg.widthK << " v " << cfg.widthV << " out " << cfg.widthO
           << ", " << cfg.heads * cfg.queryTiles * cfg.splits << " blocks x " << cfg.threads << " threads" << splitText
           << (cfg.prefetchedTiles > 0
                   ? ", the split's first " + std::to_string(cfg.prefetchedTiles) +
                         " tiles of the cache prefetched into L2 before the wait, then (splits of several tiles) " +
                         "each tile that many ahead (prefetched-tiles)"
                   : "")
           << (launch.cacheWrite ? ", writing the step's keys and values into the cache first" : "")
           << (launch.batchedCacheWrite
                   ? ", writing every sequence's keys and values into the cache at its position first"
                   : "")
           << "\n");
  }

  // The launches at the values call, instead of the three calls (and of the
  // cache write the kernel does); the temporaries they shared with nobody
  // else go too.
  static void launchAndReplace(AttentionMatch &match, const Config &cfg, mlir::OpBuilder &host,
                               const HostOperands &operands, PreparedLaunch &launch, KernelFactory &kernels,
                               mlir::gpu::GPUFuncOp kernel) {
    mlir::Location loc = match.valuesCall.getLoc();
    LaunchDims dims;
    dims.grid = {cfg.heads * cfg.queryTiles * cfg.splits, 1, 1};
    dims.block = {cfg.threads, 1, 1};
    kernels.launch(host, loc, kernel, dims, launch.operands,
                   cfg.dynamicShared ? dynamicSharedBytes(cfg, host.getContext()) : 0);
    if (Value partials = launch.partials)
      mlir::memref::DeallocOp::create(host, loc, partials);
    if (launch.cacheWrite)
      launch.cacheWrite->copy.erase();
    if (launch.batchedCacheWrite)
      for (mlir::linalg::CopyOp copy : launch.batchedCacheWrite->copies)
        copy.erase();
    mlir::func::CallOp valuesCall = match.valuesCall, softmaxCall = match.softmaxCall, scoresCall = match.scoresCall;
    Value unmerged = valuesCall.getOperand(match.valuesOut);
    valuesCall.erase();
    softmaxCall.erase();
    scoresCall.erase();
    if (match.mergeCall) {
      // The kernel wrote the merged heads: the merge and the buffer it read go.
      match.mergeCall.erase();
      for (mlir::Operation *user : llvm::make_early_inc_range(unmerged.getUsers()))
        user->erase();
      unmerged.getDefiningOp()->erase();
    }
    for (Value buffer : {match.scores, match.probs}) {
      for (mlir::Operation *user : llvm::make_early_inc_range(buffer.getUsers()))
        user->erase();
      buffer.getDefiningOp()->erase();
    }
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
