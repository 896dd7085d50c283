// The generated matmul's warpgroup form (sm_90a): A and B stored in bf16 or
// f16, products on wgmma.mma_async m64nNk16 with f32 accumulation, both
// operands read by the tensor cores straight from shared memory through
// matrix descriptors (no ldmatrix, no fragments in registers).
//
// A block of 1 to 3 warpgroups (128 threads each) computes a blockM x
// blockN tile of C, each warpgroup 64 rows of it (one m64nN accumulator:
// N / 2 f32 a thread). K-slices of 64 (one 128-byte row of 16-bit
// elements) go to shared memory by cp.async in S stages:
//
//   cp.async slices 0 .. S-3 into stages 0 .. S-3, a group each
//   for t in slices:
//     wait until at most S-3 groups are pending; fence.proxy.async; barrier
//                                  (slice t has landed, visible to wgmma;
//                                   every warpgroup has waited for slice
//                                   t-2's products)
//     cp.async slice t+S-2 into stage (t-2) mod S, a group
//     wgmma.fence; four wgmma (16 of K each) on stage t mod S; commit
//     wgmma.wait_group 1           (slice t-1's products are done)
//   wgmma.wait_group 0
//   barrier; each thread's accumulators into an f32 tile over the stages;
//   barrier; C <- epilogue(tile [+ C]), a row's consecutive columns a warp
//                                  (kWarpgroupStagedEpilogue; or straight
//                                   from the accumulators, two columns a
//                                   store)
//
// so that slice t's products run while slice t+1's wait and barrier pass,
// S-2 slices are in flight while one is multiplied and the one before may
// still be read, and one barrier a slice suffices (kWarpgroupStagesInUse).
// With three stages (blocks sharing an SM), a second barrier a slice buys
// a second slice in flight (kWarpgroupOneBarrierMinStages): slices 0 ..
// S-2 first, and at step t, after the products' wait, a barrier, then
// slice t+S-1 into stage (t-1) mod S.
//
// Shared memory holds each operand in the 128-byte swizzle the descriptors
// name: a K-major operand (A as [m][k]; B as [n][k] where K is B's
// contiguous axis) as rows of 64 elements, 16-byte chunk c of row r at
// chunk c ^ (r mod 8); an N-major B ([k][n] as stored) as atoms of 64
// columns, each 64 K rows of 128 bytes, chunk c of K row r at c ^ (r mod
// 8). Descriptor fields (start, leading and stride byte offsets): A and a
// K-major B start at the warpgroup's first row plus 32 bytes a K-step,
// stride 1024 bytes (8 rows); an N-major B starts 16 rows (2048 bytes) a
// K-step further, its 8-row groups 1024 bytes apart and its atoms 8192
// bytes apart (the leading offset). The swizzle is a function of the
// address, so the stages are placed at a 1024-byte boundary of the block's
// dynamic shared memory (whose base is only 16-byte aligned: one more KiB
// is asked for).
//
// Rows of A and columns of B past the edge are clamped to the last one
// (they feed only elements of C that are never stored); K past the edge
// is zero-filled (cp.async reads nothing there).
#include "matmul/matmul_building.h"

#include "codegen/debug.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"

#include <algorithm>
#include <array>

