// The building blocks of the generated matmul's kernel bodies
// (matmul_building.h).
#include "matmul/matmul_building.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace mlpipe::emitters::generated_matmul {

Value zeroVector(const Ix &ix, mlir::Type element, int64_t width) {
  auto type = mlir::VectorType::get({width}, element);
  return mlir::arith::ConstantOp::create(ix.b, ix.loc, type,
                                         mlir::DenseElementsAttr::get(type, ix.b.getFloatAttr(element, 0.0)));
}

Value zeroScalar(const Ix &ix, mlir::Type element) {
  return mlir::arith::ConstantOp::create(ix.b, ix.loc, element, ix.b.getFloatAttr(element, 0.0));
}

Value extract(const Ix &ix, Value vector, int64_t i) {
  return mlir::vector::ExtractOp::create(ix.b, ix.loc, vector, i);
}

Value insert(const Ix &ix, Value element, Value vector, int64_t i) {
  return mlir::vector::InsertOp::create(ix.b, ix.loc, element, vector, i);
}

// An scf.for from 0 to `upper` carrying `init`, its body built by `body`
// with the same builder (so helpers that captured it build inside the loop).
mlir::scf::ForOp buildLoop(const Ix &ix, Value upper, mlir::ValueRange init,
                           const std::function<llvm::SmallVector<Value>(Value, llvm::SmallVector<Value>)> &body) {
  auto loop = mlir::scf::ForOp::create(ix.b, ix.loc, ix.c(0), upper, ix.c(1), init);
  mlir::OpBuilder::InsertionGuard guard(ix.b);
  ix.b.setInsertionPointToStart(loop.getBody());
  llvm::SmallVector<Value> carried(loop.getRegionIterArgs().begin(), loop.getRegionIterArgs().end());
  llvm::SmallVector<Value> results = body(loop.getInductionVar(), carried);
  mlir::scf::YieldOp::create(ix.b, ix.loc, results);
  return loop;
}

Value slice(const Ix &ix, Value vector, int64_t offset, int64_t width) {
  auto type = mlir::cast<mlir::VectorType>(vector.getType());
  if (offset == 0 && width == type.getNumElements())
    return vector;
  Value result = zeroVector(ix, type.getElementType(), width);
  for (int64_t i = 0; i < width; ++i)
    result = insert(ix, extract(ix, vector, offset + i), result, i);
  return result;
}

Value fma(const Ix &ix, Value a, Value b, Value acc) { return mlir::vector::FMAOp::create(ix.b, ix.loc, a, b, acc); }

Value convertFloat(const Ix &ix, Value value, mlir::Type to) {
  mlir::Type from = mlir::getElementTypeOrSelf(value.getType());
  if (from == to)
    return value;
  mlir::Type type = to;
  if (auto vector = mlir::dyn_cast<mlir::VectorType>(value.getType()))
    type = mlir::VectorType::get(vector.getShape(), to);
  if (from.getIntOrFloatBitWidth() < to.getIntOrFloatBitWidth())
    return mlir::arith::ExtFOp::create(ix.b, ix.loc, type, value);
  return mlir::arith::TruncFOp::create(ix.b, ix.loc, type, value);
}

int64_t bytesOfElement(mlir::MemRefType type) { return type.getElementTypeBitWidth() / 8; }

Value broadcast(const Ix &ix, Value scalar, int64_t width) {
  return mlir::vector::BroadcastOp::create(ix.b, ix.loc, mlir::VectorType::get({width}, scalar.getType()), scalar);
}

// Runs `body` under `condition` (unconditionally when it is null).
void guarded(const Ix &ix, Value condition, const std::function<void()> &body) {
  if (!condition) {
    body();
    return;
  }
  auto branch = mlir::scf::IfOp::create(ix.b, ix.loc, condition, /*withElseRegion=*/false);
  mlir::OpBuilder::InsertionGuard guard(ix.b);
  ix.b.setInsertionPointToStart(&branch.getThenRegion().front());
  body();
}

void waitForKernelBefore(const Ix &ix) {
  mlir::NVVM::GriddepcontrolOp::create(ix.b, ix.loc, mlir::NVVM::GridDepActionKind::wait);
}

