#pragma once
// The subcommands of the ioattn program (docs/design.md section 13). Each cmd_<name>.cpp defines
// register_<name>(app): it adds its subcommand, keeps its options in a shared_ptr and calls the
// library from the subcommand's callback.
//
// Exit codes (set by main.cpp): a callback that throws ioattn::InvalidArgument or
// ioattn::app::UsageError -> 2 (bad usage); ioattn::app::CheckFailed, any other ioattn::Error
// or std::exception -> 1. The message is printed on stderr as one line.

#include <stdexcept>

namespace CLI {
class App;
} // namespace CLI

namespace ioattn::app {

/// A check requested by the user failed (run --check, io dry-run agreement, verify).
class CheckFailed : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// The command line asks for something that is not (yet) available or is inconsistent.
class UsageError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

} // namespace ioattn::app

void register_demo(CLI::App& app);
void register_run(CLI::App& app);
void register_io(CLI::App& app);
void register_bound(CLI::App& app);
void register_bench(CLI::App& app);
void register_decode(CLI::App& app);
#ifdef IOATTN_WITH_NTL
void register_verify(CLI::App& app);
#endif