namespace mlpipe::emitters::generated_matmul {

namespace {

constexpr int64_t kWarpgroupThreads = 128;
// wgmma's M and K for 16-bit operands.
constexpr int64_t kWgmmaM = 64, kWgmmaK = 16;
// K per pipeline step: one 128-byte swizzled row of 16-bit elements.
constexpr int64_t kWarpgroupBlockK = 64;
// The 128-byte swizzle: 8 rows of 128 bytes repeat the pattern; cp.async
// moves one 16-byte chunk.
constexpr int64_t kSwizzleRowBytes = 128, kSwizzleRows = 8, kSwizzleAtomBytes = 1024, kChunkBytes = 16;
// The columns of one N-major atom (128 bytes of 16-bit elements).
constexpr int64_t kAtomColumns = 64;
// wgmma descriptor fields: the swizzle mode (bits 62-63, 1 = 128 bytes);
// addresses and offsets in 16-byte units.
constexpr int64_t kDescriptorSwizzle128 = int64_t(1) << 62;

// Block tiles: blockM / 64 warpgroups (128 or 64 rows), each one m64 x
// blockN accumulator (blockN / 2 registers a thread), blockN from 64 to
// 256 (wgmma's widest) in steps that split B's chunks evenly over the
// block's threads: 32 columns for 128 rows, 16 for 64. Candidates go from
// the largest area down (128 rows first at equal area: the widest tiles
// read the fewest bytes per product).
constexpr int64_t kWarpgroupMinColumns = 64, kWarpgroupMaxColumns = 256;
// A forced tile may be narrower, down to 32 columns (wgmma takes N in
// steps of 8): more blocks for a product of few tiles, two of them an SM
// (GPT-2's c_proj at T = 1024, 1024 x 768, runs 128 blocks of 64 x 96,
// one warpgroup an SM).
constexpr int64_t kWarpgroupMinForcedColumns = 32;
struct WarpgroupShape {
  int64_t blockM, blockN;
};
int64_t columnStep(int64_t blockM) { return blockM / kWgmmaM * kWarpgroupThreads / (kSwizzleRowBytes / kChunkBytes); }
// A forced tile may also have three warpgroups (192 rows, columns in steps
// of 48): of the tiles whose accumulators fit the registers, the one that
// reads the fewest bytes of A and B per product, for a product whose tiles
// are many waves of the SMs (the logits: their 128x256 tiles read 930 MB
// from L2 at 74% of its peak).
constexpr int64_t kWarpgroupMaxRows = 192;
llvm::SmallVector<WarpgroupShape> warpgroupShapes() {
  llvm::SmallVector<WarpgroupShape> shapes;
  for (int64_t blockM : {128, 64})
    for (int64_t n = kWarpgroupMaxColumns; n >= kWarpgroupMinColumns; n -= columnStep(blockM))
      shapes.push_back({blockM, n});
  std::stable_sort(shapes.begin(), shapes.end(), [](const WarpgroupShape &x, const WarpgroupShape &y) {
    return x.blockM * x.blockN > y.blockM * y.blockN;
  });
  return shapes;
}
// The tile is chosen by the work of the busiest SM: the blocks it runs
// (the grid over the SMs, rounded up) times the tile's area; a tie keeps
// the larger tile. The tiles then fit the grid to the SMs: GPT-2's 1024 x
// 3072 (c_fc) in 128 x 192 is 128 blocks, one an SM (128 x 128: 192
// blocks, two on some SMs); 1024 x 2304 (c_attn) in 128 x 160 is 120
// (128 x 192: 96, a quarter of the SMs idle); 1024 x 768 (c_proj) in 64
// x 96 is 128 (128 x 64: 96).
int64_t busiestSmWork(const WarpgroupShape &shape, const Problem &p, const DeviceDescription &device) {
  int64_t blocks = p.batch * llvm::divideCeilSigned(p.m, shape.blockM) * llvm::divideCeilSigned(p.n, shape.blockN);
  return llvm::divideCeilSigned(blocks, device.smCount) * shape.blockM * shape.blockN;
}
// Stages not being filled: the one multiplied, and the one the products
// of the slice before may still read (wgmma.wait_group 1). Copying into
// the stage two slices back needs no second barrier a slice: a profile of
// the form with the copy a slice further ahead, behind a second barrier
// (c_fc and c_proj at T = 1024, H200, ncu) had its warps waiting on
// barriers, and the 48 slices of c_proj's K = 3072 took the same 22 µs in
// every tile from 64x64 to 128x64.
constexpr int64_t kWarpgroupStagesInUse = 2;
// Below this many stages the loop takes a second barrier a slice and keeps
// one more slice in flight: GPT-2's c_attn at T = 1024 in 64x144 tiles,
// two blocks an SM in three stages each, took 14.0 µs that way and 16.3
// with one barrier and one slice in flight (bench matmul, H200).
constexpr int64_t kWarpgroupOneBarrierMinStages = 4;
// Stages of the cp.async pipeline: as many as fit the blocks the grid
// puts on an SM (fewer blocks where not even three fit), up to this many
// (four slices in flight), no more than the product has slices beside the
// two in use (at least three). Blocks sharing an SM cover each other's
// waits: GPT-2's c_attn in 64x144 tiles runs two an SM in three stages
// each. A product of one slice (attention's Q·Kᵀ, K = 64) takes three.
constexpr int64_t kMaxWarpgroupStages = 6;
// The tile is chosen among those whose blocks an SM leave at least this
// many stages (kWarpgroupOneBarrierMinStages: two slices in flight, one
// barrier a slice), or all the product's slices beside the two in use,
// where any tile does. GPT-2's c_attn at T = 1024 (1024 x 2304, K = 768)
// in 64 x 144 tiles, two blocks an SM in three stages, took 15.3 us under
// ncu on the H200, warps waiting on the stage's copies (long scoreboard
// 7.0 per issue); in 128 x 192 tiles, one block an SM in five stages,
// 12.2 us (2.7 per issue), though a quarter of the SMs idle (C through
// shared memory, 2026-12-05). With this rule c_attn takes 128 x 160 (120
// blocks, five stages): on an H100, 14.2-14.5 us against 16.6-16.9 for
// 64 x 144 and 13.0-13.1 for 128 x 192 in the same run (sweep-matmul.sh;
// why 128 x 160 trails 128 x 192 is not yet profiled).
constexpr int64_t kWarpgroupMinStagesChosen = kWarpgroupOneBarrierMinStages;
// Registers a thread takes beside its accumulators (addresses, copies'
// slots, the epilogue).
constexpr int64_t kWarpgroupRegistersBesideAccumulators = 40;
// C goes out through shared memory, where it fits the stages' (free once
// every warpgroup's products are done): each thread stores its
// accumulators there, then the block writes C a row's run of consecutive
// columns a warp, up to 16 bytes a thread. Stored where the accumulators
// lie, a warp's store covers 8 rows of C, 4 to 8 bytes of each (with N
// odd, as the logits' 50257, one 2-byte element a thread), and the
// logits' 1576 tiles of 128x256 issue as many store instructions as
// cp.async (profile: warps waiting on the LSU queue far more than on
// anything else).
constexpr bool kWarpgroupStagedEpilogue = true;
// The staged tile's rows (f32) are padded by 8 floats: a warp's pairs of
// accumulators (8 rows by 4 pairs) then fall in 32 distinct banks for
// any block width (a multiple of 16).
constexpr int64_t kStagingRowPad = 8;

struct WarpgroupConfig {
  int64_t blockM = 128, blockN = 128, stages = 2, blocksPerSm = 1;
  bool kMajorB = true;
  // K split across the grid (the option split-k): each split's blocks
  // multiply kPerSplit of K (whole slices) into their slab of the partial
  // products, which a second kernel adds up with the epilogue.
  int64_t splitK = 1, kPerSplit = 0;
  // C through shared memory (kWarpgroupStagedEpilogue), widthC columns a
  // thread.
  bool stagedEpilogue = false;
  int64_t widthC = 1;
  int64_t stagingRowFloats() const { return blockN + kStagingRowPad; }
  int64_t stagingBytes() const { return blockM * stagingRowFloats() * 4; }
  int64_t slicesPerSplit() const { return kPerSplit / kWarpgroupBlockK; }
  int64_t warpgroups() const { return blockM / kWgmmaM; }
  int64_t threads() const { return warpgroups() * kWarpgroupThreads; }
  int64_t accumulators() const { return blockN / 2; }
  int64_t stageBytesA(int64_t eb) const { return blockM * kWarpgroupBlockK * eb; }
  // N-major: whole 64-column atoms (the last one in part where blockN is
  // no multiple of 64).
  int64_t atomsB() const { return llvm::divideCeilSigned(blockN, kAtomColumns); }
  int64_t stageBytesB(int64_t eb) const { return (kMajorB ? blockN : atomsB() * kAtomColumns) * kWarpgroupBlockK * eb; }
  int64_t stagesBytes(int64_t eb) const { return stages * (stageBytesA(eb) + stageBytesB(eb)); }
  // The stages (and C's staged tile over them), at a 1024-byte boundary
  // found at run time.
  int64_t sharedBytes(int64_t eb) const {
    return std::max(stagesBytes(eb), stagedEpilogue ? stagingBytes() : 0) + kSwizzleAtomBytes;
  }
  int64_t blocks(const Problem &p) const {
    return p.batch * llvm::divideCeilSigned(p.m, blockM) * llvm::divideCeilSigned(p.n, blockN) * splitK;
  }
};

// Why the warpgroup form cannot compute this product (empty: it can).
std::string warpgroupRefusal(const Problem &p, const LoadPlan &planA, const LoadPlan &planB,
                             const DeviceDescription &device) {
  if (!device.warpgroupMma)
    return "wgmma needs sm_90a";
  if (!p.storage.isBF16() && !p.storage.isF16())
    return "wgmma here takes bf16 or f16 A and B";
  if (p.prologue)
    return "A's row computed in the kernel is the skinny form's";
  const int64_t chunk = kChunkBytes / p.elementBytes;
  if (!planA.alongK || planA.width != chunk)
    return "A must be read along K in 16-byte vectors";
  if (planB.width != chunk)
    return "B must be read in 16-byte vectors";
  return "";
}

mlir::FailureOr<WarpgroupConfig> chooseWarpgroup(const Problem &p, const LoadPlan &planB,
                                                 const GeneratedMatmulOptions &options, const DeviceDescription &device,
                                                 bool splitAllowed, std::string &error) {
  WarpgroupConfig c;
  c.kMajorB = planB.alongK;
  const int64_t allSlices = llvm::divideCeilSigned(p.k, kWarpgroupBlockK);
  c.kPerSplit = allSlices * kWarpgroupBlockK;
  if (options.splitK > 1 && splitAllowed) {
    c.kPerSplit = llvm::divideCeilSigned(allSlices, options.splitK) * kWarpgroupBlockK;
    c.splitK = llvm::divideCeilSigned(p.k, c.kPerSplit);
  }
  if (options.blockTile[0] > 0) {
    c.blockM = options.blockTile[0];
    c.blockN = options.blockTile[1];
    if (c.blockM % kWgmmaM != 0 || c.blockM < kWgmmaM || c.blockM > kWarpgroupMaxRows ||
        c.blockN < kWarpgroupMinForcedColumns || c.blockN > kWarpgroupMaxColumns ||
        c.blockN % columnStep(c.blockM) != 0) {
      error = "the warpgroup form's block tile is 64 rows by 32 to 256 columns in steps of 16, 128 rows in steps "
              "of 32, or 192 rows in steps of 48";
      return mlir::failure();
    }
  }
  const int64_t eb = p.elementBytes;
  const int64_t slices = c.slicesPerSplit();
  const int64_t maxStages =
      std::clamp<int64_t>(slices + kWarpgroupStagesInUse, kWarpgroupStagesInUse + 1, kMaxWarpgroupStages);
  auto stagesFitting = [&](const WarpgroupConfig &t, int64_t blocksPerSm) {
    int64_t limit = std::min(device.sharedMemoryPerBlockOptIn,
                             device.sharedMemoryPerSm / blocksPerSm - device.sharedMemoryReservedPerBlock);
    int64_t perStage = t.stageBytesA(eb) + t.stageBytesB(eb);
    return std::min(maxStages, (limit - kSwizzleAtomBytes) / perStage);
  };
  // The blocks an SM the grid puts there (within registers and threads),
  // then as many stages as that many blocks' shared memory holds, fewer
  // blocks where not even three stages fit.
  auto fitToSm = [&](WarpgroupConfig &t) {
    int64_t registers = t.accumulators() + kWarpgroupRegistersBesideAccumulators;
    int64_t byRegisters = std::max<int64_t>(1, device.registersPerSm / (registers * t.threads()));
    t.blocksPerSm = std::max<int64_t>(1, std::min({byRegisters, int64_t(device.maxThreadsPerSm) / t.threads(),
                                                   llvm::divideCeilSigned(t.blocks(p), int64_t(device.smCount))}));
    for (; t.blocksPerSm > 1 && stagesFitting(t, t.blocksPerSm) < kWarpgroupStagesInUse + 1; --t.blocksPerSm) {
    }
    t.stages = stagesFitting(t, t.blocksPerSm);
  };
  if (options.blockTile[0] <= 0) {
    // The least work on the busiest SM, among the tiles whose pipeline
    // keeps kWarpgroupMinStagesChosen stages (or all the product's slices
    // beside the two in use), where any does.
    const int64_t deepEnough = std::min(kWarpgroupMinStagesChosen, maxStages);
    int64_t best = 0;
    bool bestDeep = false;
    for (const WarpgroupShape &shape : warpgroupShapes()) {
      WarpgroupConfig t = c;
      t.blockM = shape.blockM;
      t.blockN = shape.blockN;
      fitToSm(t);
      bool deep = t.stages >= deepEnough;
      int64_t work = busiestSmWork(shape, p, device);
      if (best == 0 || (deep && !bestDeep) || (deep == bestDeep && work < best)) {
        best = work;
        bestDeep = deep;
        c.blockM = shape.blockM;
        c.blockN = shape.blockN;
      }
    }
  }
  fitToSm(c);
  if (options.stages > 0) {
    c.stages = options.stages;
    for (; c.blocksPerSm > 1 && stagesFitting(c, c.blocksPerSm) < c.stages; --c.blocksPerSm) {
    }
    if (c.stages < kWarpgroupStagesInUse + 1 || c.sharedBytes(eb) > device.sharedMemoryPerBlockOptIn) {
      error = "stages=" + std::to_string(options.stages) + " must be at least 3 and fit the " +
              std::to_string(device.sharedMemoryPerBlockOptIn) + " B of shared memory a block may have";
      return mlir::failure();
    }
    return c;
  }
  if (c.stages < kWarpgroupStagesInUse + 1) {
    error = "three stages of the warpgroup form's tiles do not fit this device's shared memory";
    return mlir::failure();
  }
  return c;
}

// One operand's copies: each thread's 16-byte chunks of a slice, fixed for
// the whole loop, consecutive threads along the operand's contiguous axis.
struct OperandCopies {
  Matrix *matrix = nullptr;
  bool isA = true, kMajor = true;
  int64_t blockOuter = 0, extent = 0;
  Value shared;      // the stages: [stage][outer][k], or [stage][atom][k][64]
  Value sharedBytes; // the stages' address in shared memory (index)
  int64_t stageBytes = 0;
  struct Chunk {
    Value outer, kk;      // the chunk's first element in the slice
    Value destination[3]; // its place in the stage (after the stage index)
  };
  llvm::SmallVector<Chunk> chunks;
};

class WarpgroupBody {
public:
  // `p` is the product the kernel computes (with split K, C the partial
  // products).
  WarpgroupBody(mlir::OpBuilder &b, mlir::gpu::GPUFuncOp f, const Problem &p, const WarpgroupConfig &cfg,
                bool bBeforeWait)
      : b(b), f(f), loc(f.getLoc()), ix{b, loc}, p(p), cfg(cfg), bBeforeWait(bBeforeWait), storage(p.storage),
        f32(b.getF32Type()), eb(p.elementBytes), a(f.getArgument(0), eb), bm(f.getArgument(1), eb),
        c(f.getArgument(2), bytesOfElement(p.cType)) {
    copiesA.matrix = &a;
    copiesA.isA = true;
    copiesA.kMajor = true;
    copiesA.blockOuter = cfg.blockM;
    copiesA.extent = p.m;
    copiesA.stageBytes = cfg.stageBytesA(eb);
    copiesB.matrix = &bm;
    copiesB.isA = false;
    copiesB.kMajor = cfg.kMajorB;
    copiesB.blockOuter = cfg.blockN;
    copiesB.extent = p.n;
    copiesB.stageBytes = cfg.stageBytesB(eb);
  }

