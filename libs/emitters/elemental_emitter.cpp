// ElementalEmitter: per-element code for fusion nodes, memoised by index.
#include "emitters/elemental_emitter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/AffineExpr.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace mlpipe::emitters {

namespace {

bool sameLayout(const BufferView &a, const BufferView &b) {
  return a.shape == b.shape && a.strides == b.strides && a.offset == b.offset && !a.dynamicOffset && !b.dynamicOffset;
}

int64_t elementBytes(mlir::Type type) { return std::max<int64_t>(1, type.getIntOrFloatBitWidth() / 8); }

} // namespace

ElementalEmitter::ElementalEmitter(const FusionGraph &graph, mlir::OpBuilder &builder, mlir::OpBuilder entry,
                                   const mlir::IRMapping &arguments)
    : graph_(graph), builder_(builder), entry_(entry), loc_(graph.function().getLoc()), arguments_(arguments) {
  scopes_.emplace_back();
}

void ElementalEmitter::fail(const std::string &why) {
  if (!failed_)
    failure_ = why;
  failed_ = true;
}

// ---- Memo ---------------------------------------------------------------------

ElementalEmitter::Key ElementalEmitter::key(const void *what, llvm::ArrayRef<mlir::Value> index) const {
  Key k{what, {}};
  for (mlir::Value v : index)
    k.index.push_back(v.getAsOpaquePointer());
  return k;
}

mlir::Value ElementalEmitter::lookup(const Key &k) const {
  for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope)
    if (auto found = scope->find(k); found != scope->end())
      return found->second;
  return {};
}

void ElementalEmitter::remember(const Key &k, mlir::Value value) { scopes_.back()[k] = value; }

void ElementalEmitter::pushScope() { scopes_.emplace_back(); }

void ElementalEmitter::popScope() {
  // Lane groups and memoised index arithmetic made in the scope go too.
  scopes_.pop_back();
}

// ---- Index arithmetic ---------------------------------------------------------

mlir::Value ElementalEmitter::index(int64_t value) {
  Key k = key(reinterpret_cast<const void *>(static_cast<intptr_t>(value)), {});
  k.index.push_back(nullptr); // distinguishes constants from other keys
  for (const auto &scope : scopes_)
    if (auto found = scope.find(k); found != scope.end())
      return found->second;
  mlir::Value constant = mlir::arith::ConstantIndexOp::create(entry_, loc_, value);
  scopes_.front()[k] = constant;
  return constant;
}

mlir::Value ElementalEmitter::add(mlir::Value a, mlir::Value b) {
  if (auto ca = mlir::getConstantIntValue(a); ca && *ca == 0)
    return b;
  if (auto cb = mlir::getConstantIntValue(b); cb && *cb == 0)
    return a;
  Key k = key("add", {a, b});
  if (mlir::Value found = lookup(k))
    return found;
  mlir::Value sum = mlir::arith::AddIOp::create(builder_, loc_, a, b);
  remember(k, sum);
  return sum;
}

mlir::Value ElementalEmitter::mul(mlir::Value a, int64_t b) {
  if (b == 1)
    return a;
  if (b == 0)
    return index(0);
  Key k = key("mul", {a, index(b)});
  if (mlir::Value found = lookup(k))
    return found;
  mlir::Value product = mlir::arith::MulIOp::create(builder_, loc_, a, index(b));
  remember(k, product);
  return product;
}

mlir::Value ElementalEmitter::minIndex(mlir::Value a, int64_t b) {
  Key k = key("min", {a, index(b)});
  if (mlir::Value found = lookup(k))
    return found;
  mlir::Value smaller = mlir::arith::MinUIOp::create(builder_, loc_, a, index(b));
  remember(k, smaller);
  return smaller;
}

