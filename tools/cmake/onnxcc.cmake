# onnxcc.cmake - compiling ONNX models with onnxcc as a step of a CMake build. `make install`
# puts this file in PREFIX/share/onnxcc/cmake; a project does
#
#   list(APPEND CMAKE_MODULE_PATH /usr/local/share/onnxcc/cmake)
#   include(onnxcc)
#   add_executable(app main.c)
#   onnxcc_add_model(app model.onnx [NAME n] [TARGET_TRIPLE t] [CPU c] [FEATURES f] [ABI a]
#                    [OPTIONS arg...])
#
# onnxcc_add_model compiles the model into ${CMAKE_CURRENT_BINARY_DIR}/onnxcc/NAME.o and NAME.h,
# links the object into the target and puts the header's directory on its include path
# (#include "NAME.h"). The object is rebuilt when the model file or onnxcc changes.
#   NAME           symbol prefix and file name; default: the model's file name without
#                  .onnx/.onnx.gz, made a C identifier
#   TARGET_TRIPLE  --target, e.g. thumbv7em-none-eabihf; default: ONNXCC_TARGET_TRIPLE if set
#                  (a toolchain file may set it), else the host
#   CPU, FEATURES, ABI   --cpu, --features, --abi; defaults: ONNXCC_CPU, ONNXCC_FEATURES,
#                  ONNXCC_ABI if set (host objects default to a baseline CPU: see the README)
#   OPTIONS        further onnxcc arguments, e.g. -O3 or --shape x=1x3x32x32
# onnxcc itself: ONNXCC_EXECUTABLE, by default the onnxcc installed next to this file, else
# the one on PATH.
#
#   onnxcc_link_pool(app)
#
# adds onnxcc's small thread pool (runtime/onnxcc_pool.c, installed in PREFIX/share/onnxcc/
# runtime) to the target, its header onnxcc_pool.h to the include path and the threads
# library to the link, for calling NAME_run_par(..., onnxcc_pool_parallel_for, pool).
cmake_minimum_required(VERSION 3.13)

# the pool's sources, next to this file once installed (share/onnxcc/cmake, share/onnxcc/runtime)
set(ONNXCC_RUNTIME_DIR "${CMAKE_CURRENT_LIST_DIR}/../runtime" CACHE PATH "onnxcc's runtime/ sources")

if(NOT ONNXCC_EXECUTABLE)
  find_program(ONNXCC_EXECUTABLE onnxcc
    HINTS "${CMAKE_CURRENT_LIST_DIR}/../../../bin" NO_CMAKE_FIND_ROOT_PATH)
endif()

function(onnxcc_add_model target model)
  cmake_parse_arguments(PARSE_ARGV 2 ARG "" "NAME;TARGET_TRIPLE;CPU;FEATURES;ABI" "OPTIONS")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "onnxcc_add_model: unknown arguments: ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT ONNXCC_EXECUTABLE)
    message(FATAL_ERROR "onnxcc_add_model: onnxcc not found; set ONNXCC_EXECUTABLE")
  endif()
  get_filename_component(model "${model}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  if(NOT ARG_NAME)
    get_filename_component(ARG_NAME "${model}" NAME)
    string(REGEX REPLACE "\\.onnx(\\.gz)?$" "" ARG_NAME "${ARG_NAME}")
    string(MAKE_C_IDENTIFIER "${ARG_NAME}" ARG_NAME)
  endif()
  foreach(v TARGET_TRIPLE CPU FEATURES ABI)
    if(NOT ARG_${v} AND ONNXCC_${v})
      set(ARG_${v} "${ONNXCC_${v}}")
    endif()
  endforeach()
  set(args --name "${ARG_NAME}")
  if(ARG_TARGET_TRIPLE)
    list(APPEND args --target "${ARG_TARGET_TRIPLE}")
  endif()
  if(ARG_CPU)
    list(APPEND args --cpu "${ARG_CPU}")
  endif()
  if(ARG_FEATURES)
    list(APPEND args --features "${ARG_FEATURES}")
  endif()
  if(ARG_ABI)
    list(APPEND args --abi "${ARG_ABI}")
  endif()
  list(APPEND args ${ARG_OPTIONS})

  set(dir "${CMAKE_CURRENT_BINARY_DIR}/onnxcc")
  set(obj "${dir}/${ARG_NAME}.o")
  set(hdr "${dir}/${ARG_NAME}.h")
  add_custom_command(
    OUTPUT "${obj}" "${hdr}"
    COMMAND "${CMAKE_COMMAND}" -E make_directory "${dir}"
    COMMAND "${ONNXCC_EXECUTABLE}" "${model}" -o "${obj}" ${args}
    DEPENDS "${model}" "${ONNXCC_EXECUTABLE}"
    COMMENT "onnxcc: compiling ${model} into ${ARG_NAME}.o"
    VERBATIM)
  # The object is linked like any compiled source; the header is listed so that the target's
  # sources wait for it.
  set_source_files_properties("${obj}" PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
  set_source_files_properties("${hdr}" PROPERTIES GENERATED TRUE HEADER_FILE_ONLY TRUE)
  target_sources(${target} PRIVATE "${obj}" "${hdr}")
  target_include_directories(${target} PRIVATE "${dir}")
endfunction()

function(onnxcc_link_pool target)
  if(NOT EXISTS "${ONNXCC_RUNTIME_DIR}/onnxcc_pool.c")
    message(FATAL_ERROR "onnxcc_link_pool: no onnxcc_pool.c in ${ONNXCC_RUNTIME_DIR}; set ONNXCC_RUNTIME_DIR")
  endif()
  find_package(Threads REQUIRED)
  target_sources(${target} PRIVATE "${ONNXCC_RUNTIME_DIR}/onnxcc_pool.c")
  target_include_directories(${target} PRIVATE "${ONNXCC_RUNTIME_DIR}")
  target_link_libraries(${target} PRIVATE Threads::Threads)
endfunction()
