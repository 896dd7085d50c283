// y = a @ b in bf16 (a 200x300, b 300x100), y in f32: a matmul left in host
// code for mlpipe-generated-matmuls, so that its options (a forced tile of
// the tensor-core form) apply.
func.func @matmul(%a: memref<200x300xbf16> {mlpipe.name = "a"}, %b: memref<300x100xbf16> {mlpipe.name = "b"},
                  %y: memref<200x100xf32> {bufferize.result, mlpipe.name = "y"})
    attributes {llvm.emit_c_interface,
                mlpipe.inputs = [{name = "a", type = tensor<200x300xbf16>}, {name = "b", type = tensor<300x100xbf16>}],
                mlpipe.outputs = [{name = "y", type = tensor<200x100xf32>}]} {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%y : memref<200x100xf32>)
  linalg.matmul ins(%a, %b : memref<200x300xbf16>, memref<300x100xbf16>) outs(%y : memref<200x100xf32>)
  return
}
