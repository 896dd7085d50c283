// mlpipe-partition-fusions: groups the linalg ops of each entry function into
// fusions, each around one hero, and outlines every fusion into a private
// function marked with its kind.
// Passes.td holds its description, with IR before and after.
//
// The rule is XLA's: an op is emitted with its users when it has one user,
// or when all its users are in one fusion and read it through the same
// indexing; otherwise it is its own piece, so no element is computed twice.
// Views (reshapes, slices), fills and empty tensors cost nothing and are
// copied into every fusion that reads them. Which ops may join a fusion
// depends on the fusion's hero (hero_analysis.h): elementwise producers join
// anything but a matmul; reductions over the same rows share one row
// reduction; a matmul takes an elementwise epilogue that reads its product
// element by element, and transposes of its operands as views.
#include "codegen/debug.h"
#include "fusion/hero_analysis.h"
#include "fusion/passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#include <memory>

namespace mlpipe {

#define GEN_PASS_DEF_PARTITIONFUSIONSPASS
#include "fusion/Passes.h.inc"

namespace {

using emitters::FusionKind;
using emitters::HeroRole;

// Ops that cost nothing to repeat: they are copied into every fusion that
// reads them instead of forming fusions of their own.
bool isFree(mlir::Operation *op) {
  if (mlir::isa<mlir::arith::ConstantOp, mlir::tensor::EmptyOp, mlir::linalg::FillOp, mlir::tensor::ExpandShapeOp,
                mlir::tensor::CollapseShapeOp, mlir::tensor::ExtractSliceOp, mlir::tensor::CastOp>(op))
    return true;
  // A scalar read from a tensor (a run-time position) and arithmetic on
  // scalars: recomputed wherever they are needed.
  bool scalarResults = llvm::all_of(op->getResultTypes(), [](mlir::Type t) { return !mlir::isa<mlir::ShapedType>(t); });
  return op->getNumRegions() == 0 && scalarResults &&
         (mlir::isa<mlir::tensor::ExtractOp>(op) || (op->getDialect() && op->getDialect()->getNamespace() == "arith"));
}

bool isView(mlir::Operation *op) {
  return mlir::isa<mlir::tensor::ExpandShapeOp, mlir::tensor::CollapseShapeOp, mlir::tensor::ExtractSliceOp,
                   mlir::tensor::CastOp>(op);
}

bool isCompute(mlir::Operation *op) { return mlir::isa<mlir::linalg::LinalgOp>(op) && !isFree(op); }

// An elementwise op that reads only the function's inputs (no value computed
// in the block) and computes at most this many elements, read by row
// reduction and matmul fusions (a decode step's embedding: one row of 768,
// read by the first layer norm and the first residual add), is computed in
// each of them instead of in a kernel of its own: its elements cost a load
// or two each, a kernel a launch and a link in the step's chain of kernels
// (about 2.5 us on the H200).
constexpr int64_t kDuplicatedProducerMaxElements = 4096;

// One use of a compute op's result by another compute op, seen through any
// views in between.
struct Use {
  mlir::Operation *consumer;
  mlir::OpOperand *operand; // the consumer's operand (holding the value or a view of it)
  bool throughView = false;
};

struct Fusion {
  FusionKind kind = FusionKind::Loop;
  mlir::Operation *hero = nullptr;
  mlir::Operation *root = nullptr;
  bool closed = false; // nothing may join (an op no emitter fuses with)
  llvm::SetVector<mlir::Operation *> members;
};

// The scope the front end recorded for an op (a NameLoc, possibly inside a
// FusedLoc after elementwise fusion), or "".
std::string scopeOf(mlir::Location loc) {
  if (auto name = mlir::dyn_cast<mlir::NameLoc>(loc))
    return name.getName().str();
  if (auto fused = mlir::dyn_cast<mlir::FusedLoc>(loc))
    for (mlir::Location part : llvm::reverse(fused.getLocations()))
      if (std::string scope = scopeOf(part); !scope.empty())
        return scope;
  return "";
}

// "h.3.attn.c_attn" -> "attn_c_attn": the layer index goes, so the twelve
// layers' fusions (and kernels) carry one name.
std::string fusionBaseName(const std::string &scope) {
  llvm::StringRef rest(scope);
  if (rest.consume_front("h.")) {
    size_t dot = rest.find('.');
    if (dot != llvm::StringRef::npos && llvm::all_of(rest.take_front(dot), llvm::isDigit))
      rest = rest.drop_front(dot + 1);
    else
      rest = scope;
  }
  std::string name;
  for (char c : rest)
    name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name;
}

class Partitioner {
public:
  Partitioner(mlir::func::FuncOp function, mlir::Block &block, mlir::SymbolTable &symbols)
      : function_(function), block_(block), symbols_(symbols) {}

