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
constexpr int64_t kThreadsPerBlock = 256;
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
    llvm::SmallVector<int64_t> shape = first.output.shape;
    for (const FusionGraph::Output &output : graph_.outputs())
      if (graph_.node(output.node).output.shape != shape)
        return why = "its outputs have different shapes", mlir::failure();

    int64_t elements = 1;
    for (int64_t extent : shape)
      elements *= extent;
    mlir::Type elementType = mlir::cast<mlir::MemRefType>(first.op.getDpsInits()[0].getType()).getElementType();
    int64_t innermost = shape.empty() ? 1 : shape.back();
    // Vectorise when whole groups fit the innermost extent: a group never
    // straddles two rows.
    int64_t width = vectorWidthFor(elementType, options_);
    while (width > 1 && innermost % width != 0)
      width /= 2;
    int64_t groups = elements / width;
    const DeviceDescription &device = *options_.device;
    int64_t threads =
        std::min<int64_t>(kThreadsPerBlock, llvm::divideCeilSigned(groups, device.warpSize) * device.warpSize);
    int64_t residentBlocks = device.smCount * std::max<int64_t>(1, device.maxThreadsPerSm / threads);
    // Unroll only when there is work enough to give every resident thread
    // all its groups.
    int64_t perThread = groups >= residentBlocks * threads * kGroupsPerThread ? kGroupsPerThread : 1;
    int64_t blocks = std::min(llvm::divideCeilSigned(groups, threads * perThread), kWavesOfBlocks * residentBlocks);
    blocks = std::max<int64_t>(blocks, 1);
    int64_t gridThreads = blocks * threads;
    int64_t stride = gridThreads * perThread;
    int64_t fullSteps = groups / stride;
    int64_t leftoverStart = fullSteps * stride;

    KernelSignature signature;
    signature.name = kernelName(graph_);
    signature.bytesMoved = fusionBytes(graph_);
    signature.blockSize = {static_cast<int32_t>(threads), 1, 1};
    mlir::Location loc = graph_.function().getLoc();
    auto kernel = buildFusionKernel(
        kernels, graph_, signature,
        [&](ElementalEmitter &elemental, mlir::gpu::GPUFuncOp) -> mlir::LogicalResult {
          mlir::OpBuilder &b = elemental.builder();
          mlir::Value tid = elemental.add(elemental.mul(blockIdX(b, loc), threads), threadIdX(b, loc));
          // The values of `count` groups starting at `firstGroup`, `gap`
          // groups apart, computed before any is stored.
          auto emitGroups = [&](mlir::Value firstGroup, int64_t count, int64_t gap) {
            struct Pending {
              llvm::SmallVector<mlir::Value> index;
              llvm::SmallVector<llvm::SmallVector<mlir::Value>> values; // per output, per lane
            };
            llvm::SmallVector<Pending> pending;
            for (int64_t k = 0; k < count; ++k) {
              mlir::Value group = elemental.add(firstGroup, elemental.index(k * gap));
              mlir::Value element = elemental.mul(group, width);
              Pending p;
              p.index = shape.empty() ? llvm::SmallVector<mlir::Value>{} : elemental.delinearize(element, shape);
              llvm::SmallVector<mlir::Value> lanes =
                  shape.empty() ? llvm::SmallVector<mlir::Value>{} : elemental.laneGroup(p.index.back(), width);
              for (const FusionGraph::Output &output : graph_.outputs()) {
                llvm::SmallVector<mlir::Value> laneValues;
                for (int64_t u = 0; u < width; ++u) {
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
                if (width == 1)
                  elemental.store(target, p.index, values.front());
                else
                  elemental.storeGroup(target, p.index, values);
              }
          };

          if (fullSteps > 0) {
            auto loop =
                mlir::scf::ForOp::create(b, loc, elemental.index(0), elemental.index(fullSteps), elemental.index(1));
            mlir::OpBuilder::InsertionGuard guard(b);
            b.setInsertionPoint(loop.getBody()->getTerminator());
            elemental.pushScope();
            mlir::Value firstGroup = elemental.add(tid, elemental.mul(loop.getInductionVar(), stride));
            emitGroups(firstGroup, perThread, gridThreads);
            elemental.popScope();
          }
          if (leftoverStart < groups) {
            auto loop = mlir::scf::ForOp::create(b, loc, elemental.add(tid, elemental.index(leftoverStart)),
                                                 elemental.index(groups), elemental.index(gridThreads));
            mlir::OpBuilder::InsertionGuard guard(b);
            b.setInsertionPoint(loop.getBody()->getTerminator());
            elemental.pushScope();
            emitGroups(loop.getInductionVar(), 1, 0);
            elemental.popScope();
          }
          return mlir::success();
        },
        why);
    if (mlir::failed(kernel))
      return mlir::failure();
    MLPIPE_DEBUG(kDebugEmitters, os << signature.name << ": loop emitter, " << elements << " elements in groups of "
                                    << width << ", " << blocks << " blocks x " << threads << " threads, " << perThread
                                    << " groups per thread per step, " << fullSteps << " full steps"
                                    << (leftoverStart < groups ? " and a bounded tail" : "") << " (" << device.smCount
                                    << " SMs)\n");
    mlir::OpBuilder host(call);
    LaunchDims dims;
    dims.grid = {blocks, 1, 1};
    dims.block = {threads, 1, 1};
    kernels.launch(host, call.getLoc(), *kernel, dims, call.getOperands());
    call.erase();
    return mlir::success();
  }
};

} // namespace

std::unique_ptr<FusionEmitter> makeLoopEmitter(const FusionGraph &graph, const EmitterOptions &options) {
  return std::make_unique<LoopEmitter>(graph, options);
}

} // namespace mlpipe::emitters
