// For the pass's test epilogue, at one row (a decode step's GEMV): y =
// gelu_tanh(a @ b + bias) + residual. N = 204 in 2-element (16-byte f64)
// vectors; the row segments narrow to 4 lanes (64 bytes), so blocks own 8
// columns and the last is cut short; K = 300 is not a multiple of the 64
// row slots, so K is not split and one launch computes everything.
func.func @step(%a: memref<1x300xf64> {mlpipe.name = "a"}, %b: memref<300x204xf64> {mlpipe.name = "b"}, %bias: memref<204xf64> {mlpipe.name = "bias"}, %residual: memref<1x204xf64> {mlpipe.name = "residual"}, %c: memref<1x204xf64> {mlpipe.name = "y"}) {
  %zero = arith.constant 0.0 : f64
  linalg.fill ins(%zero : f64) outs(%c : memref<1x204xf64>)
  linalg.matmul ins(%a, %b : memref<1x300xf64>, memref<300x204xf64>) outs(%c : memref<1x204xf64>)
  return
}
