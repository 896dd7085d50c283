// ElementalEmitter: builds, inside a kernel, the code computing any element
// of any node of a FusionGraph from its inputs (XLA's "elemental" IR
// emission).
//
// Reading an operand of a node means, recursively, computing the producer's
// element at the index the operand's indexing map gives, or loading it from
// a kernel argument when nothing in the fusion produced it. Every value is
// remembered per (node, index values), so a value read twice at the same
// index, by two ops of a fusion, is computed once (the row of a layer norm
// is loaded once and feeds both reductions and the epilogue). Emitters add
// what they compute themselves (a reduction's result for a row, a value
// staged in shared memory) with define().
//
// Vectorised access: an emitter that handles W consecutive elements along
// the innermost dimension registers their W innermost index values as one
// group; a load of an argument through a unit-stride, suitably aligned
// layout at any of those indices then loads all W with one vector.load, and
// storeGroup() stores W values with one vector.store.
#pragma once

#include "fusion/fusion_graph.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include <map>
#include <vector>

namespace mlpipe::emitters {

class ElementalEmitter {
public:
  // `arguments` maps the fusion function's arguments to the kernel's values;
  // `entry` is where values every part of the kernel may use (constants,
  // flattened argument views) are created.
  ElementalEmitter(const FusionGraph &graph, mlir::OpBuilder &builder, mlir::OpBuilder entry,
                   const mlir::IRMapping &arguments);

  mlir::OpBuilder &builder() { return builder_; }
  mlir::Location loc() const { return loc_; }
  const FusionGraph &graph() const { return graph_; }

  // The element of `node`'s output at `index` (one index value per output
  // dimension). A reduction nobody defined is computed by a serial loop.
  mlir::Value node(int node, llvm::ArrayRef<mlir::Value> index);
  // What `consumer` reads through `operand` at its loop index.
  mlir::Value operand(int consumer, mlir::OpOperand &operand, llvm::ArrayRef<mlir::Value> loopIndex);
  // For a reduction node: the value its body combines into the accumulator
  // at one point of its loops (the body without the combining op).
  mlir::Value reductionInput(int node, llvm::ArrayRef<mlir::Value> loopIndex);
  // The reduction's initial value for one output element (its init: a fill
  // or whatever the output held).
  mlir::Value reductionInit(int node, llvm::ArrayRef<mlir::Value> outputIndex);
  // Combines two partial values with the reduction's combining op.
  mlir::Value combine(int node, mlir::Value a, mlir::Value b);
  // The neutral element of the reduction's combining op.
  mlir::Value neutral(int node);
  // Whether the node is a reduction whose body is "combine(f(inputs), acc)"
  // with a combining op that has a neutral element (what warp reductions need).
  bool isTreeReducible(int node) const;

  // Loads now every fusion-argument element that `node`'s element at
  // `index` reads, directly or through the all-parallel nodes it reads,
  // stopping at reductions and at values already known: the later
  // evaluation finds them loaded. (Emitters issue an epilogue's own reads,
  // a layer norm's weight and bias, together with the row's.)
  void prefetchArgumentReads(int node, llvm::ArrayRef<mlir::Value> index);

  // Declares the value of a node's element (a reduction result the emitter
  // computed, or a value from shared memory).
  void define(int node, llvm::ArrayRef<mlir::Value> index, mlir::Value value);
  // Declares what `consumer` reads through `operand` at `operandIndex` (in
  // the operand's own shape).
  void defineRead(int consumer, mlir::OpOperand &operand, llvm::ArrayRef<mlir::Value> operandIndex, mlir::Value value);

  // While set, `bodyValue` (a value computed in a node's linalg body) is
  // `replacement` wherever that body is evaluated: an emitter that knows a
  // term's value over a region (a causal penalty that masks nothing there)
  // evaluates the body without computing it. The ops computing only it
  // are left dead. Bracket with pushScope/popScope so that no element
  // computed with it outlives the region.
  void substituteBodyValue(mlir::Value bodyValue, mlir::Value replacement);
  void clearBodySubstitutions();

