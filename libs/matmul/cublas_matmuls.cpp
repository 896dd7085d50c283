// mlpipe-cublas-matmuls: GPU matmuls become calls of the runtime's GEMM entry
// (cuBLASLt / cuBLAS), with the epilogues cuBLASLt computes folded in.
// Passes.td holds its description, with IR before and after.
//
// Two shapes of input. A matmul fusion (a private function with
// mlpipe.fusion = "matmul", as fuse's partitioner makes them) is replaced at
// each call site: the GEMM reads the caller's buffers through the fusion's
// views, and whatever of its epilogue cuBLASLt does not compute becomes a
// new "loop" fusion called right after. A bare linalg.matmul or
// linalg.batch_matmul in any other function becomes a GEMM in place, taking
// the zero fill before it and the foldable elementwise ops after it along.
#include "codegen/debug.h"
#include "codegen/device_description.h"
#include "codegen/pass_support.h"
#include "codegen/path_choice.h"
#include "fusion/fusion_graph.h"
#include "matmul/gemm_epilogue.h"
#include "matmul/matmul_kernel.h"
#include "matmul/matmul_layout.h"
#include "matmul/passes.h"
#include "runtime/gemm_abi.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Pass/Pass.h"

#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <climits>
#include <optional>

namespace mlpipe {

#define GEN_PASS_DEF_CUBLASMATMULSPASS
#include "matmul/Passes.h.inc"

namespace {

using emitters::rootBuffer;

constexpr llvm::StringLiteral kFusionAttribute = "mlpipe.fusion";

// Ops that neither read nor write memory (constants, views): a GEMM may move
// past them.
bool isMemoryInert(mlir::Operation *op) {
  return mlir::isa<mlir::ViewLikeOpInterface>(op) || (op->getNumRegions() == 0 && mlir::isMemoryEffectFree(op));
}

// Whether `op` may read or write memory rooted at `root`. Ops with regions
// other than linalg's are assumed to.
bool touches(mlir::Operation *op, mlir::Value root) {
  if (isMemoryInert(op))
    return false;
  if (op->getNumRegions() > 0 && !mlir::isa<mlir::linalg::LinalgOp>(op))
    return true;
  return llvm::any_of(op->getOperands(), [&](mlir::Value operand) {
    return mlir::isa<mlir::MemRefType>(operand.getType()) && rootBuffer(operand) == root;
  });
}

std::string locationText(mlir::Location loc) {
  std::string text;
  llvm::raw_string_ostream os(text);
  loc.print(os);
  return text;
}

// One GEMM: the matmul, what folds into it, and where it writes.
struct GemmPlan {
  mlir::linalg::LinalgOp matmul;
  BlasMatmul problem;
  mlir::linalg::FillOp fill; // the zero fill of C the GEMM replaces (beta = 0), or null
  llvm::SmallVector<mlir::linalg::GenericOp> folded;
  GemmEpilogue epilogue;
  mlir::Value output;      // D
  bool accumulate = false; // no fill: D += A B, beta = 1 on D itself
  // Where the GEMM goes: at the last op it replaces, which every operand
  // dominates (only memory-inert ops and allocations lie between the matmul
  // and it).
  mlir::Operation *anchor() { return folded.empty() ? matmul.getOperation() : folded.back().getOperation(); }
  bool replaces(mlir::Operation *op) {
    return op == matmul.getOperation() || (fill && op == fill.getOperation()) ||
           llvm::any_of(folded, [&](mlir::linalg::GenericOp g) { return g.getOperation() == op; });
  }
};

// The GEMM's operands as values where the call is built.
struct GemmValues {
  mlir::Value a, b, d, c, bias;
};

// cuBLASLt keeps to slow kernels for a 16-bit product unless both its width
// and D's row length are multiples of 8 elements, 16 bytes: GPT-2's
// 50257-wide bf16 logits at 1024 rows took 843 us (94 TFLOP/s), as they did
// with only the rows padded to 50264, or only the width split at 50256;
// with both, 125 us (a 50256-wide GEMM), plus 7 us for the last column and
// 87 us for the copy (1.12x a copy of its bytes). So such a product is
// split into its first columns up to a multiple of 8 and the few left, each
// a GEMM writing into a temporary of 16-byte rows, which a copy kernel then
// compacts into D.
constexpr int64_t kGemmWidthAlignmentBytes = 16;
// A one-row product is bound by reading B, whatever its width (the one-row
// bf16 logits GEMM measured 1.05x a copy of its bytes): one GEMM writes D
// in place. From two rows the narrow width costs as at 1024: cuBLASLt took
// GPT-2's bf16 logits of 8, 12 and 16 rows in 100-107 us (5.5x a copy of
// wte), and of 32 rows (a batched decode step of 32 sequences, 113 us of
// its 511 us of kernels) on a `cutlass_75_tensorop` kernel where every
// aligned product of the step gets an sm_90 TMA kernel.
constexpr int64_t kSplitWidthMinRows = 2;

// The width of the aligned part and the padded row length of the
// temporary, or nullopt for one GEMM writing D in place.
struct SplitWidth {
  int64_t aligned = 0; // columns [0, aligned) in one GEMM, [aligned, n) in another
  int64_t padded = 0;  // the temporary's row length
};

std::optional<SplitWidth> splitWidth(const GemmPlan &plan, const GemmValues &values) {
  const BlasMatmul &p = plan.problem;
  mlir::Type stored = plan.epilogue.stored;
  if (!stored || values.c || plan.accumulate || p.batch != 1 ||
      mlir::cast<mlir::MemRefType>(values.d.getType()).getRank() != 2)
    return std::nullopt;
  int64_t bytes = stored.getIntOrFloatBitWidth() / 8, perRow = kGemmWidthAlignmentBytes / bytes;
  if (p.n % perRow == 0)
    return std::nullopt;
  if (p.m < kSplitWidthMinRows) {
    MLPIPE_DEBUG(kDebugEmitters, os << "cublas: the product is " << p.n << " wide, not a multiple of " << perRow
                                    << ", but its " << p.m << " rows (under kSplitWidthMinRows " << kSplitWidthMinRows
                                    << ") are one GEMM\n");
    return std::nullopt;
  }
  SplitWidth split{p.n / perRow * perRow, (p.n + perRow - 1) / perRow * perRow};
  MLPIPE_DEBUG(kDebugEmitters, os << "cublas: the product is " << p.n << " wide, not a multiple of " << perRow
                                  << " (kGemmWidthAlignmentBytes): GEMMs of " << split.aligned << " and "
                                  << p.n - split.aligned << " columns write rows of " << split.padded
                                  << " into a temporary, and a copy compacts them\n");
  return split;
}

class GemmBuilder {
public:
  GemmBuilder(mlir::ModuleOp module, bool tf32) : module_(module), tf32_(tf32) {}

