// Emits a recorded Program as linalg-on-tensors MLIR text.
//
// One node becomes one small group of ops:
//   elementwise (Unary, Binary)  -> linalg.generic, broadcasting through its indexing maps
//   Reduce                       -> linalg.fill + linalg.reduce (+ tensor.expand_shape for keepdims)
//   MatMul                       -> linalg.fill + linalg.matmul / linalg.batch_matmul
//   Reshape                      -> tensor.expand_shape / tensor.collapse_shape
//   Transpose                    -> linalg.transpose
//   Slice                        -> tensor.extract_slice
//   Gather                       -> linalg.generic reading the table with tensor.extract
//   Triu                         -> linalg.generic over linalg.index
//   Compare, Select, Convert     -> linalg.generic (arith.cmpf/cmpi, arith.select, casts)
//   Broadcast                    -> linalg.generic reading the operand through a projection
//   Iota                         -> linalg.generic over linalg.index
//   Pad                          -> linalg.generic reading the operand with tensor.extract
//   Concat                       -> tensor.insert_slice of each part into tensor.empty
//   Literal                      -> arith.constant dense<...>
//   StridedSlice                 -> tensor.extract_slice with strides
//   Convolution                  -> first lowered to the nodes above: pad, strided
//                                   slices, concat and one matmul (convolution.h)
// Scalar constants are arith.constant values captured by the generic bodies.
// f16 and bf16 are stored as themselves and computed in f32.
//
// Each function carries its contract with `run`: the argument and result
// attributes {mlpipe.name = "..."} and the function attributes
//   mlpipe.inputs  = [{name = "x", type = tensor<64x256xf32>}, ...]
//   mlpipe.outputs = [{name = "y", type = tensor<64x256xf32>}]
// (an unsigned integer adds its element type, which the MLIR type does not
// say: {name = "n", type = tensor<4xi32>, dtype = "u32"}) which survive
// every stage down to the lowered module, and
// llvm.emit_c_interface, so the JIT can call it with memref descriptors.
#pragma once

#include "frontend/graph.h"

#include <string>

namespace mlpipe::fe {

std::string emitMlir(const Program &program);

// The MLIR spelling of a tensor type: tensor<64x256xf32>, tensor<f32>.
std::string tensorType(const Shape &shape, DType dtype);

// The MLIR element type of `dtype`: f32, bf16, i1, ..., and for every
// integer, signed or unsigned, the signless iN of its width (u8 is i8):
// each op says how it reads the bits (arith.divsi or divui, cmpi slt or ult).
const char *mlirType(DType dtype);

} // namespace mlpipe::fe
