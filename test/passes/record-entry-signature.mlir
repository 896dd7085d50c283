// RUN: mlpipe-opt %s -split-input-file -verify-diagnostics --mlpipe-record-entry-signature | FileCheck %s

// An entry's argument types are recorded; a function without a signature
// is left alone.
// CHECK-LABEL: func.func @gelu(
// CHECK-SAME: mlpipe.argument_types = [memref<64x256xf32>, memref<64x256xf32>]
// CHECK-LABEL: func.func private @helper(
// CHECK-NOT: mlpipe.argument_types
func.func @gelu(%x: memref<64x256xf32>, %y: memref<64x256xf32>) attributes {
    mlpipe.inputs = [{name = "x", type = tensor<64x256xf32>}], mlpipe.outputs = [{name = "y", type = tensor<64x256xf32>}]} {
  return
}
func.func private @helper(%x: memref<4xf32>) {
  return
}

// -----

// The arena is the one argument beyond the signature's buffers.
// CHECK-LABEL: func.func @planned(
// CHECK-SAME: mlpipe.argument_types = [memref<8xf32>, memref<8xf32>, memref<256xi8>]
func.func @planned(%x: memref<8xf32>, %y: memref<8xf32>, %arena: memref<256xi8>) attributes {
    mlpipe.arena = {allocated_at_run_time = 0 : i64, buffers = 1 : i64, bytes = 256 : i64, peak_live_bytes = 256 : i64, unplanned_bytes = 256 : i64},
    mlpipe.inputs = [{name = "x", type = tensor<8xf32>}], mlpipe.outputs = [{name = "y", type = tensor<8xf32>}]} {
  return
}

// -----

// expected-error @+1 {{@shrunk declares 'y' in mlpipe.outputs as tensor<1xf32>, but its argument 1 is memref<64x256xf32>}}
func.func @shrunk(%x: memref<64x256xf32>, %y: memref<64x256xf32>) attributes {
    mlpipe.inputs = [{name = "x", type = tensor<64x256xf32>}], mlpipe.outputs = [{name = "y", type = tensor<1xf32>}]} {
  return
}

// -----

// expected-error @+1 {{@extra takes 3 arguments, but its mlpipe.inputs and mlpipe.outputs declare 2 buffers}}
func.func @extra(%x: memref<4xf32>, %y: memref<4xf32>, %z: memref<4xf32>) attributes {
    mlpipe.inputs = [{name = "x", type = tensor<4xf32>}], mlpipe.outputs = [{name = "y", type = tensor<4xf32>}]} {
  return
}

// -----

// expected-error @+1 {{@typed declares 'x' in mlpipe.inputs as tensor<4xf32>, but its argument 0 is memref<4xf64>}}
func.func @typed(%x: memref<4xf64>, %y: memref<4xf32>) attributes {
    mlpipe.inputs = [{name = "x", type = tensor<4xf32>}], mlpipe.outputs = [{name = "y", type = tensor<4xf32>}]} {
  return
}
