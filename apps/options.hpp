#pragma once
// The options shared by the subcommands that take a problem (docs/design.md section 13). The names
// are part of the interface: scripts and docs depend on them. What they select (schedule, tiling,
// the smallest M that fits) is the library's policy: ioattn::plan_attention (ioattn/attention.hpp).

#include <ioattn/memory_model.hpp>
#include <ioattn/problem.hpp>
#include <ioattn/tiling.hpp>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>

namespace CLI {
class App;
} // namespace CLI

namespace ioattn::app {

/// Raw values of the shared options, as parsed. Resolve them with the functions below, which
/// throw InvalidArgument (exit 2) naming the subcommand and the bad value.
/// Marks an integer option that was not given.
inline constexpr std::int64_t kUnset = std::numeric_limits<std::int64_t>::min();

struct SharedOptions {
    std::string pass = "forward";
    std::int64_t n = 1024;
    std::int64_t n_q = kUnset; ///< unset: --N
    std::int64_t n_k = kUnset; ///< unset: --N
    std::int64_t d = 64;
    std::int64_t d_v = kUnset; ///< unset: --d
    std::int64_t batch = 1;
    std::int64_t heads = 1;
    std::int64_t kv_heads = kUnset; ///< unset: --heads
    bool causal = false;
    std::string pattern = "dense";
    std::string dtype = "float";
    std::string schedule = "auto";
    std::string select = "cost";
    std::int64_t m_words = kUnset;
    std::int64_t m_bytes = kUnset;
    std::int64_t cache_bytes = kUnset; ///< --cache-bytes: plan for a real cache of this size
    int threads = 0;                   ///< 0: every core
    std::uint64_t seed = 42;
    bool json = false;
    bool csv = false;
};

/// --pass --N --n-q --n-k --d --d-v --batch --heads --kv-heads --causal --pattern --dtype
void add_problem_options(CLI::App& cmd, SharedOptions& o);
/// --schedule auto|fused|materialized|reference and --select cost|theory
void add_schedule_options(CLI::App& cmd, SharedOptions& o);
/// --M words | --M-bytes bytes (suffixes k, KiB, M, MiB ... accepted)
void add_memory_options(CLI::App& cmd, SharedOptions& o);
/// --threads t (0: all cores), --seed s
void add_runtime_options(CLI::App& cmd, SharedOptions& o);
/// --json, and --csv unless `csv` is false
void add_output_options(CLI::App& cmd, SharedOptions& o, bool csv = true);

/// The resolved problem (the --pattern is resolved separately, by the subcommands that take
/// one). `where` names the subcommand. Throws InvalidArgument for bad sizes.
Problem problem_of(const SharedOptions& o, const char* where);

/// Throws UsageError unless --pattern is 'dense' (for subcommands with dense models only).
void require_dense_pattern(const SharedOptions& o, const char* where);

/// The usage error of an MPI option (`option` = "--dist", "--ranks") given `value` in a build
/// without MPI.
[[noreturn]] void
throw_built_without_mpi(const char* where, const char* option, const std::string& value);

/// --pass forward|backward.
Pass pass_of(const SharedOptions& o, const char* where);

/// Bytes of an operand word of --dtype: 4 (float), 8 (double) or 2 (bf16): the w of the time
/// bound and of the operands' bytes.
std::int64_t word_bytes(const SharedOptions& o);

/// Bytes of a word of fast memory M: word_bytes, but 4 for bf16 (the kernels hold fp32 tiles
/// of the widened operands; docs/design.md section 16). --M-bytes and --cache-bytes divide by it.
std::int64_t fast_word_bytes(const SharedOptions& o);

/// Whether --M or --M-bytes was given.
bool memory_given(const SharedOptions& o);

/// The fast memory: --M words, --M-bytes / word size, or the per-core L2 in words.
MemoryModel memory_of(const SharedOptions& o, const char* where);

/// --schedule: nullopt for auto.
std::optional<Schedule> schedule_of(const SharedOptions& o);

/// --select.
Select select_of(const SharedOptions& o);

/// Parses "lo:hi" (each a positive integer, lo <= hi); throws InvalidArgument.
std::pair<std::int64_t, std::int64_t> parse_range(const std::string& text, const char* what);

} // namespace ioattn::app
