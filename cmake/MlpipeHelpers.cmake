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
