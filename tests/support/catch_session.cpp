// Catch2's implementation (CATCH_CONFIG_RUNNER: everything but main), compiled once for every
// test executable; the mains (support/main.cpp, dist/main.cpp) call run_catch_session.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized" // in libstdc++'s <regex> (GCC PR 105562)
#endif
#define CATCH_CONFIG_RUNNER
#include "catch_session.hpp"

#include <catch2/catch.hpp>

int run_catch_session(int argc, char* argv[]) {
    return Catch::Session().run(argc, argv);
}
