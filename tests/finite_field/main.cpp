// Catch2 main of ioattn_tests_ff.
// GCC 12 at -O2 with -fsanitize=address reports a false -Wmaybe-uninitialized inside Catch2's
// std::regex use; it is third-party code, so that one warning is silenced for this file only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