// Indices are never negative, so floordiv and mod are unsigned divisions.
mlir::Value ElementalEmitter::expand(mlir::AffineExpr expr, llvm::ArrayRef<mlir::Value> dims) {
  if (auto dim = mlir::dyn_cast<mlir::AffineDimExpr>(expr))
    return dims[dim.getPosition()];
  if (auto constant = mlir::dyn_cast<mlir::AffineConstantExpr>(expr))
    return index(constant.getValue());
  auto binary = mlir::dyn_cast<mlir::AffineBinaryOpExpr>(expr);
  if (!binary) {
    fail("an indexing map with symbols");
    return index(0);
  }
  mlir::Value lhs = expand(binary.getLHS(), dims);
  if (expr.getKind() == mlir::AffineExprKind::Add)
    return add(lhs, expand(binary.getRHS(), dims));
  auto rhsConstant = mlir::dyn_cast<mlir::AffineConstantExpr>(binary.getRHS());
  if (expr.getKind() == mlir::AffineExprKind::Mul && rhsConstant)
    return mul(lhs, rhsConstant.getValue());
  mlir::Value rhs = expand(binary.getRHS(), dims);
  const char *name = expr.getKind() == mlir::AffineExprKind::Mul        ? "muli"
                     : expr.getKind() == mlir::AffineExprKind::FloorDiv ? "divui"
                     : expr.getKind() == mlir::AffineExprKind::Mod      ? "remui"
                                                                        : "ceildiv";
  Key k = key(name, {lhs, rhs});
  if (mlir::Value found = lookup(k))
    return found;
  mlir::Value result;
  switch (expr.getKind()) {
  case mlir::AffineExprKind::Mul:
    result = mlir::arith::MulIOp::create(builder_, loc_, lhs, rhs);
    break;
  case mlir::AffineExprKind::FloorDiv:
    result = mlir::arith::DivUIOp::create(builder_, loc_, lhs, rhs);
    break;
  case mlir::AffineExprKind::Mod:
    result = mlir::arith::RemUIOp::create(builder_, loc_, lhs, rhs);
    break;
  default:
    result = mlir::arith::CeilDivUIOp::create(builder_, loc_, lhs, rhs);
    break;
  }
  remember(k, result);
  return result;
}

llvm::SmallVector<mlir::Value> ElementalEmitter::applyMap(mlir::AffineMap map, llvm::ArrayRef<mlir::Value> dims) {
  llvm::SmallVector<mlir::Value> results;
  for (mlir::AffineExpr expr : map.getResults())
    results.push_back(expand(expr, dims));
  return results;
}

llvm::SmallVector<mlir::Value> ElementalEmitter::delinearize(mlir::Value linear, llvm::ArrayRef<int64_t> shape) {
  llvm::SmallVector<int64_t> strides = rowMajorStrides(shape);
  llvm::SmallVector<mlir::Value> result;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) {
      result.push_back(index(0));
      continue;
    }
    mlir::Value value = linear;
    if (strides[i] != 1) {
      Key k = key("divui", {value, index(strides[i])});
      mlir::Value found = lookup(k);
      if (!found) {
        found = mlir::arith::DivUIOp::create(builder_, loc_, value, index(strides[i]));
        remember(k, found);
      }
      value = found;
    }
    if (i != 0) {
      Key k = key("remui", {value, index(shape[i])});
      mlir::Value found = lookup(k);
      if (!found) {
        found = mlir::arith::RemUIOp::create(builder_, loc_, value, index(shape[i]));
        remember(k, found);
      }
      value = found;
    }
    result.push_back(value);
  }
  return result;
}

mlir::Value ElementalEmitter::linearize(llvm::ArrayRef<mlir::Value> idx, llvm::ArrayRef<int64_t> strides,
                                        int64_t offset) {
  mlir::Value sum = index(offset);
  for (size_t i = 0; i < idx.size(); ++i)
    sum = add(sum, mul(idx[i], strides[i]));
  return sum;
}

mlir::Value ElementalEmitter::address(const BufferView &view, llvm::ArrayRef<mlir::Value> idx) {
  if (!view.dynamicOffset)
    return linearize(idx, view.strides, view.offset);
  // The view rebuilt in the kernel says where it starts.
  mlir::Value kernelView = outsideValue(view.value);
  Key k = key("offset", {kernelView});
  mlir::Value offset = lookup(k);
  if (!offset) {
    auto metadata = mlir::memref::ExtractStridedMetadataOp::create(entry_, loc_, kernelView);
    offset = metadata.getOffset();
    scopes_.front()[k] = offset;
  }
  return add(offset, linearize(idx, view.strides, 0));
}

llvm::SmallVector<mlir::Value> ElementalEmitter::laneGroup(mlir::Value base, int width) {
  auto found = groups_.find(base);
  if (found != groups_.end() && static_cast<int>(found->second.size()) == width)
    return found->second;
  llvm::SmallVector<mlir::Value> lanes = {base};
  for (int lane = 1; lane < width; ++lane)
    lanes.push_back(mlir::arith::AddIOp::create(builder_, loc_, base, index(lane)));
  for (int lane = 0; lane < width; ++lane)
    laneOf_[lanes[lane]] = {base, lane};
  groups_[base] = lanes;
  return lanes;
}

