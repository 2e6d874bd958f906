#pragma once

// The ioattn program as a function (apps/program.cpp): main.cpp calls it, and so does the
// in-process fuzz target of the command line (tests/fuzz/program_args_fuzz.cpp).

namespace ioattn::app {

/// Runs `ioattn argv[1] ...`: parses the command line, runs the subcommand, and prints any
/// failure as one line "ioattn: ..." on std::cerr. Returns the exit status: 0 on success, 1 on
/// a failed check or a runtime error (ioattn::Error, ResourceError, any std::exception, a
/// failed allocation), 2 on bad usage (CLI11 parse errors, InvalidArgument, UsageError).
/// Reentrant: every call builds its own command line; output goes to std::cout and std::cerr.
int program_main(int argc, char** argv);

} // namespace ioattn::app