  void build(int64_t widthCAllowed) {
    if (cfg.blocksPerSm > 1)
      f->setAttr("nvvm.minctasm", b.getI32IntegerAttr(static_cast<int32_t>(cfg.blocksPerSm)));
    for (unsigned i = 3; i < f.getNumArguments(); ++i)
      epilogueOperands.push_back(f.getArgument(i));
    placeBlock();
    placeShared();
    placeChunks(copiesA);
    placeChunks(copiesB);
    Value result = pipeline();
    if (cfg.stagedEpilogue)
      writeCStaged(result);
    else
      writeC(result, widthCAllowed);
  }

private:
  void placeBlock() {
    tid = mlir::gpu::ThreadIdOp::create(b, loc, mlir::gpu::Dimension::x);
    Value blockX = mlir::gpu::BlockIdOp::create(b, loc, mlir::gpu::Dimension::x);
    Value blockY = mlir::gpu::BlockIdOp::create(b, loc, mlir::gpu::Dimension::y);
    const bool mFastest = llvm::divideCeilSigned(p.m, cfg.blockM) <= llvm::divideCeilSigned(p.n, cfg.blockN);
    // z: the batch, or with split K the split's slab of the partial
    // products (split x batches + batch).
    Value blockZ;
    if (p.rank == 3 || cfg.splitK > 1)
      blockZ = mlir::gpu::BlockIdOp::create(b, loc, mlir::gpu::Dimension::z);
    if (cfg.splitK > 1) {
      batch = p.rank == 3 ? ix.rem(blockZ, p.batch) : Value();
      kStart = ix.mul(ix.div(blockZ, p.batch), cfg.kPerSplit);
      batchOfC = blockZ;
    } else {
      batch = p.rank == 3 ? blockZ : Value();
      kStart = ix.c(0);
      batchOfC = batch;
    }
    m0 = ix.mul(mFastest ? blockX : blockY, cfg.blockM);
    n0 = ix.mul(mFastest ? blockY : blockX, cfg.blockN);
    steps = cfg.slicesPerSplit();
    maskK = steps * kWarpgroupBlockK * cfg.splitK != p.k;
    warpgroup = ix.div(tid, kWarpgroupThreads);
    Value lane = ix.rem(tid, 32);
    warpInGroup = ix.rem(ix.div(tid, 32), kWarpgroupThreads / 32);
    group = ix.div(lane, 4);
    inGroup = ix.rem(lane, 4);
  }