// ---- Values from outside the kernel --------------------------------------------

// A fusion-level value used by an op being emitted: an argument (mapped to
// the kernel's), a constant (copied to the kernel's entry), or a view of an
// argument (rebuilt at the kernel's entry).
mlir::Value ElementalEmitter::outsideValue(mlir::Value value) {
  if (mlir::Value mapped = arguments_.lookupOrNull(value))
    return mapped;
  if (mlir::Value mapped = outside_.lookupOrNull(value))
    return mapped;
  mlir::Operation *definer = value.getDefiningOp();
  // Scalar arithmetic and reads of arguments (a run-time position) are
  // recomputed at the kernel's entry too.
  if (auto global = mlir::dyn_cast_or_null<mlir::memref::GetGlobalOp>(definer)) {
    // The constant array goes into the kernel's own module, in global memory.
    auto kernelModule = entry_.getBlock()->getParentOp()->getParentOfType<mlir::gpu::GPUModuleOp>();
    auto hostModule = definer->getParentOfType<mlir::ModuleOp>();
    auto original = hostModule.lookupSymbol<mlir::memref::GlobalOp>(global.getName());
    if (!kernelModule || !original) {
      fail("a constant array the kernel cannot reach");
      return value;
    }
    if (!kernelModule.lookupSymbol(global.getName())) {
      mlir::OpBuilder inModule = mlir::OpBuilder::atBlockBegin(kernelModule.getBody());
      inModule.clone(*original.getOperation());
    }
    mlir::Value copy = mlir::memref::GetGlobalOp::create(entry_, loc_, global.getType(), global.getName());
    outside_.map(value, copy);
    return copy;
  }
  bool scalarWork = definer && definer->getNumRegions() == 0 &&
                    ((definer->getDialect() && definer->getDialect()->getNamespace() == "arith") ||
                     mlir::isa<mlir::memref::LoadOp>(definer));
  if (definer && (mlir::isa<mlir::arith::ConstantOp>(definer) || isViewOp(definer) || scalarWork)) {
    for (mlir::Value operand : definer->getOperands())
      outside_.map(operand, outsideValue(operand));
    mlir::Operation *copy = entry_.clone(*definer, outside_);
    for (auto [from, to] : llvm::zip(definer->getResults(), copy->getResults()))
      outside_.map(from, to);
    return outside_.lookup(value);
  }
  fail("a body uses a value the kernel cannot see");
  return value;
}

mlir::Value ElementalEmitter::flatArgument(mlir::Value root) {
  if (mlir::Value found = flat_.lookup(root))
    return found;
  mlir::Value kernelValue = arguments_.lookupOrNull(root);
  // A constant array (a memref.global): the kernel's module gets its own copy.
  if (!kernelValue && root.getDefiningOp<mlir::memref::GetGlobalOp>())
    kernelValue = outsideValue(root);
  if (!kernelValue) {
    fail("a read of a buffer that is not a fusion argument");
    return {};
  }
  auto type = mlir::cast<mlir::MemRefType>(kernelValue.getType());
  mlir::Value flat;
  if (type.getRank() <= 1) {
    flat = kernelValue; // a scalar buffer is read with no index at all
  } else {
    mlir::ReassociationIndices all;
    for (int64_t i = 0; i < type.getRank(); ++i)
      all.push_back(i);
    flat = mlir::memref::CollapseShapeOp::create(entry_, loc_, kernelValue,
                                                 llvm::ArrayRef<mlir::ReassociationIndices>{all});
  }
  flat_[root] = flat;
  return flat;
}

// The widest vector access of a lane group: two 16-byte accesses.
constexpr int64_t kMaxGroupBytes = 32;

