// ioattn: exact attention on CPUs measured in data movement. One program, subcommands demo, run,
// io, bound, bench and verify (docs/design.md section 13). Exit 0 on success, 1 on a failed check
// or runtime error, 2 on bad usage, with the reason on stderr in one line.

#include "program.hpp"

#include "commands.hpp"

#include <ioattn/error.hpp>
#include <ioattn/isa.hpp>
#include <ioattn/resources.hpp>

#include <CLI/CLI.hpp>
#include <tbb/version.h>

#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include <measure.hpp>

namespace ioattn::app {

namespace {

/// One line per failure, keeping only the first line of a multi-line message.
void print_error(const std::string& what) {
    std::cerr << "ioattn: " << what.substr(0, what.find('\n')) << '\n';
}

/// The line for an allocation that failed outside the library's own checks.
std::string out_of_memory() {
    std::string line = "out of memory: an allocation failed";
    try {
        const MemoryLimit limit = memory_limit();
        line += " (" + format_bytes(limit.bytes) + " available, " + limit.source + ")";
    } catch (const Error&) { // a bad IOATTN_MAX_BYTES: the allocation is the news here
    }
    return line;
}

std::string isa_list(const std::vector<Isa>& isas) {
    std::string s;
    for (const Isa i : isas)
        s += (s.empty() ? "" : ", ") + std::string(to_string(i));
    return s;
}

/// `ioattn --version`: the version, the kernels' instruction set, oneTBB, the BLAS core.
std::string version_text() {
    std::vector<Isa> usable;
    for (const Isa i : built_isas())
        if (cpu_supports(i))
            usable.push_back(i);
    return std::string("ioattn ") + IOATTN_VERSION +
           "\nkernels: " + std::string(to_string(active_isa())) +
           " (built: " + isa_list(built_isas()) + "; this CPU runs: " + isa_list(usable) +
           "; IOATTN_ISA=avx512|avx2|sse2 forces one)\noneTBB: " + TBB_runtime_version() +
           " (built against " + TBB_VERSION_STRING + ")\nBLAS: " + measure::blas_config() +
           "; core " + measure::blas_core();
}

} // namespace

int program_main(int argc, char** argv) {
    try {
        CLI::App app{"ioattn: exact attention on CPUs, measured in data movement.\n"
                     "Every schedule can run counted: words moved between a fast memory of M "
                     "words\nand slow memory, held against the I/O lower bounds of Saha & Ye "
                     "(2024)."};
        app.require_subcommand(1);
        app.set_version_flag("--version", version_text);
        // A bad IOATTN_ISA is a usage error of the whole program (exit 2), whatever it runs.
        (void)active_isa();
        app.failure_message([](const CLI::App* /*app*/, const CLI::Error& e) {
            return "ioattn: " + std::string(e.what()) + " (see --help)\n";
        });
        register_demo(app);
        register_run(app);
        register_io(app);
        register_bound(app);
        register_bench(app);
        register_decode(app);
#ifdef IOATTN_WITH_NTL
        register_verify(app);
#endif
        try {
            app.parse(argc, argv);
        } catch (const CLI::ParseError& e) {
            return app.exit(e) == 0 ? 0 : 2;
        }
    } catch (const InvalidArgument& e) {
        print_error(e.what());
        return 2;
    } catch (const UsageError& e) {
        print_error(e.what());
        return 2;
    } catch (const CheckFailed& e) {
        print_error(e.what());
        return 1;
    } catch (const Error& e) {
        print_error(e.what());
        return 1;
    } catch (const std::bad_alloc&) {
        print_error(out_of_memory());
        return 1;
    } catch (const std::exception& e) {
        print_error(e.what());
        return 1;
    }
    return 0;
}

} // namespace ioattn::app