  // The stages as views of dynamic shared memory from its first 1024-byte
  // boundary: A's, then B's.
  void placeShared() {
    auto space = mlir::gpu::AddressSpaceAttr::get(b.getContext(), mlir::gpu::AddressSpace::Workgroup);
    auto bytes =
        mlir::MemRefType::get({mlir::ShapedType::kDynamic}, b.getI8Type(), mlir::MemRefLayoutAttrInterface(), space);
    dynamic = mlir::gpu::DynamicSharedMemoryOp::create(b, loc, bytes);
    Value base = mlir::memref::ExtractAlignedPointerAsIndexOp::create(b, loc, dynamic);
    // (1024 - base mod 1024) mod 1024
    pad = ix.rem(ix.sub(ix.c(kSwizzleAtomBytes), ix.rem(base, kSwizzleAtomBytes)), kSwizzleAtomBytes);
    const int64_t offsetB = cfg.stages * copiesA.stageBytes;
    auto place = [&](OperandCopies &copies, int64_t offset, llvm::ArrayRef<int64_t> shape) {
      Value at = ix.add(pad, offset);
      copies.shared =
          mlir::memref::ViewOp::create(b, loc, workgroupType(shape, storage), dynamic, at, mlir::ValueRange{});
      copies.sharedBytes = ix.add(base, at);
    };
    place(copiesA, 0, {cfg.stages, cfg.blockM, kWarpgroupBlockK});
    if (copiesB.kMajor)
      place(copiesB, offsetB, {cfg.stages, cfg.blockN, kWarpgroupBlockK});
    else
      place(copiesB, offsetB, {cfg.stages, cfg.atomsB(), kWarpgroupBlockK, kAtomColumns});
  }