bool ElementalEmitter::vectorizable(mlir::Value memref, int width) const {
  if (width <= 1)
    return false;
  std::optional<BufferView> view = graph_.view(memref);
  if (!view || view->shape.empty() || view->dynamicOffset || view->strides.back() != 1 || view->offset % width != 0)
    return false;
  auto type = mlir::cast<mlir::MemRefType>(memref.getType());
  // LLVM packs a vector of i1 into bits (vector<4xi1> is one byte), but a
  // memref of i1 holds a byte per element: a vector access would read the
  // bits of the group's first byte and write the group's bits into it.
  // Such elements move one at a time, whatever the group's width.
  if (type.getElementType().getIntOrFloatBitWidth() % 8 != 0)
    return false;
  // A group set by 16-bit data (8 elements) moves its f32 companions as 32
  // bytes, which the backend splits into two 16-byte accesses; wider goes
  // element by element.
  if (width * elementBytes(type.getElementType()) > kMaxGroupBytes)
    return false;
  for (size_t i = 0; i + 1 < view->strides.size(); ++i)
    if (view->shape[i] != 1 && view->strides[i] % width != 0)
      return false;
  return view->shape.back() % width == 0;
}

mlir::Value ElementalEmitter::readArgument(mlir::Value memref, llvm::ArrayRef<mlir::Value> idx) {
  Key k = key(memref.getAsOpaquePointer(), idx);
  if (mlir::Value found = lookup(k))
    return found;
  std::optional<BufferView> view = graph_.view(memref);
  mlir::Value flat = flatArgument(view->root);
  if (!flat)
    return {};
  auto elementType = mlir::cast<mlir::MemRefType>(memref.getType()).getElementType();

  // One of a lane group: load the whole group with one vector access.
  if (!idx.empty()) {
    auto lane = laneOf_.find(idx.back());
    if (lane != laneOf_.end()) {
      mlir::Value base = lane->second.first;
      const llvm::SmallVector<mlir::Value> &lanes = groups_[base];
      int width = static_cast<int>(lanes.size());
      if (vectorizable(memref, width)) {
        llvm::SmallVector<mlir::Value> baseIndex(idx.begin(), idx.end());
        baseIndex.back() = base;
        mlir::Value place = address(*view, baseIndex);
        auto vectorType = mlir::VectorType::get({width}, elementType);
        auto alignment = llvm::MaybeAlign(width * elementBytes(elementType));
        mlir::Value vector = mlir::vector::LoadOp::create(builder_, loc_, vectorType, flat, mlir::ValueRange{place},
                                                          /*nontemporal=*/false, alignment);
        mlir::Value wanted;
        for (int u = 0; u < width; ++u) {
          mlir::Value element = mlir::vector::ExtractOp::create(builder_, loc_, vector, llvm::ArrayRef<int64_t>{u});
          llvm::SmallVector<mlir::Value> laneIndex = baseIndex;
          laneIndex.back() = lanes[u];
          remember(key(memref.getAsOpaquePointer(), laneIndex), element);
          if (u == lane->second.second)
            wanted = element;
        }
        return wanted;
      }
    }
  }
  mlir::Value element;
  if (mlir::cast<mlir::MemRefType>(flat.getType()).getRank() == 0)
    element = mlir::memref::LoadOp::create(builder_, loc_, flat, mlir::ValueRange{});
  else
    element = mlir::memref::LoadOp::create(builder_, loc_, flat, mlir::ValueRange{address(*view, idx)});
  remember(k, element);
  return element;
}

mlir::Value ElementalEmitter::read(int consumer, mlir::Value memref, llvm::ArrayRef<mlir::Value> idx, int producer) {
  if (producer < 0)
    return readArgument(memref, idx);
  const FusionNode &source = graph_.node(producer);
  std::optional<BufferView> view = graph_.view(memref);
  if (!view) {
    fail("a read through a dynamic layout");
    return {};
  }
  if (sameLayout(*view, source.output))
    return node(producer, idx);
  // Through a view: the element's place in the root, then the producer's
  // index for that place (the producer wrote the root densely).
  mlir::Value place = address(*view, idx);
  return node(producer, delinearize(place, source.output.shape));
}

// ---- Nodes -----------------------------------------------------------------------

llvm::SmallVector<mlir::Value> ElementalEmitter::loopIndexOfOutput(int nodeIndex,
                                                                   llvm::ArrayRef<mlir::Value> outputIndex) {
  mlir::linalg::LinalgOp op = graph_.node(nodeIndex).op;
  mlir::AffineMap outputMap = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  if (!outputMap.isPermutation()) {
    fail("an output indexing that is not a permutation");
    return llvm::SmallVector<mlir::Value>(op.getNumLoops(), index(0));
  }
  return applyMap(mlir::inversePermutation(outputMap), outputIndex);
}