  void run() {
    llvm::SmallVector<mlir::Operation *> computeOps;
    for (mlir::Operation &op : block_)
      if (isCompute(&op))
        computeOps.push_back(&op);
    for (mlir::Operation *op : llvm::reverse(computeOps))
      place(op);
    // In program order, so the fusion functions read in that order too.
    for (auto &fusion : llvm::reverse(fusions_))
      outline(*fusion);
    // The views, fills and constants the fusions copied and nothing reads now.
    bool erased = true;
    while (erased) {
      erased = false;
      for (mlir::Operation &op : llvm::make_early_inc_range(llvm::reverse(block_)))
        if (isFree(&op) && op.use_empty()) {
          op.erase();
          erased = true;
        }
    }
  }

private:
  // Uses of `value` by ops of this function, looking through views. A use
  // by anything but a compute op (the return, an unknown op) escapes.
  void collectUses(mlir::Value value, bool throughView, llvm::SmallVectorImpl<Use> &uses, bool &escapes) {
    for (mlir::OpOperand &operand : value.getUses()) {
      mlir::Operation *user = operand.getOwner();
      if (isView(user)) {
        collectUses(user->getResult(0), true, uses, escapes);
        continue;
      }
      // Inside a compute op's region (a gather reads its table there): the
      // compute op is the user.
      mlir::Operation *top = block_.findAncestorOpInBlock(*user);
      if (top && isCompute(top)) {
        uses.push_back({top, top == user ? &operand : nullptr, throughView || top != user});
        continue;
      }
      escapes = true;
    }
  }

  // The indexing through which a use reads its value; null when it is not
  // a plain operand read (through a view, or inside a region).
  static mlir::AffineMap useMap(const Use &use) {
    if (use.throughView || !use.operand)
      return {};
    auto linalgOp = mlir::cast<mlir::linalg::LinalgOp>(use.consumer);
    return linalgOp.getMatchingIndexingMap(use.operand);
  }

  // XLA's rule: one use, or several that read through one indexing over one
  // iteration space.
  static bool readAlike(llvm::ArrayRef<Use> uses) {
    if (uses.size() == 1)
      return true;
    mlir::AffineMap first = useMap(uses.front());
    if (!first)
      return false;
    auto ranges = mlir::cast<mlir::linalg::LinalgOp>(uses.front().consumer).getStaticLoopRanges();
    for (const Use &use : uses.drop_front()) {
      mlir::AffineMap map = useMap(use);
      if (!map || map != first || mlir::cast<mlir::linalg::LinalgOp>(use.consumer).getStaticLoopRanges() != ranges)
        return false;
    }
    return true;
  }

  // Whether every use of a matmul's product reads it element by element.
  static bool readsElementwise(llvm::ArrayRef<Use> uses) {
    for (const Use &use : uses) {
      mlir::AffineMap map = useMap(use);
      auto consumer = mlir::cast<mlir::linalg::LinalgOp>(use.consumer);
      if (!map || !map.isIdentity() || emitters::heroRole(consumer) != HeroRole::Elementwise ||
          !consumer.getMatchingIndexingMap(consumer.getDpsInitOperand(0)).isIdentity())
        return false;
    }
    return true;
  }