  // Chunk q of a slice: K-major, row q / 8 and chunk q mod 8 along K;
  // N-major, K row q / (blockN / 8) and chunk q mod (blockN / 8) along N.
  // Each lands at its swizzled place: chunk c of shared row r at c ^ (r
  // mod 8).
  void placeChunks(OperandCopies &copies) {
    const int64_t chunkElements = kChunkBytes / eb;
    const int64_t perRow = (copies.kMajor ? kWarpgroupBlockK : copies.blockOuter) / chunkElements;
    const int64_t count = copies.blockOuter * kWarpgroupBlockK / chunkElements;
    for (int64_t j = 0; j < count / cfg.threads(); ++j) {
      Value q = ix.add(tid, j * cfg.threads());
      Value row = ix.div(q, perRow), chunk = ix.rem(q, perRow);
      OperandCopies::Chunk ch;
      if (copies.kMajor) {
        ch.outer = row;
        ch.kk = ix.mul(chunk, chunkElements);
        Value swizzled = b.createOrFold<mlir::arith::XOrIOp>(loc, chunk, ix.rem(row, kSwizzleRows));
        ch.destination[0] = row;
        ch.destination[1] = ix.mul(swizzled, chunkElements);
      } else {
        ch.kk = row;
        ch.outer = ix.mul(chunk, chunkElements);
        Value inAtom = ix.rem(chunk, kAtomColumns / chunkElements);
        Value swizzled = b.createOrFold<mlir::arith::XOrIOp>(loc, inAtom, ix.rem(row, kSwizzleRows));
        ch.destination[0] = ix.div(chunk, kAtomColumns / chunkElements);
        ch.destination[1] = row;
        ch.destination[2] = ix.mul(swizzled, chunkElements);
      }
      copies.chunks.push_back(ch);
    }
  }

  // The cp.async copies of one operand's slice `slice` into stage `stage`.
  // A slice past the last (the pipeline's tail) is all zero-filled: its
  // copies read nothing.
  void copySlice(OperandCopies &copies, Value slice, Value stage, llvm::SmallVectorImpl<Value> &tokens) {
    const int64_t width = kChunkBytes / eb;
    const int64_t lastSlice = steps - 1;
    Value live = ix.lt(slice, lastSlice + 1);
    if (std::optional<int64_t> known = mlir::getConstantIntValue(live); known && *known)
      live = Value();
    Value k0 = ix.add(kStart, ix.mul(ix.min(slice, lastSlice), kWarpgroupBlockK));
    Value source = copies.matrix->along(ix, /*alongRows=*/copies.isA ? false : copies.kMajor);
    for (const OperandCopies::Chunk &ch : copies.chunks) {
      Value outer = ix.add(copies.isA ? m0 : n0, ch.outer);
      if (copies.extent % copies.blockOuter != 0)
        outer = ix.min(outer, copies.extent - (copies.kMajor ? 1 : width));
      Value k = ix.add(k0, ch.kk);
      Value present;
      if (maskK) {
        present = mlir::arith::SelectOp::create(b, loc, ix.lt(k, p.k), ix.c(width), ix.c(0));
        k = ix.min(k, p.k - (copies.kMajor ? width : 1));
      }
      if (live)
        present = b.createOrFold<mlir::arith::SelectOp>(loc, live, present ? present : ix.c(width), ix.c(0));
      llvm::SmallVector<Value> from;
      if (p.rank == 3)
        from.push_back(batch);
      from.push_back(copies.kMajor ? outer : k);
      from.push_back(copies.kMajor ? k : outer);
      llvm::SmallVector<Value> to{stage};
      for (Value d : ch.destination)
        if (d)
          to.push_back(d);
      tokens.push_back(mlir::nvgpu::DeviceAsyncCopyOp::create(b, loc, copies.shared, to, source, from,
                                                              b.getIndexAttr(width), present, b.getUnitAttr()));
    }
  }

  Value copySlices(Value slice, Value stage) {
    llvm::SmallVector<Value> tokens;
    copySlice(copiesA, slice, stage, tokens);
    copySlice(copiesB, slice, stage, tokens);
    return mlir::nvgpu::DeviceAsyncCreateGroupOp::create(b, loc, tokens);
  }

  bool oneBarrier() const { return cfg.stages >= kWarpgroupOneBarrierMinStages; }
  // Slices in flight while one is multiplied.
  int64_t ahead() const { return cfg.stages - (oneBarrier() ? kWarpgroupStagesInUse : 1); }
  int64_t firstSlices() const { return ahead(); }

