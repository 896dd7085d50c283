# Small helpers so that each CMakeLists.txt says only what differs.

# mlpipe_library(NAME SOURCES... DEPENDS targets...)
# One layer of libs/. The layers compile as object libraries that all go
# into one shared library, libmlpipe.so (libs/CMakeLists.txt), which the
# tools and tests link; DEPENDS states what a layer builds on and gives it
# that layer's include directories. (The fuzz build, which has no core
# library, makes each layer a shared library of its own.) MLIR and LLVM are
# linked by the core library, not by a layer.
# A layer's sources compile as unity builds, MLPIPE_UNITY_BATCH_SIZE files to
# a translation unit: most of a file's compile time goes to the headers it
# includes and the templates they instantiate, which a batch pays for once.
# Names private to a file (static, anonymous namespace) must therefore be
# distinct across its layer. -DMLPIPE_UNITY_BUILD=OFF compiles file by file.
option(MLPIPE_UNITY_BUILD "Compile each library's sources in batches (CMake unity builds)" ON)
set(MLPIPE_UNITY_BATCH_SIZE 8 CACHE STRING "Source files per unity translation unit")
function(mlpipe_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPENDS" ${ARGN})
  if(MLPIPE_FUZZ)
    add_library(${name} SHARED ${ARG_SOURCES})
  else()
    add_library(${name} OBJECT ${ARG_SOURCES})
    set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
    list(REMOVE_ITEM ARG_DEPENDS MLIR LLVM)
  endif()
  set_target_properties(${name} PROPERTIES UNITY_BUILD ${MLPIPE_UNITY_BUILD}
    UNITY_BUILD_BATCH_SIZE ${MLPIPE_UNITY_BATCH_SIZE})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/libs)
  target_link_libraries(${name} PUBLIC ${ARG_DEPENDS})
  target_compile_options(${name} PRIVATE -Wall -Wextra -Wno-unused-parameter)
endfunction()

# MLPIPE_THIN_OPTIMIZATION: the optimisation level of code that only parses
# flags or checks results (tools' mains, unit tests, fuzz replays): it runs
# for microseconds, but at -O3 its header-only libraries (CLI11, Boost.Test)
# took twice as long to compile, a minute of a clean build on two cores.
set(MLPIPE_THIN_OPTIMIZATION -O1)

# mlpipe_tool(NAME): tools/NAME/main.cpp -> build/bin/NAME, linked against
# the core library.
function(mlpipe_tool name)
  add_executable(${name} main.cpp)
  target_link_libraries(${name} PRIVATE mlpipe CLI11::CLI11)
  target_compile_options(${name} PRIVATE -Wall -Wextra -Wno-unused-parameter ${MLPIPE_THIN_OPTIMIZATION})
endfunction()

# mlpipe_compiler_library(NAME SOURCES... DEPENDS targets... [PASSES Name])
# A layer of the compiler: a layer (mlpipe_library) over MLIR. With PASSES, the
# folder's Passes.td becomes FOLDER/Passes.h.inc (mlir-tblgen -name Name,
# which defines registerNamePasses()) in the build's include directory.
# The layers share one precompiled header of the MLIR headers most of their
# files include (MLIR's headers dominate their compile time).
set(MLPIPE_GENERATED_INCLUDE ${PROJECT_BINARY_DIR}/include)
set(MLPIPE_COMPILER_PCH
  <mlir/Dialect/Arith/IR/Arith.h> <mlir/Dialect/Func/IR/FuncOps.h> <mlir/Dialect/GPU/IR/GPUDialect.h>
  <mlir/Dialect/LLVMIR/LLVMDialect.h> <mlir/Dialect/Linalg/IR/Linalg.h> <mlir/Dialect/Math/IR/Math.h>
  <mlir/Dialect/MemRef/IR/MemRef.h> <mlir/Dialect/SCF/IR/SCF.h> <mlir/Dialect/Vector/IR/VectorOps.h>
  <mlir/IR/Builders.h> <mlir/IR/BuiltinOps.h> <mlir/IR/IRMapping.h> <mlir/IR/Matchers.h> <mlir/IR/SymbolTable.h>
  <mlir/Interfaces/SideEffectInterfaces.h> <mlir/Interfaces/ViewLikeInterface.h> <mlir/Pass/Pass.h>
  <llvm/Support/raw_ostream.h>)
function(mlpipe_compiler_library name)
  cmake_parse_arguments(ARG "" "PASSES" "SOURCES;DEPENDS" ${ARGN})
  mlpipe_library(${name} SOURCES ${ARG_SOURCES} DEPENDS ${ARG_DEPENDS} MLIR LLVM)
  target_include_directories(${name} PUBLIC ${MLPIPE_GENERATED_INCLUDE})
  # The first layer builds the precompiled header; the others reuse it. A
  # header precompiled under other macros is not used: no NAME_EXPORTS.
  set_target_properties(${name} PROPERTIES DEFINE_SYMBOL "")
  if(name STREQUAL "mlpipe_codegen")
    target_precompile_headers(${name} PRIVATE ${MLPIPE_COMPILER_PCH})
  else()
    target_precompile_headers(${name} REUSE_FROM mlpipe_codegen)
  endif()
  if(ARG_PASSES)
    get_filename_component(folder ${CMAKE_CURRENT_SOURCE_DIR} NAME)
    set(generated ${MLPIPE_GENERATED_INCLUDE}/${folder}/Passes.h.inc)
    add_custom_command(
      OUTPUT ${generated}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${MLPIPE_GENERATED_INCLUDE}/${folder}
      COMMAND ${MLPIPE_MLIR_TBLGEN} -gen-pass-decls -name ${ARG_PASSES} -I ${MLIR_INCLUDE_DIRS}
              ${CMAKE_CURRENT_SOURCE_DIR}/Passes.td -o ${generated}
      DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/Passes.td
      COMMENT "Generating ${folder}/Passes.h.inc from ${folder}/Passes.td"
      VERBATIM)
    add_custom_target(${name}_passes_inc DEPENDS ${generated})
    add_dependencies(${name} ${name}_passes_inc)
  endif()
endfunction()
