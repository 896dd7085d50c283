// What mlpipe-fused-attention matches in host code (private to
// libs/attention): attention's three calls in a row, as `fuse` and
// `bufferize` make them of nn::causalAttention,
//
//   scores = scores_matmul(Q, K)      a batch_matmul of per-head views
//   probs  = softmax(scores)          prologue x = f(s, h, i, j) (scale, mask),
//                                     max, exp(x - max), sum, divide
//   out    = values_matmul(probs, V)  a batch_matmul with a per-head view of V
//
// where nothing else touches `scores` or `probs`; the causal mask the
// softmax reads from memory, or the run-time position past which a decode
// step's keys are masked (softmax_analysis.h); and a decode step's copy of
// its keys and values into the KV cache just before, which the kernel can
// do itself.
#pragma once

#include "fusion/fusion_graph.h"
#include "fusion/softmax_analysis.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>

namespace mlpipe::emitters::fused_attention {

using mlir::Value;

// ---- The three calls -------------------------------------------------------

struct AttentionMatch {
  mlir::func::CallOp scoresCall, softmaxCall, valuesCall;
  mlir::func::FuncOp scoresFn, valuesFn;
  FusionGraph softmaxGraph;
  Softmax softmax;
  Value scores, probs; // the host temporaries between the calls
  // A causal mask in memory that the softmax's prologue reads, or a decode
  // step's mask past its position, whose elements the kernel computes
  // instead (with its writer's graph); null if none.
  Value mask;
  std::optional<FusionGraph> maskGraph;
  // The call writing `mask`: the kernel reads what that call reads besides
  // (a decode step's position) as arguments of its own.
  mlir::func::CallOp maskWriterCall;
  // A decode step's run-time position, keys past which are masked; null if
  // none. In batched decoding, the positions ([batch] i32), row r's keys
  // masked past positions[r / rowsPerPosition] (0: one position).
  Value position;
  int64_t rowsPerPosition = 0;
  // Batched decoding's queries, copied inside the scores fusion from a
  // view [batch, heads * D] of c_attn's output to be read as [batch *
  // heads, 1, D] (a strided view cannot merge the two axes): that copy,
  // whose source the kernel reads in place instead; null if none.
  mlir::linalg::CopyOp queryCopy;
  // The two products, in their fusions, and the values call's output
  // argument.
  mlir::linalg::LinalgOp scoresOp, valuesOp;
  unsigned valuesOut = 0;
  // The heads' merge that alone reads the values call's output [H, T, D]
  // and writes it, as it is or rounded to its type, as [T, H * D] (a loop
  // fusion call; matchHeadsMerge): the kernel writes the merged buffer
  // through `mergedOutType`, a view [H, T, D] of it, and the call goes.
  // Null where there is none (or it is not folded).
  mlir::func::CallOp mergeCall;
  mlir::MemRefType mergedOutType;
};

// The heads' merge after the attention in `match` (see mergeCall), set in
// `match` where there is one the kernel can write through a view: a loop
// fusion whose one op reads the values call's output [H, T, D] at
// (t, c) -> (c / D, t, c % D) into a buffer [T, H * D], yielding it or its
// truncf; nothing else reads the output. The buffer is a fresh one
// (allocated with no use before the merge), whose allocation moves up to
// the values call so that the kernel's launch may take it, or the host
// function's argument, unused between the values call and the merge.
void matchHeadsMerge(AttentionMatch &match, mlir::SymbolTable &symbols);

// Whether `softmaxCall` (a call of a row_reduction fusion from host code)
// is the softmax of an attention, with the scores matmul call before it and
// the values matmul call after it; failure with the reason `why` otherwise.
// `looksLikeSoftmax` is set once the softmax starts like one (a max from a
// constant), so that callers report only near misses. `match.mask` is set
// as soon as the softmax is seen to read a causal mask, even where the
// rest does not match.
mlir::LogicalResult matchAttention(mlir::func::CallOp softmaxCall, mlir::SymbolTable &symbols, AttentionMatch &match,
                                   std::string &why, bool &looksLikeSoftmax);

// ---- A decode step's cache write -------------------------------------------

// What a source dimension of the cache write indexes.
enum CacheDim : int { kUnitDim = -1, kKeyOrValueDim = 0, kHeadDim = 1, kHeadElementDim = 2 };

// A host copy of the step's keys and values into the cache at a run-time
// key, just before the attention (the kernel does that copy itself).
struct CacheWrite {
  mlir::linalg::CopyOp copy;
  Value source;                   // shaped as the destination
  Value key;                      // the key (an index) the rows go to
  llvm::SmallVector<int, 5> dims; // per source dimension: a CacheDim
  // How the key is computed on the host: pure ops and loads of host
  // arguments (the position), in order. The kernel computes it again, as
  // the host must not read device memory.
  llvm::SmallVector<mlir::Operation *> keyOps;
  llvm::SmallVector<Value> keyInputs; // the host arguments the loads read
};

// Batched decoding's cache writes: a host copy per sequence b of its keys
// and values [2, H, 1, D] into rows b * H ... b * H + H - 1 of the cache
// at the key clamp(positions[b], 0, n_ctx - 1), just before the attention
// (the kernel does them all: each row's block whose split holds its
// sequence's key writes that row).
struct BatchedCacheWrite {
  llvm::SmallVector<mlir::linalg::CopyOp> copies; // by sequence
  int64_t rowsPerSequence = 0;                    // H
  int64_t lastKey = 0;                            // n_ctx - 1: the key is clamped to [0, lastKey]
  // Where sequence b's element (kv, h, d) is read: in `sourceRoot` (an
  // identity-layout buffer), at the element offset + b * sequenceStride
  // + kv * kvStride + h * headStride + d.
  Value sourceRoot;
  int64_t offset = 0, sequenceStride = 0, kvStride = 0, headStride = 0;
};

// The copies before `scoresCall` that write batched decoding's new keys
// and values into the cache `k` and `v` ([B * H, Tk, D] views) view, one
// per sequence, each at the key of its sequence's position read from
// `positions` (a host input [B] i32), with nothing but the calls being
// fused touching the cache or the copies' sources between the first copy
// and `valuesCall`. Else none.
std::optional<BatchedCacheWrite> matchBatchedCacheWrite(mlir::func::CallOp scoresCall, mlir::func::CallOp softmaxCall,
                                                        mlir::func::CallOp valuesCall, Value k, Value v,
                                                        Value positions, int64_t rows, int64_t rowsPerSequence,
                                                        int64_t headSize, mlir::Type element);

// The copy before `scoresCall` that writes, at one run-time key, exactly
// the elements k[h, key, d] and v[h, key, d] of the cache that `k` and `v`
// ([H, Tk, D] views) view, for every head h and element d; nothing but the
// calls being fused touching the cache or the copy's source between the
// copy and `valuesCall`. Else none.
std::optional<CacheWrite> matchCacheWrite(mlir::func::CallOp scoresCall, mlir::func::CallOp softmaxCall,
                                          mlir::func::CallOp valuesCall, Value k, Value v, int64_t heads,
                                          int64_t headSize, mlir::Type element);

} // namespace mlpipe::emitters::fused_attention