  // A transpose or copy of a matmul operand, read by nothing but that
  // matmul: the matmul emitters read it as a strided view.
  static bool isOperandView(mlir::Operation *op, llvm::ArrayRef<Use> uses, const Fusion &fusion) {
    if (!mlir::isa<mlir::linalg::TransposeOp, mlir::linalg::CopyOp>(op) || uses.size() != 1)
      return false;
    const Use &use = uses.front();
    if (use.consumer != fusion.hero || !use.operand)
      return false;
    auto matmul = mlir::cast<mlir::linalg::LinalgOp>(fusion.hero);
    return matmul.isDpsInput(use.operand);
  }

  static mlir::Value reducedShapeOf(mlir::Operation *reduction) {
    return emitters::reducedOperand(mlir::cast<mlir::linalg::LinalgOp>(reduction))->get();
  }
  // Two reduced operands of one shape, whatever their element types (a
  // greedy token's index reduction over the positions holding the logits'
  // maximum reduces i32 over the rows the maximum reduced in f32): the row
  // reduction emitter keeps their warps' totals as bits (slotType).
  static bool sameShape(mlir::Value a, mlir::Value b) {
    return mlir::cast<mlir::ShapedType>(a.getType()).getShape() == mlir::cast<mlir::ShapedType>(b.getType()).getShape();
  }

  bool canJoin(mlir::Operation *op, HeroRole role, llvm::ArrayRef<Use> uses, Fusion &fusion, std::string &why) {
    if (fusion.closed)
      return why = "its users' fusion takes no producers", false;
    if (!readAlike(uses))
      return why = "its users read it through different indexings", false;
    switch (role) {
    case HeroRole::Elementwise:
      if (fusion.kind == FusionKind::Matmul) {
        if (isOperandView(op, uses, fusion))
          return true;
        return why = "a matmul fusion takes no producers", false;
      }
      return true;
    case HeroRole::RowReduction:
    case HeroRole::ColumnReduction: {
      FusionKind kind = fusionKindFor(role);
      // The reduction emitters compute, after the reduction, only values of
      // its result's shape, or (over rows) of the rows' shape.
      auto linalgOp = mlir::cast<mlir::linalg::LinalgOp>(op);
      auto resultShape = mlir::cast<mlir::ShapedType>(op->getResult(0).getType()).getShape();
      auto rowShape = mlir::cast<mlir::ShapedType>(emitters::reducedOperand(linalgOp)->get().getType()).getShape();
      for (mlir::Operation *member : fusion.members) {
        auto memberShape = mlir::cast<mlir::ShapedType>(member->getResult(0).getType()).getShape();
        if (memberShape != resultShape && (role != HeroRole::RowReduction || memberShape != rowShape))
          return why = "its users compute values of another shape", false;
      }
      if (fusion.kind == FusionKind::Loop)
        return true;
      mlir::Value joined = reducedShapeOf(fusion.hero), joining = reducedShapeOf(op);
      bool alike = role == HeroRole::RowReduction ? sameShape(joined, joining) : joined.getType() == joining.getType();
      if (fusion.kind == kind && alike &&
          mlir::cast<mlir::linalg::LinalgOp>(fusion.hero).getIteratorTypesArray() ==
              mlir::cast<mlir::linalg::LinalgOp>(op).getIteratorTypesArray())
        return true;
      return why = "its users' fusion has another hero", false;
    }
    case HeroRole::Transpose:
      if (fusion.kind == FusionKind::Loop || (fusion.kind == FusionKind::Matmul && isOperandView(op, uses, fusion)))
        return true;
      return why = "its users' fusion has another hero", false;
    case HeroRole::Matmul:
      if (fusion.kind != FusionKind::Loop)
        return why = "its users' fusion has another hero", false;
      if (!readsElementwise(uses))
        return why = "its users do not read the product element by element", false;
      for (mlir::Operation *member : fusion.members)
        if (emitters::heroRole(mlir::cast<mlir::linalg::LinalgOp>(member)) != HeroRole::Elementwise)
          return why = "its users' fusion is not elementwise", false;
      return true;
    case HeroRole::Other:
      return why = "no emitter fuses it with others", false;
    }
    return false;
  }

