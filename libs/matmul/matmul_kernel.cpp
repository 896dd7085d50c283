// The generated matmul's entry (matmul_kernel.h): a product's operands
// checked and described as a Problem, its form chosen (matmul_config.cpp)
// and emitted (tiled_matmul.cpp, skinny_matmul.cpp), the kernel that adds
// split-K's partial products in a fixed order and applies the epilogue, and
// the two elementwise kernels a product with K = 0 needs (zeroing C,
// applying the epilogue).
#include "matmul/matmul_kernel.h"

#include "codegen/debug.h"
#include "codegen/path_choice.h"
#include "codegen/type_sizes.h"
#include "codegen/unwritten_arguments.h"
#include "fusion/fusion_graph.h"
#include "matmul/matmul_building.h"

#include <algorithm>

namespace mlpipe::emitters {

namespace generated_matmul {

namespace {

// The elementwise kernels (zeroing C, the epilogue, split-K's sum): one
// element per thread.
constexpr int64_t kElementwiseThreads = 256;
// Split-K's partial products are stored in vectors of up to 8 f32 (a
// 16-bit product's B vector): their buffer is aligned for the widest.
constexpr int64_t kPartialSumsAlignment = 64;

//===----------------------------------------------------------------------===//
// Elementwise kernels over C: zeroing it, applying the epilogue (a product
// with K = 0), and adding split-K's partial products.
//===----------------------------------------------------------------------===//

enum class Elementwise { Zero, Epilogue };

mlir::LogicalResult emitElementwise(mlir::OpBuilder &host, mlir::Location loc, const Problem &p, Value c,
                                    llvm::ArrayRef<Value> epilogueOperands, Elementwise what, KernelFactory &kernels,
                                    const std::string &name) {
  int64_t total = p.batch * p.m * p.n;
  const char *suffix = what == Elementwise::Zero ? "_zero" : "_epilogue";
  KernelSignature signature;
  signature.name = name + suffix;
  Problem q = p;
  if (what == Elementwise::Zero)
    q.epilogue = nullptr;
  signature.arguments = argumentTypes(q, /*withAB=*/false);
  signature.bytesMoved = bytesOf(p.cType) * (what == Elementwise::Epilogue ? 2 : 1);
  signature.blockSize = {static_cast<int32_t>(kElementwiseThreads), 1, 1};
  auto kernel = kernels.build(signature, [&](mlir::OpBuilder &b, mlir::gpu::GPUFuncOp f) {
    mlir::Location kloc = f.getLoc();
    Ix ix{b, kloc};
    Matrix matrix(f.getArgument(0), bytesOfElement(p.cType));
    llvm::SmallVector<Value> operands;
    for (unsigned i = 1; i < f.getNumArguments(); ++i)
      operands.push_back(f.getArgument(i));
    Value tid = mlir::gpu::ThreadIdOp::create(b, kloc, mlir::gpu::Dimension::x);
    Value block = mlir::gpu::BlockIdOp::create(b, kloc, mlir::gpu::Dimension::x);
    Value linear = ix.add(ix.mul(block, kElementwiseThreads), tid);
    guarded(ix, total % kElementwiseThreads != 0 ? ix.lt(linear, total) : Value(), [&] {
      Value col = ix.rem(linear, p.n);
      Value row = ix.rem(ix.div(linear, p.n), p.m);
      Value batch = ix.div(linear, p.n * p.m);
      Value v =
          what == Elementwise::Epilogue ? matrix.loadScalar(ix, batch, row, col) : zeroScalar(ix, matrix.element());
      if (what != Elementwise::Zero) {
        OutputWriter writer{q, matrix, operands};
        v = convertFloat(ix, writer.finish(ix, convertFloat(ix, v, p.element), batch, row, col), matrix.element());
      }
      matrix.storeScalar(ix, v, batch, row, col);
    });
  });
  LaunchDims dims;
  dims.grid = {llvm::divideCeilSigned(total, kElementwiseThreads), 1, 1};
  dims.block = {kElementwiseThreads, 1, 1};
  llvm::SmallVector<Value> arguments{c};
  if (what != Elementwise::Zero)
    arguments.append(epilogueOperands.begin(), epilogueOperands.end());
  kernels.launch(host, loc, kernel, dims, arguments);
  return mlir::success();
}

// Split-K's second kernel: each element of C is the sum of its `splits`
// partial products (partialSumsType), added in the order of the splits, so
// that a product gives the same bits run after run and replayed in a graph;
// C's old value first where accumulating, then the epilogue, rounded to C's
// type once as it is stored.
mlir::LogicalResult emitSplitSum(const ProductLaunch &launch, const Problem &product, Value partials, int64_t splits) {
  // The sum reads the partial products and the epilogue's operands, never
  // A's rows (a prologue's operands are the product kernel's).
  Problem p = product;
  p.prologue = nullptr;
  int64_t total = p.batch * p.m * p.n;
  KernelSignature signature;
  signature.name = launch.name + "_split_sum";
  signature.arguments = {partials.getType()};
  signature.arguments.append(argumentTypes(p, /*withAB=*/false));
  signature.bytesMoved =
      bytesOf(mlir::cast<mlir::MemRefType>(partials.getType())) + bytesOf(p.cType) * (p.accumulate ? 2 : 1);
  signature.blockSize = {static_cast<int32_t>(kElementwiseThreads), 1, 1};
  auto kernel = launch.kernels.build(signature, [&](mlir::OpBuilder &b, mlir::gpu::GPUFuncOp f) {
    mlir::Location kloc = f.getLoc();
    Ix ix{b, kloc};
    Matrix sums(f.getArgument(0), p.accumulatorBytes);
    Matrix c(f.getArgument(1), bytesOfElement(p.cType));
    llvm::SmallVector<Value> operands;
    for (unsigned i = 2; i < f.getNumArguments(); ++i)
      operands.push_back(f.getArgument(i));
    Value tid = mlir::gpu::ThreadIdOp::create(b, kloc, mlir::gpu::Dimension::x);
    Value block = mlir::gpu::BlockIdOp::create(b, kloc, mlir::gpu::Dimension::x);
    Value linear = ix.add(ix.mul(block, kElementwiseThreads), tid);
    guarded(ix, total % kElementwiseThreads != 0 ? ix.lt(linear, total) : Value(), [&] {
      Value col = ix.rem(linear, p.n);
      Value row = ix.rem(ix.div(linear, p.n), p.m);
      Value batch = ix.div(linear, p.n * p.m);
      Value sum = sums.loadScalar(ix, batch, row, col);
      for (int64_t split = 1; split < splits; ++split)
        sum = mlir::arith::AddFOp::create(b, kloc, sum, sums.loadScalar(ix, ix.add(batch, split * p.batch), row, col));
      OutputWriter writer{p, c, operands};
      writer.write(ix, broadcast(ix, sum, 1), batch, row, col, 1, /*vectorC=*/false);
    });
  });
  LaunchDims dims;
  dims.grid = {llvm::divideCeilSigned(total, kElementwiseThreads), 1, 1};
  dims.block = {kElementwiseThreads, 1, 1};
  llvm::SmallVector<Value> arguments{partials, launch.operands.c};
  arguments.append(launch.epilogueOperands.begin(), launch.epilogueOperands.end());
  launch.kernels.launch(launch.host, launch.loc, kernel, dims, arguments);
  return mlir::success();
}

// The problem the operands describe; fails (with a diagnostic at `loc`) for
// shapes, types or options the kernels do not take.
mlir::FailureOr<Problem> problemOf(mlir::Location loc, const MatmulOperands &operands, bool accumulate,
                                   const MatmulEpilogue *epilogue, const MatmulRowPrologue *prologue,
                                   const GeneratedMatmulOptions &options) {
  auto aType = mlir::dyn_cast<mlir::MemRefType>(operands.a.getType());
  auto bType = mlir::dyn_cast<mlir::MemRefType>(operands.b.getType());
  auto cType = mlir::dyn_cast<mlir::MemRefType>(operands.c.getType());
  if (!aType || !bType || !cType)
    return mlir::emitError(loc, "generated matmul: the operands must be memrefs");
  int64_t rank = cType.getRank();
  if ((rank != 2 && rank != 3) || aType.getRank() != rank || bType.getRank() != rank)
    return mlir::emitError(loc, "generated matmul: the operands must all be of rank 2, or all of rank 3");
  if (!aType.hasStaticShape() || !bType.hasStaticShape() || !cType.hasStaticShape())
    return mlir::emitError(loc, "generated matmul: the shapes must be static");
  // f32 or f64 throughout, or 16-bit A and B (computed in f32) with C in
  // their type or in f32.
  mlir::Type storage = aType.getElementType();
  bool sixteenBit = storage.isBF16() || storage.isF16();
  mlir::Type element = sixteenBit ? mlir::Float32Type::get(storage.getContext()) : storage;
  mlir::Type cElement = cType.getElementType();
  bool typesTaken = (storage.isF32() || storage.isF64() || sixteenBit) && bType.getElementType() == storage &&
                    (cElement == storage || cElement == element);
  if (!typesTaken)
    return mlir::emitError(loc, "generated matmul: the operands must all be f32, or all f64, or A and B both bf16 or "
                                "both f16 with C in their type or f32");
  if (aType.getMemorySpace() || bType.getMemorySpace() || cType.getMemorySpace())
    return mlir::emitError(loc, "generated matmul: the operands must be in the default memory space");

  Problem p;
  p.rank = rank;
  p.batch = rank == 3 ? cType.getDimSize(0) : 1;
  p.m = cType.getDimSize(rank - 2);
  p.n = cType.getDimSize(rank - 1);
  p.k = aType.getDimSize(rank - 1);
  p.element = element;
  p.storage = storage;
  p.elementBytes = storage.getIntOrFloatBitWidth() / 8;
  p.accumulatorBytes = element.getIntOrFloatBitWidth() / 8;
  p.aType = aType;
  p.bType = bType;
  p.cType = cType;
  p.accumulate = accumulate;
  p.epilogue = epilogue;
  p.prologue = prologue;
  p.bUnwritten = isUnwrittenArgument(operands.b);
  p.maxVector = kVectorBytes / p.elementBytes;
  if (options.vectorWidth > 0) {
    if ((options.vectorWidth & (options.vectorWidth - 1)) != 0)
      return mlir::emitError(loc, "generated matmul: the vector width must be a power of two");
    p.maxVector = std::min(p.maxVector, options.vectorWidth);
  }
  bool shapesAgree = aType.getDimSize(rank - 2) == p.m && bType.getDimSize(rank - 2) == p.k &&
                     bType.getDimSize(rank - 1) == p.n &&
                     (rank == 2 || (aType.getDimSize(0) == p.batch && bType.getDimSize(0) == p.batch));
  if (!shapesAgree)
    return mlir::emitError(loc, "generated matmul: A, B and C have mismatched shapes");
  if (options.form != "auto" && options.form != "tiled" && options.form != "skinny" && options.form != "row_dot" &&
      options.form != "tensor_core" && options.form != "warpgroup")
    return mlir::emitError(
               loc, "generated matmul: the form must be auto, tiled, skinny, row_dot, tensor_core or warpgroup, not '")
           << options.form << "'";
  if (options.form == "warpgroup" && !sixteenBit)
    return mlir::emitError(loc, "generated matmul: the warpgroup form takes A and B in bf16 or f16");
  if (options.form == "tensor_core" && !sixteenBit && !(options.tf32 && p.storage.isF32()))
    return mlir::emitError(loc, "generated matmul: the tensor-core form takes A and B in bf16 or f16, or in f32 "
                                "with precision=tf32");
  return p;
}

// No product (K = 0): C keeps its value (or becomes zero) and goes through
// the epilogue.
mlir::LogicalResult emitWithoutProduct(const ProductLaunch &launch, const Problem &p) {
  MLPIPE_DEBUG(kDebugEmitters, os << launch.name << ": generated matmul with K = 0: elementwise only\n");
  if (!p.accumulate && mlir::failed(emitElementwise(launch.host, launch.loc, p, launch.operands.c, {},
                                                    Elementwise::Zero, launch.kernels, launch.name)))
    return mlir::failure();
  if (p.epilogue)
    return emitElementwise(launch.host, launch.loc, p, launch.operands.c, launch.epilogueOperands,
                           Elementwise::Epilogue, launch.kernels, launch.name);
  return mlir::success();
}

// K may be split across blocks unless every block computes the whole row of
// A (a one-row prologue: the skinny form stages the row whole); the
// few-row tensor-core tiles hold every row whole and read their split's K
// of it. The partial products go to a buffer of their own, so an
// epilogue operand that is C itself (a residual added in place) is read by
// the split-sum kernel element by element, as the unsplit kernels read it.
bool splitAllowed(const Problem &p) { return !p.prologue || p.m > 1; }

} // namespace

mlir::MemRefType partialSumsType(const Problem &p, int64_t splits) {
  return mlir::MemRefType::get({splits * p.batch, p.m, p.n}, p.element);
}

Problem productProblem(const Problem &p, int64_t splits) {
  Problem q = p;
  if (splits > 1) {
    q.epilogue = nullptr;
    q.accumulate = false;
    q.cType = partialSumsType(p, splits);
  }
  return q;
}

mlir::LogicalResult launchProduct(const ProductLaunch &launch, const Problem &p, int64_t splits,
                                  const KernelSignature &signature, const LaunchDims &dims, const KernelBody &body,
                                  int64_t dynamicSharedBytes, bool lastSplitCompletes) {
  mlir::OpBuilder &host = launch.host;
  mlir::Location loc = launch.loc;
  const MatmulOperands &operands = launch.operands;
  KernelFactory &kernels = launch.kernels;
  mlir::FailureOr<mlir::gpu::GPUFuncOp> built = kernels.tryBuild(signature, body);
  if (mlir::failed(built))
    return mlir::emitError(loc, "generated matmul: the kernel's body could not be built");
  mlir::gpu::GPUFuncOp kernel = *built;
  if (splits == 1) {
    llvm::SmallVector<Value> arguments{operands.a, operands.b, operands.c};
    arguments.append(launch.epilogueOperands.begin(), launch.epilogueOperands.end());
    if (p.prologue)
      arguments.append(p.prologue->hostOperands.begin(), p.prologue->hostOperands.end());
    kernels.launch(host, loc, kernel, dims, arguments, dynamicSharedBytes);
    return mlir::success();
  }
  // Split K: each split's partial product to its own slab of a temporary
  // (the buffer plan puts it in the arena), then one kernel adds them up.
  Value partials = mlir::memref::AllocOp::create(host, loc, partialSumsType(p, splits),
                                                 host.getI64IntegerAttr(kPartialSumsAlignment));
  llvm::SmallVector<Value> arguments{operands.a, operands.b, partials};
  if (lastSplitCompletes) {
    arguments.push_back(operands.c);
    arguments.append(launch.epilogueOperands.begin(), launch.epilogueOperands.end());
  }
  if (p.prologue) // every split computes A's rows (the few-row tensor-core tiles)
    arguments.append(p.prologue->hostOperands.begin(), p.prologue->hostOperands.end());
  kernels.launch(host, loc, kernel, dims, arguments, dynamicSharedBytes);
  if (!lastSplitCompletes && mlir::failed(emitSplitSum(launch, p, partials, splits)))
    return mlir::failure();
  mlir::memref::DeallocOp::create(host, loc, partials);
  return mlir::success();
}

} // namespace generated_matmul

bool generatedMatmulTakesSixteenBit(mlir::MemRefType aType, mlir::MemRefType bType, mlir::MemRefType cType,
                                    const DeviceDescription &device, bool accumulate) {
  mlir::Type storage = aType.getElementType();
  if (!(storage.isBF16() || storage.isF16()) || bType.getElementType() != storage ||
      !(cType.getElementType() == storage || cType.getElementType().isF32()))
    return false;
  int64_t rank = cType.getRank();
  if ((rank != 2 && rank != 3) || aType.getRank() != rank || bType.getRank() != rank || !aType.hasStaticShape() ||
      !bType.hasStaticShape() || !cType.hasStaticShape())
    return false;
  // Every product on tensor cores (the tensor-core form), where the chip
  // has them; elsewhere those the skinny form takes (few rows, B read row
  // by row) or the row-dot form (few rows, B stored [N, K], wide).
  if (device.sixteenBitMma)
    return true;
  (void)accumulate; // both forms add C's old value where asked
  int64_t rows = cType.getDimSize(rank - 2);
  bool skinny = rows <= generated_matmul::kSkinnyMaxRows && bType.getDimSize(rank - 1) > 1 &&
                generated_matmul::hasUnitStride(bType, rank - 1);
  bool rowDot = rows <= generated_matmul::kRowDotMaxRows && (rank == 2 || cType.getDimSize(0) == 1) &&
                generated_matmul::hasUnitStride(bType, rank - 2) && !generated_matmul::hasUnitStride(bType, rank - 1) &&
                bType.getDimSize(rank - 1) >= kGeneratedRowDotMinColumns;
  return skinny || rowDot;
}

mlir::LogicalResult emitGeneratedMatmul(mlir::OpBuilder &host, mlir::Location loc, const MatmulOperands &operands,
                                        bool accumulate, const MatmulEpilogue *epilogue, KernelFactory &kernels,
                                        const DeviceDescription &device, const std::string &name,
                                        const GeneratedMatmulOptions &options, const MatmulRowPrologue *prologue) {
  using namespace generated_matmul;
  mlir::FailureOr<Problem> problem = problemOf(loc, operands, accumulate, epilogue, prologue, options);
  if (mlir::failed(problem))
    return mlir::failure();
  const Problem &p = *problem;
  ProductLaunch launch(host, loc, operands, kernels, device, name, options);
  if (epilogue)
    launch.epilogueOperands.assign(epilogue->hostOperands.begin(), epilogue->hostOperands.end());

  if (p.batch == 0 || p.m == 0 || p.n == 0)
    return mlir::success();
  if (p.k == 0)
    return emitWithoutProduct(launch, p);

  launch.splitAllowed = splitAllowed(p);
  launch.flops = 2 * p.batch * p.m * p.n * p.k;
  launch.bytes = bytesOf(p.aType) + bytesOf(p.bType) + bytesOf(p.cType) * (accumulate ? 2 : 1);
  for (Value operand : launch.epilogueOperands)
    launch.bytes += bytesOf(operand.getType());
  // C takes 128-bit stores where its rows are contiguous and aligned.
  launch.widthC = vectorWidthAlong(p.cType, p.colDim(), p.maxVector);

  // B stored [N, K] and few rows: the row-dot form streams B's storage row
  // by row (16-bit operands too).
  // A row prologue there: every block computes A's rows into shared memory.
  if (prefersRowDot(p, options)) {
    if (prologue && (p.batch != 1 || accumulate))
      return mlir::emitError(loc, "generated matmul: a row computed in the row-dot form needs one product, C not "
                                  "accumulated");
    if (!hasUnitStride(p.bType, p.rowDim()))
      return mlir::emitError(loc, "generated matmul: the row-dot form needs B stored [N, K] (K contiguous)");
    return emitRowDotMatmul(launch, p, chooseRowDot(p, device));
  }

  // f32 under precision=tf32: every product the skinny form does not take
  // goes to tensor cores, A and B rounded to TF32 as they are read (the
  // skinny form streams B at memory speed, which tensor cores would not
  // beat). Without tf32, f32 stays exact, on CUDA cores.
  const bool f32Operands = p.storage == p.element && p.storage.isF32();
  const bool tf32 = f32Operands && options.tf32 && device.tf32Mma;
  if (f32Operands && options.form == "tensor_core" && !tf32)
    return mlir::emitError(loc, "generated matmul: ")
           << device.chip << " has no mma.sync .tf32 for the tensor-core form of f32 products (sm_80 and later)";
  if (tf32 && !prologue &&
      (options.form == "tensor_core" ||
       (options.form == "auto" && options.blockTile[0] == 0 && !prefersSkinny(p, options)))) {
    Problem rounded = p;
    rounded.tf32 = true;
    return emitTensorCoreMatmul(launch, rounded);
  }

  // 16-bit operands: the skinny form reads them where it takes the product
  // (few rows, B read row by row: bandwidth-bound); every other product goes
  // to tensor cores, on a chip with 16-bit mma.sync.
  bool sixteenBit = p.storage != p.element;
  bool fewRowTensorCores = sixteenBit && options.form == "auto" && options.blockTile[0] == 0 &&
                           p.m >= kFewRowTensorCoreMinRows && p.m <= kTensorCoreFewRowsMaxRows &&
                           tensorCoresTake(p, device) &&
                           tensorCoresSplitFewRows(p, options, device, launch.splitAllowed);
  if (sixteenBit && (!prefersSkinny(p, options) || fewRowTensorCores)) {
    if ((prologue && !fewRowTensorCores) || options.form == "skinny" || options.form == "tiled")
      return mlir::emitError(loc, "generated matmul: of the CUDA-core forms only the skinny and row-dot forms read "
                                  "16-bit operands (at most kSkinnyMaxRows rows with B's rows contiguous, or "
                                  "kRowDotMaxRows with B stored [N, K])");
    if (options.form == "warpgroup" || (options.form == "auto" && options.blockTile[0] == 0 && !fewRowTensorCores &&
                                        p.m >= kWarpgroupMinRows && warpgroupTakes(p, device)))
      return emitWarpgroupMatmul(launch, p);
    if (!tensorCoresTake(p, device))
      return mlir::emitError(loc, "generated matmul: ")
             << device.chip << " has no mma.sync m16n8k16 for the tensor-core form of 16-bit products";
    return emitTensorCoreMatmul(launch, p);
  }

  // The skinny form: few rows, and B read along its contiguous rows.
  int64_t vectorN = vectorWidthAlong(p.bType, p.colDim(), p.maxVector);
  bool skinny = prefersSkinny(p, options);
  if (options.form == "skinny" && !hasUnitStride(p.bType, p.colDim()))
    return mlir::emitError(loc, "generated matmul: the skinny form needs B's rows contiguous");
  if (prologue && (!skinny || p.batch != 1 || accumulate || !skinnyIsOneLaunch(p.m, p.k, p.elementBytes)))
    return mlir::emitError(loc, "generated matmul: a row computed in the kernel needs the one-launch skinny form");
  if (skinny) {
    SkinnyConfig cfg = chooseSkinny(p, options, device, vectorN, launch.splitAllowed);
    if (prologue && cfg.splitK > 1)
      return mlir::emitError(loc, "generated matmul: a row computed in the kernel must fit one staged slice");
    if (cfg.splitK <= 1 || launch.splitAllowed)
      return emitSkinnyMatmul(launch, p, cfg);
    // K does not fit one staged slice and the epilogue forbids splitting.
    if (options.form == "skinny")
      return mlir::emitError(loc, "generated matmul: the skinny form would split K, which this epilogue forbids");
  }
  return emitTiledMatmul(launch, p);
}

} // namespace mlpipe::emitters