mlir::Operation *ElementalEmitter::combiner(int nodeIndex) const {
  mlir::linalg::LinalgOp op = graph_.node(nodeIndex).op;
  mlir::Block *block = op.getBlock();
  mlir::BlockArgument accumulator = block->getArguments().back();
  if (!accumulator.hasOneUse())
    return nullptr;
  mlir::Operation *user = *accumulator.getUsers().begin();
  mlir::Operation *yield = block->getTerminator();
  if (user->getNumResults() != 1 || user->getNumOperands() != 2 || yield->getNumOperands() != 1 ||
      yield->getOperand(0) != user->getResult(0) || user->getBlock() != block)
    return nullptr;
  return user;
}

bool ElementalEmitter::isTreeReducible(int nodeIndex) const {
  mlir::linalg::LinalgOp op = graph_.node(nodeIndex).op;
  if (op.getNumReductionLoops() == 0)
    return false;
  mlir::Operation *combining = combiner(nodeIndex);
  return combining && mlir::arith::getNeutralElement(combining).has_value();
}

mlir::Value ElementalEmitter::combine(int nodeIndex, mlir::Value a, mlir::Value b) {
  mlir::Operation *combining = combiner(nodeIndex);
  mlir::IRMapping mapping;
  mapping.map(combining->getOperand(0), a);
  mapping.map(combining->getOperand(1), b);
  return builder_.clone(*combining, mapping)->getResult(0);
}

mlir::Value ElementalEmitter::neutral(int nodeIndex) {
  mlir::Operation *combining = combiner(nodeIndex);
  mlir::TypedAttr value = *mlir::arith::getNeutralElement(combining);
  return mlir::arith::ConstantOp::create(entry_, loc_, value);
}

// The body at one loop point: block arguments bound to the operands' values
// there, linalg.index to the loop index, the accumulator (the output's
// block argument) to `accumulator`. Without the combiner, the value it
// would combine into the accumulator.
void ElementalEmitter::substituteBodyValue(mlir::Value bodyValue, mlir::Value replacement) {
  bodySubstitutions_.map(bodyValue, replacement);
}

void ElementalEmitter::clearBodySubstitutions() { bodySubstitutions_.clear(); }

mlir::Value ElementalEmitter::body(int nodeIndex, llvm::ArrayRef<mlir::Value> loopIndex, mlir::Value accumulator,
                                   bool withoutCombiner) {
  const FusionNode &n = graph_.node(nodeIndex);
  mlir::linalg::LinalgOp op = n.op;
  mlir::Block *block = op.getBlock();
  mlir::IRMapping mapping;
  unsigned argument = 0;
  for (mlir::OpOperand *input : op.getDpsInputOperands()) {
    mlir::BlockArgument blockArgument = block->getArgument(argument++);
    if (blockArgument.use_empty())
      continue;
    mapping.map(blockArgument, operand(nodeIndex, *input, loopIndex));
  }
  mlir::BlockArgument outputArgument = block->getArgument(argument);
  mlir::Operation *combining = withoutCombiner ? combiner(nodeIndex) : nullptr;
  if (!outputArgument.use_empty() && !combining) {
    if (!accumulator) {
      fail("a body reads its output");
      return {};
    }
    mapping.map(outputArgument, accumulator);
  }
  for (mlir::Operation &bodyOp : block->without_terminator())
    for (mlir::Value result : bodyOp.getResults())
      if (mlir::Value replacement = bodySubstitutions_.lookupOrNull(result))
        mapping.map(result, replacement);
  for (mlir::Operation &bodyOp : block->without_terminator()) {
    if (&bodyOp == combining)
      continue;
    if (bodyOp.getNumResults() > 0 &&
        llvm::all_of(bodyOp.getResults(), [&](mlir::Value result) { return mapping.contains(result); }))
      continue; // substituted
    if (auto indexOp = mlir::dyn_cast<mlir::linalg::IndexOp>(bodyOp)) {
      mapping.map(indexOp.getResult(), loopIndex[indexOp.getDim()]);
      continue;
    }
    // Values from outside the linalg op, also inside nested regions.
    bodyOp.walk([&](mlir::Operation *nested) {
      for (mlir::Value used : nested->getOperands())
        if (!mapping.contains(used) && !op->isAncestor(used.getParentBlock()->getParentOp()))
          mapping.map(used, outsideValue(used));
    });
    builder_.clone(bodyOp, mapping);
  }
  // The result: computed in the body, or a value from outside it (a body
  // yielding a constant).
  auto resultOf = [&](mlir::Value v) -> mlir::Value {
    if (mlir::Value mapped = mapping.lookupOrNull(v))
      return mapped;
    return outsideValue(v);
  };
  if (combining)
    return resultOf(combining->getOperand(0) == outputArgument ? combining->getOperand(1) : combining->getOperand(0));
  return resultOf(block->getTerminator()->getOperand(0));
}

