// The same as matmul_epilogue.mlir with the test epilogue written out, for
// the CPU: y = gelu_tanh(a @ b + bias) + residual.
#rows = affine_map<(i, j) -> (i, j)>
#columns = affine_map<(i, j) -> (j)>
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
  linalg.generic {indexing_maps = [#columns, #rows, #rows], iterator_types = ["parallel", "parallel"]}
      ins(%bias, %residual : memref<96xf32>, memref<40x96xf32>) outs(%y : memref<40x96xf32>) {
  ^bb0(%bias_j: f32, %residual_ij: f32, %product: f32):
    %half = arith.constant 0.5 : f32
    %one = arith.constant 1.0 : f32
    %c = arith.constant 0.044715 : f32
    %s = arith.constant 0.7978845608028654 : f32
    %x = arith.addf %product, %bias_j : f32
    %x2 = arith.mulf %x, %x : f32
    %x3 = arith.mulf %x, %x2 : f32
    %cx3 = arith.mulf %c, %x3 : f32
    %inner = arith.addf %x, %cx3 : f32
    %scaled = arith.mulf %s, %inner : f32
    %t = math.tanh %scaled : f32
    %onet = arith.addf %one, %t : f32
    %halfx = arith.mulf %half, %x : f32
    %gelu = arith.mulf %halfx, %onet : f32
    %out = arith.addf %gelu, %residual_ij : f32
    linalg.yield %out : f32
  }
  return
}
