// RUN: mlpipe-opt %s -split-input-file --mlpipe-elide-storage-roundings | FileCheck %s

#id = affine_map<(d0) -> (d0)>

// A fused tanh(x) * x in bf16: the tanh's rounding and its widening go, the
// result is rounded once.
// CHECK-LABEL: func.func @fused_chain
// CHECK: %[[X:.*]] = arith.extf %in : bf16 to f32
// CHECK-NEXT: %[[T:.*]] = math.tanh %[[X]] : f32
// CHECK-NEXT: %[[M:.*]] = arith.mulf %[[T]], %[[X]] : f32
// CHECK-NEXT: %[[R:.*]] = arith.truncf %[[M]] {mlpipe.storage_rounding} : f32 to bf16
// CHECK-NEXT: linalg.yield %[[R]] : bf16
func.func @fused_chain(%x: tensor<8xbf16>) -> tensor<8xbf16> {
  %e = tensor.empty() : tensor<8xbf16>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<8xbf16>) outs(%e : tensor<8xbf16>) {
  ^bb0(%in: bf16, %out: bf16):
    %0 = arith.extf %in : bf16 to f32
    %1 = math.tanh %0 : f32
    %2 = arith.truncf %1 {mlpipe.storage_rounding} : f32 to bf16
    %3 = arith.extf %2 : bf16 to f32
    %4 = arith.mulf %3, %0 : f32
    %5 = arith.truncf %4 {mlpipe.storage_rounding} : f32 to bf16
    linalg.yield %5 : bf16
  } -> tensor<8xbf16>
  return %y : tensor<8xbf16>
}

// -----

#id = affine_map<(d0) -> (d0)>

// A convert the program asks for (f32 -> bf16 -> f32) is not marked and
// keeps its rounding.
// CHECK-LABEL: func.func @explicit_convert
// CHECK: %[[R:.*]] = arith.truncf %in : f32 to bf16
// CHECK-NEXT: %[[W:.*]] = arith.extf %[[R]] : bf16 to f32
// CHECK-NEXT: linalg.yield %[[W]] : f32
func.func @explicit_convert(%x: tensor<8xf32>) -> tensor<8xf32> {
  %e = tensor.empty() : tensor<8xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.truncf %in : f32 to bf16
    %1 = arith.extf %0 : bf16 to f32
    linalg.yield %1 : f32
  } -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

#id = affine_map<(d0) -> (d0)>

// A rounding that is also yielded (the value is stored in bf16 and used
// again in f32) stays for the store; only the widening goes.
// CHECK-LABEL: func.func @stored_and_reused
// CHECK: %[[E:.*]] = math.exp
// CHECK-NEXT: %[[R:.*]] = arith.truncf %[[E]] {mlpipe.storage_rounding} : f32 to f16
// CHECK-NEXT: %[[A:.*]] = arith.addf %[[E]], %[[E]] : f32
// CHECK-NEXT: %[[S:.*]] = arith.truncf %[[A]] {mlpipe.storage_rounding} : f32 to f16
// CHECK-NEXT: linalg.yield %[[R]], %[[S]] : f16, f16
func.func @stored_and_reused(%x: tensor<8xf16>) -> (tensor<8xf16>, tensor<8xf16>) {
  %e = tensor.empty() : tensor<8xf16>
  %y:2 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<8xf16>) outs(%e, %e : tensor<8xf16>, tensor<8xf16>) {
  ^bb0(%in: f16, %o1: f16, %o2: f16):
    %0 = arith.extf %in : f16 to f32
    %1 = math.exp %0 : f32
    %2 = arith.truncf %1 {mlpipe.storage_rounding} : f32 to f16
    %3 = arith.extf %2 : f16 to f32
    %4 = arith.addf %3, %3 : f32
    %5 = arith.truncf %4 {mlpipe.storage_rounding} : f32 to f16
    linalg.yield %2, %5 : f16, f16
  } -> (tensor<8xf16>, tensor<8xf16>)
  return %y#0, %y#1 : tensor<8xf16>, tensor<8xf16>
}

// -----

#id = affine_map<(d0) -> (d0)>

// f64 -> f32 -> f64 is not a 16-bit storage rounding's pair of types.
// CHECK-LABEL: func.func @other_widths
// CHECK: arith.truncf %[[V:.*]] {mlpipe.storage_rounding} : f32 to bf16
// CHECK-NEXT: arith.extf {{.*}} : bf16 to f64
func.func @other_widths(%x: tensor<8xf32>) -> tensor<8xf64> {
  %e = tensor.empty() : tensor<8xf64>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<8xf32>) outs(%e : tensor<8xf64>) {
  ^bb0(%in: f32, %out: f64):
    %0 = arith.truncf %in {mlpipe.storage_rounding} : f32 to bf16
    %1 = arith.extf %0 : bf16 to f64
    linalg.yield %1 : f64
  } -> tensor<8xf64>
  return %y : tensor<8xf64>
}
