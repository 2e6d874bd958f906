// Every exit path of the ioattn program prints one line "ioattn: ..." on stderr and nothing on
// stdout: a table of bad invocations, one per way each subcommand refuses, with the
// exit status (2 bad usage, 1 runtime: a refused allocation, a failed write) and the words the
// line must name. The parse errors of CLI11 are in main_test.cpp.

#include "cli.hpp"
#include "sanitized.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

using ioattn::app::test::Env;
using ioattn::app::test::require_one_line_error;

namespace {

struct Bad {
    std::vector<std::string> args;
    std::string names; ///< what the line must contain
    int status;
    Env env;
};

} // namespace

TEST_CASE("bad usage: one line, exit 2, naming the value", "[apps][errors]") {
    const std::vector<Bad> table{
        {{"run", "--N", "0"}, "n_q = 0", 2, {}},
        {{"run", "--N", "8", "--d", "-3"}, "d = -3", 2, {}},
        {{"run", "--N", "8", "--heads", "4", "--kv-heads", "3"}, "not divisible", 2, {}},
        {{"run", "--N", "8", "--M", "0"}, "M = 0", 2, {}},
        {{"run", "--N", "8", "--M-bytes", "2"}, "--M-bytes 2", 2, {}},
        {{"run", "--N", "8", "--d", "8", "--M", "3"}, "needs M >=", 2, {}},
        {{"run", "--N", "8", "--pattern", "bogus:1"}, "unknown pattern 'bogus'", 2, {}},
        {{"run", "--N", "8", "--pattern", "window:x"}, "'x' is not an integer", 2, {}},
        {{"run", "--N", "8", "--pattern", "file:/nonexistent/a.mtx"}, "cannot open", 2, {}},
        {{"run", "--N", "8", "--pattern", "window:2", "--causal"},
         "--causal with --pattern",
         2,
         {}},
        {{"run", "--N", "8", "--input-density", "0"}, "--input-density", 2, {}},
        {{"run", "--N", "8", "--count-io", "--schedule", "reference"}, "--count-io", 2, {}},
        {{"run", "--N", "8"}, "IOATTN_MAX_BYTES = 'lots'", 2, {{"IOATTN_MAX_BYTES", "lots"}}},
        {{"io", "--N", "8", "--pattern", "window:2", "--causal"},
         "--pattern does not take --causal",
         2,
         {}},
        {{"io", "--N", "8", "--M-range", "9:3"}, "--M-range '9:3'", 2, {}},
        {{"io", "--N", "8", "--M-range", "abc"}, "--M-range 'abc'", 2, {}},
        {{"bound", "--N", "8"}, "--bandwidth", 2, {}},
        {{"bound", "--N", "8", "--M-bytes", "1", "--preset", "a100"}, "less than one word", 2, {}},
        {{"run", "--N", "8", "--pass", "sideways"}, "sideways not in {forward,backward}", 2, {}},
        {{"run", "--N", "8", "--cache-bytes", "4"}, "a cache of 4 bytes leaves M = 0", 2, {}},
        {{"run", "--N", "8"}, "IOATTN_ISA", 2, {{"IOATTN_ISA", "avx1024"}}},
        {{"run", "--N", "8", "--pattern", "((((window:2)"}, "is not closed", 2, {}},
        {{"run", "--N", "8", "--pattern", std::string(300, '(') + "dense" + std::string(300, ')')},
         "nested deeper than 256",
         2,
         {}},
        {{"io", "--N", "8", "--pass", "sideways"}, "sideways not in {forward,backward}", 2, {}},
        {{"bound", "--N", "8", "--preset", "a100", "--schedule", "reference"},
         "--schedule reference has no I/O model",
         2,
         {}},
        {{"bench", "--suite", "nothing"}, "nothing", 2, {}},
    };
    for (const Bad& b : table)
        require_one_line_error(b.args, b.names, b.status, b.env);
}

