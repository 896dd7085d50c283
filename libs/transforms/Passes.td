//===- transforms/Passes.td ---------------------------------------------===//
//
// mlpipe's transforms passes: the host, buffer and kernel passes around the emitters: bufferization helpers, the buffer plan, kernel merging, costs, launch order and assembly. Each with its summary, a
// before/after description, its options and the dialects it creates.
// mlir-tblgen turns this file into transforms/Passes.h.inc; each pass file
// includes its GEN_PASS_DEF_ section, and compiler/'s registration calls
// registerTransformsPasses() so that the text pipelines in pipelines/ and
// mlpipe-opt can name them like any MLIR pass.
//
//===----------------------------------------------------------------------===//

#ifndef MLPIPE_TRANSFORMS_PASSES
#define MLPIPE_TRANSFORMS_PASSES

include "mlir/Pass/PassBase.td"

def FillPerUsePass : Pass<"mlpipe-fill-per-use", "mlir::func::FuncOp"> {
  let summary = "Give every use of a tensor linalg.fill its own fill";
  let description = [{
    cse merges equal fills, so two matmuls of one shape end up accumulating
    into one zero-filled tensor; bufferization must then copy it for the first
    matmul to keep it for the second. Refilling is cheaper than copying:

    ```mlir
    %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x64x64xf32>) -> tensor<2x64x64xf32>
    %a = linalg.batch_matmul ins(...) outs(%z : ...)
    %b = linalg.batch_matmul ins(...) outs(%z : ...)
    ```
    becomes
    ```mlir
    %z = linalg.fill ins(%zero : f32) outs(%e : ...) -> ...
    %a = linalg.batch_matmul ins(...) outs(%z : ...)
    %z2 = linalg.fill ins(%zero : f32) outs(%e : ...) -> ...
    %b = linalg.batch_matmul ins(...) outs(%z2 : ...)
    ```
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect"];
}

def DropInoutResultsPass : Pass<"mlpipe-drop-inout-results", "mlir::ModuleOp"> {
  let summary = "Drop the results that carry an in-out input's in-place update";
  let description = [{
    The front end returns the new value of an in-out input (a KV cache the
    function writes in place) as a result marked `mlpipe.updates`, only so
    that the writes are not dead code. After one-shot bufferization, such a
    result must be the input's own buffer — the writes went into the
    caller's memory — and is dropped; if bufferization had to copy instead,
    this pass fails, naming the input, rather than lose the update.

    ```mlir
    func.func @decode(%cache: memref<2x8x4xf32> {mlpipe.name = "kv_cache"}, ...)
        -> (memref<1x50xf32>, memref<2x8x4xf32> {mlpipe.updates = "kv_cache"}) {
      ... memref.copy %row, %subview_of_cache ...
      return %logits, %cache : memref<1x50xf32>, memref<2x8x4xf32>
    }
    ```
    becomes
    ```mlir
    func.func @decode(%cache: memref<2x8x4xf32> {mlpipe.name = "kv_cache"}, ...) -> memref<1x50xf32> {
      ... memref.copy %row, %subview_of_cache ...
      return %logits : memref<1x50xf32>
    }
    ```
  }];
}

def ElideResultCopiesPass : Pass<"mlpipe-elide-result-copies", "mlir::func::FuncOp"> {
  let summary = "Write results straight into their out-parameters instead of copying them there";
  let description = [{
    After buffer-results-to-out-params, a function whose result came from a
    call (a fusion) allocates a buffer for the call and copies it into the
    out-parameter at the end. When nothing else touches the out-parameter,
    the call writes into it directly and the copy (a kernel, on the GPU)
    goes:

    ```mlir
    func.func @gelu(%x: memref<64x256xf32>, %y: memref<64x256xf32>) {
      %alloc = memref.alloc() : memref<64x256xf32>
      call @gelu_loop(%x, %alloc) : (...) -> ()
      memref.copy %alloc, %y : memref<64x256xf32> to memref<64x256xf32>
      memref.dealloc %alloc : memref<64x256xf32>
      return
    }
    ```
    becomes
    ```mlir
    func.func @gelu(%x: memref<64x256xf32>, %y: memref<64x256xf32>) {
      call @gelu_loop(%x, %y) : (...) -> ()
      return
    }
    ```
    A temporary seen through a reshape (`memref.expand_shape` or
    `memref.collapse_shape`, as a fusion that reshapes its result leaves it)
    goes the same way: the writer gets the out-parameter through the
    inverse reshape.
  }];
}

def CopiesAsLinalgPass : Pass<"mlpipe-copies-as-linalg", "mlir::func::FuncOp"> {
  let summary = "Turn memref.copy into linalg.copy";
  let description = [{
    memref.copy becomes linalg.copy, so that the kernel pipeline turns copies
    (bufferization inserts them, e.g. when a result is an input) into GPU
    kernels instead of host loops.

    ```mlir
    memref.copy %src, %dst : memref<4x8xf32> to memref<4x8xf32>
    ```
    becomes
    ```mlir
    linalg.copy ins(%src : memref<4x8xf32>) outs(%dst : memref<4x8xf32>)
    ```
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect"];
}

def BufferPlanPass : Pass<"mlpipe-buffer-plan", "mlir::ModuleOp"> {
  let summary = "Give every host temporary of an entry function an offset in one arena planned from lifetimes";
  let description = [{
    The host's temporaries become views of one arena, a trailing argument of
    the entry function that the runtime allocates once per compiled module
    and shape, in device memory, and reuses on every call; no memory is
    allocated or freed while the function runs. As XLA's buffer assignment
    does, each temporary's lifetime runs from its allocation to the last use
    of it or of any view of it (in the order of the function's body), and
    temporaries whose lifetimes do not overlap share bytes: greedy by size,
    each at the lowest offset free for its whole lifetime, every offset a
    multiple of `alignment` (so kernels may use 128-bit vector accesses).

    ```mlir
    func.func @f(%x: memref<64xf32>, %y: memref<64xf32>) attributes {mlpipe.inputs = [...]} {
      %a = memref.alloc() : memref<64xf32>
      gpu.launch_func @k::@k ... args(%x : memref<64xf32>, %a : memref<64xf32>)
      %b = memref.alloc() : memref<64xf32>
      gpu.launch_func @k::@k ... args(%a : memref<64xf32>, %b : memref<64xf32>)
      memref.dealloc %a : memref<64xf32>
      gpu.launch_func @k::@k ... args(%b : memref<64xf32>, %y : memref<64xf32>)
      memref.dealloc %b : memref<64xf32>
      return
    }
    ```
    becomes
    ```mlir
    func.func @f(%x: memref<64xf32>, %y: memref<64xf32>, %arena: memref<512xi8> {mlpipe.arena})
        attributes {mlpipe.arena = {alignment = 256, allocated_at_run_time = 0, buffers = 2, bytes = 512,
                                    peak_live_bytes = 512, unplanned_bytes = 512}, mlpipe.inputs = [...]} {
      %c0 = arith.constant 0 : index
      %a = memref.view %arena[%c0][] : memref<512xi8> to memref<64xf32>
      ...
      %c256 = arith.constant 256 : index
      %b = memref.view %arena[%c256][] : memref<512xi8> to memref<64xf32>
      ...
    }
    ```

    The function attribute `mlpipe.arena` tells the runtime the arena's size
    (`bytes`; no argument is added when it is 0) and, for `bench`, what
    separate allocations would take (`unplanned_bytes`) and the most bytes
    live at once (`peak_live_bytes`, a bound no plan can beat). Temporaries
    that cannot be planned (in a function that is not an entry, allocated
    inside a region, dynamically shaped, returned) are allocated in device
    memory at run time instead, and counted in `allocated_at_run_time`; a
    loop's buffers are, and so every `memref.dealloc` left in host code
    (one of a buffer a loop allocated, through the loop's values) becomes
    `gpu.dealloc`.
    `--debug-only=mlpipe-buffer-plan` prints every plan.
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t", /*default=*/"256",
           "Every offset in the arena is a multiple of this many bytes">,
  ];
  let dependentDialects = ["mlir::memref::MemRefDialect", "mlir::arith::ArithDialect", "mlir::gpu::GPUDialect"];
}

def HostLoopsPass : Pass<"mlpipe-host-loops", "mlir::ModuleOp"> {
  let summary = "Run loops on the host: read each condition back from the device, keep pointer lists on the host";
  let description = [{
    A loop whose trip count is known only at run time (an HLO `while`
    trace did not unroll) stays on the host as `scf.while`: its condition
    and body launch kernels, and the flag the condition's kernel writes
    lives in device memory, where the host cannot load it. Each host
    `memref.load` of a one-element device buffer becomes a copy of that
    element into host memory on the stream, a wait for the stream, and a
    load from the copy (a `memref.alloca` at the function's start, so that
    trips do not grow the stack):

    ```mlir
    %w:2 = scf.while (%a = %x, %b = %y) : (memref<16xf32>, memref<16xf32>) -> (...) {
      %flag = memref.alloc() : memref<i1>
      gpu.launch_func @k::@cond ... args(%a : memref<16xf32>, %flag : memref<i1>)
      %c = memref.load %flag[] : memref<i1>
      scf.condition(%c) %a, %b : memref<16xf32>, memref<16xf32>
    } do { ... }
    ```
    becomes
    ```mlir
    %host = memref.alloca() : memref<i1>
    %w:2 = scf.while (%a = %x, %b = %y) : (memref<16xf32>, memref<16xf32>) -> (...) {
      %flag = memref.alloc() : memref<i1>
      gpu.launch_func @k::@cond ... args(%a : memref<16xf32>, %flag : memref<i1>)
      %t0 = gpu.wait async
      %t1 = gpu.memcpy async [%t0] %host, %flag : memref<i1>, memref<i1>
      gpu.wait [%t1]
      %c = memref.load %host[] : memref<i1>
      scf.condition(%c) %a, %b : memref<16xf32>, memref<16xf32>
    } do { ... }
    ```

    Bufferization's ownership-based deallocation frees a loop's buffers
    after checking at run time which of them alias (`dealloc_helper`
    compares their pointers): the lists of pointers and flags it hands that
    helper are written by the host, so they become host buffers
    (`memref.alloca` at the function's start, their deallocs gone) rather
    than device memory. mlpipe-buffer-plan then frees in device memory
    what the loops allocate.

    A function with loops is marked `mlpipe.host_loops` (how many): the
    host decides each trip, so `run` and `verify` launch it directly and
    never capture it as a CUDA graph (a graph would replay one trip count).
    A host load of a device buffer of more than one element is refused.

    A kernel launch's arguments go on the stack where it is launched, so
    each region of a loop that launches kernels saves the stack pointer on
    entry and restores it before its terminator: a loop of 100,000 trips
    would otherwise grow the stack by its launches' arguments every trip
    until it overflows.

    ```mlir
    scf.while (...) {
      %sp = llvm.intr.stacksave : !llvm.ptr
      gpu.launch_func @k::@cond ...
      ...
      llvm.intr.stackrestore %sp : !llvm.ptr
      scf.condition(%c) %a, %b : memref<16xf32>, memref<16xf32>
    } do { ... }
    ```
  }];
  let dependentDialects = ["mlir::memref::MemRefDialect", "mlir::gpu::GPUDialect", "mlir::LLVM::LLVMDialect"];
}

def RecordEntrySignaturePass : Pass<"mlpipe-record-entry-signature", "mlir::ModuleOp"> {
  let summary = "Record each entry's argument types before lowering erases them, checked against its signature";
  let description = [{
    `run` binds `.npy` files to an entry's buffers by the `mlpipe.inputs`
    and `mlpipe.outputs` attributes trace wrote, and sizes each buffer from
    them. Lowering to LLVM expands every memref into a descriptor and keeps
    no shape, so before it this pass checks that those attributes describe
    the function's arguments exactly (inputs, then outputs, then the arena
    when the entry has one) and records the argument types as
    `mlpipe.argument_types`, which the runtime checks the attributes
    against again before it runs the lowered entry. A function whose
    attributes disagree with its arguments is an error here.

    ```mlir
    func.func @gelu(%x: memref<64x256xf32>, %y: memref<64x256xf32>) attributes {
        mlpipe.inputs = [{name = "x", type = tensor<64x256xf32>} ],
        mlpipe.outputs = [{name = "y", type = tensor<64x256xf32>} ]} { ... }
    ```
    gains
    ```mlir
        mlpipe.argument_types = [memref<64x256xf32>, memref<64x256xf32>]
    ```
    while `mlpipe.outputs = [{name = "y", type = tensor<1xf32>} ]` is refused:
    "@gelu declares 'y' in mlpipe.outputs as tensor<1xf32>, but its argument
    1 is memref<64x256xf32>".
  }];
}

def MergeIdenticalKernelsPass : Pass<"mlpipe-merge-identical-kernels", "mlir::ModuleOp"> {
  let summary = "Merge gpu.modules that are equal but for their names";
  let description = [{
    Kernels that are structurally identical (the twelve blocks of GPT-2
    launch the same kernels on different weights) are compiled, assembled
    and loaded once: launches of a duplicate module launch the first one
    instead, and the duplicate goes. Two modules are equal when their text,
    printed under one fixed name, is.

    ```mlir
    gpu.launch_func @block_kernel::@block_kernel ... args(%w0 : memref<768xf32>, ...)
    gpu.launch_func @block_kernel_0::@block_kernel ... args(%w1 : memref<768xf32>, ...)
    gpu.module @block_kernel { gpu.func @block_kernel(...) kernel { BODY } }
    gpu.module @block_kernel_0 { gpu.func @block_kernel(...) kernel { BODY } }
    ```
    becomes
    ```mlir
    gpu.launch_func @block_kernel::@block_kernel ... args(%w0 : memref<768xf32>, ...)
    gpu.launch_func @block_kernel::@block_kernel ... args(%w1 : memref<768xf32>, ...)
    gpu.module @block_kernel { gpu.func @block_kernel(...) kernel { BODY } }
    ```
  }];
}

def ProgrammaticLaunchPass : Pass<"mlpipe-programmatic-launch", "mlir::ModuleOp"> {
  let summary = "Let each kernel's launch overlap the end of the kernel before it (sm_90 and later)";
  let description = [{
    A launch that waits for the kernel before it to finish and only then
    starts costs a microsecond or two of an idle GPU, which a decode step of
    a hundred small kernels pays a hundred times. On chips with programmatic
    dependent launch (sm_90 and later, `programmaticDependentLaunch` in the
    device description of `chip`), every kernel

      - waits, before touching memory, until the kernel before it has
        finished and its writes are visible (`griddepcontrol.wait`);
      - then lets the kernel after it be scheduled
        (`griddepcontrol.launch_dependents`), so that kernel's blocks are
        resident, waiting, when this one ends.

    A kernel whose emitter already waits, after work that neither reads nor
    writes a value (the skinny matmul brings its slice of B into L2 first),
    keeps its own wait, and the next kernel is let go right after it.

    Letting the next kernel go only after the wait keeps one kernel waiting
    ahead at most;
    letting it go first thing let a whole chain of small kernels become
    resident at once, each waiting on the one before, and made a GPT-2
    decode step slower, not faster. A kernel launched without the attribute
    returns from the wait at once. Each module gets a marker global,
    `mlpipe_programmatic_launch`, that tells the runtime its kernels may be
    launched with CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION. On
    older chips nothing is added, and a kernel's own wait goes, with the L2
    prefetches before it (a module outlined for a later chip): LLVM selects
    neither there. A module holding a kernel marked
    `mlpipe.launch_after_predecessor` (blocks of unequal work, longest first:
    causal attention's query tiles) is left as it is, so that kernel starts
    only once the one before it has finished and the block scheduler deals
    its longest blocks over every SM; launched early they stacked on the SMs
    the kernel before freed first. `--debug-only=mlpipe-launch` prints the
    choice.

    ```mlir
    gpu.module @gelu_kernel {
      gpu.func @gelu_kernel(%x: memref<64xf32>, %y: memref<64xf32>) kernel { BODY }
    }
    ```
    becomes, for sm_90,
    ```mlir
    gpu.module @gelu_kernel {
      llvm.mlir.global external constant @mlpipe_programmatic_launch(1 : i8) : i8
      gpu.func @gelu_kernel(%x: memref<64xf32>, %y: memref<64xf32>) kernel {
        nvvm.griddepcontrol wait
        nvvm.griddepcontrol launch_dependents
        BODY
      }
    }
    ```
  }];
  let options = [
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90\"",
           "The chip the kernels are compiled for (sm_90 and later launch programmatically)">,
  ];
  let dependentDialects = ["mlir::NVVM::NVVMDialect", "mlir::LLVM::LLVMDialect"];
}

def KernelCostsPass : Pass<"mlpipe-kernel-costs", "mlir::ModuleOp"> {
  let summary = "Record each kernel's bytes moved and flops on the module, for the runtime's profiler";
  let description = [{
    Before the kernels are serialised, each kernel's cost goes into one
    module attribute the runtime reads after lowering: the bytes it reads
    plus writes per launch and its floating-point operations, from the
    emitters' `mlpipe.bytes` and `mlpipe.flops` on the gpu.func. Without
    `mlpipe.bytes` the bytes are -1: the runtime's profiler then counts the
    extent of every memref argument of each launch, whose ranks and element
    sizes `args` lists (rank -1 for a scalar argument). The table is keyed
    by kernel name, as the runtime sees launches, so a kernel name that
    several modules share is replaced by its module's name.

    ```mlir
    gpu.module @gelu_kernel {
      gpu.func @gelu_kernel(%n: index, %x: memref<64x256xf32>, %y: memref<64x256xf32>) kernel
          attributes {mlpipe.bytes = 131072 : i64, mlpipe.flops = 0 : i64} { ... }
    }
    ```
    adds to the module
    ```mlir
    module attributes {mlpipe.kernels = {gelu_kernel = {args = [-1, 0, 2, 4, 2, 4], bytes = 131072 : i64,
                                                        flops = 0 : i64}}}
    ```
  }];
}

def SixteenBitFastMathPass : Pass<"mlpipe-sixteen-bit-fast-math", "mlir::gpu::GPUModuleOp"> {
  let summary = "In kernels that store only 16-bit floats, compute f32 math to the precision the rounding keeps";
  let description = [{
    A kernel on bf16 or f16 data computes in f32 registers and rounds each
    result once, to 8 (bf16) or 11 (f16) significant bits. libdevice's
    accurate f32 functions then cost issue slots that show in nothing the
    kernel stores, and with 16-bit data a 16-byte load brings twice the
    values to compute as in f32: the bf16 GELU unit kernel had its issue
    slots 78% busy and took 1.13x a copy of its bytes (libdevice's tanhf,
    about 20 instructions a value), softmax and layer norm 1.25x (an
    IEEE division, about 10 instructions, and expf, about 8, a value).

    In a kernel whose floating-point memref arguments are all 16-bit or
    narrower (kFastMathMaxStorageBits), on f32 values:

      - `1 + tanh(u)` (GELU's tanh form; the tanh's one use) becomes
        `2 / (1 + exp2(-2u / ln 2))`, an identity with no cancellation
        (tanh near -1 gives 2 / (a large number));
      - `math.exp x` becomes `math.exp2 (x * log2 e)` (`ex2.approx`);
      - every `arith.divf` is marked `afn` (an approximate reciprocal and a
        multiply);
      - with `contract=true` (off by default), every `arith.mulf`,
        `arith.addf` and `arith.subf` is marked `contract`, so that a
        multiply feeding an add becomes one fused multiply-add (one rounding
        instead of two). Without the flag the kernels have no FFMA at all
        (the tensor-core attention's weights, exp2(logit log2 e - m log2 e),
        take a multiply and an add each), but fusing them gained nothing
        measurable (H200, 2026-12-05, `bench/scripts/check-contract.sh`, two
        rounds alternated): the attention at T=1024 19.4 us against
        18.8-19.4, the bf16 forward at T=1024 0.966-0.980 ms against
        0.969-0.980, layer norm 14.97 against 15.09-15.10 us, GELU, softmax
        and the column sum unchanged. So results keep their bits.

    Each adds an error of a few units in f32's last place (2^-22 or so),
    far below the rounding to 16 bits (2^-8, 2^-11) and the verify bound
    (4 u). Kernels that store f32 or f64 are left as they are, bit for bit.

    ```mlir
    %t = math.tanh %u : f32
    %s = arith.addf %t, %one : f32          // %one = arith.constant 1.0
    %e = math.exp %x : f32
    %y = arith.divf %e, %l : f32
    ```
    becomes
    ```mlir
    %m = arith.mulf %u, %minus_two_over_ln2 : f32
    %p = math.exp2 %m : f32
    %d = arith.addf %p, %one : f32
    %s = arith.divf %two, %d fastmath<afn> : f32
    %xl = arith.mulf %x, %log2e : f32
    %e = math.exp2 %xl : f32
    %y = arith.divf %e, %l fastmath<afn> : f32
    ```
    `--debug-only=mlpipe-fast-math` prints each kernel's counts.
  }];
  let options = [
    Option<"contract", "contract", "bool", /*default=*/"false",
           "Mark f32 multiplies, adds and subtractions contractible into fused multiply-adds">,
  ];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::math::MathDialect"];
}

def AssembleKernelsPass : Pass<"mlpipe-assemble-kernels", "mlir::ModuleOp"> {
  let summary = "Assemble every kernel's PTX to cubin with ptxas, in parallel, each distinct PTX once, cached on disk";
  let description = [{
    gpu-module-to-binary leaves PTX, which the driver would assemble on every
    load. Here each distinct PTX text is assembled once by the toolkit's
    ptxas for the chip, several at a time (`jobs`, default one per core),
    and kept in `cache-dir` under a hash of the PTX, the chip, the
    optimisation level, the format and ptxas's version, so an unchanged
    kernel is never assembled twice. Each object becomes its cubin (or, for
    `format=fatbin`, a fatbin holding the cubin and the PTX); the PTX stays in
    the object's properties as `mlpipe.ptx`, so ptx-check reads it. With
    `format=isa` nothing changes. PTX calling a libdevice function it does
    not define is refused, naming the function.

    ```mlir
    gpu.binary @gelu_kernel [#gpu.object<#nvvm.target<O = 3, chip = "sm_90">, assembly = ".version 7.8 ...">]
    ```
    becomes
    ```mlir
    gpu.binary @gelu_kernel [#gpu.object<#nvvm.target<O = 3, chip = "sm_90">,
        properties = {mlpipe.ptx = ".version 7.8 ..."}, bin = "\7FELF...">]
    ```
    `--debug-only=mlpipe-ptxas` says how many kernels were assembled, how
    many came from the cache, on how many threads.
  }];
  let options = [
    Option<"format", "format", "std::string", /*default=*/"\"bin\"", "isa (leave PTX), bin (cubin) or fatbin">,
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90\"", "The GPU to assemble for">,
    Option<"optLevel", "opt-level", "int", /*default=*/"3", "ptxas optimisation level, 0-3">,
    Option<"toolkit", "toolkit", "std::string", /*default=*/"\"/usr/local/cuda\"", "CUDA toolkit root (bin/ptxas)">,
    Option<"cacheDir", "cache-dir", "std::string", /*default=*/"\"\"", "Directory of assembled kernels; empty: no cache">,
    Option<"jobsOption", "jobs", "int", /*default=*/"0", "ptxas processes at once; 0: one per core">,
  ];
}

#endif // MLPIPE_TRANSFORMS_PASSES
