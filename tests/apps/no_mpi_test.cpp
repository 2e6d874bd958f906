// Tests of a program built without MPI (no ioattn::dist): `run --dist` and `bound --ranks`
// are still options, and each is one usage line naming the option and the missing build
// dependency, exit 2 (registered only when apps/ was built without ioattn::dist).

#include "cli.hpp"

#include <catch2/catch.hpp>

using ioattn::app::test::require_one_line_error;

TEST_CASE("without MPI, run --dist and bound --ranks are one usage line", "[apps][no-mpi]") {
    require_one_line_error({"run", "--N", "64", "--d", "8", "--dist", "ring"},
                           "--dist ring: this ioattn was built without MPI");
    require_one_line_error({"bound", "--N", "64", "--d", "8", "--ranks", "2"},
                           "--ranks 2: this ioattn was built without MPI");
}
