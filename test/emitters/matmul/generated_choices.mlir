// The choices for GPT-2's products on an H200 (sm_90: 132 SMs) and on a T4
// (sm_75: 40 SMs), as --debug-only=mlpipe-emitters prints them, and the
// refusals of bad options.
// RUN: mlpipe-opt %s --mlpipe-generated-matmuls --debug-only=mlpipe-emitters -o /dev/null 2>&1 | FileCheck %s --check-prefix=SM90
// RUN: mlpipe-opt %s --mlpipe-generated-matmuls=chip=sm_75 --debug-only=mlpipe-emitters -o /dev/null 2>&1 | FileCheck %s --check-prefix=SM75
// RUN: not mlpipe-opt %s --mlpipe-generated-matmuls="block-tile=128,128,8 thread-tile=5,5" -o /dev/null 2>&1 | FileCheck %s --check-prefix=THREAD-TILE
// RUN: not mlpipe-opt %s --mlpipe-generated-matmuls="block-tile=128,128" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BLOCK-TILE
// RUN: not mlpipe-opt %s --mlpipe-generated-matmuls="block-tile=2048,2048,8" -o /dev/null 2>&1 | FileCheck %s --check-prefix=TOO-BIG
// RUN: not mlpipe-opt %s --mlpipe-generated-matmuls="form=skinny" -o /dev/null 2>&1 | FileCheck %s --check-prefix=SKINNY
// RUN: not mlpipe-opt %s --mlpipe-generated-matmuls="form=wide" -o /dev/null 2>&1 | FileCheck %s --check-prefix=FORM
// RUN: not mlpipe-opt %s --mlpipe-generated-matmuls="chip=sm_1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=CHIP
// RUN: not mlpipe-opt %s --mlpipe-generated-matmuls="test-epilogue=relu" -o /dev/null 2>&1 | FileCheck %s --check-prefix=EPILOGUE

// THREAD-TILE: error: generated matmul: the thread tile must be 4 or 8 in each dimension
// BLOCK-TILE: error: mlpipe-generated-matmuls: block-tile takes M,N,K
// TOO-BIG: error: generated matmul: the block tile over the thread tile must give a whole number of warps, at most 1024 threads
// SKINNY: error: generated matmul: the skinny form needs B's rows contiguous
// FORM: error: generated matmul: the form must be auto, tiled, skinny, row_dot, tensor_core or warpgroup, not 'wide'
// CHIP: error: mlpipe-generated-matmuls: no device description for chip 'sm_1'
// EPILOGUE: error: mlpipe-generated-matmuls: unknown test-epilogue 'relu'

// The tied logits: 128x128 tiles, B (wte^T) read along K; N = 50257 is odd,
// so C takes scalar stores. M tiles run fastest, so the 8 blocks of a
// column tile are adjacent and wte comes from HBM once.
// SM90: logits_matmul: generated matmul 1x1024x50257x768 (batch x M x N x K), tiled 128x128x8, thread tile 8x8, 256 threads, split-K 1 (768 rows each), A vectors 4 along K, B vectors 4 along K, C vectors 1, grid (8, 393, 1) with M tiles fastest
// 192 tiles of 128x128 would leave 60 of 132 SMs with a second block: 128x64.
// SM90: attention_in_fc_matmul: generated matmul 1x1024x3072x768 (batch x M x N x K), tiled 128x64x8, thread tile 8x4, 256 threads, split-K 1
// 48 tiles of 128x128 for 132 SMs: smaller tiles, and K split in two.
// SM90: fc_proj_matmul: generated matmul 1x1024x768x3072 (batch x M x N x K), tiled 64x64x8, thread tile 8x4, 128 threads, split-K 2 (1536 rows each)
// SM90: decode_fc_matmul: generated matmul 1x16x3072x768 (batch x M x N x K), skinny form: 16 rows x 128 columns per block (32 lanes per B row segment, kSkinnyMinSegmentBytes), 256 threads, B vectors 4 along N, split-K 6 (128 rows each, 4 in flight per thread), C vectors, grid (24, 6, 1), 40960 B shared
// SM90: step_fc_matmul: generated matmul 1x1x3072x768 (batch x M x N x K), skinny form: 1 rows x 16 columns per block (4 lanes per B row segment, kSkinnyMinSegmentBytes), 256 threads, B vectors 4 along N, split-K 1 (768 rows each, {{[0-9]+}} in flight per thread), C vectors, grid (192, 1, 1)
// SM90: step_proj_matmul: generated matmul 1x1x768x3072 (batch x M x N x K), skinny form: 1 rows x 16 columns per block (4 lanes per B row segment, kSkinnyMinSegmentBytes), 256 threads, B vectors 4 along N, split-K 1 (3072 rows each, {{[0-9]+}} in flight per thread), C vectors, grid (48, 1, 1)
// SM90: attention_scores_batch_matmul: generated matmul 12x1024x1024x64 (batch x M x N x K), tiled 128x128x8, thread tile 8x8, 256 threads, split-K 1 (64 rows each), A vectors 4 along K, B vectors 4 along N, C vectors 4, grid (8, 8, 12)
// SM90: attention_values_batch_matmul: generated matmul 12x1024x64x1024 (batch x M x N x K), tiled 64x64x8, thread tile 8x4, 128 threads, split-K 2
// Decoding's logits read wte^T along K: the row-dot form streams wte's
// rows, two columns a group of 8 lanes.
// SM90: decode_logits_matmul: generated matmul 1x16x50257x768 (batch x M x N x K), row-dot form (B stored [N, K]): 2 columns per group of 8 lanes (32 sums a lane, kRowDotSums), 64 columns per block, vectors of 4 along K, 24 steps, 2 in flight, grid (786, 1, 1)

