// ioattn bench: benchmark suites measured in one run (docs/performance.md section 1): the
// command's options and the suites it runs, --suite dense (bench_dense.cpp), sparse
// (bench_sparse.cpp) or decode (bench_decode.cpp).

#include "bench_decode.hpp"
#include "bench_dense.hpp"
#include "bench_sparse.hpp"
#include "commands.hpp"
#include "options.hpp"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ioattn::app {

namespace {

constexpr const char* kBenchWhere = "bench";

struct BenchOptions {
    std::string suite = "dense";
    bool quick = false;
    bool count_io = false;
    bool json = false;
    bool csv = false;
    int threads = 2;
    int repeat = 5;
    std::uint64_t seed = 42;
    std::string plot;
    std::vector<std::int64_t> ns, ds;  ///< sparse: --N, --d
    std::vector<std::string> patterns; ///< sparse: --patterns
};

void run(const BenchOptions& o) {
    if (o.suite == "sparse") {
        run_sparse_suite(
            {o.quick, o.json, o.csv, o.count_io, o.repeat, o.seed, o.plot, o.ns, o.ds, o.patterns});
        return;
    }
    if (o.suite == "decode") {
        if (!o.plot.empty())
            throw UsageError(std::string(kBenchWhere) +
                             ": --plot draws the dense and sparse suites, not decode");
        run_decode_suite({o.quick, o.json, o.csv, o.threads, o.repeat, o.seed});
        return;
    }
    if (o.suite != "dense")
        throw UsageError(std::string(kBenchWhere) + ": --suite " + o.suite +
                         " is unknown (expected dense, sparse or decode)");
    run_dense_suite({o.quick, o.json, o.csv, o.threads, o.repeat, o.seed, o.plot});
}

} // namespace

} // namespace ioattn::app

void register_bench(CLI::App& app) {
    using namespace ioattn::app;
    auto o = std::make_shared<BenchOptions>();
    auto* cmd = app.add_subcommand(
        "bench",
        "Benchmark suites in one run: the fused forward against naive attention on OpenBLAS "
        "and the same-run SGEMM roofline");
    cmd->add_option("--suite",
                    o->suite,
                    "dense: fused vs naive OpenBLAS vs SGEMM, B=1 H=8; sparse: patterns x N x d x "
                    "schedules x threads vs dense fused, GraphBLAS and SGEMM, B=H=1; decode: "
                    "the decode step against the read bandwidth")
        ->check(CLI::IsMember({"dense", "sparse", "decode"}))
        ->capture_default_str();
    cmd->add_flag("--quick", o->quick, "A subset (dense: N = 1024; sparse: N = 4096, d = 64)");
    cmd->add_flag("--count-io", o->count_io, "sparse: add each row's counted I/O and its bound");
    auto* j = cmd->add_flag("--json", o->json, "Machine-readable JSON on stdout");
    cmd->add_flag("--csv", o->csv, "Machine-readable CSV on stdout")->excludes(j);
    cmd->add_option("--threads", o->threads, "Threads for every row (oneTBB and OpenBLAS)")
        ->check(CLI::Range(1, 1 << 16))
        ->capture_default_str();
    cmd->add_option("--repeat", o->repeat, "Timed runs per row (median)")
        ->check(CLI::Range(1, 1 << 20))
        ->capture_default_str();
    cmd->add_option("--seed", o->seed, "Seed of the random inputs")->capture_default_str();
    cmd->add_option("--N", o->ns, "sparse: these sequence lengths instead of the suite's")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 24));
    cmd->add_option("--d", o->ds, "sparse: these head dimensions instead of the suite's")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 12));
    cmd->add_option(
        "--patterns", o->patterns, "sparse: these pattern specs instead of the suite's");
    cmd->add_option("--plot",
                    o->plot,
                    "Also plot GFLOP/s per shape or pattern and schedule, with the peers and the "
                    "roofline, with gnuplot: FILE.svg, its data FILE.csv and script FILE.gp");
    cmd->callback([o] { run(*o); });
}
