// y = a @ b, with inputs named bias and residual for the generated matmul's
// test epilogue (mlpipe-generated-matmuls{test-epilogue=bias-gelu-residual}
// makes it y = gelu_tanh(a @ b + bias) + residual). 40x64 @ 64x96.
func.func @mlp(%a: memref<40x64xf32> {mlpipe.name = "a"}, %b: memref<64x96xf32> {mlpipe.name = "b"},
               %bias: memref<96xf32> {mlpipe.name = "bias"}, %residual: memref<40x96xf32> {mlpipe.name = "residual"},
               %y: memref<40x96xf32> {bufferize.result, mlpipe.name = "y"})
    attributes {llvm.emit_c_interface,
                mlpipe.inputs = [{name = "a", type = tensor<40x64xf32>}, {name = "b", type = tensor<64x96xf32>},
                                 {name = "bias", type = tensor<96xf32>}, {name = "residual", type = tensor<40x96xf32>}],
                mlpipe.outputs = [{name = "y", type = tensor<40x96xf32>}]} {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%y : memref<40x96xf32>)
  linalg.matmul ins(%a, %b : memref<40x64xf32>, memref<64x96xf32>) outs(%y : memref<40x96xf32>)
  return
}