// A T4 has 40 SMs: 192 tiles of 128x128 are plenty.
// SM75: logits_matmul: {{.*}} tiled 128x128x8, thread tile 8x8
// SM75: attention_in_fc_matmul: {{.*}} tiled 128x128x8, thread tile 8x8, 256 threads, split-K 1
// SM75: fc_proj_matmul: {{.*}} tiled 128x128x8, thread tile 8x8, 256 threads, split-K 5
// SM75: decode_fc_matmul: {{.*}} skinny form: {{.*}} split-K 3 (256 rows each
// SM75: attention_scores_batch_matmul: {{.*}} tiled 128x128x8
// SM75: attention_values_batch_matmul: {{.*}} tiled 64x64x8, thread tile 8x4, 128 threads, split-K 1
// SM75: decode_logits_matmul: {{.*}} row-dot form (B stored [N, K]): 2 columns per group of 8 lanes

func.func @logits(%a: memref<1024x768xf32>, %wte: memref<50257x768xf32>, %c: memref<1024x50257xf32>) {
  %cst = arith.constant 0.0 : f32
  %b = memref.transpose %wte (d0, d1) -> (d1, d0) : memref<50257x768xf32> to memref<768x50257xf32, strided<[1, 768]>>
  linalg.fill ins(%cst : f32) outs(%c : memref<1024x50257xf32>)
  linalg.matmul ins(%a, %b : memref<1024x768xf32>, memref<768x50257xf32, strided<[1, 768]>>) outs(%c : memref<1024x50257xf32>)
  return
}

func.func @attention_in_fc(%a: memref<1024x768xf32>, %b: memref<768x3072xf32>, %c: memref<1024x3072xf32>) {
  %cst = arith.constant 0.0 : f32
  linalg.fill ins(%cst : f32) outs(%c : memref<1024x3072xf32>)
  linalg.matmul ins(%a, %b : memref<1024x768xf32>, memref<768x3072xf32>) outs(%c : memref<1024x3072xf32>)
  return
}

func.func @fc_proj(%a: memref<1024x3072xf32>, %b: memref<3072x768xf32>, %c: memref<1024x768xf32>) {
  %cst = arith.constant 0.0 : f32
  linalg.fill ins(%cst : f32) outs(%c : memref<1024x768xf32>)
  linalg.matmul ins(%a, %b : memref<1024x3072xf32>, memref<3072x768xf32>) outs(%c : memref<1024x768xf32>)
  return
}

func.func @decode_fc(%a: memref<16x768xf32>, %b: memref<768x3072xf32>, %c: memref<16x3072xf32>) {
  %cst = arith.constant 0.0 : f32
  linalg.fill ins(%cst : f32) outs(%c : memref<16x3072xf32>)
  linalg.matmul ins(%a, %b : memref<16x768xf32>, memref<768x3072xf32>) outs(%c : memref<16x3072xf32>)
  return
}

// One row (a decode step's GEMVs): narrower row segments instead of split-K,
// so each is one launch: c_fc (3072 columns) and c_proj (768 columns, K 3072).
func.func @step_fc(%a: memref<1x768xf32>, %b: memref<768x3072xf32>, %c: memref<1x3072xf32>) {
  %cst = arith.constant 0.0 : f32
  linalg.fill ins(%cst : f32) outs(%c : memref<1x3072xf32>)
  linalg.matmul ins(%a, %b : memref<1x768xf32>, memref<768x3072xf32>) outs(%c : memref<1x3072xf32>)
  return
}

func.func @step_proj(%a: memref<1x3072xf32>, %b: memref<3072x768xf32>, %c: memref<1x768xf32>) {
  %cst = arith.constant 0.0 : f32
  linalg.fill ins(%cst : f32) outs(%c : memref<1x768xf32>)
  linalg.matmul ins(%a, %b : memref<1x3072xf32>, memref<3072x768xf32>) outs(%c : memref<1x768xf32>)
  return
}

func.func @attention_scores(%a: memref<12x1024x64xf32>, %b: memref<12x64x1024xf32>, %c: memref<12x1024x1024xf32>) {
  %cst = arith.constant 0.0 : f32
  linalg.fill ins(%cst : f32) outs(%c : memref<12x1024x1024xf32>)
  linalg.batch_matmul ins(%a, %b : memref<12x1024x64xf32>, memref<12x64x1024xf32>) outs(%c : memref<12x1024x1024xf32>)
  return
}

func.func @attention_values(%a: memref<12x1024x1024xf32>, %b: memref<12x1024x64xf32>, %c: memref<12x1024x64xf32>) {
  %cst = arith.constant 0.0 : f32
  linalg.fill ins(%cst : f32) outs(%c : memref<12x1024x64xf32>)
  linalg.batch_matmul ins(%a, %b : memref<12x1024x1024xf32>, memref<12x1024x64xf32>) outs(%c : memref<12x1024x64xf32>)
  return
}

func.func @decode_logits(%a: memref<16x768xf32>, %wte: memref<50257x768xf32>, %c: memref<16x50257xf32>) {
  %cst = arith.constant 0.0 : f32
  %b = memref.transpose %wte (d0, d1) -> (d1, d0) : memref<50257x768xf32> to memref<768x50257xf32, strided<[1, 768]>>
  linalg.fill ins(%cst : f32) outs(%c : memref<16x50257xf32>)
  linalg.matmul ins(%a, %b : memref<16x768xf32>, memref<768x50257xf32, strided<[1, 768]>>) outs(%c : memref<16x50257xf32>)
  return
}
