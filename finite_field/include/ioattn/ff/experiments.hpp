#pragma once
/// The eight finite-field experiments of DESIGN.md section 3: named, seeded, reproducible runs,
/// parallel over instances with oneTBB. Results do not depend on the thread count.
///
/// Names: vandermonde, rank-formula, count, lemma-4.6, fooling, negative, epochs, binary.

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
    std::int64_t n = 256;    ///< largest sequence length N
    std::int64_t d = 32;     ///< largest head dimension d (d <= N)
    std::int64_t p = 0;      ///< the prime; 0: next_prime(max(n, 2^20)) (count: its own tiny p)
    std::int64_t m = 0;      ///< epochs: one fast-memory size M; 0: sweep 4d, 8d, ..., N d
    std::int64_t trials = 0; ///< random instances per shape; 0: each experiment's default
    std::uint64_t seed = 1;
    int threads = 0;               ///< 0: all
    bool negative_control = false; ///< accept p <= N (the rank formula may then fail)
    Progress* progress = nullptr;  ///< optional; updated while running

    /// Throws InvalidArgument naming `where` and the value: n < 1, n > 4096, d < 1, d > n,
    /// m < 0 or m > 2^40, trials < 0, p given but not prime or >= 2^60, p <= n without
    /// negative_control.
    void validate(std::string_view where) const;

    /// The prime used for F_p experiments (p, or the default).
    [[nodiscard]] std::int64_t prime() const;
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
    /// epochs: max over epochs of |I_t| / B_max; NaN if n/a.
    double max_epoch_ratio = std::numeric_limits<double>::quiet_NaN();
    double seconds = 0;
    std::string first_failure; ///< the first failing instance (by index), enough to rerun it
    std::string note;          ///< what was swept

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
Result experiment_epochs(const Config& config);
Result experiment_binary(const Config& config);

} // namespace ioattn::ff
