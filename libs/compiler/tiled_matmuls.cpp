// mlpipe-tiled-matmuls: GPU matmuls become launches of a shared-memory tiled kernel.
// Passes.td holds its description, with IR before and after.
#include "compiler/passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/Pass.h"

#include <string>

namespace mlpipe {

#define GEN_PASS_DEF_TILEDMATMULSPASS
#include "compiler/Passes.h.inc"

namespace {

// 16x16 = 256 threads per block, one output element each; the two staged
// tiles take 2 KiB (f32) or 4 KiB (f64) of workgroup memory.
constexpr int64_t kTileSize = 16;

// The kernel, with @NAME@, @ELT@ (element type), @MEMREF@ (operand type),
// @B@ (the batch index prefix), @BATCH@ (its definition) and @DM@ @DK@ @DN@
// (the axes of M, K and N) filled in per rank and element type.
constexpr const char *kKernelTemplate = R"mlir(
gpu.module @mlpipe_tiled_matmul_@NAME@ {
  gpu.func @tiled_matmul_@NAME@(%A: @MEMREF@, %B: @MEMREF@, %C: @MEMREF@)
      workgroup(%tileA: memref<@T@x@T@x@ELT@, #gpu.address_space<workgroup>>,
                %tileB: memref<@T@x@T@x@ELT@, #gpu.address_space<workgroup>>)
      kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %tile = arith.constant @T@ : index
    %tileMinusOne = arith.constant @TM1@ : index
    %zero = arith.constant 0.0 : @ELT@
    %tx = gpu.thread_id x
    %ty = gpu.thread_id y
    %bx = gpu.block_id x
    %by = gpu.block_id y
    @BATCH@
    %M = memref.dim %A, @DM@ : @MEMREF@
    %K = memref.dim %A, @DK@ : @MEMREF@
    %N = memref.dim %B, @DN@ : @MEMREF@
    %rowBase = arith.muli %by, %tile : index
    %row = arith.addi %rowBase, %ty : index
    %colBase = arith.muli %bx, %tile : index
    %col = arith.addi %colBase, %tx : index
    %rowInside = arith.cmpi ult, %row, %M : index
    %colInside = arith.cmpi ult, %col, %N : index
    %kRounded = arith.addi %K, %tileMinusOne : index
    %steps = arith.divui %kRounded, %tile : index
    %sum = scf.for %step = %c0 to %steps step %c1 iter_args(%acc = %zero) -> (@ELT@) {
      %k0 = arith.muli %step, %tile : index
      %ka = arith.addi %k0, %tx : index
      %kaInside = arith.cmpi ult, %ka, %K : index
      %aInside = arith.andi %rowInside, %kaInside : i1
      %a = scf.if %aInside -> (@ELT@) {
        %v = memref.load %A[@B@%row, %ka] : @MEMREF@
        scf.yield %v : @ELT@
      } else {
        scf.yield %zero : @ELT@
      }
      memref.store %a, %tileA[%ty, %tx] : memref<@T@x@T@x@ELT@, #gpu.address_space<workgroup>>
      %kb = arith.addi %k0, %ty : index
      %kbInside = arith.cmpi ult, %kb, %K : index
      %bInside = arith.andi %kbInside, %colInside : i1
      %b = scf.if %bInside -> (@ELT@) {
        %v = memref.load %B[@B@%kb, %col] : @MEMREF@
        scf.yield %v : @ELT@
      } else {
        scf.yield %zero : @ELT@
      }
      memref.store %b, %tileB[%ty, %tx] : memref<@T@x@T@x@ELT@, #gpu.address_space<workgroup>>
      gpu.barrier
      %partial = scf.for %k = %c0 to %tile step %c1 iter_args(%p = %acc) -> (@ELT@) {
        %x = memref.load %tileA[%ty, %k] : memref<@T@x@T@x@ELT@, #gpu.address_space<workgroup>>
        %y = memref.load %tileB[%k, %tx] : memref<@T@x@T@x@ELT@, #gpu.address_space<workgroup>>
        %xy = arith.mulf %x, %y : @ELT@
        %next = arith.addf %p, %xy : @ELT@
        scf.yield %next : @ELT@
      }
      gpu.barrier
      scf.yield %partial : @ELT@
    }
    %inside = arith.andi %rowInside, %colInside : i1
    scf.if %inside {
      %old = memref.load %C[@B@%row, %col] : @MEMREF@
      %new = arith.addf %old, %sum : @ELT@
      memref.store %new, %C[@B@%row, %col] : @MEMREF@
    }
    gpu.return
  }
}
)mlir";

void replaceAll(std::string &text, const std::string &from, const std::string &to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
}

// "2d_f32", "3d_f64": names the kernel for one rank and element type.
std::string kernelSuffix(int64_t rank, mlir::Type element) {
  std::string type;
  llvm::raw_string_ostream os(type);
  element.print(os);
  return std::to_string(rank) + "d_" + os.str();
}

std::string kernelText(int64_t rank, mlir::Type element) {
  std::string elt;
  llvm::raw_string_ostream os(elt);
  element.print(os);
  bool batched = rank == 3;
  std::string text = kKernelTemplate;
  replaceAll(text, "@NAME@", kernelSuffix(rank, element));
  replaceAll(text, "@MEMREF@",
             batched ? "memref<?x?x?x@ELT@, strided<[?, ?, ?], offset: ?>>"
                     : "memref<?x?x@ELT@, strided<[?, ?], offset: ?>>");
  replaceAll(text, "@ELT@", os.str());
  replaceAll(text, "@BATCH@", batched ? "%batch = gpu.block_id z" : "");
  replaceAll(text, "@B@", batched ? "%batch, " : "");
  replaceAll(text, "@DM@", batched ? "%c1" : "%c0");
  replaceAll(text, "@DK@", batched ? "%c2" : "%c1");
  replaceAll(text, "@DN@", batched ? "%c2" : "%c1");
  replaceAll(text, "@TM1@", std::to_string(kTileSize - 1));
  replaceAll(text, "@T@", std::to_string(kTileSize));
  return text;
}

struct TiledMatmulsPass : impl::TiledMatmulsPassBase<TiledMatmulsPass> {
  void runOnOperation() final {
    mlir::ModuleOp module = getOperation();
    llvm::SmallVector<mlir::linalg::LinalgOp> matmuls;
    module.walk([&](mlir::linalg::LinalgOp op) {
      if (isTiledMatmulCandidate(op))
        matmuls.push_back(op);
    });
    for (mlir::linalg::LinalgOp op : matmuls)
      if (mlir::failed(replaceWithLaunch(module, op)))
        return signalPassFailure();
  }

