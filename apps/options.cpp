// The shared options of the ioattn program (docs/design.md section 13) and their resolution into
// library values. Bad values become InvalidArgument / UsageError: one line on stderr, exit 2.

#include "options.hpp"

#include "commands.hpp"

#include <ioattn/error.hpp>

#include <CLI/CLI.hpp>

#include <string>

namespace ioattn::app {

void add_problem_options(CLI::App& cmd, SharedOptions& o) {
    cmd.add_option("--pass", o.pass, "Which pass: forward or backward")
        ->check(CLI::IsMember({"forward", "backward"}))
        ->capture_default_str();
    auto* n = cmd.add_option("--N", o.n, "Sequence length (n_q = n_k = N)")->capture_default_str();
    auto* nq = cmd.add_option("--n-q", o.n_q, "Query rows (default: N)");
    auto* nk = cmd.add_option("--n-k", o.n_k, "Key/value rows (default: N)");
    n->excludes(nq)->excludes(nk);
    cmd.add_option("--d", o.d, "Head dimension of Q and K")->capture_default_str();
    cmd.add_option("--d-v", o.d_v, "Head dimension of V and O (default: d)");
    cmd.add_option("--batch", o.batch, "Batch size")->capture_default_str();
    cmd.add_option("--heads", o.heads, "Query heads")->capture_default_str();
    cmd.add_option(
        "--kv-heads", o.kv_heads, "Key/value heads, must divide --heads (default: heads)");
    cmd.add_flag("--causal", o.causal, "Causal mask (bottom-right aligned when n_q != n_k)");
    cmd.add_option("--pattern",
                   o.pattern,
                   "Sparse support spec, e.g. window:256, bigbird:64:2:3, causal-varlen:128,900,33 "
                   "(packed sequences), file:A.mtx (default: dense)")
        ->capture_default_str();
    cmd.add_option("--dtype",
                   o.dtype,
                   "Working precision: float, double or bf16 (storage bfloat16, arithmetic and "
                   "L fp32)")
        ->check(CLI::IsMember({"float", "double", "bf16"}))
        ->capture_default_str();
}

void add_schedule_options(CLI::App& cmd, SharedOptions& o) {
    cmd.add_option("--schedule", o.schedule, "Kernel: auto, fused, materialized or reference")
        ->check(CLI::IsMember({"auto", "fused", "materialized", "reference"}))
        ->capture_default_str();
    cmd.add_option("--select",
                   o.select,
                   "How auto chooses: cost (fewer exact words) or theory (fused iff M >= d^2)")
        ->check(CLI::IsMember({"cost", "theory"}))
        ->capture_default_str();
}

void add_memory_options(CLI::App& cmd, SharedOptions& o) {
    auto* m = cmd.add_option("--M", o.m_words, "Fast memory in words (default: per-core L2)");
    auto* mb = cmd.add_option("--M-bytes",
                              o.m_bytes,
                              "Fast memory in bytes, e.g. 2MiB (words = bytes / word size)")
                   ->transform(CLI::AsSizeValue(false));
    auto* cb = cmd.add_option("--cache-bytes",
                              o.cache_bytes,
                              "Plan for a real cache of this size, e.g. 512KiB: M = bytes / word "
                              "size / 2, the slack an LRU cache needs to move the counted words "
                              "(MemoryModel::for_cache)")
                   ->transform(CLI::AsSizeValue(false));
    m->excludes(mb);
    cb->excludes(m);
    cb->excludes(mb);
}

void add_runtime_options(CLI::App& cmd, SharedOptions& o) {
    cmd.add_option("--threads", o.threads, "Worker threads (0: all cores)")
        ->check(CLI::Range(0, 1 << 16))
        ->capture_default_str();
    cmd.add_option("--seed", o.seed, "Seed of the random inputs")->capture_default_str();
}

void add_output_options(CLI::App& cmd, SharedOptions& o, bool csv) {
    auto* j = cmd.add_flag("--json", o.json, "Machine-readable JSON on stdout");
    if (csv)
        cmd.add_flag("--csv", o.csv, "Machine-readable CSV on stdout")->excludes(j);
}

void require_dense_pattern(const SharedOptions& o, const char* where) {
    if (o.pattern != "dense")
        throw UsageError(std::string(where) + ": --pattern " + o.pattern +
                         ": this subcommand models dense attention only; sparse patterns run "
                         "with `ioattn run --pattern` and `ioattn bench --suite sparse`");
}

void throw_built_without_mpi(const char* where, const char* option, const std::string& value) {
    throw UsageError(std::string(where) + ": " + option + " " + value +
                     ": this ioattn was built without MPI (IOATTN_WITH_MPI, libopenmpi-dev)");
}

Pass pass_of(const SharedOptions& o, const char* where) {
    if (o.pass == "backward")
        return Pass::backward;
    if (o.pass != "forward")
        throw UsageError(std::string(where) + ": --pass " + o.pass +
                         " (expected forward or backward)");
    return Pass::forward;
}

Problem problem_of(const SharedOptions& o, const char* where) {
    (void)pass_of(o, where);
    const auto given = [&](std::int64_t value, const char* name) {
        if (value != kUnset && value < 1)
            throw InvalidArgument(std::string(where) + ": " + name + " = " + std::to_string(value) +
                                  " (expected >= 1)");
        return value != kUnset;
    };
    Problem p;
    p.batch = o.batch;
    p.heads = o.heads;
    p.kv_heads = given(o.kv_heads, "kv_heads") ? o.kv_heads : 0;
    p.n_q = given(o.n_q, "n_q") ? o.n_q : o.n;
    p.n_k = given(o.n_k, "n_k") ? o.n_k : o.n;
    p.d = o.d;
    p.d_v = given(o.d_v, "d_v") ? o.d_v : 0;
    p.causal = o.causal;
    return p.resolved(where);
}

std::int64_t word_bytes(const SharedOptions& o) {
    return o.dtype == "double" ? 8 : o.dtype == "bf16" ? 2 : 4;
}

std::int64_t fast_word_bytes(const SharedOptions& o) {
    return o.dtype == "bf16" ? 4 : word_bytes(o);
}

bool memory_given(const SharedOptions& o) {
    return o.m_words != kUnset || o.m_bytes != kUnset || o.cache_bytes != kUnset;
}

MemoryModel memory_of(const SharedOptions& o, const char* where) {
    const std::int64_t wb = fast_word_bytes(o);
    MemoryModel m = MemoryModel::per_core_l2(wb);
    if (o.m_bytes != kUnset) {
        if (o.m_bytes < wb)
            throw InvalidArgument(std::string(where) + ": --M-bytes " + std::to_string(o.m_bytes) +
                                  " is less than one word of " + std::to_string(wb) + " bytes");
        m.fast_words = o.m_bytes / wb;
    } else if (o.cache_bytes != kUnset) {
        m = MemoryModel::for_cache(o.cache_bytes, wb);
    } else if (o.m_words != kUnset) {
        m.fast_words = o.m_words;
    }
    if (m.fast_words < 1)
        throw InvalidArgument(std::string(where) + ": M = " + std::to_string(m.fast_words) +
                              " words (expected >= 1)");
    return m;
}

std::optional<Schedule> schedule_of(const SharedOptions& o) {
    if (o.schedule == "auto")
        return std::nullopt;
    return parse_schedule(o.schedule);
}

Select select_of(const SharedOptions& o) {
    return o.select == "theory" ? Select::theory : Select::cost;
}

std::pair<std::int64_t, std::int64_t> parse_range(const std::string& text, const char* what) {
    const auto colon = text.find(':');
    const auto bad = [&]() {
        return InvalidArgument(std::string(what) + " '" + text +
                               "' (expected lo:hi with 1 <= lo <= hi)");
    };
    if (colon == std::string::npos)
        throw bad();
    std::int64_t lo = 0;
    std::int64_t hi = 0;
    try {
        std::size_t a = 0;
        std::size_t b = 0;
        lo = std::stoll(text.substr(0, colon), &a);
        hi = std::stoll(text.substr(colon + 1), &b);
        if (a != colon || b != text.size() - colon - 1)
            throw bad();
    } catch (const std::logic_error&) {
        throw bad();
    }
    if (lo < 1 || hi < lo)
        throw bad();
    return {lo, hi};
}

} // namespace ioattn::app
