// What ldmatrix.mlir's kernels compute: a copy, and a transpose.
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @copy(%in: memref<16x16xf16>, %out: memref<16x16xf16>) {
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%in : memref<16x16xf16>) outs(%out : memref<16x16xf16>) {
  ^bb0(%x: f16, %y: f16):
    linalg.yield %x : f16
  }
  return
}
func.func @transposed(%in: memref<16x16xf16>, %out: memref<16x16xf16>) {
  linalg.transpose ins(%in : memref<16x16xf16>) outs(%out : memref<16x16xf16>) permutation = [1, 0]
  return
}