  // The call of the runtime's entry for `plan` at the builder's insertion
  // point (two, into a temporary then copied, where splitWidth says).
  void emit(mlir::OpBuilder &builder, mlir::Location loc, GemmPlan &plan, const GemmValues &values) {
    std::optional<SplitWidth> split = splitWidth(plan, values);
    if (!split)
      return emitCall(builder, loc, plan, values);
    const BlasMatmul &p = plan.problem;
    auto paddedType = mlir::MemRefType::get({p.m, split->padded}, plan.epilogue.stored);
    mlir::Value temporary =
        mlir::memref::AllocOp::create(builder, loc, paddedType, mlir::ValueRange{}, builder.getI64IntegerAttr(64));
    auto index = [&](int64_t v) -> mlir::OpFoldResult { return builder.getIndexAttr(v); };
    // Columns [first, first + width) of a matrix (or elements of a vector).
    auto columns = [&](mlir::Value memref, int64_t first, int64_t width) -> mlir::Value {
      auto type = mlir::cast<mlir::MemRefType>(memref.getType());
      if (type.getRank() == 1)
        return mlir::memref::SubViewOp::create(builder, loc, memref, {index(first)}, {index(width)}, {index(1)});
      return mlir::memref::SubViewOp::create(builder, loc, memref, {index(0), index(first)},
                                             {index(type.getDimSize(0)), index(width)}, {index(1), index(1)});
    };
    for (auto [first, width] :
         {std::pair{int64_t(0), split->aligned}, std::pair{split->aligned, p.n - split->aligned}}) {
      if (width == 0)
        continue;
      GemmPlan part = plan;
      part.problem.n = width;
      GemmValues partValues = values;
      partValues.b = columns(values.b, first, width);
      partValues.d = columns(temporary, first, width);
      if (values.bias)
        partValues.bias = columns(values.bias, first, width);
      emitCall(builder, loc, part, partValues);
    }
    mlir::linalg::CopyOp::create(builder, loc, columns(temporary, 0, p.n), values.d);
    mlir::memref::DeallocOp::create(builder, loc, temporary);
  }

private:
  void emitCall(mlir::OpBuilder &builder, mlir::Location loc, GemmPlan &plan, const GemmValues &values) {
    namespace abi = gemm_abi;
    const BlasMatmul &p = plan.problem;
    bool f32 = p.element.isF32();
    auto i32 = [&](int64_t v) { return mlir::arith::ConstantIntOp::create(builder, loc, v, 32).getResult(); };
    auto i64 = [&](int64_t v) { return mlir::arith::ConstantIntOp::create(builder, loc, v, 64).getResult(); };
    auto f64 = [&](double v) {
      return mlir::arith::ConstantOp::create(builder, loc, builder.getF64FloatAttr(v)).getResult();
    };
    auto pointerType = mlir::LLVM::LLVMPointerType::get(builder.getContext());
    auto pointer = [&](mlir::Value memref) -> mlir::Value {
      if (!memref)
        return mlir::LLVM::ZeroOp::create(builder, loc, pointerType);
      return elementPointer(builder, loc, memref);
    };
    int32_t epilogue = abi::kNone;
    if (plan.epilogue.activation == GemmActivation::GeluTanh)
      epilogue = plan.epilogue.bias ? abi::kBiasGelu : abi::kGelu;
    else if (plan.epilogue.bias)
      epilogue = abi::kBias;
    // C: D itself when accumulating, the residual when one was folded.
    MatrixLayout c;
    mlir::Value cValue = values.c;
    if (plan.accumulate) {
      c = p.c;
      cValue = values.d;
    } else if (cValue) {
      c = *matrixLayout(mlir::cast<mlir::MemRefType>(cValue.getType()));
    }
    MatrixLayout d = *matrixLayout(mlir::cast<mlir::MemRefType>(values.d.getType()));
    // With a 16-bit D (the epilogue rounds), A, B, C and bias are that type.
    mlir::Type stored = plan.epilogue.stored;
    int32_t element = !f32                        ? abi::kF64
                      : stored && stored.isBF16() ? abi::kBf16
                      : stored && stored.isF16()  ? abi::kF16
                      : p.inputElement.isBF16()   ? abi::kBf16F32
                      : p.inputElement.isF16()    ? abi::kF16F32
                                                  : abi::kF32;
    mlir::Value args[] = {i32(element),
                          i32(element == abi::kF32 && tf32_ ? abi::kTf32 : abi::kExact),
                          i32(p.a.transposed),
                          i32(p.b.transposed),
                          i64(p.batch),
                          i64(p.m),
                          i64(p.n),
                          i64(p.k),
                          f64(plan.epilogue.alpha),
                          pointer(values.a),
                          i64(p.a.leadingDimension),
                          i64(p.a.batchStride),
                          pointer(values.b),
                          i64(p.b.leadingDimension),
                          i64(p.b.batchStride),
                          f64(cValue ? 1.0 : 0.0),
                          pointer(cValue),
                          i64(cValue ? c.leadingDimension : 0),
                          i64(cValue ? c.batchStride : 0),
                          pointer(values.d),
                          i64(d.leadingDimension),
                          i64(d.batchStride),
                          i32(epilogue),
                          pointer(values.bias)};
    mlir::func::CallOp::create(builder, loc, declaration(builder), args);
  }