mlir::Value ElementalEmitter::operand(int consumer, mlir::OpOperand &operand, llvm::ArrayRef<mlir::Value> loopIndex) {
  mlir::linalg::LinalgOp op = graph_.node(consumer).op;
  mlir::Value value = operand.get();
  if (!mlir::isa<mlir::ShapedType>(value.getType()))
    return outsideValue(value);
  llvm::SmallVector<mlir::Value> operandIndex = applyMap(op.getMatchingIndexingMap(&operand), loopIndex);
  Key k = key(&operand, operandIndex);
  if (mlir::Value found = lookup(k))
    return found;
  mlir::Value result = read(consumer, value, operandIndex, graph_.producerOf(consumer, operand));
  if (result)
    remember(k, result);
  return result;
}

void ElementalEmitter::defineRead(int consumer, mlir::OpOperand &operand, llvm::ArrayRef<mlir::Value> operandIndex,
                                  mlir::Value value) {
  remember(key(&operand, operandIndex), value);
}

void ElementalEmitter::define(int nodeIndex, llvm::ArrayRef<mlir::Value> idx, mlir::Value value) {
  remember(key(graph_.node(nodeIndex).op.getOperation(), idx), value);
}

mlir::Value ElementalEmitter::reductionInput(int nodeIndex, llvm::ArrayRef<mlir::Value> loopIndex) {
  return body(nodeIndex, loopIndex, {}, /*withoutCombiner=*/true);
}

mlir::Value ElementalEmitter::reductionInit(int nodeIndex, llvm::ArrayRef<mlir::Value> outputIndex) {
  const FusionNode &n = graph_.node(nodeIndex);
  return read(nodeIndex, n.op.getDpsInits()[0], outputIndex, n.initProducer);
}

mlir::Value ElementalEmitter::serialReduction(int nodeIndex, llvm::ArrayRef<mlir::Value> outputIndex) {
  mlir::linalg::LinalgOp op = graph_.node(nodeIndex).op;
  mlir::AffineMap outputMap = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  llvm::SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  llvm::SmallVector<mlir::Value> loopIndex(op.getNumLoops());
  for (auto [position, expr] : llvm::enumerate(outputMap.getResults())) {
    auto dim = mlir::dyn_cast<mlir::AffineDimExpr>(expr);
    if (!dim) {
      fail("a reduction whose output indexing is not a projection");
      return {};
    }
    loopIndex[dim.getPosition()] = outputIndex[position];
  }
  mlir::Value accumulator = reductionInit(nodeIndex, outputIndex);
  llvm::SmallVector<unsigned> reductionDims;
  op.getReductionDims(reductionDims);
  // Nested loops over the reduced dimensions, the accumulator carried.
  std::function<mlir::Value(size_t, mlir::Value)> nest = [&](size_t level, mlir::Value carried) -> mlir::Value {
    if (level == reductionDims.size())
      return body(nodeIndex, loopIndex, carried, /*withoutCombiner=*/false);
    unsigned dim = reductionDims[level];
    auto loop =
        mlir::scf::ForOp::create(builder_, loc_, index(0), index(ranges[dim]), index(1), mlir::ValueRange{carried});
    mlir::OpBuilder::InsertionGuard guard(builder_);
    builder_.setInsertionPointToStart(loop.getBody());
    pushScope();
    loopIndex[dim] = loop.getInductionVar();
    mlir::Value next = nest(level + 1, loop.getRegionIterArgs()[0]);
    popScope();
    mlir::scf::YieldOp::create(builder_, loc_, next);
    return loop.getResult(0);
  };
  mlir::Value result;
  {
    mlir::OpBuilder::InsertionGuard guard(builder_);
    result = nest(0, accumulator);
  }
  return result;
}