  void place(mlir::Operation *op) {
    auto linalgOp = mlir::cast<mlir::linalg::LinalgOp>(op);
    HeroRole role = emitters::heroRole(linalgOp);
    llvm::SmallVector<Use> uses;
    bool escapes = false;
    for (mlir::Value result : op->getResults())
      collectUses(result, false, uses, escapes);

    std::string why;
    Fusion *target = nullptr;
    if (!escapes && role == HeroRole::Elementwise && placeInEachUser(op, uses))
      return;
    if (escapes || uses.empty()) {
      why = "its value leaves the function";
    } else {
      Fusion *candidate = fusionOf_.lookup(uses.front().consumer);
      for (const Use &use : uses)
        if (fusionOf_.lookup(use.consumer) != candidate)
          candidate = nullptr;
      if (!candidate)
        why = "its users are in different fusions";
      else if (canJoin(op, role, uses, *candidate, why))
        target = candidate;
    }

    if (target) {
      if (target->kind == FusionKind::Loop && role != HeroRole::Elementwise) {
        target->kind = fusionKindFor(role);
        target->hero = op;
      }
      target->members.insert(op);
      fusionOf_[op] = target;
      return;
    }
    auto fusion = std::make_unique<Fusion>();
    fusion->kind = fusionKindFor(role);
    fusion->hero = op;
    fusion->root = op;
    fusion->closed = role == HeroRole::Other;
    fusion->members.insert(op);
    fusionOf_[op] = fusion.get();
    MLPIPE_DEBUG(kDebugPartitioner, os << "@" << function_.getName() << ": " << op->getName() << " at " << op->getLoc()
                                       << " starts a " << emitters::fusionKindName(fusion->kind) << " fusion: " << why
                                       << "\n");
    fusions_.push_back(std::move(fusion));
  }

  // Puts `op` into every fusion that reads it, where it is a small
  // elementwise op of the function's inputs (kDuplicatedProducerMaxElements)
  // read by a matmul fusion's epilogue and by other row reduction or matmul
  // fusions, each reading it through one indexing.
  bool placeInEachUser(mlir::Operation *op, llvm::ArrayRef<Use> uses) {
    auto type =
        op->getNumResults() == 1 ? mlir::dyn_cast<mlir::ShapedType>(op->getResult(0).getType()) : mlir::ShapedType();
    if (!type || !type.hasStaticShape() || type.getNumElements() > kDuplicatedProducerMaxElements)
      return false;
    bool readsComputed = false;
    op->walk([&](mlir::Operation *nested) {
      for (mlir::Value operand : nested->getOperands())
        if (mlir::Operation *definer = operand.getDefiningOp())
          if (!op->isAncestor(definer)) {
            mlir::Operation *top = block_.findAncestorOpInBlock(*definer);
            readsComputed = readsComputed || (top && !isFree(top));
          }
    });
    if (readsComputed)
      return false;
    llvm::MapVector<Fusion *, llvm::SmallVector<Use>> byFusion;
    for (const Use &use : uses) {
      Fusion *fusion = fusionOf_.lookup(use.consumer);
      if (!fusion)
        return false;
      byFusion[fusion].push_back(use);
    }
    // (A mask over the keys that every layer's softmax reads stays one
    // fusion: the fused attention reads it, or computes it, as it is.)
    if (byFusion.size() < 2 ||
        llvm::none_of(byFusion, [](const auto &entry) { return entry.first->kind == FusionKind::Matmul; }))
      return false;
    for (auto &[fusion, fusionUses] : byFusion) {
      if (fusion->closed || !readAlike(fusionUses) ||
          (fusion->kind != FusionKind::RowReduction && fusion->kind != FusionKind::Matmul))
        return false;
      if (fusion->kind == FusionKind::Matmul &&
          llvm::any_of(fusionUses, [&](const Use &use) { return use.consumer == fusion->hero; }))
        return false;
    }
    for (auto &[fusion, fusionUses] : byFusion)
      fusion->members.insert(op);
    fusionOf_[op] = byFusion.front().first;
    fusionsHolding_[op] = static_cast<int>(byFusion.size());
    MLPIPE_DEBUG(kDebugPartitioner, os << "@" << function_.getName() << ": " << op->getName() << " at " << op->getLoc()
                                       << " is computed in each of the " << byFusion.size()
                                       << " fusions reading it (kDuplicatedProducerMaxElements)\n");
    return true;
  }

