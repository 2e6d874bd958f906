# ISA targets of the kernels (docs/design.md section 12.1; lib/include/ioattn/kernels/target.hpp).
#
# By default every kernel source is compiled once per ISA target (AVX-512, AVX2+FMA, SSE2) into
# the library, which picks one at run time (ioattn/isa.hpp): a plain `cmake -S . -B build` build
# is the fast build on any x86-64 CPU. The targets are GCC `#pragma GCC target` regions, so other
# compilers (clang builds the fuzz targets) and other processors build the baseline alone.
# IOATTN_NATIVE=ON builds one target with -march=native instead (experiments; such a binary
# runs only on CPUs like the one that built it).
#
# ioattn_isa (INTERFACE, not exported) carries the choice to every target that links it:
# IOATTN_BUILT_* for the run-time dispatch (isa_dispatch.cpp), -march=native in a native build.
add_library(ioattn_isa INTERFACE)
if(IOATTN_NATIVE)
  set(IOATTN_ISAS native)
  target_compile_options(ioattn_isa INTERFACE -march=native)
  target_compile_definitions(ioattn_isa INTERFACE IOATTN_SINGLE_ISA)
elseif(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64)$")
  # IOATTN_ISA_TARGETS narrows the set for quicker development builds (e.g. "avx2;sse2" on a
  # machine without AVX-512); the baseline is always built, so every CPU has a target to run.
  # "host": the best target the configuring machine runs and the baseline (the Quick start's
  # demo build, which runs where it is built: one target fewer to compile than the default).
  set(IOATTN_ISA_TARGETS "avx512;avx2;sse2" CACHE STRING "ISA targets to build the kernels for (subset of avx512;avx2;sse2, or host)")
  set(ioattn_targets ${IOATTN_ISA_TARGETS})
  if(IOATTN_ISA_TARGETS STREQUAL "host")
    try_run(ioattn_host_run ioattn_host_compiled ${CMAKE_BINARY_DIR}/host_isa
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/host_isa.cpp RUN_OUTPUT_VARIABLE ioattn_host_isa)
    string(STRIP "${ioattn_host_isa}" ioattn_host_isa)
    if(NOT ioattn_host_compiled OR NOT ioattn_host_run EQUAL 0
       OR NOT ioattn_host_isa MATCHES "^(avx512|avx2|sse2)$")
      message(WARNING "IOATTN_ISA_TARGETS=host: the CPU check did not run; building every target")
      set(ioattn_targets avx512 avx2 sse2)
    else()
      set(ioattn_targets ${ioattn_host_isa} sse2)
      message(STATUS "ioattn: IOATTN_ISA_TARGETS=host: this CPU runs ${ioattn_host_isa}")
    endif()
  endif()
  set(IOATTN_ISAS "")
  foreach(isa IN LISTS ioattn_targets)
    if(NOT isa MATCHES "^(avx512|avx2|sse2)$")
      message(FATAL_ERROR "IOATTN_ISA_TARGETS: unknown ISA target '${isa}' (known: avx512;avx2;sse2)")
    endif()
  endforeach()
  foreach(isa IN ITEMS avx512 avx2)
    if(isa IN_LIST ioattn_targets)
      list(APPEND IOATTN_ISAS ${isa})
      string(TOUPPER ${isa} ISA)
      target_compile_definitions(ioattn_isa INTERFACE IOATTN_BUILT_${ISA})
    endif()
  endforeach()
  list(APPEND IOATTN_ISAS sse2)
  # The native bf16 kernels (AVX512_BF16: vdpbf16ps) are one more target region over the
  # avx512 target, for the few sources that use them (ioattn_add_bf16_kernels); the library
  # runs them when the CPU has the extension (ioattn/isa.hpp: bf16_kernels_native).
  include(CheckCXXCompilerFlag)
  check_cxx_compiler_flag(-mavx512bf16 IOATTN_COMPILER_HAS_AVX512BF16)
  if("avx512" IN_LIST IOATTN_ISAS AND IOATTN_COMPILER_HAS_AVX512BF16)
    set(IOATTN_BF16_KERNELS ON)
    target_compile_definitions(ioattn_isa INTERFACE IOATTN_BUILT_AVX512BF16)
  endif()
else()
  set(IOATTN_ISAS sse2)
endif()
if(IOATTN_BF16_KERNELS)
  message(STATUS "ioattn: ISA targets: ${IOATTN_ISAS}, native bf16 kernels (avx512bf16)")