  // Slices 0 .. ahead()-1, a group each; where B is copied before the wait
  // (kTensorCoreCopiesBBeforeWait), all of B's first, then the wait, then
  // A's (B's join the first group).
  Value copyFirstSlices() {
    llvm::SmallVector<Value> early;
    if (bBeforeWait) {
      for (int64_t s = 0; s < firstSlices(); ++s)
        copySlice(copiesB, ix.c(s), ix.c(s), early);
      waitForKernelBefore(ix);
    }
    Value group;
    for (int64_t s = 0; s < firstSlices(); ++s) {
      if (!bBeforeWait) {
        group = copySlices(ix.c(s), ix.c(s));
        continue;
      }
      llvm::SmallVector<Value> tokens = s == 0 ? early : llvm::SmallVector<Value>();
      copySlice(copiesA, ix.c(s), ix.c(s), tokens);
      group = mlir::nvgpu::DeviceAsyncCreateGroupOp::create(b, loc, tokens);
    }
    return group;
  }

  // A wgmma matrix descriptor: the start address and the two byte offsets
  // (16-byte units) and the 128-byte swizzle.
  Value descriptor(Value address, int64_t leadingBytes, int64_t strideBytes) {
    auto i64 = b.getI64Type();
    Value start = mlir::arith::IndexCastUIOp::create(b, loc, i64, address);
    start = mlir::arith::AndIOp::create(
        b, loc, mlir::arith::ShRUIOp::create(b, loc, start, mlir::arith::ConstantIntOp::create(b, loc, i64, 4)),
        mlir::arith::ConstantIntOp::create(b, loc, i64, 0x3FFF));
    int64_t fields = ((leadingBytes >> 4) << 16) | ((strideBytes >> 4) << 32) | kDescriptorSwizzle128;
    return mlir::arith::OrIOp::create(b, loc, start, mlir::arith::ConstantIntOp::create(b, loc, i64, fields));
  }

  // The descriptors of K-step `s` of stage `stage` for this warpgroup.
  std::pair<Value, Value> descriptors(Value stage, int64_t s) {
    const int64_t kStepBytes = kWgmmaK * eb;
    Value addressA = ix.add(ix.add(copiesA.sharedBytes, ix.mul(stage, copiesA.stageBytes)),
                            ix.add(ix.mul(warpgroup, kWgmmaM * kSwizzleRowBytes), s * kStepBytes));
    Value descriptorA = descriptor(addressA, kChunkBytes, kSwizzleAtomBytes);
    Value stageB = ix.add(copiesB.sharedBytes, ix.mul(stage, copiesB.stageBytes));
    Value descriptorB;
    if (copiesB.kMajor)
      descriptorB = descriptor(ix.add(stageB, s * kStepBytes), kChunkBytes, kSwizzleAtomBytes);
    else
      descriptorB = descriptor(ix.add(stageB, s * kWgmmaK * kSwizzleRowBytes), kWarpgroupBlockK * kSwizzleRowBytes,
                               kSwizzleAtomBytes);
    return {descriptorA, descriptorB};
  }

  mlir::Type accumulatorType() {
    llvm::SmallVector<mlir::Type> fields(cfg.accumulators(), f32);
    return mlir::LLVM::LLVMStructType::getLiteral(b.getContext(), fields);
  }

  Value multiplySlice(Value stage, Value acc) {
    mlir::NVVM::WgmmaFenceAlignedOp::create(b, loc);
    auto ptx = storage.isBF16() ? mlir::NVVM::WGMMATypes::bf16 : mlir::NVVM::WGMMATypes::f16;
    auto shape = mlir::NVVM::MMAShapeAttr::get(b.getContext(), kWgmmaM, cfg.blockN, kWgmmaK);
    for (int64_t s = 0; s < kWarpgroupBlockK / kWgmmaK; ++s) {
      auto [descriptorA, descriptorB] = descriptors(stage, s);
      acc = mlir::NVVM::WgmmaMmaAsyncOp::create(
          b, loc, acc.getType(), acc, descriptorA, descriptorB, shape, ptx, ptx, mlir::NVVM::WGMMATypes::f32,
          mlir::NVVM::WGMMAScaleOut::one, mlir::NVVM::WGMMAScaleIn::one, mlir::NVVM::WGMMAScaleIn::one,
          mlir::NVVM::MMALayout::row, copiesB.kMajor ? mlir::NVVM::MMALayout::col : mlir::NVVM::MMALayout::row,
          mlir::NVVM::MMAIntOverflowAttr());
    }
    mlir::NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
    return acc;
  }

  Value pipeline() {
    const int64_t stages = cfg.stages;
    Value group = copyFirstSlices();
    Value acc = mlir::LLVM::UndefOp::create(b, loc, accumulatorType());
    Value zero = zeroScalar(ix, f32);
    for (int64_t i = 0; i < cfg.accumulators(); ++i)
      acc = mlir::LLVM::InsertValueOp::create(b, loc, acc, zero, llvm::ArrayRef<int64_t>{i});
    mlir::scf::ForOp loop =
        buildLoop(ix, ix.c(steps), mlir::ValueRange{acc}, [&](Value step, llvm::SmallVector<Value> carried) {
          mlir::nvgpu::DeviceAsyncWaitOp::create(b, loc, group, b.getI32IntegerAttr(static_cast<int32_t>(ahead() - 1)));
          mlir::NVVM::FenceProxyOp::create(
              b, loc, mlir::NVVM::ProxyKindAttr::get(b.getContext(), mlir::NVVM::ProxyKind::async_shared),
              mlir::NVVM::SharedSpaceAttr::get(b.getContext(), mlir::NVVM::SharedSpace::shared_cta));
          mlir::gpu::BarrierOp::create(b, loc);
          Value slice = ix.add(step, ahead());
          if (oneBarrier())
            copySlices(slice, ix.rem(slice, stages));
          Value next = multiplySlice(ix.rem(step, stages), carried[0]);
          mlir::NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 1);
          if (!oneBarrier()) {
            mlir::gpu::BarrierOp::create(b, loc);
            copySlices(slice, ix.rem(slice, stages));
          }
          return llvm::SmallVector<Value>{next};
        });
    mlir::NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 0);
    // No copy outlives the kernel.
    mlir::nvgpu::DeviceAsyncWaitOp::create(b, loc, group, b.getI32IntegerAttr(0));
    return loop.getResult(0);
  }

