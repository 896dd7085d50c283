func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {llvm.emit_c_interface, mlpipe.inputs = [{name = "x", type = tensor<4xf32>}], mlpipe.outputs = [{name = "y", type = tensor<4xf32>}]} {
  %0 = math.tanh %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}
