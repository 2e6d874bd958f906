# Warnings and sanitizers for every ioattn target (not exported).
add_library(ioattn_warnings INTERFACE)
target_compile_options(ioattn_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wsign-conversion -Wdouble-promotion
  -Wold-style-cast -Wnon-virtual-dtor -Woverloaded-virtual -Wcast-align -Wformat=2
  -Wimplicit-fallthrough $<$<BOOL:${IOATTN_WARNINGS_AS_ERRORS}>:-Werror>)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  # GCC 12 at -O3 reports -Wrestrict inside libstdc++'s std::string operator+ (inlined
  # char_traits::copy; GCC PR 105329, fixed in 13): a false positive on every "..." + str
  target_compile_options(ioattn_warnings INTERFACE -Wno-restrict)
endif()
if(IOATTN_SANITIZE)
  target_compile_options(ioattn_warnings INTERFACE -fsanitize=${IOATTN_SANITIZE}
                         -fno-omit-frame-pointer -fno-sanitize-recover=all)
  target_link_options(ioattn_warnings INTERFACE -fsanitize=${IOATTN_SANITIZE})
  if(IOATTN_SANITIZE MATCHES "thread" AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # GCC's -Wtsan: NTL's reference counts (inlined into finite_field/) use
    # std::atomic_thread_fence, which ThreadSanitizer does not model; a warning, not an error
    target_compile_options(ioattn_warnings INTERFACE -Wno-error=tsan)
  endif()
endif()
