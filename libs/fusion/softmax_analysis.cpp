// The softmax analysis: see softmax_analysis.h.
#include "fusion/softmax_analysis.h"

#include "fusion/hero_analysis.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Matchers.h"

#include <optional>

namespace mlpipe::emitters {

namespace {

using mlir::Value;

// Whether a generic's body is exactly `yield op(args...)`-shaped chain of
// the given op names, each using the previous result.
bool bodyIs(mlir::linalg::LinalgOp op, llvm::ArrayRef<llvm::StringRef> names) {
  mlir::Block *block = op.getBlock();
  llvm::SmallVector<mlir::Operation *> ops;
  for (mlir::Operation &inner : block->without_terminator())
    ops.push_back(&inner);
  if (ops.size() != names.size())
    return false;
  for (auto [inner, name] : llvm::zip(ops, names))
    if (inner->getName().getStringRef() != name)
      return false;
  return block->getTerminator()->getOperand(0) == ops.back()->getResult(0);
}

bool isIdentity(mlir::linalg::LinalgOp op, mlir::OpOperand *operand) {
  return op.getMatchingIndexingMap(operand).isIdentity();
}

// The reduction node's combining op name, if its body is `yield op(in, acc)`.
llvm::StringRef combinerName(mlir::linalg::LinalgOp op) {
  mlir::Block *block = op.getBlock();
  if (block->getOperations().size() != 2)
    return "";
  mlir::Operation &combining = block->front();
  if (combining.getNumOperands() != 2 || !llvm::is_contained(combining.getOperands(), block->getArgument(0)) ||
      !llvm::is_contained(combining.getOperands(), block->getArguments().back()))
    return "";
  return combining.getName().getStringRef();
}

// The traced causal penalty's value where it does not mask, if `value` (in
// a linalg body) is that penalty: select(index(keyDim) - index(queryDim)
// >= 1, a, 0) * big with a * big at most -1e9, so that exp(penalty + score
// - m) is exactly 0 in f32 and f64 for any score below 1e8 in magnitude;
// where the key is not after the query it is 0 * big, a signed zero.
std::optional<double> causalPenaltyWhereVisible(Value value, unsigned queryDim, unsigned keyDim) {
  auto scaled = value.getDefiningOp<mlir::arith::MulFOp>();
  if (!scaled)
    return std::nullopt;
  for (auto [selected, other] :
       {std::pair(scaled.getLhs(), scaled.getRhs()), std::pair(scaled.getRhs(), scaled.getLhs())}) {
    auto select = selected.getDefiningOp<mlir::arith::SelectOp>();
    mlir::FloatAttr big, whenAfter, otherwise;
    if (!select || !mlir::matchPattern(other, mlir::m_Constant(&big)) ||
        !mlir::matchPattern(select.getTrueValue(), mlir::m_Constant(&whenAfter)) ||
        !mlir::matchPattern(select.getFalseValue(), mlir::m_Constant(&otherwise)) || !otherwise.getValue().isZero() ||
        whenAfter.getValueAsDouble() * big.getValueAsDouble() > -1e9)
      continue;
    auto cmp = select.getCondition().getDefiningOp<mlir::arith::CmpIOp>();
    llvm::APInt one;
    if (!cmp || cmp.getPredicate() != mlir::arith::CmpIPredicate::sge ||
        !mlir::matchPattern(cmp.getRhs(), mlir::m_ConstantInt(&one)) || one != 1)
      continue;
    auto sub = cmp.getLhs().getDefiningOp<mlir::arith::SubIOp>();
    if (!sub)
      continue;
    auto key = sub.getLhs().getDefiningOp<mlir::linalg::IndexOp>();
    auto query = sub.getRhs().getDefiningOp<mlir::linalg::IndexOp>();
    if (key && query && key.getDim() == keyDim && query.getDim() == queryDim)
      return otherwise.getValueAsDouble() * big.getValueAsDouble();
  }
  return std::nullopt;
}

bool isCausalPenalty(Value value, unsigned queryDim, unsigned keyDim) {
  return causalPenaltyWhereVisible(value, queryDim, keyDim).has_value();
}

// The prologue's result as `something + term`: the terms added (either
// order), or none.
llvm::SmallVector<Value, 2> addedTerms(mlir::linalg::LinalgOp op) {
  auto add = op.getBlock()->getTerminator()->getOperand(0).getDefiningOp<mlir::arith::AddFOp>();
  if (!add)
    return {};
  return {add.getLhs(), add.getRhs()};
}

// Whether the prologue adds the causal penalty computed in its own body
// (sublayer mode traces it there).
bool isCausalMask(mlir::linalg::LinalgOp prologue) {
  for (Value term : addedTerms(prologue))
    if (isCausalPenalty(term, 1, 2))
      return true;
  return false;
}

} // namespace

mlir::FailureOr<Softmax> matchSoftmax(const FusionGraph &graph, std::string &why, bool &looksLikeSoftmax) {
  Softmax s;
  llvm::SmallVector<int> reductions = graph.reductions();
  if (reductions.size() != 2)
    return why = "the softmax fusion does not hold two reductions", mlir::failure();
  s.max = reductions[0];
  s.sum = reductions[1];
  for (int r : reductions) {
    mlir::linalg::LinalgOp op = graph.node(r).op;
    if (heroRole(op) != HeroRole::RowReduction || op.getNumLoops() != 3 || op.getNumReductionLoops() != 1 ||
        !mlir::isa<mlir::linalg::ReduceOp>(op.getOperation()))
      return why = "a softmax reduction that is not over the last axis", mlir::failure();
  }
  llvm::StringRef maxOp = combinerName(graph.node(s.max).op);
  if (maxOp != "arith.maximumf" && maxOp != "arith.maxnumf")
    return why = "the first reduction is not a max", mlir::failure();
  int maxInit = graph.node(s.max).initProducer;
  auto maxFill = maxInit < 0 ? mlir::linalg::FillOp()
                             : mlir::dyn_cast<mlir::linalg::FillOp>(graph.node(maxInit).op.getOperation());
  if (!maxFill || !mlir::matchPattern(maxFill.getInputs()[0], mlir::m_Constant()))
    return why = "the max does not start from a constant", mlir::failure();
  // From here on it looks like a softmax: a reason is worth reporting.
  looksLikeSoftmax = true;
  if (combinerName(graph.node(s.sum).op) != "arith.addf" || !isZeroFillNode(graph, graph.node(s.sum).initProducer))
    return why = "the second reduction is not a sum from zero", mlir::failure();
  s.prologue = graph.node(s.max).inputProducers[0];
  s.exp = graph.node(s.sum).inputProducers[0];
  if (s.prologue < 0 || s.exp < 0)
    return why = "a softmax reduction of an argument", mlir::failure();
  // The prologue: elementwise over (head, query, key), reading the scores
  // argument at the same index (and possibly other arguments: a mask).
  mlir::linalg::LinalgOp prologue = graph.node(s.prologue).op;
  if (prologue.getNumReductionLoops() != 0 || !isIdentity(prologue, prologue.getDpsInitOperand(0)) ||
      FusionGraph::readsMemrefInBody(prologue))
    return why = "the softmax prologue is not elementwise", mlir::failure();
  int scoresFound = 0;
  mlir::Block &entry = graph.function().front();
  // Inputs of the prologue's shape read as they are: the scores, and
  // perhaps a mask of the same shape (batched decoding's per-row mask,
  // [rows, 1, keys]). Where there are two, the scores are the one the
  // prologue scales (multiplies by a constant), the mask an extra argument.
  llvm::SmallVector<unsigned, 2> asTheyAre;
  for (auto [position, operand] : llvm::enumerate(prologue.getDpsInputOperands()))
    if (auto argument = mlir::dyn_cast<mlir::BlockArgument>(operand->get());
        argument && mlir::isa<mlir::MemRefType>(argument.getType()) && isIdentity(prologue, operand) &&
        mlir::cast<mlir::MemRefType>(argument.getType()).getShape() == graph.node(s.prologue).output.shape)
      asTheyAre.push_back(static_cast<unsigned>(position));
  std::optional<unsigned> scaled;
  if (asTheyAre.size() == 2) {
    auto isScaled = [&](unsigned position) {
      return llvm::any_of(prologue.getBlock()->getArgument(position).getUsers(), [](mlir::Operation *user) {
        auto multiply = mlir::dyn_cast<mlir::arith::MulFOp>(user);
        return multiply && (mlir::matchPattern(multiply.getLhs(), mlir::m_Constant()) ||
                            mlir::matchPattern(multiply.getRhs(), mlir::m_Constant()));
      });
    };
    if (isScaled(asTheyAre[0]) != isScaled(asTheyAre[1]))
      scaled = isScaled(asTheyAre[0]) ? asTheyAre[0] : asTheyAre[1];
  }
  for (auto [position, operand] : llvm::enumerate(prologue.getDpsInputOperands())) {
    if (graph.node(s.prologue).inputProducers[position] != -1)
      return why = "the softmax prologue reads a value computed in the fusion", mlir::failure();
    auto argument = mlir::dyn_cast<mlir::BlockArgument>(operand->get());
    if (!mlir::isa<mlir::MemRefType>(operand->get().getType()))
      continue;
    // A mask over [batch, heads, ...] the prologue reads as [batch * heads,
    // ...] (batched decoding's per-sequence mask): the argument it views
    // is the one the kernel takes.
    auto collapsed = operand->get().getDefiningOp<mlir::memref::CollapseShapeOp>();
    if (!argument && collapsed)
      argument = mlir::dyn_cast<mlir::BlockArgument>(collapsed.getSrc());
    if (!argument || argument.getOwner() != &entry)
      return why = "the softmax prologue reads through a view", mlir::failure();
    if (!collapsed && isIdentity(prologue, operand) &&
        mlir::cast<mlir::MemRefType>(argument.getType()).getShape() == graph.node(s.prologue).output.shape &&
        (!scaled || *scaled == position)) {
      s.scoresInput = position;
      ++scoresFound;
    } else if (!llvm::is_contained(s.extraArguments, argument.getArgNumber())) {
      s.extraArguments.push_back(argument.getArgNumber());
    }
  }
  if (scoresFound != 1)
    return why = "the softmax prologue does not read one [heads, T, T] argument as it is", mlir::failure();
  // Arguments the fusion reads outside its linalg ops (a run-time position
  // loaded once, that the prologue's mask compares keys with): the kernel
  // takes them too.
  unsigned scoresArgument =
      mlir::cast<mlir::BlockArgument>(prologue.getDpsInputOperand(s.scoresInput)->get()).getArgNumber();
  for (mlir::BlockArgument argument : entry.getArguments()) {
    unsigned number = argument.getArgNumber();
    if (number == scoresArgument || llvm::is_contained(s.extraArguments, number) ||
        !mlir::isa<mlir::MemRefType>(argument.getType()) ||
        llvm::any_of(graph.outputs(), [&](const FusionGraph::Output &output) { return output.argument == number; }))
      continue;
    if (llvm::any_of(argument.getUsers(), [](mlir::Operation *user) { return mlir::isa<mlir::memref::LoadOp>(user); }))
      s.extraArguments.push_back(number);
  }
  if (!isIdentity(graph.node(s.max).op, graph.node(s.max).op.getDpsInputOperand(0)))
    return why = "the max reads the prologue through a view", mlir::failure();
  // exp(x - max)
  auto checkEpilogue = [&](int node, int first, int second, llvm::ArrayRef<llvm::StringRef> body) {
    mlir::linalg::LinalgOp op = graph.node(node).op;
    if (op.getNumReductionLoops() != 0 || op.getNumDpsInputs() != 2 || graph.node(node).inputProducers[0] != first ||
        graph.node(node).inputProducers[1] != second || !isIdentity(op, op.getDpsInputOperand(0)) ||
        !isIdentity(op, op.getDpsInitOperand(0)) || !bodyIs(op, body))
      return false;
    mlir::Block *block = op.getBlock();
    mlir::Operation &head = block->front();
    return head.getOperand(0) == block->getArgument(0) && head.getOperand(1) == block->getArgument(1) &&
           op.getMatchingIndexingMap(op.getDpsInputOperand(1)) ==
               mlir::AffineMap::getMultiDimIdentityMap(3, op.getContext()).getMajorSubMap(2);
  };
  if (!checkEpilogue(s.exp, s.prologue, s.max, {"arith.subf", "math.exp"}))
    return why = "the softmax's exponential is not exp(x - max)", mlir::failure();
  if (graph.outputs().size() != 1)
    return why = "the softmax fusion has several outputs", mlir::failure();
  s.divide = graph.outputs().front().node;
  // The quotient, or (16-bit storage: a softmax computed in f32 and stored
  // once) the quotient rounded to the stored type.
  auto roundedQuotient = [&] {
    if (!checkEpilogue(s.divide, s.exp, s.sum, {"arith.divf", "arith.truncf"}))
      return false;
    mlir::Operation &divide = graph.node(s.divide).op.getBlock()->front();
    return divide.getNextNode()->getOperand(0) == divide.getResult(0);
  };
  if (!checkEpilogue(s.divide, s.exp, s.sum, {"arith.divf"}) && !roundedQuotient())
    return why = "the softmax's output is not exp(x - max) / sum", mlir::failure();
  // Nothing else but the fills.
  for (const FusionNode &node : graph.nodes())
    if (!llvm::is_contained({s.prologue, s.max, s.exp, s.sum, s.divide}, node.order) &&
        !mlir::isa<mlir::linalg::FillOp>(node.op.getOperation()))
      return why = "the softmax fusion holds other ops", mlir::failure();
  s.causal = isCausalMask(prologue);
  return s;
}

namespace {

// The one fusion call that writes host buffer `buffer`, before `reader`
// and in its block, with `buffer` a host allocation nothing else writes;
// its graph and the node of the output it writes there. Null otherwise.
struct SoleWriter {
  mlir::func::CallOp call;
  mutable mlir::func::FuncOp callee; // (op handles are used through const writers)
  std::optional<FusionGraph> graph;
  int node = -1;
  unsigned argument = 0;
};
SoleWriter soleWriterBefore(Value buffer, mlir::func::CallOp reader, mlir::SymbolTable &symbols) {
  SoleWriter found;
  if (!buffer.getDefiningOp<mlir::memref::AllocOp>())
    return {};
  for (mlir::Operation *user : buffer.getUsers()) {
    // (A launch made of a fusion reads the mask as an argument only.)
    if (mlir::isa<mlir::memref::DeallocOp, mlir::gpu::LaunchFuncOp>(user))
      continue;
    auto call = mlir::dyn_cast<mlir::func::CallOp>(user);
    if (!call)
      return {};
    auto callee = symbols.lookup<mlir::func::FuncOp>(call.getCallee());
    std::string ignored;
    auto graph = callee ? FusionGraph::analyze(callee, ignored) : mlir::FailureOr<FusionGraph>(mlir::failure());
    if (mlir::failed(graph))
      return {};
    for (const FusionGraph::Output &output : graph->outputs()) {
      if (call.getOperand(output.argument) != buffer)
        continue;
      if (found.call)
        return {};
      found.call = call;
      found.callee = callee;
      found.node = output.node;
      found.argument = output.argument;
    }
    if (found.call == call)
      found.graph = std::move(*graph);
  }
  if (!found.call || found.call->getBlock() != reader->getBlock() || !found.call->isBeforeInBlock(reader))
    return {};
  return found;
}

// The writer's one op, when it computes the whole output from its indices
// alone (no inputs) over `loops` loops.
mlir::linalg::LinalgOp indexOnlyOp(const SoleWriter &writer, unsigned loops) {
  if (!writer.call || writer.graph->nodes().size() != 1)
    return {};
  mlir::linalg::LinalgOp op = writer.graph->node(writer.node).op;
  if (op.getNumDpsInputs() != 0 || op.getNumLoops() != loops ||
      op.getDpsInits()[0] != writer.callee.getArgument(writer.argument) || !isIdentity(op, op.getDpsInitOperand(0)))
    return {};
  return op;
}

} // namespace

std::optional<VisibleCausalPenalty> visibleCausalPenalty(const Softmax &softmax, const FusionGraph &graph,
                                                         const FusionGraph *maskGraph) {
  if (!softmax.causal)
    return std::nullopt;
  if (softmax.maskInput >= 0) {
    // Read from memory: the writer's one op yields the penalty over [query, key].
    if (!maskGraph || maskGraph->outputs().size() != 1)
      return std::nullopt;
    mlir::linalg::LinalgOp writer = maskGraph->node(maskGraph->outputs().front().node).op;
    std::optional<double> value = causalPenaltyWhereVisible(writer.getBlock()->getTerminator()->getOperand(0), 0, 1);
    if (!value)
      return std::nullopt;
    return VisibleCausalPenalty{Value(), *value};
  }
  for (Value term : addedTerms(graph.node(softmax.prologue).op))
    if (std::optional<double> value = causalPenaltyWhereVisible(term, 1, 2))
      return VisibleCausalPenalty{term, *value};
  return std::nullopt;
}

mlir::func::FuncOp causalMaskWriter(Value mask, mlir::func::CallOp reader, mlir::SymbolTable &symbols) {
  SoleWriter writer = soleWriterBefore(mask, reader, symbols);
  mlir::linalg::LinalgOp op = indexOnlyOp(writer, 2);
  if (!op || !isCausalPenalty(op.getBlock()->getTerminator()->getOperand(0), 0, 1))
    return {};
  return writer.callee;
}

namespace {

// The fusion argument p is loaded from, where `value` (in a linalg body)
// is select(index(keyDim) > p, big, 0) with big at most -1e9 and p the
// index_cast of a scalar loaded from an argument of the fusion `fusion`.
mlir::BlockArgument comparedPosition(Value value, unsigned keyDim, mlir::func::FuncOp fusion) {
  auto select = value.getDefiningOp<mlir::arith::SelectOp>();
  mlir::FloatAttr big, otherwise;
  if (!select || !mlir::matchPattern(select.getTrueValue(), mlir::m_Constant(&big)) ||
      !mlir::matchPattern(select.getFalseValue(), mlir::m_Constant(&otherwise)) || !otherwise.getValue().isZero() ||
      big.getValueAsDouble() > -1e9)
    return {};
  auto cmp = select.getCondition().getDefiningOp<mlir::arith::CmpIOp>();
  if (!cmp || cmp.getPredicate() != mlir::arith::CmpIPredicate::sgt)
    return {};
  auto key = cmp.getLhs().getDefiningOp<mlir::linalg::IndexOp>();
  auto cast = cmp.getRhs().getDefiningOp<mlir::arith::IndexCastOp>();
  auto load = cast ? cast.getIn().getDefiningOp<mlir::memref::LoadOp>() : mlir::memref::LoadOp();
  auto argument = load ? mlir::dyn_cast<mlir::BlockArgument>(load.getMemref()) : mlir::BlockArgument();
  if (!key || key.getDim() != keyDim || !load || !load.getIndices().empty() || !argument ||
      argument.getOwner() != &fusion.getBody().front())
    return {};
  return argument;
}

// A mask over keys written by a fusion before `reader`: the host value of
// the position it compares keys with, or null.
Value positionMaskSource(Value mask, mlir::func::CallOp reader, mlir::SymbolTable &symbols) {
  SoleWriter writer = soleWriterBefore(mask, reader, symbols);
  mlir::linalg::LinalgOp op = indexOnlyOp(writer, 1);
  if (!op)
    return {};
  mlir::BlockArgument argument = comparedPosition(op.getBlock()->getTerminator()->getOperand(0), 0, writer.callee);
  return argument ? hostInput(writer.call.getOperand(argument.getArgNumber()), reader) : Value();
}

// The key index as the writer compares it: index(keyDim), or that
// index cast to an integer (index_cast, then trunci), as traced for an i32
// comparison.
bool isKeyIndex(Value value, unsigned keyDim) {
  if (auto truncate = value.getDefiningOp<mlir::arith::TruncIOp>())
    value = truncate.getIn();
  if (auto cast = value.getDefiningOp<mlir::arith::IndexCastOp>())
    value = cast.getIn();
  auto key = value.getDefiningOp<mlir::linalg::IndexOp>();
  return key && key.getDim() == keyDim;
}

// Batched decoding's per-row mask (Graph::positionsMask): where `value` (in
// the body of `op`, over [rows, 1, keys]) is select(key > p, big, 0), big
// at most -1e9, with key the index along `keyDim` and p the element of an
// i32 input [rows / R] that `op` reads at row floordiv R: that input, and R
// (0 where the value is not so).
std::pair<mlir::OpOperand *, int64_t> comparedRowPosition(Value value, unsigned keyDim, mlir::linalg::LinalgOp op) {
  auto select = value.getDefiningOp<mlir::arith::SelectOp>();
  mlir::FloatAttr big, otherwise;
  if (!select || !mlir::matchPattern(select.getTrueValue(), mlir::m_Constant(&big)) ||
      !mlir::matchPattern(select.getFalseValue(), mlir::m_Constant(&otherwise)) || !otherwise.getValue().isZero() ||
      big.getValueAsDouble() > -1e9)
    return {};
  auto cmp = select.getCondition().getDefiningOp<mlir::arith::CmpIOp>();
  auto compared = cmp ? mlir::dyn_cast<mlir::BlockArgument>(cmp.getRhs()) : mlir::BlockArgument();
  if (!cmp || cmp.getPredicate() != mlir::arith::CmpIPredicate::sgt || !isKeyIndex(cmp.getLhs(), keyDim) || !compared ||
      compared.getOwner() != op.getBlock() || compared.getArgNumber() >= op.getNumDpsInputs())
    return {};
  mlir::OpOperand *input = op.getDpsInputOperand(compared.getArgNumber());
  auto type = mlir::dyn_cast<mlir::MemRefType>(input->get().getType());
  mlir::AffineMap map = op.getMatchingIndexingMap(input);
  if (!type || type.getRank() != 1 || !type.getElementType().isInteger(32) || op.getNumLoops() != 3 ||
      map.getNumResults() != 1)
    return {};
  mlir::AffineExpr row = map.getResult(0);
  if (row == mlir::getAffineDimExpr(0, op.getContext()))
    return {input, 1};
  auto divided = mlir::dyn_cast<mlir::AffineBinaryOpExpr>(row);
  auto divisor = divided ? mlir::dyn_cast<mlir::AffineConstantExpr>(divided.getRHS()) : mlir::AffineConstantExpr();
  if (!divided || divided.getKind() != mlir::AffineExprKind::FloorDiv || !divisor || divisor.getValue() < 1 ||
      divided.getLHS() != mlir::getAffineDimExpr(0, op.getContext()))
    return {};
  return {input, divisor.getValue()};
}

// Batched decoding's per-row mask over [rows, 1, keys], written before
// `reader` by a fusion whose one op is Graph::positionsMask's: the host
// value of the positions, and the rows per position.
std::pair<Value, int64_t> rowPositionsMaskSource(Value mask, mlir::func::CallOp reader, mlir::SymbolTable &symbols) {
  SoleWriter writer = soleWriterBefore(mask, reader, symbols);
  if (!writer.call || writer.graph->nodes().size() != 1)
    return {};
  mlir::linalg::LinalgOp op = writer.graph->node(writer.node).op;
  if (op.getNumDpsInputs() != 1 || op.getNumReductionLoops() != 0 ||
      op.getDpsInits()[0] != writer.callee.getArgument(writer.argument) || !isIdentity(op, op.getDpsInitOperand(0)))
    return {};
  auto [input, rows] = comparedRowPosition(op.getBlock()->getTerminator()->getOperand(0), 2, op);
  auto argument = input ? mlir::dyn_cast<mlir::BlockArgument>(input->get()) : mlir::BlockArgument();
  if (!argument || argument.getOwner() != &writer.callee.getBody().front())
    return {};
  Value positions = hostInput(writer.call.getOperand(argument.getArgNumber()), reader);
  return positions ? std::pair<Value, int64_t>{positions, rows} : std::pair<Value, int64_t>{};
}

// Batched decoding's mask over [batch, heads, 1, keys], written before
// `reader` by a fusion whose one op computes select(key > p[b], big, 0)
// from the positions p ([batch] i32, read at the sequence b) and its
// indices, big at most -1e9: the host value of the positions, and the
// heads (rows of the reader's [batch * heads, 1, keys] per position).
std::pair<Value, int64_t> positionsMaskSource(Value mask, mlir::func::CallOp reader, mlir::SymbolTable &symbols) {
  SoleWriter writer = soleWriterBefore(mask, reader, symbols);
  if (!writer.call || writer.graph->nodes().size() != 1)
    return {};
  mlir::linalg::LinalgOp op = writer.graph->node(writer.node).op;
  auto outType = mlir::dyn_cast<mlir::MemRefType>(op.getDpsInits()[0].getType());
  if (op.getNumDpsInputs() != 1 || op.getNumLoops() != 4 || op.getNumReductionLoops() != 0 || !outType ||
      outType.getDimSize(2) != 1 || op.getDpsInits()[0] != writer.callee.getArgument(writer.argument) ||
      !isIdentity(op, op.getDpsInitOperand(0)))
    return {};
  mlir::OpOperand *positionsOperand = op.getDpsInputOperand(0);
  auto positionsArgument = mlir::dyn_cast<mlir::BlockArgument>(positionsOperand->get());
  auto positionsType = mlir::dyn_cast<mlir::MemRefType>(positionsOperand->get().getType());
  mlir::MLIRContext *context = op.getContext();
  if (!positionsArgument || positionsArgument.getOwner() != &writer.callee.getBody().front() || !positionsType ||
      positionsType.getRank() != 1 || !positionsType.getElementType().isInteger(32) ||
      positionsType.getDimSize(0) != outType.getDimSize(0) ||
      op.getMatchingIndexingMap(positionsOperand) !=
          mlir::AffineMap::get(4, 0, {mlir::getAffineDimExpr(0, context)}, context))
    return {};
  auto select = op.getBlock()->getTerminator()->getOperand(0).getDefiningOp<mlir::arith::SelectOp>();
  mlir::FloatAttr big, otherwise;
  if (!select || !mlir::matchPattern(select.getTrueValue(), mlir::m_Constant(&big)) ||
      !mlir::matchPattern(select.getFalseValue(), mlir::m_Constant(&otherwise)) || !otherwise.getValue().isZero() ||
      big.getValueAsDouble() > -1e9)
    return {};
  auto cmp = select.getCondition().getDefiningOp<mlir::arith::CmpIOp>();
  if (!cmp || cmp.getPredicate() != mlir::arith::CmpIPredicate::sgt || !isKeyIndex(cmp.getLhs(), 3) ||
      cmp.getRhs() != op.getMatchingBlockArgument(positionsOperand))
    return {};
  Value positions = hostInput(writer.call.getOperand(positionsArgument.getArgNumber()), reader);
  if (!positions)
    return {};
  return {positions, outType.getDimSize(1)};
}

} // namespace

Value hostInput(Value value, mlir::func::CallOp call) {
  auto argument = mlir::dyn_cast<mlir::BlockArgument>(value);
  auto host = call->getParentOfType<mlir::func::FuncOp>();
  auto inputs = host ? host->getAttrOfType<mlir::ArrayAttr>("mlpipe.inputs") : nullptr;
  if (!argument || !inputs || argument.getOwner() != &host.getBody().front() ||
      argument.getArgNumber() >= inputs.size())
    return {};
  auto input = mlir::dyn_cast<mlir::DictionaryAttr>(inputs[argument.getArgNumber()]);
  if (!input || input.contains("inout"))
    return {};
  return value;
}

Value maskingPosition(const Softmax &softmax, const FusionGraph &graph, mlir::func::CallOp call,
                      mlir::SymbolTable &symbols, int64_t *rowsPerPosition) {
  if (rowsPerPosition)
    *rowsPerPosition = 0;
  mlir::linalg::LinalgOp prologue = graph.node(softmax.prologue).op;
  mlir::MLIRContext *context = prologue.getContext();
  mlir::AffineMap keyOnly = mlir::AffineMap::get(3, 0, {mlir::getAffineDimExpr(2, context)}, context);
  for (Value term : addedTerms(prologue)) {
    // Computed in the prologue (sublayer mode).
    if (mlir::BlockArgument argument = comparedPosition(term, 2, graph.function()))
      if (Value position = hostInput(call.getOperand(argument.getArgNumber()), call))
        return position;
    // Batched decoding's, computed in the prologue from the positions read
    // at each row's sequence (sublayer mode).
    if (auto [input, rows] = comparedRowPosition(term, 2, prologue); input && rowsPerPosition) {
      auto argument = mlir::dyn_cast<mlir::BlockArgument>(input->get());
      if (argument && argument.getOwner() == &graph.function().getBody().front())
        if (Value positions = hostInput(call.getOperand(argument.getArgNumber()), call)) {
          *rowsPerPosition = rows;
          return positions;
        }
    }
    // Read from a mask over the keys (fused mode).
    auto read = mlir::dyn_cast<mlir::BlockArgument>(term);
    if (!read || read.getOwner() != prologue.getBlock())
      continue;
    mlir::OpOperand *input = prologue.getMatchingOpOperand(read);
    auto argument = mlir::dyn_cast<mlir::BlockArgument>(input->get());
    if (argument && argument.getOwner() == &graph.function().getBody().front() &&
        prologue.getMatchingIndexingMap(input) == keyOnly)
      if (Value position = positionMaskSource(call.getOperand(argument.getArgNumber()), call, symbols))
        return position;
    // Batched decoding: a per-row mask over [rows, 1, keys] read as it is
    // (fused mode: one mask fusion serves every layer, until the fused
    // attention kernels compute its elements: matchPositionMaskInput).
    if (rowsPerPosition && argument && argument.getOwner() == &graph.function().getBody().front() &&
        prologue.getMatchingIndexingMap(input).isIdentity())
      if (auto [positions, rows] = rowPositionsMaskSource(call.getOperand(argument.getArgNumber()), call, symbols);
          positions) {
        *rowsPerPosition = rows;
        return positions;
      }
    // Batched decoding: a mask over [batch, heads, 1, keys] read as
    // [batch * heads, 1, keys], row r's keys masked past the position of
    // its sequence r / heads.
    auto collapsed = input->get().getDefiningOp<mlir::memref::CollapseShapeOp>();
    argument = collapsed ? mlir::dyn_cast<mlir::BlockArgument>(collapsed.getSrc()) : mlir::BlockArgument();
    if (!rowsPerPosition || !argument || argument.getOwner() != &graph.function().getBody().front() ||
        !prologue.getMatchingIndexingMap(input).isIdentity())
      continue;
    auto groups = collapsed.getReassociationIndices();
    if (groups.size() != 3 || groups[0] != mlir::ReassociationIndices{0, 1} ||
        groups[1] != mlir::ReassociationIndices{2} || groups[2] != mlir::ReassociationIndices{3})
      continue;
    auto [positions, heads] = positionsMaskSource(call.getOperand(argument.getArgNumber()), call, symbols);
    if (positions) {
      *rowsPerPosition = heads;
      return positions;
    }
  }
  return {};
}

int matchCausalMaskInput(Softmax &softmax, const FusionGraph &graph,
                         llvm::function_ref<bool(unsigned argument)> holdsCausalMask) {
  mlir::linalg::LinalgOp prologue = graph.node(softmax.prologue).op;
  unsigned scoresArgument =
      mlir::cast<mlir::BlockArgument>(prologue.getDpsInputOperand(softmax.scoresInput)->get()).getArgNumber();
  llvm::SmallVector<Value, 2> terms = addedTerms(prologue);
  mlir::MLIRContext *context = prologue.getContext();
  mlir::AffineMap queryKey =
      mlir::AffineMap::get(3, 0, {mlir::getAffineDimExpr(1, context), mlir::getAffineDimExpr(2, context)}, context);
  for (mlir::OpOperand *input : prologue.getDpsInputOperands()) {
    auto argument = mlir::dyn_cast<mlir::BlockArgument>(input->get());
    if (!argument || argument.getOwner() != &graph.function().front() || argument.getArgNumber() == scoresArgument ||
        !llvm::is_contained(terms, prologue.getMatchingBlockArgument(input)) ||
        prologue.getMatchingIndexingMap(input) != queryKey || !holdsCausalMask(argument.getArgNumber()))
      continue;
    softmax.causal = true;
    softmax.maskInput = static_cast<int>(input->getOperandNumber());
    softmax.maskArgument = static_cast<int>(argument.getArgNumber());
    llvm::erase(softmax.extraArguments, argument.getArgNumber());
    return softmax.maskArgument;
  }
  return -1;
}

mlir::func::CallOp matchPositionMaskInput(Softmax &softmax, const FusionGraph &graph, mlir::func::CallOp call,
                                          mlir::SymbolTable &symbols) {
  if (softmax.causal || softmax.maskInput >= 0)
    return {};
  mlir::linalg::LinalgOp prologue = graph.node(softmax.prologue).op;
  mlir::MLIRContext *context = prologue.getContext();
  mlir::AffineMap keyOnly = mlir::AffineMap::get(3, 0, {mlir::getAffineDimExpr(2, context)}, context);
  llvm::SmallVector<Value, 2> terms = addedTerms(prologue);
  for (mlir::OpOperand *input : prologue.getDpsInputOperands()) {
    auto argument = mlir::dyn_cast<mlir::BlockArgument>(input->get());
    mlir::AffineMap map = prologue.getMatchingIndexingMap(input);
    if (!argument || argument.getOwner() != &graph.function().front() || (map != keyOnly && !map.isIdentity()) ||
        !llvm::is_contained(terms, prologue.getMatchingBlockArgument(input)) ||
        !llvm::is_contained(softmax.extraArguments, argument.getArgNumber()))
      continue;
    // One position's mask over the keys, or batched decoding's over [rows,
    // 1, keys], each row's keys masked past its sequence's position.
    Value mask = call.getOperand(argument.getArgNumber());
    if (map == keyOnly ? !positionMaskSource(mask, call, symbols) : !rowPositionsMaskSource(mask, call, symbols).first)
      continue;
    softmax.maskInput = static_cast<int>(input->getOperandNumber());
    softmax.maskArgument = static_cast<int>(argument.getArgNumber());
    llvm::erase(softmax.extraArguments, argument.getArgNumber());
    return soleWriterBefore(mask, call, symbols).call;
  }
  return {};
}

mlir::func::FuncOp matchCausalMaskWriter(Softmax &softmax, const FusionGraph &graph, mlir::func::CallOp call,
                                         mlir::SymbolTable &symbols) {
  mlir::func::FuncOp writer;
  matchCausalMaskInput(softmax, graph, [&](unsigned argument) {
    writer = causalMaskWriter(call.getOperand(argument), call, symbols);
    return static_cast<bool>(writer);
  });
  return writer;
}

} // namespace mlpipe::emitters
