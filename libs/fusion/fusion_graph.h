// FusionGraph: the dataflow of one bufferized fusion function, as the
// emitters need it.
//
// After bufferization a fusion function is straight-line code over memrefs:
// linalg ops writing whole buffers (function arguments, or memref.alloc'ed
// temporaries, sometimes reused in place), views of those buffers, fills
// and copies. The graph turns that back into values: every linalg op is a
// node, and every shaped operand it reads is resolved to the node that last
// wrote the buffer before it (or to a function argument nobody wrote). The
// emitters then compute any node's value at any index from its inputs'
// values ("elementally"), keeping intermediates in registers instead of
// memory; only the nodes whose buffers are the function's outputs are
// stored.
//
// An op may write part of a buffer (a slice at a static or run-time
// position), as long as nothing in the fusion reads that buffer afterwards.
// Scalars the fusion reads from its arguments (a position) and arithmetic on
// them may appear between the ops. analyze() refuses what elemental emission
// cannot express (an unknown op, a read of a partly written buffer, an input
// read inside a body from a temporary); the emit pass then emits such a
// fusion op by op.
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/BuiltinTypes.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>
#include <vector>

namespace mlpipe::emitters {

// A memref value's place in its root buffer: the root (a function argument
// or a memref.alloc) and the static strided layout (offset, strides in
// elements) of the value over the root's storage.
struct BufferView {
  mlir::Value root;
  mlir::Value value;          // the memref this is the layout of
  int64_t offset = 0;         // in elements; meaningless when dynamicOffset
  bool dynamicOffset = false; // a slice at a run-time position (a KV cache row)
  llvm::SmallVector<int64_t> strides;
  llvm::SmallVector<int64_t> shape;
  // Row-major over the root's whole storage: the same elements in the same
  // order, however reshaped.
  bool coversRootDensely = false;
};

struct FusionNode {
  mutable mlir::linalg::LinalgOp op; // (op handles are used through const graphs)
  int order = 0;
  // Per DPS input operand: the node that produced what it reads, or -1 when
  // it reads a function argument (or a scalar).
  llvm::SmallVector<int> inputProducers;
  // The node that last wrote the output buffer before this op (its init,
  // e.g. the fill a reduction accumulates into), or -1.
  int initProducer = -1;
  BufferView output;
};

class FusionGraph {
public:
  // Fails with a one-line reason when the function is not a fusion the
  // elemental emitters can express.
  static llvm::FailureOr<FusionGraph> analyze(mlir::func::FuncOp fusion, std::string &reason);

  mlir::func::FuncOp function() const { return function_; }
  const std::vector<FusionNode> &nodes() const { return nodes_; }
  const FusionNode &node(int index) const { return nodes_[index]; }
  int nodeOf(mlir::Operation *op) const { return nodeOf_.lookup(op) - 1; }

  // The function arguments some node writes, and the node whose values each
  // ends up holding (the last writer).
  struct Output {
    unsigned argument;
    int node;
  };
  const llvm::SmallVector<Output> &outputs() const { return outputs_; }
  bool isOutputArgument(unsigned argument) const;

  // The producer of what `consumer` reads through its operand `operand`
  // (-1: a function argument).
  int producerOf(int consumer, mlir::OpOperand &operand) const;

  // Where a memref value of the function lives.
  std::optional<BufferView> view(mlir::Value memref) const;

  // Every memref a node's body reads directly (a gather's table): they must
  // be function arguments (or views of them).
  static bool readsMemrefInBody(mlir::linalg::LinalgOp op);

  // The reduction nodes, in program order.
  llvm::SmallVector<int> reductions() const;

private:
  mlir::func::FuncOp function_;
  std::vector<FusionNode> nodes_;
  llvm::DenseMap<mlir::Operation *, int> nodeOf_; // index + 1
  llvm::SmallVector<Output> outputs_;
};

// Whether an op only views memory (subview, expand/collapse_shape,
// memref.transpose, ...), and the buffer a value views (itself if none).
bool isViewOp(mlir::Operation *op);
mlir::Value rootBuffer(mlir::Value value);

// Whether a linalg.fill on memrefs writes floating-point zero (a matmul or a
// sum then starts from nothing), and whether node `node` of a graph is one
// (false for -1, "no node").
bool isZeroFill(mlir::linalg::FillOp fill);
bool isZeroFillNode(const FusionGraph &graph, int node);

// A view's layout from its type, relative to its root. Identity memrefs are
// row-major with offset 0.
std::optional<BufferView> layoutOf(mlir::Value memref, mlir::Value root);

// The element strides of a row-major array of `shape`.
llvm::SmallVector<int64_t> rowMajorStrides(llvm::ArrayRef<int64_t> shape);
// The elements of an array of `shape`: the product of its extents (1 for
// the empty shape of a scalar).
int64_t elementCount(llvm::ArrayRef<int64_t> shape);

} // namespace mlpipe::emitters