  static bool isTiledMatmulCandidate(mlir::linalg::LinalgOp op) {
    if (!op.hasPureBufferSemantics() || op->getParentOfType<mlir::gpu::GPUModuleOp>())
      return false;
    auto matmul = mlir::dyn_cast<mlir::linalg::MatmulOp>(op.getOperation());
    auto batched = mlir::dyn_cast<mlir::linalg::BatchMatmulOp>(op.getOperation());
    if (!matmul && !batched)
      return false;
    // Matmuls with transposing or broadcasting indexing maps keep the loops.
    if ((matmul && matmul.hasUserDefinedMaps()) || (batched && batched.hasUserDefinedMaps()))
      return false;
    mlir::Type element = mlir::cast<mlir::MemRefType>(op.getDpsInits()[0].getType()).getElementType();
    for (mlir::Value operand : op->getOperands())
      if (mlir::cast<mlir::MemRefType>(operand.getType()).getElementType() != element)
        return false;
    return element.isF32() || element.isF64();
  }

  // The kernel for this rank and element type, added to the module on first use.
  static mlir::FailureOr<mlir::gpu::GPUFuncOp> kernelFor(mlir::ModuleOp module, int64_t rank, mlir::Type element) {
    std::string suffix = kernelSuffix(rank, element);
    if (auto existing = module.lookupSymbol<mlir::gpu::GPUModuleOp>("mlpipe_tiled_matmul_" + suffix))
      return existing.lookupSymbol<mlir::gpu::GPUFuncOp>("tiled_matmul_" + suffix);
    auto parsed = mlir::parseSourceString<mlir::ModuleOp>(kernelText(rank, element), module.getContext());
    if (!parsed)
      return module.emitError("mlpipe-tiled-matmuls: the kernel template does not parse"), mlir::failure();
    mlir::OpBuilder builder = mlir::OpBuilder::atBlockEnd(module.getBody());
    auto kernelModule = mlir::cast<mlir::gpu::GPUModuleOp>(builder.clone(parsed->getBody()->front()));
    module->setAttr(mlir::gpu::GPUDialect::getContainerModuleAttrName(), builder.getUnitAttr());
    return kernelModule.lookupSymbol<mlir::gpu::GPUFuncOp>("tiled_matmul_" + suffix);
  }

  static mlir::LogicalResult replaceWithLaunch(mlir::ModuleOp module, mlir::linalg::LinalgOp op) {
    mlir::Value c = op.getDpsInits()[0];
    auto cType = mlir::cast<mlir::MemRefType>(c.getType());
    int64_t rank = cType.getRank();
    auto kernel = kernelFor(module, rank, cType.getElementType());
    if (mlir::failed(kernel))
      return mlir::failure();

    mlir::OpBuilder builder(op);
    mlir::Location loc = op.getLoc();
    auto index = [&](int64_t v) { return mlir::arith::ConstantIndexOp::create(builder, loc, v).getResult(); };
    int64_t dynamic = mlir::ShapedType::kDynamic;
    llvm::SmallVector<mlir::Value> args;
    for (mlir::Value operand : op->getOperands()) {
      auto type = mlir::cast<mlir::MemRefType>(operand.getType());
      auto layout =
          mlir::StridedLayoutAttr::get(builder.getContext(), dynamic, llvm::SmallVector<int64_t>(rank, dynamic));
      auto stridedType = mlir::MemRefType::get(llvm::SmallVector<int64_t>(rank, dynamic), type.getElementType(), layout,
                                               type.getMemorySpace());
      args.push_back(mlir::memref::CastOp::create(builder, loc, stridedType, operand));
    }
    // Grid: ceil(N / 16) x ceil(M / 16) x batch.
    auto tiles = [&](mlir::Value extent) {
      mlir::Value rounded = mlir::arith::AddIOp::create(builder, loc, extent, index(kTileSize - 1));
      return mlir::arith::DivUIOp::create(builder, loc, rounded, index(kTileSize)).getResult();
    };
    mlir::Value rows = mlir::memref::DimOp::create(builder, loc, c, rank - 2);
    mlir::Value cols = mlir::memref::DimOp::create(builder, loc, c, rank - 1);
    mlir::Value batch = rank == 3 ? mlir::memref::DimOp::create(builder, loc, c, 0).getResult() : index(1);
    mlir::gpu::KernelDim3 grid{tiles(cols), tiles(rows), batch};
    mlir::gpu::KernelDim3 block{index(kTileSize), index(kTileSize), index(1)};
    mlir::gpu::LaunchFuncOp::create(builder, loc, *kernel, grid, block, /*dynamicSharedMemorySize=*/mlir::Value(),
                                    args);
    op->erase();
    return mlir::success();
  }
};

} // namespace

} // namespace mlpipe