  // func.func private @mlpipeGemm(...), added to the module once.
  mlir::func::FuncOp declaration(mlir::OpBuilder &builder) {
    if (auto existing = module_.lookupSymbol<mlir::func::FuncOp>(gemm_abi::kEntryName))
      return existing;
    mlir::OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToStart(module_.getBody());
    mlir::Type i32 = builder.getI32Type(), i64 = builder.getI64Type(), f64 = builder.getF64Type();
    auto ptr = mlir::LLVM::LLVMPointerType::get(builder.getContext());
    auto type = builder.getFunctionType({i32, i32, i32, i32, i64, i64, i64, i64, f64, ptr, i64, i64,
                                         ptr, i64, i64, f64, ptr, i64, i64, ptr, i64, i64, i32, ptr},
                                        {});
    auto function = mlir::func::FuncOp::create(builder, module_.getLoc(), gemm_abi::kEntryName, type);
    function.setPrivate();
    return function;
  }

  mlir::ModuleOp module_;
  bool tf32_;
};

// ---- Planning ---------------------------------------------------------------

// Whether `op` writes every element of `buffer` (an allocation) without
// reading any: a fill of it, or an elementwise linalg op whose output it is.
bool overwritesWhole(mlir::Operation *op, mlir::Value buffer) {
  if (auto fill = mlir::dyn_cast<mlir::linalg::FillOp>(op))
    return fill.getOutputs()[0] == buffer;
  auto linalgOp = mlir::dyn_cast<mlir::linalg::LinalgOp>(op);
  if (!linalgOp || !linalgOp.hasPureBufferSemantics() || linalgOp.getNumReductionLoops() != 0 ||
      linalgOp.getNumDpsInits() != 1)
    return false;
  mlir::OpOperand *init = linalgOp.getDpsInitOperand(0);
  if (init->get() != buffer || linalgOp.payloadUsesValueFromOperand(init) ||
      !linalgOp.getMatchingIndexingMap(init).isPermutation())
    return false;
  return llvm::none_of(linalgOp.getDpsInputs(), [&](mlir::Value input) { return rootBuffer(input) == buffer; });
}

// Whether nothing after `op` in its block reads the allocation `buffer`
// before it is freed or overwritten whole (bufferization reuses buffers).
bool unreadAfter(mlir::Value buffer, mlir::Operation *op) {
  for (mlir::Operation *next = op->getNextNode(); next; next = next->getNextNode()) {
    if (!touches(next, buffer))
      continue;
    return mlir::isa<mlir::memref::DeallocOp>(next) || overwritesWhole(next, buffer);
  }
  return true;
}

// Whether `generic` may be computed by the GEMM of `plan`, writing its
// output there and then: the caller has checked that only memory-inert ops
// lie between. `extended` is the epilogue with the generic folded.
bool mayMoveIntoGemm(GemmPlan &plan, mlir::linalg::GenericOp generic, const GemmEpilogue &extended,
                     std::string &whyNot) {
  if (extended.stored && extended.stored != plan.problem.inputElement) {
    whyNot = "it rounds to another type than the matmul's operands' (a 16-bit GEMM's A, B and D share one)";
    return false;
  }
  mlir::Value output = generic.getDpsInits()[0];
  if (output != plan.output) {
    // The GEMM would write the generic's output instead of the product's
    // buffer: that must be a temporary nothing reads afterwards.
    auto alloc = plan.output.getDefiningOp<mlir::memref::AllocOp>();
    if (!alloc || plan.accumulate) {
      whyNot = "it writes another buffer than the product's, which is not a temporary";
      return false;
    }
    if (!unreadAfter(plan.output, generic)) {
      whyNot = "the product is read after it";
      return false;
    }
    auto layout = matrixLayout(mlir::cast<mlir::MemRefType>(output.getType()));
    if (!layout || layout->transposed) {
      whyNot = "its output is not row-major";
      return false;
    }
  }
  mlir::Value outputRoot = rootBuffer(output);
  for (mlir::Value input : {plan.matmul->getOperand(0), plan.matmul->getOperand(1)})
    if (rootBuffer(input) == outputRoot) {
      whyNot = "its output overlaps an operand of the matmul";
      return false;
    }
  if (extended.bias && rootBuffer(extended.bias) == outputRoot) {
    whyNot = "its bias overlaps its output";
    return false;
  }
  if (extended.residual) {
    if (plan.accumulate) {
      whyNot = "the matmul accumulates into its output already";
      return false;
    }
    // In place (C == D, the same view) is fine; overlapping otherwise is not.
    if (extended.residual != output && rootBuffer(extended.residual) == outputRoot) {
      whyNot = "the matrix it adds overlaps its output";
      return false;
    }
  }
  return true;
}

// The GEMM for `matmul`, with the fill before it and the foldable
// elementwise ops after it in its block; nullopt (and why) when cuBLAS
// cannot compute the matmul.
std::optional<GemmPlan> planGemm(mlir::linalg::LinalgOp matmul, const MatmulPathOptions &options, std::string &whyNot) {
  std::string unreadable;
  auto problem = blasMatmul(matmul, &unreadable, /*narrowInputs=*/true);
  MatmulProblem summary;
  summary.readableInPlace = problem.has_value();
  summary.notReadableBecause = unreadable;
  if (problem) {
    summary.batch = problem->batch;
    summary.m = problem->m;
    summary.n = problem->n;
    summary.k = problem->k;
    summary.elementBytes = problem->inputElement.getIntOrFloatBitWidth() / 8;
    summary.f64 = problem->element.isF64();
    summary.bTransposed = problem->b.transposed;
    summary.maxLeadingDimension =
        std::max({problem->a.leadingDimension, problem->b.leadingDimension, problem->c.leadingDimension});
  }
  MatmulChoice choice = chooseMatmulPath(summary, options);
  if (choice.path != MatmulPath::Cublas) {
    whyNot = choice.why;
    return std::nullopt;
  }
  GemmPlan plan;
  plan.matmul = matmul;
  plan.problem = *problem;
  plan.output = matmul.getDpsInits()[0];
  // The nearest op before that touches C: a zero fill of exactly C is
  // replaced by beta = 0; anything else means C's value is added.
  mlir::Value root = rootBuffer(plan.output);
  for (mlir::Operation *op = matmul->getPrevNode(); op; op = op->getPrevNode()) {
    if (!touches(op, root))
      continue;
    auto fill = mlir::dyn_cast<mlir::linalg::FillOp>(op);
    if (fill && emitters::isZeroFill(fill) && fill.getOutputs()[0] == plan.output)
      plan.fill = fill;
    break;
  }
  plan.accumulate = !plan.fill;
  // Epilogues: cuBLASLt's, for f32 (f64 goes to cublasDgemm, which has none).
  if (!problem->element.isF32())
    return plan;
  mlir::Operation *cursor = matmul;
  while (true) {
    // Allocations may be crossed too: they touch no memory in use.
    mlir::Operation *next = cursor->getNextNode();
    while (next && (isMemoryInert(next) || mlir::isa<mlir::memref::AllocOp>(next)))
      next = next->getNextNode();
    auto generic = mlir::dyn_cast_or_null<mlir::linalg::GenericOp>(next);
    if (!generic || !llvm::is_contained(generic->getOperands(), plan.output))
      break;
    GemmEpilogue extended = plan.epilogue;
    std::string why;
    if (!foldIntoEpilogue(generic, plan.output, extended, why) || !mayMoveIntoGemm(plan, generic, extended, why)) {
      MLPIPE_DEBUG(kDebugEmitters, os << "cublas: the epilogue stops at the linalg.generic at "
                                      << locationText(generic.getLoc()) << ": " << why << "\n");
      break;
    }
    plan.epilogue = extended;
    plan.folded.push_back(generic);
    plan.output = generic.getDpsInits()[0];
    cursor = generic;
  }
  return plan;
}

// Erases what the GEMM replaced, and the product's temporary when the GEMM
// writes elsewhere and nothing but deallocations is left of it.
void eraseReplaced(GemmPlan &plan, mlir::Value firstOutput) {
  for (mlir::linalg::GenericOp generic : llvm::reverse(plan.folded))
    generic.erase();
  plan.matmul.erase();
  if (plan.fill)
    plan.fill.erase();
  if (auto alloc = firstOutput.getDefiningOp<mlir::memref::AllocOp>(); alloc && firstOutput != plan.output) {
    if (llvm::all_of(alloc->getUsers(),
                     [](mlir::Operation *user) { return mlir::isa<mlir::memref::DeallocOp>(user); })) {
      for (mlir::Operation *user : llvm::make_early_inc_range(alloc->getUsers()))
        user->erase();
      alloc.erase();
    }
  }
}

bool isFusion(mlir::func::FuncOp function, llvm::StringRef kind) {
  auto attribute = function->getAttrOfType<mlir::StringAttr>(kFusionAttribute);
  return attribute && attribute.getValue() == kind;
}

void debugGemm(llvm::StringRef where, GemmPlan &plan, llvm::StringRef leftover) {
  MLPIPE_DEBUG(kDebugEmitters, {
    const BlasMatmul &p = plan.problem;
    os << "cublas: " << where << ": " << (p.element.isF32() ? "f32" : "f64");
    if (p.narrowInputs())
      os << " (" << p.inputElement << " inputs)";
    os << " GEMM m=" << p.m << " n=" << p.n << " k=" << p.k;
    if (p.batch > 1)
      os << " batch=" << p.batch;
    os << (p.a.transposed ? ", A transposed" : "") << (p.b.transposed ? ", B transposed" : "")
       << (plan.accumulate ? ", accumulating" : "") << ", epilogue " << plan.epilogue.describe() << " ("
       << plan.folded.size() << " op" << (plan.folded.size() == 1 ? "" : "s") << " folded)" << leftover << "\n";
  });
}

// ---- Matmul fusions -----------------------------------------------------------

// A matmul fusion's GEMM, the same for every call of it.
struct FusionPlan {
  mlir::func::FuncOp function;
  GemmPlan gemm;
  // D, when it is a temporary of the fusion's own: the caller allocates it
  // (and frees it after the leftover epilogue has read it).
  mlir::memref::AllocOp hoisted;
  // The rest of the epilogue as a loop fusion, called right after the GEMM
  // with the operands the fusion was called with at `keptArguments` (and the
  // hoisted temporary last); null when the GEMM computes everything.
  mlir::func::FuncOp leftover;
  llvm::SmallVector<unsigned> keptArguments;
  bool leftoverTakesHoisted = false;
};

// Whether `value` can be rebuilt at a call site: a fusion argument, or views
// and constants over them (and the hoisted temporary).
bool rebuildable(mlir::Value value, mlir::func::FuncOp function, mlir::Operation *hoisted) {
  if (auto argument = mlir::dyn_cast<mlir::BlockArgument>(value))
    return argument.getOwner() == &function.getBody().front();
  mlir::Operation *op = value.getDefiningOp();
  if (op == hoisted)
    return true;
  if (!isMemoryInert(op))
    return false;
  return llvm::all_of(op->getOperands(), [&](mlir::Value operand) { return rebuildable(operand, function, hoisted); });
}

mlir::Value rebuild(mlir::Value value, mlir::IRMapping &mapping, mlir::OpBuilder &builder) {
  if (!value)
    return {};
  if (mlir::Value mapped = mapping.lookupOrNull(value))
    return mapped;
  mlir::Operation *op = value.getDefiningOp();
  for (mlir::Value operand : op->getOperands())
    rebuild(operand, mapping, builder);
  mlir::Operation *clone = builder.clone(*op, mapping);
  return clone->getResult(mlir::cast<mlir::OpResult>(value).getResultNumber());
}

// Whether any op that is not the GEMM's, a deallocation or the return is
// left after it: then the leftover fusion is needed.
bool hasLeftover(FusionPlan &fusion) {
  for (mlir::Operation &op : fusion.function.getBody().front())
    if (!fusion.gemm.replaces(&op) && !isMemoryInert(&op) &&
        !mlir::isa<mlir::memref::DeallocOp, mlir::memref::AllocOp, mlir::func::ReturnOp>(op))
      return true;
  return false;
}

// The fusion less what the GEMM computes, as a new "loop" fusion.
void buildLeftover(FusionPlan &fusion, mlir::ModuleOp module) {
  mlir::func::FuncOp function = fusion.function;
  mlir::Block &original = function.getBody().front();
  llvm::SmallVector<size_t> replacedIndices;
  std::optional<size_t> hoistedIndex;
  for (auto [index, op] : llvm::enumerate(original)) {
    if (fusion.gemm.replaces(&op))
      replacedIndices.push_back(index);
    if (&op == fusion.hoisted.getOperation())
      hoistedIndex = index;
  }
  auto leftover = mlir::cast<mlir::func::FuncOp>(function->clone());
  leftover.setName((function.getName() + "_epilogue").str());
  leftover->setAttr(kFusionAttribute, mlir::StringAttr::get(module.getContext(), "loop"));
  mlir::SymbolTable(module).insert(leftover, std::next(function->getIterator()));
  mlir::Block &body = leftover.getBody().front();
  llvm::SmallVector<mlir::Operation *> ops;
  for (mlir::Operation &op : body)
    ops.push_back(&op);
  for (size_t index : llvm::reverse(replacedIndices))
    ops[index]->erase();
  // The hoisted temporary becomes a trailing argument.
  if (hoistedIndex) {
    mlir::Operation *alloc = ops[*hoistedIndex];
    unsigned position = leftover.getNumArguments();
    if (mlir::failed(leftover.insertArgument(position, alloc->getResult(0).getType(), {}, alloc->getLoc())))
      return;
    for (mlir::Operation *user : llvm::make_early_inc_range(alloc->getUsers()))
      if (mlir::isa<mlir::memref::DeallocOp>(user))
        user->erase();
    alloc->getResult(0).replaceAllUsesWith(leftover.getArgument(position));
    alloc->erase();
  }
  // What the GEMM's ops alone used: constants, views, temporaries.
  bool changed = true;
  while (changed) {
    changed = false;
    for (mlir::Operation &op : llvm::make_early_inc_range(llvm::reverse(body))) {
      bool deadAlloc = mlir::isa<mlir::memref::AllocOp>(op) && llvm::all_of(op.getUsers(), [](mlir::Operation *u) {
                         return mlir::isa<mlir::memref::DeallocOp>(u);
                       });
      if (deadAlloc) {
        for (mlir::Operation *user : llvm::make_early_inc_range(op.getUsers()))
          user->erase();
      }
      if (deadAlloc || (isMemoryInert(&op) && op.use_empty() && !op.hasTrait<mlir::OpTrait::IsTerminator>())) {
        op.erase();
        changed = true;
      }
    }
  }
  // Arguments the rest does not read are dropped (from its calls too).
  unsigned originalArguments = function.getNumArguments();
  llvm::BitVector unused(leftover.getNumArguments());
  for (unsigned i = 0; i < leftover.getNumArguments(); ++i) {
    if (leftover.getArgument(i).use_empty())
      unused.set(i);
    else if (i < originalArguments)
      fusion.keptArguments.push_back(i);
    else
      fusion.leftoverTakesHoisted = true;
  }
  (void)leftover.eraseArguments(unused);
  fusion.leftover = leftover;
}

std::optional<FusionPlan> planFusion(mlir::func::FuncOp function, const MatmulPathOptions &options,
                                     std::string &whyNot) {
  if (!function.getBody().hasOneBlock()) {
    whyNot = "its body is not one block";
    return std::nullopt;
  }
  mlir::Block &body = function.getBody().front();
  llvm::SmallVector<mlir::linalg::LinalgOp> matmuls;
  for (mlir::Operation &op : body)
    if (isMatmul(&op))
      matmuls.push_back(mlir::cast<mlir::linalg::LinalgOp>(op));
  if (matmuls.size() != 1) {
    whyNot = "it holds " + std::to_string(matmuls.size()) + " matmuls, not one";
    return std::nullopt;
  }
  auto gemm = planGemm(matmuls.front(), options, whyNot);
  if (!gemm)
    return std::nullopt;
  FusionPlan fusion;
  fusion.function = function;
  fusion.gemm = *gemm;
  // The GEMM runs before everything left: nothing before the matmul may
  // touch memory, but the fill it replaces and allocations.
  for (mlir::Operation *op = &body.front(); op != gemm->matmul.getOperation(); op = op->getNextNode())
    if (!isMemoryInert(op) && !gemm->replaces(op) && !mlir::isa<mlir::memref::AllocOp>(op)) {
      whyNot = op->getName().getStringRef().str() + " before the matmul would run after the GEMM";
      return std::nullopt;
    }
  if (auto alloc = gemm->output.getDefiningOp<mlir::memref::AllocOp>())
    fusion.hoisted = alloc;
  mlir::Operation *hoisted = fusion.hoisted.getOperation();
  for (mlir::Value value : {gemm->matmul->getOperand(0), gemm->matmul->getOperand(1), gemm->output,
                            gemm->epilogue.residual, gemm->epilogue.bias})
    if (value && !rebuildable(value, function, hoisted)) {
      whyNot = "an operand of the GEMM is not a view of the fusion's arguments";
      return std::nullopt;
    }
  return fusion;
}

// Replaces one call of the fusion.
void rewriteCall(mlir::func::CallOp call, FusionPlan &fusion, GemmBuilder &gemms) {
  mlir::OpBuilder builder(call);
  mlir::Location loc = call.getLoc();
  mlir::IRMapping mapping;
  for (auto [argument, operand] : llvm::zip(fusion.function.getArguments(), call.getOperands()))
    mapping.map(argument, operand);
  mlir::Value hoisted;
  if (fusion.hoisted)
    hoisted = builder.clone(*fusion.hoisted, mapping)->getResult(0);
  GemmPlan &plan = fusion.gemm;
  GemmValues values{rebuild(plan.matmul->getOperand(0), mapping, builder),
                    rebuild(plan.matmul->getOperand(1), mapping, builder), rebuild(plan.output, mapping, builder),
                    rebuild(plan.epilogue.residual, mapping, builder), rebuild(plan.epilogue.bias, mapping, builder)};
  gemms.emit(builder, loc, plan, values);
  if (fusion.leftover) {
    llvm::SmallVector<mlir::Value> operands;
    for (unsigned index : fusion.keptArguments)
      operands.push_back(call.getOperand(index));
    if (fusion.leftoverTakesHoisted)
      operands.push_back(hoisted);
    mlir::func::CallOp::create(builder, loc, fusion.leftover, operands);
  }
  if (hoisted)
    mlir::memref::DeallocOp::create(builder, loc, hoisted);
  call.erase();
}

// ---- The pass -----------------------------------------------------------------

struct CublasMatmulsPass : impl::CublasMatmulsPassBase<CublasMatmulsPass> {
  using CublasMatmulsPassBase::CublasMatmulsPassBase;