else()
  message(STATUS "ioattn: ISA targets: ${IOATTN_ISAS}")
endif()

# ioattn_kernel_sources(<var> <dir>...): the .cpp files under the dirs (recursively) that open
# an ISA-target region, `#include <ioattn/kernels/target_begin.hpp>` at the start of a line.
# That include is what makes a source a kernel source: a new kernel file is found by it, with
# no list to edit (the glob re-runs at build time when a file is added).
function(ioattn_kernel_sources var)
  set(found "")
  foreach(dir IN LISTS ARGN)
    file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${dir}/*.cpp)
    foreach(source IN LISTS sources)
      file(STRINGS ${source} marker REGEX "^#include <ioattn/kernels/target_begin\\.hpp>"
           LIMIT_COUNT 1)
      if(marker)
        list(APPEND found ${source})
      endif()
    endforeach()
  endforeach()
  list(SORT found)
  # <name>_bf16.cpp sources build for the avx512bf16 region only (ioattn_add_bf16_kernels)
  list(FILTER found EXCLUDE REGEX "_bf16\\.cpp$")
  set(${var} ${found} PARENT_SCOPE)
endfunction()

# ioattn_add_kernels(<target> INCLUDE <dir>... LINK <lib>... SOURCES <file>...)
# Compiles SOURCES (ioattn_kernel_sources) once per ISA target, with IOATTN_TARGET_<ISA>
# defined, and adds the objects to <target>.
# Every kernel function starts on a cache line, so that where its loops fall in their lines
# depends on its own code only, not on how much code the linker placed before it (at the
# linker's alignment random:0.02 runs 0.94x-0.98x with identical instructions).
function(ioattn_add_kernels target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "INCLUDE;LINK;SOURCES")
  set(align $<$<CXX_COMPILER_ID:GNU>:-falign-functions=64>)
  if(IOATTN_ISAS STREQUAL "native")
    target_sources(${target} PRIVATE ${arg_SOURCES})
    target_compile_options(${target} PRIVATE ${align}) # the whole target here
    # one object per kernel, as in the dispatched build (ioattn_unity.cmake)
    set_source_files_properties(${arg_SOURCES} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
    return()
  endif()
  foreach(isa IN LISTS IOATTN_ISAS)
    set(obj ${target}_${isa})
    string(TOUPPER ${isa} ISA)
    add_library(${obj} OBJECT ${arg_SOURCES})
    set_target_properties(${obj} PROPERTIES POSITION_INDEPENDENT_CODE ON)
    target_compile_features(${obj} PRIVATE cxx_std_20)
    target_compile_definitions(${obj} PRIVATE IOATTN_TARGET_${ISA})
    target_compile_options(${obj} PRIVATE ${align})
    target_include_directories(${obj} PRIVATE ${arg_INCLUDE})
    target_link_libraries(${obj} PRIVATE ${arg_LINK} $<BUILD_INTERFACE:ioattn_warnings>
                          $<BUILD_INTERFACE:ioattn_isa>)
    target_sources(${target} PRIVATE $<TARGET_OBJECTS:${obj}>)
  endforeach()
endfunction()

# ioattn_add_bf16_kernels(<target> INCLUDE <dir>... LINK <lib>... SOURCES <file>...)
# Compiles SOURCES once, for the avx512 target with AVX512_BF16 (IOATTN_TARGET_AVX512BF16:
# kernels/target_begin.hpp adds avx512bf16 to the region, kernels/target.hpp names the
# namespace isa_avx512bf16), when IOATTN_BF16_KERNELS; nothing otherwise.
function(ioattn_add_bf16_kernels target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "INCLUDE;LINK;SOURCES")
  if(NOT IOATTN_BF16_KERNELS)
    return()
  endif()
  set(obj ${target}_avx512bf16)
  add_library(${obj} OBJECT ${arg_SOURCES})
  set_target_properties(${obj} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_compile_features(${obj} PRIVATE cxx_std_20)
  target_compile_definitions(${obj} PRIVATE IOATTN_TARGET_AVX512BF16)
  target_compile_options(${obj} PRIVATE $<$<CXX_COMPILER_ID:GNU>:-falign-functions=64>)
  target_include_directories(${obj} PRIVATE ${arg_INCLUDE})
  target_link_libraries(${obj} PRIVATE ${arg_LINK} $<BUILD_INTERFACE:ioattn_warnings>
                        $<BUILD_INTERFACE:ioattn_isa>)
  target_sources(${target} PRIVATE $<TARGET_OBJECTS:${obj}>)
endfunction()
