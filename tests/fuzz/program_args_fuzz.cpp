// Fuzz target: the ioattn program's command line, in-process (ioattn::app::program_main), for
// the subcommands run, io and verify. The input's first byte picks the subcommand; the rest,
// split at '\n', are its arguments. Properties: the program returns 0, 1 or 2, never crashes
// or throws, and every failing exit prints exactly one line "ioattn: ..." on stderr.
// Work is bounded, not the grammar: inputs with a number above 512 or whose numbers multiply
// past 2^16 (verify: past 32) are skipped (the fuzzer explores options, not run times), and a
// run or io without sizes gets --N 16 (or the missing one of --n-q/--n-k) and --d 8, verify
// --N 8 --d 2, so that the programs' defaults (N = 1024, verify's N = 256) do not make every
// input a slow one; `verify all`, `verify count` and `verify lemma-4.6`, whose work the sizes
// do not bound, are skipped. Under this preset (ASan + UBSan, -O1, coverage), of a grid of
// accepted inputs (each experiment at N x d = 32, and at --trials 16 and 32) the slowest took
// 2.5 s against the 20 s timeout of run.sh (verify negative --N 8 --d 4); run and io at
// N = 512, d = 128: 0.2-2.0 s.
// The fuzz preset builds without MPI (IOATTN_WITH_MPI=OFF): `run --dist` initialises MPI, once
// per process, which an in-process fuzzer cannot repeat; there --dist is the usage error.
// Seeds: corpus/program_args_fuzz.

#include "fuzz_util.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <program.hpp>

namespace {

/// Whether every number in the arguments (digits, with a sign, fraction, exponent or hex
/// prefix as strtod reads them) is at most 512 in magnitude and all multiply to at most
/// `product_limit`.
bool bounded(const std::vector<std::string>& args, double product_limit) {
    double product = 1.0;
    for (const std::string& a : args) {
        const char* s = a.c_str();
        for (std::size_t at = 0; at < a.size();) {
            if (std::isdigit(static_cast<unsigned char>(s[at])) == 0) {
                ++at;
                continue;
            }
            char* end = nullptr;
            const double v = std::strtod(s + at, &end);
            const std::size_t used = static_cast<std::size_t>(end - (s + at));
            if (!(std::fabs(v) <= 512.0))
                return false;
            product *= std::max(1.0, std::fabs(v));
            if (product > product_limit)
                return false;
            at += used == 0 ? 1 : used;
        }
    }
    return true;
}

bool has(const std::vector<std::string>& args, const std::string& flag) {
    for (const std::string& a : args)
        if (a == flag || a.rfind(flag + "=", 0) == 0)
            return true;
    return false;
}

/// Small sizes for the options a bounded input left at their (large) defaults.
void add_small_sizes(const std::string& sub, std::vector<std::string>& args) {
    if (has(args, "--help") || has(args, "-h"))
        return;
    if (sub == "verify") {
        if (!has(args, "--N"))
            args.insert(args.end(), {"--N", "8"});
        if (!has(args, "--d"))
            args.insert(args.end(), {"--d", "2"});
        return;
    }
    const bool n = has(args, "--N"), nq = has(args, "--n-q"), nk = has(args, "--n-k");
    if (!n && !nq && !nk)
        args.insert(args.end(), {"--N", "16"});
    else if (nq && !nk && !n)
        args.insert(args.end(), {"--n-k", "16"});
    else if (nk && !nq && !n)
        args.insert(args.end(), {"--n-q", "16"});
    if (!has(args, "--d"))
        args.insert(args.end(), {"--d", "8"});
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
    ioattn::fuzz::init();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0)
        return 0;
    static const char* const kSubcommands[] = {"run", "io", "verify"};
    const std::string sub = kSubcommands[data[0] % 3];
    std::vector<std::string> args;
    std::string current;
    for (std::size_t i = 1; i < size; ++i) {
        const char c = static_cast<char>(data[i]);
        if (c == '\n') {
            args.push_back(current);
            current.clear();
        } else if (c == '\0') {
            return 0; // argv strings cannot hold NUL
        } else {
            current += c;
        }
    }
    if (size > 1)
        args.push_back(current);
    // verify's experiments sweep every shape up to its N and d, with fixed families per shape:
    // under ASan epochs --N 64 --d 64 takes 29 s, rank-formula --N 32 --d 8 13 s
    // (regress-verify-epochs-slow), hence its tighter product
    if (!bounded(args, sub == "verify" ? 32.0 : 65536.0))
        return 0;
    // verify all, count and lemma-4.6 run fixed exhaustive work whatever the sizes (count
    // enumerates its own tiny fields: 0.9 s in a release build, past the 20 s timeout under
    // ASan at -O1, regress-verify-all-slow; lemma-4.6 every index set of the 4 x 4 matrices
    // for each d: 4.0 s at its fuzz defaults, 7.5 s at --d 4): their options are the other
    // experiments'
    if (sub == "verify" && (has(args, "all") || has(args, "count") || has(args, "lemma-4.6")))
        return 0;
    add_small_sizes(sub, args);
    for (const std::string& a : args) // no files: --plot and file: patterns write or read paths
        if (a.find("--plot") == 0 || a.find("file") != std::string::npos)
            return 0;

    std::vector<std::string> argv_strings{"ioattn", sub};
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& s : argv_strings)
        argv.push_back(s.data());
    argv.push_back(nullptr);

    std::ostringstream out, err;
    std::streambuf* old_out = std::cout.rdbuf(out.rdbuf());
    std::streambuf* old_err = std::cerr.rdbuf(err.rdbuf());
    const int status =
        ioattn::app::program_main(static_cast<int>(argv_strings.size()), argv.data());
    std::cout.rdbuf(old_out);
    std::cerr.rdbuf(old_err);

    FUZZ_CHECK(status == 0 || status == 1 || status == 2);
    if (status != 0) {
        const std::string e = err.str();
        if (!(e.rfind("ioattn: ", 0) == 0 && e.find('\n') == e.size() - 1)) {
            std::fprintf(stderr, "exit %d with stderr:\n%s\n", status, e.c_str());
            FUZZ_CHECK(false && "a failing exit prints exactly one line 'ioattn: ...'");
        }
    }
    return 0;
}