  void runOnOperation() final {
    if (!enabled)
      return;
    if (precision != "f32" && precision != "tf32") {
      getOperation().emitError() << "mlpipe-cublas-matmuls: precision must be f32 or tf32, not '" << precision << "'";
      return signalPassFailure();
    }
    mlir::ModuleOp module = getOperation();
    GemmBuilder gemms(module, precision == "tf32");
    llvm::SmallVector<mlir::func::FuncOp> fusions, others;
    for (auto function : module.getOps<mlir::func::FuncOp>())
      (isFusion(function, "matmul") ? fusions : others).push_back(function);
    MatmulPathOptions pathOptions;
    pathOptions.skinnyMaxRows = skinnyRows;
    pathOptions.rowDotMaxRows = rowDotRows;
    const DeviceDescription *device = passDeviceDescription(module, chip, "mlpipe-cublas-matmuls: ");
    if (!device)
      return signalPassFailure();
    pathOptions.warpgroupMma = device->warpgroupMma;
    pathOptions.warpgroupMinColumns = warpgroupMinColumns;
    for (mlir::func::FuncOp function : fusions)
      rewriteFusion(function, module, gemms, pathOptions);
    for (mlir::func::FuncOp function : others)
      rewriteBareMatmuls(function, gemms, pathOptions);
  }