  // The accumulator is mma.sync's C layout for each warp's 16 rows
  // (writeAccumulatorTiles): warp w of the warpgroup holds rows 16w ..
  // 16w+15 of its 64, N / 8 tiles.
  void writeC(Value result, int64_t widthCAllowed) {
    OutputWriter writer{p, c, epilogueOperands};
    AccumulatorTiles tiles;
    tiles.rowOrigin = ix.add(m0, ix.add(ix.mul(warpgroup, kWgmmaM), ix.mul(warpInGroup, 16)));
    tiles.colOrigin = n0;
    tiles.group = group;
    tiles.inGroup = inGroup;
    tiles.tilesM = 1;
    tiles.tilesN = cfg.blockN / 8;
    tiles.rowEdge = p.m % cfg.blockM != 0;
    tiles.colEdge = p.n % cfg.blockN != 0;
    writeAccumulatorTiles(
        ix, writer, tiles,
        [&](int64_t i) { return mlir::LLVM::ExtractValueOp::create(b, loc, result, llvm::ArrayRef<int64_t>{i}); },
        batchOfC, widthCAllowed);
  }

  // C through shared memory (kWarpgroupStagedEpilogue). Once every
  // warpgroup's products are done (a barrier: the stages are free), each
  // thread stores its accumulators' pairs at their place in an f32 tile
  // over the stages; after a second barrier, thread q of the block takes
  // run q of widthC consecutive columns (runs along the tile's rows, then
  // down them) and writes it through the epilogue, one vector where widthC
  // > 1. The values and the epilogue are the direct path's: C's bits are
  // the same.
  void writeCStaged(Value result) {
    mlir::gpu::BarrierOp::create(b, loc);
    const int64_t rowFloats = cfg.stagingRowFloats();
    Value staging = mlir::memref::ViewOp::create(b, loc, workgroupType({cfg.blockM, rowFloats}, f32), dynamic, pad,
                                                 mlir::ValueRange{});
    Value rowOrigin = ix.add(ix.mul(warpgroup, kWgmmaM), ix.mul(warpInGroup, 16));
    auto pairType = mlir::VectorType::get({2}, f32);
    auto accumulator = [&](int64_t i) {
      return mlir::LLVM::ExtractValueOp::create(b, loc, result, llvm::ArrayRef<int64_t>{i});
    };
    for (int64_t r = 0; r < 2; ++r) {
      Value row = ix.add(ix.add(rowOrigin, group), r * 8);
      for (int64_t j = 0; j < cfg.blockN / 8; ++j) {
        Value col = ix.add(ix.mul(inGroup, 2), j * 8);
        int64_t base = j * 4 + r * 2;
        Value pair = mlir::vector::FromElementsOp::create(b, loc, pairType,
                                                          mlir::ValueRange{accumulator(base), accumulator(base + 1)});
        mlir::vector::StoreOp::create(b, loc, pair, staging, mlir::ValueRange{row, col}, false, llvm::MaybeAlign(8));
      }
    }
    mlir::gpu::BarrierOp::create(b, loc);
    OutputWriter writer{p, c, epilogueOperands};
    const int64_t width = cfg.widthC, runs = cfg.blockN / width, total = cfg.blockM * runs;
    const bool rowEdge = p.m % cfg.blockM != 0, colEdge = p.n % cfg.blockN != 0;
    auto runType = mlir::VectorType::get({width}, f32);
    for (int64_t first = 0; first < total; first += cfg.threads()) {
      Value q = ix.add(tid, first);
      Value inTile = first + cfg.threads() > total ? ix.lt(q, total) : Value();
      guarded(ix, inTile, [&] {
        Value rowInTile = ix.div(q, runs), colInTile = ix.mul(ix.rem(q, runs), width);
        Value row = ix.add(m0, rowInTile), col = ix.add(n0, colInTile);
        // widthC divides N: a run is wholly in C or wholly past it.
        Value inC = ix.both(rowEdge ? ix.lt(row, p.m) : Value(), colEdge ? ix.lt(col, p.n) : Value());
        guarded(ix, inC, [&] {
          Value values = mlir::vector::LoadOp::create(b, loc, runType, staging, mlir::ValueRange{rowInTile, colInTile},
                                                      false, llvm::MaybeAlign(4 * width));
          writer.write(ix, values, batchOfC, row, col, width, /*vectorC=*/width > 1);
        });
      });
    }
  }

  mlir::OpBuilder &b;
  mlir::gpu::GPUFuncOp f;
  mlir::Location loc;
  Ix ix;
  const Problem &p;
  const WarpgroupConfig &cfg;
  bool bBeforeWait;
  mlir::Type storage, f32;
  int64_t eb;
  Matrix a, bm, c;
  OperandCopies copiesA, copiesB;
  // Dynamic shared memory, and the offset of its first 1024-byte boundary.
  Value dynamic, pad;
  llvm::SmallVector<Value> epilogueOperands;
  // batch: A's and B's; batchOfC: C's (with split K, the partial
  // products' slab); kStart: the split's first K.
  Value tid, batch, batchOfC, kStart, m0, n0, warpgroup, warpInGroup, group, inGroup;
  int64_t steps = 0;
  bool maskK = false;
};

} // namespace