  // A group of `width` consecutive innermost indices: lane u is base + u
  // (lane 0 is `base` itself). Returns the lanes' index values.
  llvm::SmallVector<mlir::Value> laneGroup(mlir::Value base, int width);

  // Stores into a fusion argument: one element, or a registered lane group
  // (vector.store when the layout allows).
  // `memref` is a fusion argument or a view of one.
  void store(mlir::Value memref, llvm::ArrayRef<mlir::Value> index, mlir::Value value);
  void storeGroup(mlir::Value memref, llvm::ArrayRef<mlir::Value> baseIndex, llvm::ArrayRef<mlir::Value> values);
  // Whether a W-wide group at innermost positions that are multiples of W
  // can use one vector access on this fusion memref value.
  bool vectorizable(mlir::Value memref, int width) const;

  // Values computed inside a region (an scf.if or scf.for body) are not
  // visible after it: emitters bracket such regions with these.
  void pushScope();
  void popScope();

  // Index arithmetic, memoised.
  mlir::Value index(int64_t value);
  llvm::SmallVector<mlir::Value> applyMap(mlir::AffineMap map, llvm::ArrayRef<mlir::Value> dims);
  llvm::SmallVector<mlir::Value> delinearize(mlir::Value linear, llvm::ArrayRef<int64_t> shape);
  mlir::Value linearize(llvm::ArrayRef<mlir::Value> index, llvm::ArrayRef<int64_t> strides, int64_t offset);
  // The element's place in the root buffer of a view (its offset may be a
  // run-time value).
  mlir::Value address(const BufferView &view, llvm::ArrayRef<mlir::Value> index);
  mlir::Value add(mlir::Value a, mlir::Value b);
  mlir::Value mul(mlir::Value a, int64_t b);
  mlir::Value minIndex(mlir::Value a, int64_t b);

  // The loop index of an all-parallel node for one element of its output.
  llvm::SmallVector<mlir::Value> loopIndexOfOutput(int node, llvm::ArrayRef<mlir::Value> outputIndex);

  // Set when something could not be expressed; the emitter then gives up
  // on the fusion (and the pass emits it op by op).
  bool failed() const { return failed_; }
  const std::string &failure() const { return failure_; }

private:
  struct Key {
    const void *what;
    std::vector<const void *> index;
    bool operator<(const Key &other) const { return what != other.what ? what < other.what : index < other.index; }
  };
  Key key(const void *what, llvm::ArrayRef<mlir::Value> index) const;
  mlir::Value lookup(const Key &key) const;
  void remember(const Key &key, mlir::Value value);

  mlir::Value read(int consumer, mlir::Value memref, llvm::ArrayRef<mlir::Value> index, int producer);
  mlir::Value readArgument(mlir::Value memref, llvm::ArrayRef<mlir::Value> index);
  mlir::Value flatArgument(mlir::Value root);
  mlir::Value outsideValue(mlir::Value value);
  mlir::Value body(int node, llvm::ArrayRef<mlir::Value> loopIndex, mlir::Value accumulator, bool withoutCombiner);
  mlir::Value serialReduction(int node, llvm::ArrayRef<mlir::Value> outputIndex);
  mlir::Value expand(mlir::AffineExpr expr, llvm::ArrayRef<mlir::Value> dims);
  mlir::Operation *combiner(int node) const;
  void fail(const std::string &why);

  const FusionGraph &graph_;
  mlir::OpBuilder &builder_;
  mlir::OpBuilder entry_;
  mlir::Location loc_;
  mlir::IRMapping arguments_;
  mlir::IRMapping outside_; // fusion-level values (constants, views) already brought into the kernel
  std::vector<std::map<Key, mlir::Value>> scopes_;
  mlir::IRMapping bodySubstitutions_;
  llvm::DenseMap<mlir::Value, std::pair<mlir::Value, int>> laneOf_; // lane index -> (group base, lane)
  llvm::DenseMap<mlir::Value, llvm::SmallVector<mlir::Value>> groups_;
  llvm::DenseMap<mlir::Value, mlir::Value> flat_;
  bool failed_ = false;
  std::string failure_;
};

} // namespace mlpipe::emitters
