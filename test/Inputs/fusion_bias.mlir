// The unit matmul with --epilogue bias, as fuse's partitioner shapes it
// after bufferize: the entry calls a matmul fusion (zero fill, matmul, bias
// epilogue). Inputs and output are named as `verify matmul --epilogue bias
// --shape 47x33 --shape 33x65 --save DIR` writes them.
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
module {
  func.func private @linear_matmul(%a: memref<47x33xf32>, %b: memref<33x65xf32>, %bias: memref<65xf32>,
                                   %y: memref<47x65xf32> {bufferize.result}) attributes {mlpipe.fusion = "matmul"} {
    %zero = arith.constant 0.0 : f32
    linalg.fill ins(%zero : f32) outs(%y : memref<47x65xf32>)
    linalg.matmul ins(%a, %b : memref<47x33xf32>, memref<33x65xf32>) outs(%y : memref<47x65xf32>)
    linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
        ins(%y, %bias : memref<47x65xf32>, memref<65xf32>) outs(%y : memref<47x65xf32>) {
    ^bb0(%p: f32, %c: f32, %out: f32):
      %s = arith.addf %p, %c : f32
      linalg.yield %s : f32
    }
    return
  }
  func.func @matmul(%a: memref<47x33xf32> {mlpipe.name = "a"}, %b: memref<33x65xf32> {mlpipe.name = "b"},
                    %bias: memref<65xf32> {mlpipe.name = "bias"},
                    %y: memref<47x65xf32> {bufferize.result, mlpipe.name = "y"})
      attributes {llvm.emit_c_interface,
                  mlpipe.inputs = [{name = "a", type = tensor<47x33xf32>}, {name = "b", type = tensor<33x65xf32>},
                                   {name = "bias", type = tensor<65xf32>}],
                  mlpipe.outputs = [{name = "y", type = tensor<47x65xf32>}]} {
    call @linear_matmul(%a, %b, %bias, %y) : (memref<47x33xf32>, memref<33x65xf32>, memref<65xf32>, memref<47x65xf32>) -> ()
    return
  }
}