  std::string uniqueName(const Fusion &fusion) {
    std::string base = fusionBaseName(scopeOf(fusion.hero->getLoc()));
    if (base.empty())
      base = fusionBaseName(scopeOf(fusion.root->getLoc()));
    if (base.empty())
      base = function_.getName().str();
    base += std::string("_") + emitters::fusionKindName(fusion.kind);
    std::string name = base;
    for (int suffix = 1; symbols_.lookup(name); ++suffix)
      name = base + "_" + std::to_string(suffix);
    return name;
  }

  // Copies `value`'s free producers (views, fills, constants) into the
  // fusion function, or makes it an argument.
  mlir::Value materialize(mlir::Value value, mlir::OpBuilder &builder, mlir::IRMapping &mapping,
                          llvm::SmallVectorImpl<mlir::Value> &arguments, mlir::Block &body) {
    if (mlir::Value mapped = mapping.lookupOrNull(value))
      return mapped;
    mlir::Operation *producer = value.getDefiningOp();
    // A free producer in this block, or around it (a constant
    // canonicalization hoisted out of a loop), is copied in.
    bool around = producer && producer->getParentRegion()->isProperAncestor(block_.getParent());
    if (producer && isFree(producer) && (producer->getBlock() == &block_ || around)) {
      for (mlir::Value operand : producer->getOperands())
        materialize(operand, builder, mapping, arguments, body);
      builder.clone(*producer, mapping);
      return mapping.lookup(value);
    }
    arguments.push_back(value);
    mlir::Value argument = body.addArgument(value.getType(), value.getLoc());
    mapping.map(value, argument);
    return argument;
  }

