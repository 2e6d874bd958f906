#pragma once
/// The finite-field experiments of docs/design.md section 10.5: named, seeded, reproducible runs,
/// parallel over instances with oneTBB. Results do not depend on the thread count.
///
/// Names: vandermonde, rank-formula, count, lemma-4.6, fooling, negative, sparse-rank, epochs,
/// binary.

#include <atomic>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace ioattn::ff {

/// Instances completed so far / planned, readable from another thread (progress display).
struct Progress {
    std::atomic<std::int64_t> done{0};
    std::atomic<std::int64_t> total{0};
};

/// Parameters of a run. Sizes sweep powers of two up to the maxima (and the maxima).
struct Config {
    std::int64_t n = 0;      ///< largest sequence length N; 0: the experiment's default
    std::int64_t d = 0;      ///< largest head dimension d (d <= N); 0: the experiment's default
    std::int64_t p = 0;      ///< the prime; 0: next_prime(max(n, 2^20)) (count: its own tiny p)
    std::int64_t m = 0;      ///< epochs: one fast-memory size M; 0: sweep 4d, 8d, ..., N d
    std::int64_t trials = 0; ///< random instances per shape; 0: each experiment's default
    std::uint64_t seed = 1;
    int threads = 0;               ///< 0: all
    bool negative_control = false; ///< accept p <= N (the rank formula may then fail)
    bool quick = false;            ///< smaller default sizes and sweeps (CI, the demo)
    std::string pattern; ///< epochs, sparse-rank: one support spec (parse_pattern) for every N
                         ///< of the sweep it fits; empty: every pattern family
    Progress* progress = nullptr; ///< optional; updated while running

    /// Throws InvalidArgument naming `where` and the value: n < 0, n > 4096, d < 0, d > n
    /// (both given), m < 0 or m > 2^40, trials < 0, p given but not prime or >= 2^60, p <= n
    /// without negative_control, a pattern that does not parse or fit N (size parameters of
    /// at least N, a file of another shape) or needs the sparse module this build lacks.
    void validate(std::string_view where) const;

    /// This config with the sizes experiment `name` uses when n or d is 0: epochs N = 1024,
    /// d = 64 (quick: 256, 32), the others N = 256, d = 32 (quick: 64, 16); d capped at N.
    [[nodiscard]] Config sized_for(std::string_view name) const;

    /// The prime used for F_p experiments (p, or the default).
    [[nodiscard]] std::int64_t prime() const;
};

/// One line of a result's breakdown (epochs: one per schedule, pass and kind of inputs).
struct ResultRow {
    std::string label;
    std::int64_t instances = 0;
    std::int64_t failed = 0;
    /// max over instances and epochs of |I_t(w)| / B(M, w); NaN if none.
    double max_epoch_ratio = std::numeric_limits<double>::quiet_NaN();
    /// max over replayed epochs of message / 2M; NaN if none.
    double max_message_ratio = std::numeric_limits<double>::quiet_NaN();
    /// min over instances of a lemma's slack (sparse-rank); NaN if none.
    double min_slack = std::numeric_limits<double>::quiet_NaN();
};

/// Outcome of one experiment.
struct Result {
    std::string name;
    std::int64_t instances = 0;
    std::int64_t passed = 0;
    std::int64_t failed = 0;
    /// lemma-4.6: min over instances of max(r_R, r_C) - bound (field elements); NaN if n/a.
    double min_slack = std::numeric_limits<double>::quiet_NaN();
    /// lemma-4.6: max over instances of U(I) / bound; NaN if n/a.
    double max_tightness = std::numeric_limits<double>::quiet_NaN();
    /// epochs: max over epochs of |I_t| / B_max (sparse inputs: |I_t(w)| / B(M, w)); NaN if n/a.
    double max_epoch_ratio = std::numeric_limits<double>::quiet_NaN();
    /// epochs: max over replayed epochs of message / 2M; NaN if n/a.
    double max_message_ratio = std::numeric_limits<double>::quiet_NaN();
    double seconds = 0;
    std::string first_failure;   ///< the first failing instance (by index), enough to rerun it
    std::string note;            ///< what was swept
    std::vector<ResultRow> rows; ///< a breakdown (epochs: per schedule); may be empty

    [[nodiscard]] bool ok() const { return failed == 0; }
};

/// The experiment names, in the order `all` runs them.
const std::vector<std::string>& experiment_names();

/// Runs one experiment. Throws InvalidArgument for an unknown name or a bad config (the
/// config is validated before anything runs). Failed checks are counted in the result.
Result run_experiment(std::string_view name, const Config& config);

/// Runs experiment_names() in order (or only `name` unless it is "all").
std::vector<Result> run_experiments(std::string_view name, const Config& config);

// The experiments one by one (exp_<name>.cpp); each validates `config` itself.
Result experiment_vandermonde(const Config& config);
Result experiment_rank_formula(const Config& config);
Result experiment_count(const Config& config);
Result experiment_lemma46(const Config& config);
Result experiment_fooling(const Config& config);
Result experiment_negative(const Config& config);
Result experiment_sparse_rank(const Config& config);
Result experiment_epochs(const Config& config);
Result experiment_binary(const Config& config);

} // namespace ioattn::ff