void ElementalEmitter::prefetchArgumentReads(int nodeIndex, llvm::ArrayRef<mlir::Value> idx) {
  const FusionNode &n = graph_.node(nodeIndex);
  if (n.op.getNumReductionLoops() > 0 || mlir::isa<mlir::linalg::MatmulOp, mlir::linalg::BatchMatmulOp>(n.op) ||
      lookup(key(n.op.getOperation(), idx)))
    return;
  llvm::SmallVector<mlir::Value> loopIndex = loopIndexOfOutput(nodeIndex, idx);
  for (mlir::OpOperand *input : n.op.getDpsInputOperands()) {
    if (!mlir::isa<mlir::ShapedType>(input->get().getType()))
      continue;
    int producer = graph_.producerOf(nodeIndex, *input);
    if (producer < 0) {
      operand(nodeIndex, *input, loopIndex);
      continue;
    }
    std::optional<BufferView> view = graph_.view(input->get());
    if (view && sameLayout(*view, graph_.node(producer).output))
      prefetchArgumentReads(producer, applyMap(n.op.getMatchingIndexingMap(input), loopIndex));
  }
}

mlir::Value ElementalEmitter::node(int nodeIndex, llvm::ArrayRef<mlir::Value> idx) {
  const FusionNode &n = graph_.node(nodeIndex);
  Key k = key(n.op.getOperation(), idx);
  if (mlir::Value found = lookup(k))
    return found;
  if (mlir::isa<mlir::linalg::MatmulOp, mlir::linalg::BatchMatmulOp>(n.op.getOperation())) {
    fail("a matmul read element by element");
    return {};
  }
  mlir::Value result;
  if (n.op.getNumReductionLoops() > 0) {
    result = serialReduction(nodeIndex, idx);
  } else {
    llvm::SmallVector<mlir::Value> loopIndex = loopIndexOfOutput(nodeIndex, idx);
    mlir::Value accumulator;
    mlir::Block *block = n.op.getBlock();
    if (!block->getArguments().back().use_empty())
      accumulator = reductionInit(nodeIndex, idx);
    result = body(nodeIndex, loopIndex, accumulator, /*withoutCombiner=*/false);
  }
  if (result)
    remember(k, result);
  return result;
}

// ---- Stores ---------------------------------------------------------------------

void ElementalEmitter::store(mlir::Value memref, llvm::ArrayRef<mlir::Value> idx, mlir::Value value) {
  std::optional<BufferView> view = graph_.view(memref);
  mlir::Value flat = view ? flatArgument(view->root) : mlir::Value();
  if (!flat)
    return fail("a store into a buffer that is not a fusion argument");
  if (mlir::cast<mlir::MemRefType>(flat.getType()).getRank() == 0) {
    mlir::memref::StoreOp::create(builder_, loc_, value, flat, mlir::ValueRange{});
    return;
  }
  mlir::Value place = address(*view, idx);
  mlir::memref::StoreOp::create(builder_, loc_, value, flat, mlir::ValueRange{place});
}

void ElementalEmitter::storeGroup(mlir::Value memref, llvm::ArrayRef<mlir::Value> baseIndex,
                                  llvm::ArrayRef<mlir::Value> values) {
  int width = static_cast<int>(values.size());
  if (!vectorizable(memref, width)) {
    llvm::SmallVector<mlir::Value> lanes = laneGroup(baseIndex.back(), width);
    for (int u = 0; u < width; ++u) {
      llvm::SmallVector<mlir::Value> idx(baseIndex.begin(), baseIndex.end());
      idx.back() = lanes[u];
      store(memref, idx, values[u]);
    }
    return;
  }
  std::optional<BufferView> view = graph_.view(memref);
  mlir::Value flat = flatArgument(view->root);
  if (!flat)
    return fail("a store into a buffer that is not a fusion argument");
  mlir::Value place = address(*view, baseIndex);
  mlir::Type elementType = values.front().getType();
  auto vectorType = mlir::VectorType::get({width}, elementType);
  mlir::Value vector = mlir::vector::FromElementsOp::create(builder_, loc_, vectorType, values);
  mlir::vector::StoreOp::create(builder_, loc_, vector, flat, mlir::ValueRange{place}, /*nontemporal=*/false,
                                llvm::MaybeAlign(width * elementBytes(elementType)));
}

} // namespace mlpipe::emitters