  void outline(Fusion &fusion) {
    mlir::MLIRContext *context = function_.getContext();
    // Members in program order; the root comes last.
    llvm::SmallVector<mlir::Operation *> members(fusion.members.begin(), fusion.members.end());
    llvm::sort(members, [](mlir::Operation *a, mlir::Operation *b) { return a->isBeforeInBlock(b); });

    std::string name = uniqueName(fusion);
    mlir::OpBuilder moduleBuilder(function_);
    auto placeholderType = mlir::FunctionType::get(context, {}, {});
    auto callee = mlir::func::FuncOp::create(moduleBuilder, fusion.hero->getLoc(), name, placeholderType);
    callee.setPrivate();
    callee->setAttr(emitters::kFusionAttrName, mlir::StringAttr::get(context, emitters::fusionKindName(fusion.kind)));
    symbols_.insert(callee);
    mlir::Block *body = callee.addEntryBlock();
    mlir::OpBuilder builder = mlir::OpBuilder::atBlockEnd(body);

    mlir::IRMapping mapping;
    llvm::SmallVector<mlir::Value> arguments;
    for (mlir::Operation *member : members) {
      // Every value the member reads from outside itself, regions included.
      llvm::SetVector<mlir::Value> read;
      member->walk([&](mlir::Operation *nested) {
        for (mlir::Value operand : nested->getOperands()) {
          mlir::Operation *definer = operand.getDefiningOp();
          mlir::Region *region = operand.getParentRegion();
          bool inside = definer ? member->isAncestor(definer) : member->isProperAncestor(region->getParentOp());
          if (!inside && !(mlir::isa<mlir::BlockArgument>(operand) && member->isAncestor(region->getParentOp())))
            read.insert(operand);
        }
      });
      for (mlir::Value value : read)
        materialize(value, builder, mapping, arguments, *body);
      builder.clone(*member, mapping);
    }
    mlir::Operation *root = members.back();
    llvm::SmallVector<mlir::Value> results;
    for (mlir::Value result : root->getResults())
      results.push_back(mapping.lookup(result));
    mlir::func::ReturnOp::create(builder, root->getLoc(), results);
    callee.setFunctionType(mlir::FunctionType::get(context, body->getArgumentTypes(), root->getResultTypes()));

    mlir::OpBuilder callBuilder(root);
    auto call = mlir::func::CallOp::create(callBuilder, root->getLoc(), callee, arguments);
    root->replaceAllUsesWith(call.getResults());
    // Views and scalars in the entry that read the members were copied into
    // the fusion: they go first, so no use of a member is left dangling.
    std::function<void(mlir::Operation *)> eraseWithViews = [&](mlir::Operation *op) {
      for (mlir::Operation *user : llvm::make_early_inc_range(op->getUsers()))
        if (isFree(user))
          eraseWithViews(user);
      op->erase();
    };
    for (mlir::Operation *member : llvm::reverse(members)) {
      // A member other fusions hold too goes with the last of them.
      if (auto shared = fusionsHolding_.find(member); shared != fusionsHolding_.end() && --shared->second > 0)
        continue;
      eraseWithViews(member);
    }
    MLPIPE_DEBUG(kDebugPartitioner, os << "@" << function_.getName() << ": fusion @" << name << " (" << members.size()
                                       << " ops, hero " << fusion.hero->getName() << ")\n");
  }

  mlir::func::FuncOp function_;
  mlir::Block &block_; // the block whose ops are partitioned: the function's, or a loop region's
  mlir::SymbolTable &symbols_;
  llvm::DenseMap<mlir::Operation *, Fusion *> fusionOf_;
  // Ops computed in several fusions (placeInEachUser): how many of them are
  // still to be outlined.
  llvm::DenseMap<mlir::Operation *, int> fusionsHolding_;
  std::vector<std::unique_ptr<Fusion>> fusions_;
};

struct PartitionFusionsPass : impl::PartitionFusionsPassBase<PartitionFusionsPass> {
  void runOnOperation() final {
    mlir::ModuleOp module = getOperation();
    mlir::SymbolTable symbols(module);
    llvm::SmallVector<mlir::func::FuncOp> entries;
    for (auto function : module.getOps<mlir::func::FuncOp>())
      if (!function.isExternal() && !function->hasAttr(emitters::kFusionAttrName))
        entries.push_back(function);
    for (mlir::func::FuncOp function : entries) {
      if (!function.getBody().hasOneBlock()) {
        function.emitError("mlpipe-partition-fusions: the function has more than one block");
        return signalPassFailure();
      }
      // The blocks of loops (scf.while) first, inner before outer, each
      // partitioned alone: a fusion never spans a region's boundary, and a
      // value a region's terminator or a nested loop reads leaves its
      // block. The function's own block last.
      llvm::SmallVector<mlir::Block *> blocks;
      function.walk([&](mlir::Operation *op) {
        if (mlir::isa<mlir::scf::WhileOp>(op))
          for (mlir::Region &region : op->getRegions())
            for (mlir::Block &block : region)
              blocks.push_back(&block);
      });
      blocks.push_back(&function.getBody().front());
      for (mlir::Block *block : blocks)
        Partitioner(function, *block, symbols).run();
    }
  }
};

} // namespace

} // namespace mlpipe