  static void rewriteFusion(mlir::func::FuncOp function, mlir::ModuleOp module, GemmBuilder &gemms,
                            const MatmulPathOptions &pathOptions) {
    llvm::SmallVector<mlir::func::CallOp> calls;
    if (auto uses = mlir::SymbolTable::getSymbolUses(function, module))
      for (const mlir::SymbolTable::SymbolUse &use : *uses)
        if (auto call = mlir::dyn_cast<mlir::func::CallOp>(use.getUser()); call && call->getNumResults() == 0)
          calls.push_back(call);
    if (calls.empty())
      return;
    std::string whyNot;
    auto fusion = planFusion(function, pathOptions, whyNot);
    if (!fusion) {
      MLPIPE_DEBUG(kDebugEmitters,
                   os << "cublas: @" << function.getName() << " is left to the generated kernel: " << whyNot << "\n");
      return;
    }
    if (hasLeftover(*fusion))
      buildLeftover(*fusion, module);
    debugGemm(("@" + function.getName()).str(), fusion->gemm,
              fusion->leftover ? (", the rest in @" + fusion->leftover.getName()).str() : "");
    for (mlir::func::CallOp call : calls)
      rewriteCall(call, *fusion, gemms);
    if (mlir::SymbolTable::symbolKnownUseEmpty(function, module))
      function.erase();
  }

