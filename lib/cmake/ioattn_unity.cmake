# Unity builds (CMake's UNITY_BUILD) for the libraries, the program and the suites: a target's
# sources compile in batches of eight, so the headers they share (the libraries', oneTBB's,
# CLI11's, nlohmann's, NTL's, Catch's, the standard library's) are parsed and their inline
# templates compiled once per batch instead of once per file. The kernels are not batched: each
# is one object per ISA target (ioattn_isa.cmake), and one kernel changed rebuilds one object.
# A clean build of the program's library: 5.5 CPU-minutes file by file, 2.1 in batches.
# File-local names (anonymous namespaces, static functions) must therefore be unique within a
# target; a file that cannot share a batch sets SKIP_UNITY_BUILD_INCLUSION.
function(ioattn_unity)
  foreach(target IN LISTS ARGN)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  endforeach()
endfunction()