#ifdef IOATTN_APPS_WITH_VERIFY
TEST_CASE("bad usage of verify: one line, exit 2", "[apps][errors]") {
    const std::vector<Bad> table{
        {{"verify", "no-such-experiment"}, "unknown experiment 'no-such-experiment'", 2, {}},
        {{"verify", "epochs", "--M", "0"}, "M = 0", 2, {}},
        {{"verify", "rank-formula", "--N", "0"}, "0", 2, {}},
        {{"verify", "rank-formula", "--N", "8", "--d", "2", "--p", "9"}, "9", 2, {}},
    };
    for (const Bad& b : table)
        require_one_line_error(b.args, b.names, b.status, b.env);
}
#endif

TEST_CASE("refused or failed resources: one line, exit 1, naming the bytes", "[apps][errors]") {
    const Env one_mib{{"IOATTN_MAX_BYTES", "1M"}};
    const std::vector<Bad> table{
        // operands of the program: 4096 x 64 floats of Q, K, V, O are 4 MiB
        {{"run", "--N", "4096", "--d", "64"},
         "ioattn: run: needs 4210688 bytes (4.02 MiB) of operands",
         1,
         one_mib},
        // a kernel's workspace: the materializing forward keeps b score rows of n_k per worker
        {{"run", "--N", "600", "--d", "16", "--schedule", "materialized"},
         "ioattn::dense::forward_materialized: needs",
         1,
         {{"IOATTN_MAX_BYTES", "320K"}}},
        {{"run", "--N", "600", "--d", "16", "--pass", "backward", "--schedule", "materialized"},
         "ioattn::dense::backward_materialized: needs",
         1,
         {{"IOATTN_MAX_BYTES", "1M"}}},
        // the support of a pattern, refused while it is built
        {{"run", "--N", "1500", "--d", "1", "--pattern", "causal"},
         "ioattn::sparse::pattern_causal: needs",
         1,
         one_mib},
        // beyond any machine, with no limit set: 64 TiB of operands against physical memory
        {{"run", "--N", "1073741824", "--d", "4096"}, "(64.0 TiB) of operands", 1, {}},
    };
    for (const Bad& b : table)
        require_one_line_error(b.args, b.names, b.status, b.env);
}

TEST_CASE("a plot that cannot be written: the table, then one line, exit 1", "[apps][errors]") {
    const std::vector<std::string> args{
        "io", "--N", "64", "--d", "8", "--plot", "/nonexistent/dir/plot.svg"};
    const ioattn::app::test::Outcome r = ioattn::app::test::run_ioattn(args);
    INFO("stderr: " << r.err);
    CHECK(r.status == 1);
    CHECK(r.out.find("ioattn io:") == 0); // the sweep was printed before the plot
    CHECK(ioattn::app::test::lines_of(r.err).size() == 1);
    CHECK(r.err == "ioattn: io: cannot write --plot /nonexistent/dir/plot.svg (its file "
                   "/nonexistent/dir/plot.csv)\n");
}

TEST_CASE("an address-space limit (ulimit -v) is honoured before any allocation",
          "[apps][errors][limits]") {
#if defined(IOATTN_SANITIZED)
    // AddressSanitizer reserves terabytes of shadow address space when the program starts, so
    // an instrumented ioattn cannot start under any ulimit -v that refuses 2 GB; the dev build
    // runs this check uninstrumented
    WARN("instrumented build: the address-space limit is checked by the uninstrumented tests");
#else
    // 2 GB of operands (Q, K, V, O of 2e6 x 64 floats) under a 1.5 GB address space: refused
    // by the operand check, naming RLIMIT_AS, before a byte of them is allocated or drawn
    const std::vector<std::string> args{
        "run", "--N", "2000000", "--d", "64", "--heads", "1", "--schedule", "materialized"};
    const auto start = std::chrono::steady_clock::now();
    const ioattn::app::test::Outcome r =
        ioattn::app::test::run_ioattn(args, {}, "ulimit -v 1464844 &&");
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    INFO("stderr: " << r.err);
    CHECK(r.status == 1);
    CHECK(r.out.empty());
    CHECK(ioattn::app::test::lines_of(r.err).size() == 1);
    CHECK(r.err.find("ioattn: run: needs 2056000000 bytes") == 0);
    CHECK(r.err.find("address-space limit RLIMIT_AS (ulimit -v) of 1500000256 bytes") !=
          std::string::npos);
    // drawing 2 GB of operands takes seconds; a refusal before it, a fraction of one
    CHECK(seconds < 2.0);
#endif
}
