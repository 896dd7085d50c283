// For the pass's test epilogue: y = gelu_tanh(a @ b + bias) + residual.
func.func @mlp(%a: memref<21x24xf64> {mlpipe.name = "a"}, %b: memref<24x36xf64> {mlpipe.name = "b"}, %bias: memref<36xf64> {mlpipe.name = "bias"}, %residual: memref<21x36xf64> {mlpipe.name = "residual"}, %c: memref<21x36xf64> {mlpipe.name = "y"}) {
  %zero = arith.constant 0.0 : f64
  linalg.fill ins(%zero : f64) outs(%c : memref<21x36xf64>)
  linalg.matmul ins(%a, %b : memref<21x24xf64>, memref<24x36xf64>) outs(%c : memref<21x36xf64>)
  return
}
