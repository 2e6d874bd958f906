# ioattn_add_header_check(<target> <include dir> <library>): an OBJECT library of one generated
# TU per public header under <include dir>/ioattn (oneTBB's test_tbb_header.cpp idea), each
# including its header twice, compiled with <library>'s usage requirements and the project's
# warnings, at -O0: every public header compiles alone and has an include guard. The header
# globs are the only globs of the build. A sanitizer build (IOATTN_SANITIZE) skips the check, an
# empty target of that name: it compiles and runs nothing a sanitizer could look at, and the
# plain builds check the same headers.
function(ioattn_add_header_check target include_dir library)
  if(IOATTN_SANITIZE)
    add_custom_target(${target})
    return()
  endif()
  get_filename_component(root ${include_dir} ABSOLUTE)
  file(GLOB_RECURSE headers CONFIGURE_DEPENDS ${root}/ioattn/*.hpp)
  set(tus)
  foreach(header IN LISTS headers)
    file(RELATIVE_PATH rel ${root} ${header})
    string(MAKE_C_IDENTIFIER ${rel} stem)
    set(tu ${CMAKE_CURRENT_BINARY_DIR}/header_check/${stem}.cpp)
    file(CONFIGURE OUTPUT ${tu}
         CONTENT "// Generated: ${rel} compiles on its own.\n#include <${rel}>\n#include <${rel}>\n")
    list(APPEND tus ${tu})
  endforeach()
  add_library(${target} OBJECT ${tus})
  target_link_libraries(${target} PRIVATE ${library} $<BUILD_INTERFACE:ioattn_warnings>)
  target_compile_options(${target} PRIVATE -O0) # compiled, never run
endfunction()
