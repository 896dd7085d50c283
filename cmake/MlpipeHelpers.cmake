# Small helpers so that each CMakeLists.txt says only what differs.

# mlpipe_library(NAME SOURCES... DEPENDS targets...)
# One shared library per layer of libs/: the tools stay thin and share it.
function(mlpipe_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPENDS" ${ARGN})
  add_library(${name} SHARED ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/libs)
  target_link_libraries(${name} PUBLIC ${ARG_DEPENDS})
  target_compile_options(${name} PRIVATE -Wall -Wextra -Wno-unused-parameter)
endfunction()

# mlpipe_tool(NAME DEPENDS libs...): tools/NAME/main.cpp -> build/bin/NAME
function(mlpipe_tool name)
  cmake_parse_arguments(ARG "" "" "DEPENDS" ${ARGN})
  add_executable(${name} main.cpp)
  target_link_libraries(${name} PRIVATE ${ARG_DEPENDS} CLI11::CLI11)
  target_compile_options(${name} PRIVATE -Wall -Wextra -Wno-unused-parameter)
endfunction()

# mlpipe_compiler_library(NAME SOURCES... DEPENDS targets... [PASSES Name])
# A layer of the compiler: a shared library over MLIR. With PASSES, the
# folder's Passes.td becomes FOLDER/Passes.h.inc (mlir-tblgen -name Name,
# which defines registerNamePasses()) in the build's include directory.
# The layers share one precompiled header of the MLIR headers most of their
# files include (MLIR's headers dominate their compile time).
set(MLPIPE_GENERATED_INCLUDE ${PROJECT_BINARY_DIR}/include)
function(mlpipe_compiler_library name)
  cmake_parse_arguments(ARG "" "PASSES" "SOURCES;DEPENDS" ${ARGN})
  mlpipe_library(${name} SOURCES ${ARG_SOURCES} DEPENDS ${ARG_DEPENDS} MLIR LLVM)
  target_include_directories(${name} PUBLIC ${MLPIPE_GENERATED_INCLUDE})
  target_link_options(${name} PRIVATE -Wl,--no-undefined)
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
