// ioattn demo: the whole engine in under a minute, on built-in seeded inputs (no files):
// 1. the dense forward and backward of both schedules against the double reference, with
// their counted I/O; 2. the I/O sweep over M and the measured crossover next to d^2 (with
// --plot, drawn by gnuplot); 3. a sparse pattern checked, then timed against the GraphBLAS
// pipeline and the dense kernel; 4. the finite-field verifier's quick experiments; 5. the
// fused forward timed against naive attention on OpenBLAS; 6. a decode step over a paged
// key/value cache against the read bandwidth. Each part opens with what it shows
// and the command that goes further; --json prints the whole tour as one document.

#include "commands.hpp"
#include "demo.hpp"
#include "plot.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <iostream>
#include <memory>
#include <string>

namespace ioattn::app {

namespace {

struct Part {
    const char* key;
    const char* title;
    const char* about; ///< what the part shows
    const char* next;  ///< the command that goes further
    nlohmann::json (*run)(const DemoOptions&, bool);
};

constexpr Part kParts[] = {
    {"dense",
     "Dense attention, forward and backward, against the reference",
     "Both schedules (fused: FlashAttention's streaming order, at a large fast memory M = 4 d^2; "
     "materialized: square tiles of the score matrix, at a small M = d^2 / 2) on a causal, "
     "grouped-query problem, checked against a double-precision reference (passed: the error is "
     "within twice that of a naive float computation). Every word moved is counted by IoCounter "
     "and must equal the closed form io_cost exactly. A last line runs the fused forward with bf16 "
     "operands (fp32 arithmetic and L) against the double reference on the bf16-rounded inputs.",
     "ioattn run --pass backward --schedule materialized --M 2048 --check --count-io",
     &demo_dense},
    {"io_sweep",
     "Counted I/O against M: the two regimes and the crossover",
     "The I/O of each schedule's tiling as the fast memory M doubles, next to the lower bound "
     "max(compulsory, min(N^2 d^2/M, N^2 d/sqrt(M))) and the explicit bound. Below d^2 the "
     "materialized schedule moves fewer words, above it the fused one: the measured crossover "
     "lands near M = d^2, where the papers put it. Every point is also walked by a dry run of "
     "the kernel.",
     "ioattn io --N 4096 --d 64 --plot io.svg  (or ioattn demo --plot io.svg)",
     &demo_io_sweep},
    {"sparse",
     "Sparse attention: a sliding window against GraphBLAS and the dense kernel",
     "The sparse engine on a window pattern (each query sees 257 keys): checked against the "
     "reference with exact counted I/O on a small shape, then timed on N = 2048 against the "
     "SuiteSparse:GraphBLAS pipeline (masked SDDMM, softmax, SpMM; its output must match) and "
     "against the dense fused kernel computing every pair.",
     "ioattn bench --suite sparse --quick --plot sparse.svg",
     &demo_sparse},
    {"verify",
     "The lower bounds' argument, verified over a finite field",
     "The communication-complexity argument behind the I/O lower bounds, run on concrete "
     "instances over F_p (NTL): Vandermonde ranks, the rank formula, counting, Lemma 4.6, "
     "fooling sets, the negative control, the sparse ranks, the epochs of real schedules and "
     "the binary field; the quick sizes.",
     "ioattn verify all  (full sizes; ioattn verify --help lists the experiments)",
     &demo_verify},
    {"speed",
     "Speed: the fused forward against naive attention on OpenBLAS",
     "The fused forward (ioattn::attention, planned once: the tuned tiling) against the naive "
     "three-step attention on "
     "OpenBLAS (S = Q K^T, softmax, O = P V with the scores in memory), B = 1, H = 8, N = 1024, "
     "d = 64; both outputs must agree.",
     "ioattn bench --suite dense --plot dense.svg  (roofline, time / bound, both passes)",
     &demo_speed},
    {"decode",
     "Decode: new tokens against a paged key/value cache",
     "One decode step of a ragged batch (one sequence empty) over a paged cache: the query "
     "heads of a KV group meet each cached row once, so the cache is read once; checked against "
     "ioattn::attention in double, the counted I/O equal to the closed form, and the cached "
     "bytes per second set against the read bandwidth measured in the same run.",
     "ioattn decode --kv-len 65536 --threads 2 --check  (--dtype bf16, --page-size 16, "
     "--pattern causal-window:4095)",
     &demo_decode},
};

/// `text` wrapped at 96 columns, indented by 3.
void paragraph(const std::string& text) {
    std::string line = "  ";
    std::string word;
    const auto flush_word = [&] {
        if (word.empty())
            return;
        if (line.size() + 1 + word.size() > 96) {
            std::cout << line << '\n';
            line = "  ";
        }
        line += " " + word;
        word.clear();
    };
    for (const char c : text) {
        if (c == ' ')
            flush_word();
        else
            word += c;
    }
    flush_word();
    std::cout << line << '\n';
}

void run(const DemoOptions& o) {
    if (!o.plot.empty())
        (void)plot_files(o.plot, "demo"); // a bad name fails before the tour
    const auto start = std::chrono::steady_clock::now();
    nlohmann::json tour = {{"parts", nlohmann::json::object()}};
    bool passed = true;
    int index = 0;
    for (const Part& part : kParts) {
        ++index;
        if (!o.json) {
            std::cout << (index == 1 ? "" : "\n") << index << ". " << part.title << '\n';
            paragraph(part.about);
        }
        nlohmann::json j = part.run(o, !o.json);
        passed = passed && j.at("passed").get<bool>();
        if (!o.json)
            std::cout << "   further: " << part.next << '\n';
        j["about"] = part.about;
        j["next"] = part.next;
        tour["parts"][part.key] = j;
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    tour["passed"] = passed;
    tour["seconds"] = seconds;
    if (o.json)
        std::cout << tour.dump(2) << '\n';
    else
        std::cout << "\ndemo: " << (passed ? "every check passed" : "A CHECK FAILED") << " in "
                  << seconds << " s\n";
    if (!passed)
        throw CheckFailed("demo: a check failed (see the parts above)");
}

} // namespace

} // namespace ioattn::app

void register_demo(CLI::App& app) {
    using namespace ioattn::app;
    auto o = std::make_shared<DemoOptions>();
    auto* cmd = app.add_subcommand(
        "demo",
        "The whole engine in under a minute on built-in inputs: dense forward and backward, the "
        "I/O sweep and its crossover, sparse against GraphBLAS, the verifier, speed, decode");
    cmd->add_option("--threads", o->threads, "Worker threads (0: all cores)")
        ->check(CLI::Range(0, 1 << 16))
        ->capture_default_str();
    cmd->add_option("--seed", o->seed, "Seed of the random inputs")->capture_default_str();
    cmd->add_option("--plot", o->plot, "Also draw the I/O sweep with gnuplot to FILE.svg");
    cmd->add_flag("--json", o->json, "The whole tour as one JSON document on stdout");
    cmd->callback([o] { run(*o); });
}
