// For the pass's test epilogue on the tensor-core form:
// y = gelu_tanh(a @ b + bias) + residual, bf16 A and B, f32 C; N = 72 and
// K = 72 multiples of no tile.
func.func @mlp(%a: memref<17x72xbf16> {mlpipe.name = "a"}, %b: memref<72x72xbf16> {mlpipe.name = "b"}, %bias: memref<72xf32> {mlpipe.name = "bias"}, %residual: memref<17x72xf32> {mlpipe.name = "residual"}, %c: memref<17x72xf32> {mlpipe.name = "y"}) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<17x72xf32>)
  linalg.matmul ins(%a, %b : memref<17x72xbf16>, memref<72x72xbf16>) outs(%c : memref<17x72xf32>)
  return
}