bool warpgroupTakes(const Problem &p, const DeviceDescription &device) {
  LoadPlan planA = planOperand(p, p.aType, /*isA=*/true, kWarpgroupBlockK, 128);
  LoadPlan planB = planOperand(p, p.bType, /*isA=*/false, kWarpgroupBlockK, 128);
  return warpgroupRefusal(p, planA, planB, device).empty();
}

mlir::LogicalResult emitWarpgroupMatmul(const ProductLaunch &launch, const Problem &p) {
  LoadPlan planA = planOperand(p, p.aType, /*isA=*/true, kWarpgroupBlockK, 128);
  LoadPlan planB = planOperand(p, p.bType, /*isA=*/false, kWarpgroupBlockK, 128);
  if (std::string refusal = warpgroupRefusal(p, planA, planB, launch.device); !refusal.empty())
    return mlir::emitError(launch.loc, "generated matmul: warpgroup form: ") << refusal;
  std::string error;
  auto chosen = chooseWarpgroup(p, planB, launch.options, launch.device, launch.splitAllowed, error);
  if (mlir::failed(chosen))
    return mlir::emitError(launch.loc, "generated matmul: warpgroup form: ") << error;
  WarpgroupConfig cfg = *chosen;
  Problem q = productProblem(p, cfg.splitK);
  // C's runs: the widest vector C's layout allows (with split K, the
  // partial products'), at most 16 bytes; 1 where N is odd.
  cfg.widthC = std::min(cfg.splitK > 1 ? vectorWidthAlong(q.cType, q.colDim(), p.maxVector) : launch.widthC,
                        kChunkBytes / bytesOfElement(q.cType));
  if (launch.options.stagedEpilogue == 1) {
    cfg.stagedEpilogue = true;
    if (cfg.sharedBytes(p.elementBytes) > launch.device.sharedMemoryPerBlockOptIn)
      return mlir::emitError(launch.loc, "generated matmul: warpgroup form: C's staged tile (")
             << cfg.stagingBytes() << " B) does not fit the " << launch.device.sharedMemoryPerBlockOptIn
             << " B of shared memory a block may have";
  } else if (launch.options.stagedEpilogue < 0) {
    // By default only where the stages hold it: no block gives up an SM
    // for it.
    cfg.stagedEpilogue = kWarpgroupStagedEpilogue && cfg.stagingBytes() <= cfg.stagesBytes(p.elementBytes);
  }
  const bool bBeforeWait = kTensorCoreCopiesBBeforeWait && p.bUnwritten && launch.device.programmaticDependentLaunch;
  KernelSignature signature;
  signature.name = launch.name;
  signature.arguments = argumentTypes(q, /*withAB=*/true);
  signature.bytesMoved = launch.bytes;
  signature.flops = launch.flops;
  signature.blockSize = {static_cast<int32_t>(cfg.threads()), 1, 1};
  int64_t tilesM = llvm::divideCeilSigned(p.m, cfg.blockM), tilesN = llvm::divideCeilSigned(p.n, cfg.blockN);
  bool mFastest = tilesM <= tilesN;
  LaunchDims dims;
  dims.grid = {mFastest ? tilesM : tilesN, mFastest ? tilesN : tilesM, p.batch * cfg.splitK};
  dims.block = {cfg.threads(), 1, 1};
  if (dims.grid[1] > 65535 || dims.grid[2] > 65535)
    return mlir::emitError(launch.loc, "generated matmul: the grid is too large for this product");
  const int64_t sharedBytes = cfg.sharedBytes(p.elementBytes);
  MLPIPE_DEBUG(kDebugEmitters,
               os << launch.name << ": generated matmul " << p.batch << "x" << p.m << "x" << p.n << "x" << p.k
                  << " (batch x M x N x K), warpgroups (wgmma m64n" << cfg.blockN << "k16, "
                  << (p.storage.isBF16() ? "bf16" : "f16") << ", f32 accumulation), block " << cfg.blockM << "x"
                  << cfg.blockN << "x" << kWarpgroupBlockK << ", " << cfg.warpgroups() << " warpgroups, "
                  << (cfg.splitK > 1 ? "split-K " + std::to_string(cfg.splitK) + " (" + std::to_string(cfg.kPerSplit) +
                                           " of K each), "
                                     : std::string())
                  << "B " << (cfg.kMajorB ? "K-major" : "N-major") << ", grid (" << dims.grid[0] << ", " << dims.grid[1]
                  << ", " << dims.grid[2] << "), " << sharedBytes << " B shared in " << cfg.stages
                  << " stages by cp.async (128-byte swizzle), "
                  << (cfg.stages >= kWarpgroupOneBarrierMinStages ? "one barrier" : "two barriers")
                  << " a slice, sized for " << cfg.blocksPerSm << (cfg.blocksPerSm == 1 ? " block" : " blocks")
                  << " an SM"
                  << (bBeforeWait ? ", B's first slices copied before the wait (kTensorCoreCopiesBBeforeWait)" : "")
                  << (cfg.stagedEpilogue
                          ? ", C through shared memory, " + std::to_string(cfg.widthC) +
                                (cfg.widthC == 1 ? " column" : " columns") + " a thread (kWarpgroupStagedEpilogue)"
                          : ", C stored from the accumulators")
                  << "\n");
  return launchProduct(
      launch, p, cfg.splitK, signature, dims,
      [&](mlir::OpBuilder &b, mlir::gpu::GPUFuncOp f) {
        WarpgroupBody(b, f, q, cfg, bBeforeWait).build(launch.widthC);
        return mlir::success();
      },
      sharedBytes);
}

} // namespace mlpipe::emitters::generated_matmul
