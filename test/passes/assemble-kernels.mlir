// RUN: rm -rf %t.cache
// RUN: mlpipe-opt %s -split-input-file --pass-pipeline='builtin.module(mlpipe-assemble-kernels{chip=sm_75 toolkit=%cuda_toolkit cache-dir=%t.cache})' --debug-only=mlpipe-ptxas 2>%t.log | FileCheck %s
// RUN: FileCheck %s --check-prefix=FIRST --input-file=%t.log
// RUN: ls %t.cache | wc -l | FileCheck %s --check-prefix=FILES
// RUN: mlpipe-opt %s -split-input-file --pass-pipeline='builtin.module(mlpipe-assemble-kernels{chip=sm_75 toolkit=%cuda_toolkit cache-dir=%t.cache})' --debug-only=mlpipe-ptxas 2>&1 >/dev/null | FileCheck %s --check-prefix=AGAIN
// RUN: mlpipe-opt %s -split-input-file --pass-pipeline='builtin.module(mlpipe-assemble-kernels{format=fatbin chip=sm_75 toolkit=%cuda_toolkit})' | FileCheck %s --check-prefix=FATBIN
// RUN: mlpipe-opt %s -split-input-file --pass-pipeline='builtin.module(mlpipe-assemble-kernels{format=isa chip=sm_75 toolkit=%cuda_toolkit})' | FileCheck %s --check-prefix=ISA

// (A fatbin is the object format MLIR prints without a keyword; it starts with
// the fatbin magic 0xBA55ED50.)
// Two kernels with the same PTX: assembled once, both become that cubin,
// each keeping its PTX (without the serialisation time, which varies).
// CHECK: gpu.binary @first [#gpu.object<#nvvm.target<chip = "sm_75">, properties = {O = 3 : i32, mlpipe.ptx = ".version 7.8{{.*}}"}, bin = "\7FELF
// CHECK: gpu.binary @second [#gpu.object<#nvvm.target<chip = "sm_75">, properties = {O = 3 : i32, mlpipe.ptx = ".version 7.8{{.*}}"}, bin = "\7FELF
// FIRST: 2 kernel objects, 1 distinct PTX, 0 from the cache in {{.*}}.cache, 1 assembled on 1 threads for sm_75
// FILES: {{^ *1$}}
// AGAIN: 2 kernel objects, 1 distinct PTX, 1 from the cache in {{.*}}.cache, 0 assembled on 0 threads for sm_75
// FATBIN: gpu.binary @first [#gpu.object<#nvvm.target<chip = "sm_75">, properties = {O = 3 : i32, mlpipe.ptx = {{.*}}"}, "P\EDU\BA
// ISA: gpu.binary @first [#gpu.object<#nvvm.target<chip = "sm_75">, properties = {LLVMIRToISATimeInMs = 4 : i64, O = 3 : i32}, assembly = ".version 7.8
module attributes {gpu.container_module} {
  gpu.binary @first [#gpu.object<#nvvm.target<chip = "sm_75">, properties = {LLVMIRToISATimeInMs = 4 : i64, O = 3 : i32}, assembly = ".version 7.8\0A.target sm_75\0A.address_size 64\0A.visible .entry k(.param .u64 k_x)\0A{\0A.reg .b64 %rd<2>;\0A.reg .f32 %f<2>;\0Ald.param.u64 %rd1, [k_x];\0Acvta.to.global.u64 %rd1, %rd1;\0Amov.f32 %f1, 0f3F800000;\0Ast.global.f32 [%rd1], %f1;\0Aret;\0A}\0A">]
  gpu.binary @second [#gpu.object<#nvvm.target<chip = "sm_75">, properties = {LLVMIRToISATimeInMs = 7 : i64, O = 3 : i32}, assembly = ".version 7.8\0A.target sm_75\0A.address_size 64\0A.visible .entry k(.param .u64 k_x)\0A{\0A.reg .b64 %rd<2>;\0A.reg .f32 %f<2>;\0Ald.param.u64 %rd1, [k_x];\0Acvta.to.global.u64 %rd1, %rd1;\0Amov.f32 %f1, 0f3F800000;\0Ast.global.f32 [%rd1], %f1;\0Aret;\0A}\0A">]
}
