// Catch2 main of ioattn_tests_ff.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
