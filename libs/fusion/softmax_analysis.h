// The softmax analysis shared by mlpipe-fused-attention and the row
// reduction emitter: whether a row_reduction fusion is a softmax over the
// last axis of [heads, queries, keys],
//
//   x = prologue(scores, indices, ...)   m = max_j x    e = exp(x - m)
//   l = sum_j e                          y = e / l
//
// and whether its prologue adds the causal penalty (keys after the query
// get -1e9 or less), computed in its body (sublayer mode) or read from a
// mask that another fusion computes from its indices (fused mode). Where
// it does, e and y are exactly 0 for every key after the query, in f32 and
// f64, whatever those keys' scores (below 1e8 in magnitude).
#pragma once

#include "fusion/fusion_graph.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <optional>
#include <string>

namespace mlpipe::emitters {

// The softmax fusion's structure.
struct Softmax {
  int prologue = -1;        // x = f(scores, indices, ...): all parallel, reads the scores argument
  unsigned scoresInput = 0; // which input of the prologue the scores are
  // Other arguments of the fusion the prologue reads (a mask computed
  // once for all layers): they become arguments of the kernel.
  llvm::SmallVector<unsigned> extraArguments;
  // The prologue's input that is a causal mask computed in memory by
  // another fusion (fused mode): the kernel computes its elements from that
  // fusion's own op instead of reading them. -1: none.
  int maskInput = -1;
  int maskArgument = -1; // the fusion argument it reads, -1: none
  int max = -1;          // m = max_j x
  int exp = -1;          // e = exp(x - m)
  int sum = -1;          // l = sum_j e
  int divide = -1;       // y = e / l, the output
  bool causal = false;
};

// The softmax in `graph`, or failure with the reason. `looksLikeSoftmax`
// is set once the fusion starts like one (a max from a constant), so that
// callers report only near misses.
mlir::FailureOr<Softmax> matchSoftmax(const FusionGraph &graph, std::string &why, bool &looksLikeSoftmax);

// Where a causal softmax's penalty does not mask (every key up to its
// query), it is a constant: 0 * big, a signed zero, so that the prologue's
// x = f(s) + penalty is f(s) exactly there. `term` is the penalty the
// prologue's body computes (sublayer mode), null where the prologue reads
// it from memory (maskInput; `maskGraph` is its writer's graph).
struct VisibleCausalPenalty {
  mlir::Value term;
  double value = 0.0;
};
// The penalty where it does not mask, for a causal softmax whose penalty is
// the traced one (in the prologue's body, or its writer's); none otherwise.
std::optional<VisibleCausalPenalty> visibleCausalPenalty(const Softmax &softmax, const FusionGraph &graph,
                                                         const FusionGraph *maskGraph);

// The fusion that fills host buffer `mask` (read by the call `reader`)
// with the causal penalty over [query, key], or null: written once, before
// `reader`, by a fusion whose one op computes it from its indices, and
// written by nothing else.
mlir::func::FuncOp causalMaskWriter(mlir::Value mask, mlir::func::CallOp reader, mlir::SymbolTable &symbols);

// `value` when it is one of the inputs of the host function holding
// `call` (its mlpipe.inputs) that is not in-out: never written. Else null.
mlir::Value hostInput(mlir::Value value, mlir::func::CallOp call);

// A decode step's mask past a run-time position: where the softmax's
// prologue (called by `call`) adds select(key > p, big, 0), big at most
// -1e9, with p a scalar loaded from memory, computed in its body
// (sublayer mode) or read from a mask over the keys that a fusion called
// before it computes that way (fused mode), and p comes from an argument
// of the host function (never written): that host value, the position.
// Keys after it then have exact-zero weights as long as key 0 does not
// (p >= 0). Null otherwise.
//
// With `rowsPerPosition`, batched decoding's mask too: read as [batch *
// heads, 1, keys] from a mask over [batch, heads, 1, keys] that a fusion
// computes as select(key > p[b], big, 0) from the positions p ([batch]
// i32, a host input): then the positions, and *rowsPerPosition the heads
// (row r's keys are masked past p[r / heads]); 0 for one position.
mlir::Value maskingPosition(const Softmax &softmax, const FusionGraph &graph, mlir::func::CallOp call,
                            mlir::SymbolTable &symbols, int64_t *rowsPerPosition = nullptr);

// A decode step's mask past a run-time position (maskingPosition's fused
// mode: a mask over the keys that a fusion computes as select(key > p,
// big, 0) from the position, before `call`; or batched decoding's over
// [rows, 1, keys] from the positions, read as it is) that the softmax's
// prologue reads from memory: marks that input the softmax's maskInput and
// maskArgument (no longer an extra argument, so that a kernel computes its
// elements from the writer's own op) and returns the writer's call. Null
// where the prologue reads no such mask.
mlir::func::CallOp matchPositionMaskInput(Softmax &softmax, const FusionGraph &graph, mlir::func::CallOp call,
                                          mlir::SymbolTable &symbols);

// For a softmax whose prologue does not compute the penalty itself: the
// fusion argument that the prologue adds at [query, key] and that
// `holdsCausalMask` says holds the causal penalty (causalMaskWriter, asked
// while the writer is still a call). The softmax is then marked causal,
// with `maskInput` and `maskArgument` set (no longer an extra argument).
// -1 where there is none.
int matchCausalMaskInput(Softmax &softmax, const FusionGraph &graph,
                         llvm::function_ref<bool(unsigned argument)> holdsCausalMask);

// matchCausalMaskInput asking causalMaskWriter about the arguments `call`
// passes: the mask's writer, or null (the softmax unchanged).
mlir::func::FuncOp matchCausalMaskWriter(Softmax &softmax, const FusionGraph &graph, mlir::func::CallOp call,
                                         mlir::SymbolTable &symbols);

} // namespace mlpipe::emitters