  static void rewriteBareMatmuls(mlir::func::FuncOp function, GemmBuilder &gemms,
                                 const MatmulPathOptions &pathOptions) {
    llvm::SmallVector<mlir::linalg::LinalgOp> matmuls;
    function.walk([&](mlir::linalg::LinalgOp op) {
      if (isMatmul(op))
        matmuls.push_back(op);
    });
    for (mlir::linalg::LinalgOp matmul : matmuls) {
      std::string whyNot;
      auto plan = planGemm(matmul, pathOptions, whyNot);
      if (!plan) {
        MLPIPE_DEBUG(kDebugEmitters, os << "cublas: the matmul at " << locationText(matmul.getLoc())
                                        << " is left to the generated kernel: " << whyNot << "\n");
        continue;
      }
      debugGemm(("@" + function.getName()).str(), *plan, "");
      mlir::Value firstOutput = matmul.getDpsInits()[0];
      mlir::OpBuilder builder(plan->anchor());
      GemmValues values{matmul->getOperand(0), matmul->getOperand(1), plan->output, plan->epilogue.residual,
                        plan->epilogue.bias};
      gemms.emit(builder, matmul.getLoc(), *plan, values);
      eraseReplaced(*plan, firstOutput);
    }
  }
};

} // namespace

} // namespace mlpipe
