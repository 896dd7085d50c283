// The loop emitter: every fusion without a reduction, transpose or matmul
// hero. The output is walked as one flat array: each thread owns groups of
// W consecutive elements of the innermost dimension (W = 128 bits of
// elements when the innermost extent allows), so loads and stores are
// coalesced and vectorised; a thread handles U groups per step of a
// grid-stride loop, loading all of them before storing any; the grid fills
// the GPU a few times over.
//
//   %tid = block_id.x * 256 + thread_id.x
//   scf.for %step = 0 to <full steps> {          // no bounds checks
//     U groups at %tid + %step * stride + k * gridThreads: vector.load ...,
//     compute, then vector.store each
//   }
//   scf.for %g = <first leftover group> + %tid to <groups> step gridThreads {
//     one group
//   }
#include "codegen/debug.h"
#include "emitters/fusion_emitter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include "llvm/Support/MathExtras.h"

namespace mlpipe::emitters {

namespace {

// 256 threads: eight warps to hide memory latency, and blocks small enough
// that several fit on every SM.
constexpr int64_t kLoopThreadsPerBlock = 256;
// Groups each thread handles per step: enough independent 128-bit loads in
// flight per thread to reach full bandwidth.
constexpr int64_t kGroupsPerThread = 4;
// A grid-stride loop needs only enough blocks to fill every SM this many
// times over; more only adds scheduling.
constexpr int64_t kWavesOfBlocks = 4;

class LoopEmitter final : public FusionEmitter {
public:
  using FusionEmitter::FusionEmitter;
  const char *name() const override { return "loop"; }

  mlir::LogicalResult emit(mlir::func::CallOp call, KernelFactory &kernels, std::string &why) override {
    // Every output is stored at the same index: one iteration space.
    const FusionNode &first = graph_.node(graph_.outputs().front().node);
    shape_ = first.output.shape;
    for (const FusionGraph::Output &output : graph_.outputs())
      if (graph_.node(output.node).output.shape != shape_)
        return why = "its outputs have different shapes", mlir::failure();
    mlir::Type elementType = mlir::cast<mlir::MemRefType>(first.op.getDpsInits()[0].getType()).getElementType();
    chooseLaunch(elementType);

    KernelSignature signature;
    signature.name = kernelName(graph_);
    signature.bytesMoved = fusionBytes(graph_);
    signature.blockSize = {static_cast<int32_t>(threads_), 1, 1};
    auto kernel = buildFusionKernel(
        kernels, graph_, signature,
        [&](ElementalEmitter &elemental, mlir::gpu::GPUFuncOp) { return emitBody(elemental); }, why);
    if (mlir::failed(kernel))
      return mlir::failure();
    MLPIPE_DEBUG(kDebugEmitters, os << signature.name << ": loop emitter, " << elements_ << " elements in groups of "
                                    << width_ << ", " << blocks_ << " blocks x " << threads_ << " threads, "
                                    << perThread_ << " groups per thread per step, " << fullSteps_ << " full steps"
                                    << (leftoverStart_ < groups_ ? " and a bounded tail" : "") << " ("
                                    << options_.device->smCount << " SMs)\n");
    mlir::OpBuilder host(call);
    LaunchDims dims;
    dims.grid = {blocks_, 1, 1};
    dims.block = {threads_, 1, 1};
    kernels.launch(host, call.getLoc(), *kernel, dims, call.getOperands());
    call.erase();
    return mlir::success();
  }

private:
  // The groups, the block size, the groups per thread and the grid, from
  // the shape and the device description.
  void chooseLaunch(mlir::Type elementType) {
    elements_ = 1;
    for (int64_t extent : shape_)
      elements_ *= extent;
    int64_t innermost = shape_.empty() ? 1 : shape_.back();
    // Vectorise when whole groups fit the innermost extent: a group never
    // straddles two rows.
    width_ = vectorWidthFor(elementType, graph_, options_);
    while (width_ > 1 && innermost % width_ != 0)
      width_ /= 2;
    groups_ = elements_ / width_;
    const DeviceDescription &device = *options_.device;
    threads_ =
        std::min<int64_t>(kLoopThreadsPerBlock, llvm::divideCeilSigned(groups_, device.warpSize) * device.warpSize);
    int64_t residentBlocks = device.smCount * std::max<int64_t>(1, device.maxThreadsPerSm / threads_);
    // Unroll only when there is work enough to give every resident thread
    // all its groups.
    perThread_ = groups_ >= residentBlocks * threads_ * kGroupsPerThread ? kGroupsPerThread : 1;
    blocks_ = std::min(llvm::divideCeilSigned(groups_, threads_ * perThread_), kWavesOfBlocks * residentBlocks);
    blocks_ = std::max<int64_t>(blocks_, 1);
    gridThreads_ = blocks_ * threads_;
    stride_ = gridThreads_ * perThread_;
    fullSteps_ = groups_ / stride_;
    leftoverStart_ = fullSteps_ * stride_;
  }

