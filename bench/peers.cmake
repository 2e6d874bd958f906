# The peers every dense comparison runs side by side (naive OpenBLAS attention, the SGEMM
# roofline) and the shared input helpers: one static library used by `ioattn bench` (apps/) and
# the Google Benchmark families (bench/). Included from both folders; defined once.
include_guard(GLOBAL)

# Debian's OpenBLASConfig.cmake sets variables only; wrap them in a target.
find_package(OpenBLAS REQUIRED CONFIG)
add_library(ioattn_openblas INTERFACE)
target_include_directories(ioattn_openblas SYSTEM INTERFACE ${OpenBLAS_INCLUDE_DIRS})
target_link_libraries(ioattn_openblas INTERFACE ${OpenBLAS_LIBRARIES})

add_library(ioattn_bench_util STATIC ${CMAKE_CURRENT_LIST_DIR}/bench_util.cpp)
target_include_directories(ioattn_bench_util PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(ioattn_bench_util
  PUBLIC ioattn::core
  PRIVATE ioattn_openblas $<BUILD_INTERFACE:ioattn_warnings> $<BUILD_INTERFACE:ioattn_isa>)
# The peers' loops are cloned per instruction set (target_clones in bench_util.cpp), so a
# default build's peers run at this CPU's best one.
# The naive peer's row softmax calls expf in a loop: -ffast-math with -fopenmp-simd (glibc
# declares its vector expf, libmvec, only then) lets GCC call the vector expf of each clone's
# instruction set (target_clones in bench_util.cpp), so the peer is not handicapped by scalar
# exp (checked with objdump: _ZGVeN16v_expf / _ZGVdN8v_expf; without -fopenmp-simd GCC 12
# called the scalar expf). The code never relies on infinities (masked entries are skipped).
target_compile_options(ioattn_bench_util PRIVATE -ffast-math -fopenmp-simd
  # the simd pragmas are hints: clang at -O1 under the sanitizers (the fuzz preset, which builds
  # the whole program for program_args_fuzz) cannot vectorize them and would fail on -Werror
  $<$<CXX_COMPILER_ID:Clang>:-Wno-pass-failed>)
