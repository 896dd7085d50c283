# Every dependency is looked up here, and a missing one stops the configure
# step with one sentence naming the Debian package or the path to pass.

function(mlpipe_require condition message)
  if(NOT ${condition})
    message(FATAL_ERROR "mlpipe: ${message}")
  endif()
endfunction()

# --- LLVM and MLIR 22 (Debian: llvm-22-dev libmlir-22-dev mlir-22-tools) ----
set(MLPIPE_LLVM_ROOT "/usr/lib/llvm-22" CACHE PATH "Root of the LLVM/MLIR 22 install")
find_package(MLIR 22.1 CONFIG QUIET PATHS ${MLPIPE_LLVM_ROOT}/lib/cmake/mlir NO_DEFAULT_PATH)
mlpipe_require(MLIR_FOUND
  "MLIR 22 not found under ${MLPIPE_LLVM_ROOT}: install it with 'apt-get install llvm-22-dev libmlir-22-dev mlir-22-tools' or pass -DMLPIPE_LLVM_ROOT=PATH.")
# The imported MLIR and LLVM targets carry no include directories or
# definitions; add them here once for every target.
include_directories(SYSTEM ${LLVM_INCLUDE_DIRS} ${MLIR_INCLUDE_DIRS})
separate_arguments(MLPIPE_LLVM_DEFINITIONS NATIVE_COMMAND "${LLVM_DEFINITIONS}")
add_compile_options(${MLPIPE_LLVM_DEFINITIONS})
link_directories(${LLVM_LIBRARY_DIR})

set(MLPIPE_LLVM_BIN ${MLPIPE_LLVM_ROOT}/bin)
find_program(MLPIPE_LIT NAMES lit llvm-lit PATHS ${MLPIPE_LLVM_BIN} NO_DEFAULT_PATH)
find_program(MLPIPE_FILECHECK FileCheck PATHS ${MLPIPE_LLVM_BIN} NO_DEFAULT_PATH)
mlpipe_require(MLPIPE_LIT "lit not found in ${MLPIPE_LLVM_BIN}: install it with 'apt-get install llvm-22-tools'.")
mlpipe_require(MLPIPE_FILECHECK "FileCheck not found in ${MLPIPE_LLVM_BIN}: install it with 'apt-get install llvm-22-tools'.")
find_program(MLPIPE_MLIR_TBLGEN mlir-tblgen PATHS ${MLPIPE_LLVM_BIN} NO_DEFAULT_PATH)
mlpipe_require(MLPIPE_MLIR_TBLGEN "mlir-tblgen not found in ${MLPIPE_LLVM_BIN}: install it with 'apt-get install mlir-22-tools'.")

# --- Small C++ libraries ----------------------------------------------------
find_package(CLI11 CONFIG QUIET)
mlpipe_require(CLI11_FOUND "CLI11 not found: install it with 'apt-get install libcli11-dev'.")
find_package(fmt CONFIG QUIET)
mlpipe_require(fmt_FOUND "fmt not found: install it with 'apt-get install libfmt-dev'.")
find_package(Boost 1.74 QUIET COMPONENTS unit_test_framework)
mlpipe_require(Boost_FOUND "Boost.Test not found: install it with 'apt-get install libboost-test-dev'.")

# --- CUDA toolkit (ptxas, libdevice); the driver itself is loaded at run time
if(DEFINED ENV{CUDA_HOME})
  set(_mlpipe_default_cuda $ENV{CUDA_HOME})
else()
  set(_mlpipe_default_cuda /usr/local/cuda)
endif()
set(MLPIPE_CUDA_TOOLKIT "${_mlpipe_default_cuda}" CACHE PATH "CUDA toolkit root (ptxas and nvvm/libdevice)")
if(NOT EXISTS "${MLPIPE_CUDA_TOOLKIT}/bin/ptxas" OR NOT EXISTS "${MLPIPE_CUDA_TOOLKIT}/nvvm/libdevice/libdevice.10.bc")
  message(FATAL_ERROR "mlpipe: no CUDA toolkit at ${MLPIPE_CUDA_TOOLKIT} (need bin/ptxas and nvvm/libdevice/libdevice.10.bc): install CUDA there or pass -DMLPIPE_CUDA_TOOLKIT=PATH.")
endif()
set(MLPIPE_CUDA_INCLUDE ${MLPIPE_CUDA_TOOLKIT}/include)

# --- Link with lld: 0.5 s per tool instead of several with ld.bfd ----------
find_program(MLPIPE_LLD NAMES ld.lld ld.lld-14)
if(MLPIPE_LLD)
  add_link_options(-fuse-ld=lld)
else()
  message(STATUS "mlpipe: lld not found (apt-get install lld); linking with the default linker")
endif()

# --- How the core library links MLIR and LLVM -------------------------------
# Statically (the default): libmlpipe.so holds the parts of MLIR and LLVM it
# uses, bound inside it and hidden. Every tool then starts in a few
# milliseconds instead of the ~90 ms the dynamic loader spends relocating
# libMLIR.so and libLLVM.so for each process (a shell pipeline of five tools,
# or a test suite of thousands of tool runs, pays that per tool). Dynamically
# (OFF): against libMLIR.so and libLLVM.so, a library of a few MB, for
# shipping the build to a machine that has those libraries.
option(MLPIPE_STATIC_MLIR "Link MLIR and LLVM into libmlpipe.so statically (fast tool start-up)" ON)
if(MLPIPE_STATIC_MLIR AND NOT MLPIPE_FUZZ)
  # Every MLIR and LLVM archive: the linker takes only the members the core
  # library reaches. MLIR's test and C API libraries are not needed.
  file(GLOB MLPIPE_MLIR_ARCHIVES ${LLVM_LIBRARY_DIR}/libMLIR*.a)
  list(FILTER MLPIPE_MLIR_ARCHIVES EXCLUDE REGEX "/libMLIR(.*Test.*|CAPI.*|MlirOptMain)\\.a$")
  file(GLOB MLPIPE_LLVM_ARCHIVES ${LLVM_LIBRARY_DIR}/libLLVM*.a)
  mlpipe_require(MLPIPE_LLVM_ARCHIVES
    "no static LLVM libraries (libLLVM*.a) in ${LLVM_LIBRARY_DIR}: install llvm-22-dev, or pass -DMLPIPE_STATIC_MLIR=OFF.")
  # What LLVM's archives need from the system (llvm-config --system-libs):
  # compression; the runtime of libzstd1 serves where its -dev package is absent.
  find_library(MLPIPE_ZLIB NAMES z)
  find_library(MLPIPE_ZSTD NAMES zstd libzstd.so.1)
  mlpipe_require(MLPIPE_ZLIB "zlib not found: install it with 'apt-get install zlib1g-dev'.")
  mlpipe_require(MLPIPE_ZSTD "zstd not found: install it with 'apt-get install libzstd1'.")
  find_package(Threads REQUIRED)
endif()