  mlir::LogicalResult emitBody(ElementalEmitter &elemental) {
    mlir::OpBuilder &b = elemental.builder();
    mlir::Location loc = graph_.function().getLoc();
    mlir::Value tid = elemental.add(elemental.mul(blockIdX(b, loc), threads_), threadIdX(b, loc));
    if (fullSteps_ > 0) {
      auto loop = mlir::scf::ForOp::create(b, loc, elemental.index(0), elemental.index(fullSteps_), elemental.index(1));
      mlir::OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(loop.getBody()->getTerminator());
      elemental.pushScope();
      mlir::Value firstGroup = elemental.add(tid, elemental.mul(loop.getInductionVar(), stride_));
      emitGroups(elemental, firstGroup, perThread_, gridThreads_);
      elemental.popScope();
    }
    if (leftoverStart_ < groups_) {
      auto loop = mlir::scf::ForOp::create(b, loc, elemental.add(tid, elemental.index(leftoverStart_)),
                                           elemental.index(groups_), elemental.index(gridThreads_));
      mlir::OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(loop.getBody()->getTerminator());
      elemental.pushScope();
      emitGroups(elemental, loop.getInductionVar(), 1, 0);
      elemental.popScope();
    }
    return mlir::success();
  }

  // The values of `count` groups starting at `firstGroup`, `gap` groups
  // apart, computed before any is stored.
  void emitGroups(ElementalEmitter &elemental, mlir::Value firstGroup, int64_t count, int64_t gap) {
    struct Pending {
      llvm::SmallVector<mlir::Value> index;
      llvm::SmallVector<llvm::SmallVector<mlir::Value>> values; // per output, per lane
    };
    llvm::SmallVector<Pending> pending;
    for (int64_t k = 0; k < count; ++k) {
      mlir::Value group = elemental.add(firstGroup, elemental.index(k * gap));
      mlir::Value element = elemental.mul(group, width_);
      Pending p;
      p.index = shape_.empty() ? llvm::SmallVector<mlir::Value>{} : elemental.delinearize(element, shape_);
      llvm::SmallVector<mlir::Value> lanes =
          shape_.empty() ? llvm::SmallVector<mlir::Value>{} : elemental.laneGroup(p.index.back(), width_);
      for (const FusionGraph::Output &output : graph_.outputs()) {
        llvm::SmallVector<mlir::Value> laneValues;
        for (int64_t u = 0; u < width_; ++u) {
          llvm::SmallVector<mlir::Value> index = p.index;
          if (!index.empty())
            index.back() = lanes[u];
          laneValues.push_back(elemental.node(output.node, index));
        }
        p.values.push_back(laneValues);
      }
      pending.push_back(p);
    }
    if (elemental.failed())
      return;
    for (Pending &p : pending)
      for (auto [output, values] : llvm::zip(graph_.outputs(), p.values)) {
        mlir::Value target = graph_.node(output.node).op.getDpsInits()[0];
        if (width_ == 1)
          elemental.store(target, p.index, values.front());
        else
          elemental.storeGroup(target, p.index, values);
      }
  }

  // The iteration space and the launch (chooseLaunch).
  llvm::SmallVector<int64_t> shape_;
  int64_t elements_ = 1, width_ = 1, groups_ = 0;
  int64_t threads_ = 0, perThread_ = 1, blocks_ = 1, gridThreads_ = 0, stride_ = 0;
  int64_t fullSteps_ = 0, leftoverStart_ = 0;
};

} // namespace

std::unique_ptr<FusionEmitter> makeLoopEmitter(const FusionGraph &graph, const EmitterOptions &options) {
  return std::make_unique<LoopEmitter>(graph, options);
}

} // namespace mlpipe::emitters