void writeAccumulatorTiles(const Ix &ix, const OutputWriter &writer, const AccumulatorTiles &tiles,
                           const std::function<Value(int64_t)> &accumulator, Value batchOfC, int64_t widthCAllowed) {
  const Problem &p = writer.p;
  const bool pairsWhole = p.n % 2 == 0;
  const int64_t widthC = pairsWhole && widthCAllowed >= 2 ? 2 : 1;
  auto pairType = mlir::VectorType::get({2}, ix.b.getF32Type());
  Value pairCol = ix.mul(tiles.inGroup, 2);
  for (int64_t i = 0; i < tiles.tilesM; ++i) {
    for (int64_t r = 0; r < 2; ++r) {
      Value row = ix.add(ix.add(tiles.rowOrigin, tiles.group), i * 16 + r * 8);
      guarded(ix, tiles.rowEdge ? ix.lt(row, p.m) : Value(), [&] {
        for (int64_t j = 0; j < tiles.tilesN; ++j) {
          Value col = ix.add(ix.add(tiles.colOrigin, pairCol), j * 8);
          int64_t base = (i * tiles.tilesN + j) * 4 + r * 2;
          Value values = mlir::vector::FromElementsOp::create(
              ix.b, ix.loc, pairType, mlir::ValueRange{accumulator(base), accumulator(base + 1)});
          if (!tiles.colEdge || pairsWhole) {
            guarded(ix, tiles.colEdge ? ix.lt(col, p.n) : Value(), [&] {
              if (widthC == 2) {
                writer.write(ix, values, batchOfC, row, col, 2, /*vectorC=*/true);
                return;
              }
              for (int64_t e = 0; e < 2; ++e)
                writer.write(ix, slice(ix, values, e, 1), batchOfC, row, ix.add(col, e), 1, false);
            });
            continue;
          }
          for (int64_t e = 0; e < 2; ++e) {
            Value colE = ix.add(col, e);
            guarded(ix, ix.lt(colE, p.n),
                    [&] { writer.write(ix, slice(ix, values, e, 1), batchOfC, row, colE, 1, false); });
          }
        }
      });
    }
  }
}

// Runs `then` or `otherwise` by `condition`.
void branch(const Ix &ix, Value condition, const std::function<void()> &then, const std::function<void()> &otherwise) {
  auto branch = mlir::scf::IfOp::create(ix.b, ix.loc, condition, /*withElseRegion=*/true);
  mlir::OpBuilder::InsertionGuard guard(ix.b);
  ix.b.setInsertionPointToStart(&branch.getThenRegion().front());
  then();
  ix.b.setInsertionPointToStart(&branch.getElseRegion().front());
  otherwise();
}

void alignWorkgroupBuffers(mlir::OpBuilder &b, mlir::gpu::GPUFuncOp f) {
  for (unsigned i = 0; i < f.getNumWorkgroupAttributions(); ++i)
    f.setWorkgroupAttributionAttr(i, "llvm.align", b.getI64IntegerAttr(kVectorBytes));
}

mlir::MemRefType workgroupType(llvm::ArrayRef<int64_t> shape, mlir::Type element) {
  auto space = mlir::gpu::AddressSpaceAttr::get(element.getContext(), mlir::gpu::AddressSpace::Workgroup);
  return mlir::MemRefType::get(shape, element, mlir::MemRefLayoutAttrInterface(), space);
}

llvm::SmallVector<mlir::Type> argumentTypes(const Problem &p, bool withAB) {
  llvm::SmallVector<mlir::Type> types;
  if (withAB) {
    types.push_back(p.aType);
    types.push_back(p.bType);
  }
  types.push_back(p.cType);
  if (p.epilogue)
    for (Value operand : p.epilogue->hostOperands)
      types.push_back(operand.getType());
  if (p.prologue)
    for (Value operand : p.prologue->hostOperands)
      types.push_back(operand.getType());
  return types;
}

Value sumOfSplits(const Ix &ix, Matrix &partials, Value batch, Value row, Value col, int64_t width, int64_t splits,
                  int64_t batches) {
  Value sum = partials.loadRowVector(ix, batch, row, col, width);
  for (int64_t split = 1; split < splits; ++split)
    sum = mlir::arith::AddFOp::create(ix.b, ix.loc, sum,
                                      partials.loadRowVector(ix, ix.add(batch, split * batches), row, col, width));
  return sum;
}

} // namespace mlpipe::emitters::generated_matmul
