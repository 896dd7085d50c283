// A bf16 matmul fusion that no emitter takes whole, as GPT-2's tied logits
// are traced: B is a transposed copy of a [N, K] weight made inside the
// fusion, the product accumulates in f32 and is rounded to bf16 after.
// Emitted op by op, its matmul is read as stored (on tensor cores) where
// the chip has them, else widened to f32 first.
#id = affine_map<(d0, d1) -> (d0, d1)>
module {
  func.func private @logits_matmul(%h: memref<17x40xbf16>, %w: memref<24x40xbf16>, %y: memref<17x24xbf16>) attributes {mlpipe.fusion = "matmul"} {
    %zero = arith.constant 0.0 : f32
    %wT = memref.alloc() : memref<40x24xbf16>
    linalg.transpose ins(%w : memref<24x40xbf16>) outs(%wT : memref<40x24xbf16>) permutation = [1, 0]
    %acc = memref.alloc() : memref<17x24xf32>
    linalg.fill ins(%zero : f32) outs(%acc : memref<17x24xf32>)
    linalg.matmul ins(%h, %wT : memref<17x40xbf16>, memref<40x24xbf16>) outs(%acc : memref<17x24xf32>)
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
        ins(%acc : memref<17x24xf32>) outs(%y : memref<17x24xbf16>) {
    ^bb0(%in: f32, %out: bf16):
      %r = arith.truncf %in : f32 to bf16
      linalg.yield %r : bf16
    }
    memref.dealloc %acc : memref<17x24xf32>
    memref.dealloc %wT : memref<40x24xbf16>
    return
  }
  func.func @logits(%h: memref<17x40xbf16>, %w: memref<24x40xbf16>, %y: memref<17x24xbf16>) {
    call @logits_matmul(%h, %w, %y) : (memref<17x40xbf16>, memref<24x40xbf16>, memref<17x24xbf16>) -> ()
    return
  }
}
