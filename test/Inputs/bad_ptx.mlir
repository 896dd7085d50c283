module attributes {gpu.container_module} {
  gpu.binary @broken [#gpu.object<#nvvm.target<chip = "sm_75">, assembly = ".version 7.8\0A.target sm_75\0A.address_size 64\0A.visible .entry broken()\0A{\0A.reg .f32 %f<2>;\0Afrobnicate.f32 %f1;\0Aret;\0A}\0A">]
}
