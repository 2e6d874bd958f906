// ioattn::ff::run_experiment: runs an experiment by name, and the experiments' shared pieces
// (config validation, the size grid, the deterministic tally of outcomes)
// Field: F_p with p = Config::prime(); each experiment states its own instances.
// Exactness: outcomes are reduced serially in instance order: results are independent of the
//   thread count.
// Tests: tests/finite_field/experiments_test.cpp

#include "experiments_impl.hpp"
#include "record.hpp"

#include <ioattn/error.hpp>
#include <ioattn/ff/field.hpp>

#include <algorithm>
#include <random>
#include <string>

namespace ioattn::ff {

void Config::validate(std::string_view where) const {
    const std::string w(where);
    if (n < 0)
        throw InvalidArgument(w + ": N = " + std::to_string(n) +
                              " (expected >= 1, or 0 for the default)");
    if (d < 0)
        throw InvalidArgument(w + ": d = " + std::to_string(d) +
                              " (expected >= 1, or 0 for the default)");
    if (n > 0 && d > n)
        throw InvalidArgument(w + ": d = " + std::to_string(d) + " > N = " + std::to_string(n) +
                              " (expected d <= N)");
    if (n > 4096)
        throw InvalidArgument(w + ": N = " + std::to_string(n) + " (expected N <= 4096)");
    if (m < 0)
        throw InvalidArgument(w + ": M = " + std::to_string(m) +
                              " (expected M >= 1, or 0 to sweep)");
    if (m > std::int64_t{1} << 40)
        throw InvalidArgument(w + ": M = " + std::to_string(m) + " (expected M <= 2^40)");
    if (trials < 0)
        throw InvalidArgument(w + ": trials = " + std::to_string(trials) + " (expected >= 0)");
    if (p != 0)
        (void)Prime::for_size(p, std::max<std::int64_t>(n, 1), negative_control, where);
    if (!pattern.empty() && n > 0)
        detail::check_pattern_fits(pattern, n, w.c_str());
}

Config Config::sized_for(std::string_view name) const {
    Config c = *this;
    const bool epochs = name == "epochs";
    if (c.n == 0)
        c.n = epochs ? (quick ? 256 : 1024) : (quick ? 64 : 256);
    if (c.d == 0)
        c.d = std::min<std::int64_t>(epochs ? (quick ? 32 : 64) : (quick ? 16 : 32), c.n);
    if (!epochs && name != "sparse-rank")
        c.pattern.clear(); // only these two take a support
    return c;
}

std::int64_t Config::prime() const {
    return p != 0 ? p : next_prime(std::max<std::int64_t>(n, std::int64_t{1} << 20));
}

const std::vector<std::string>& experiment_names() {
    static const std::vector<std::string> names{"vandermonde",
                                                "rank-formula",
                                                "count",
                                                "lemma-4.6",
                                                "fooling",
                                                "negative",
                                                "sparse-rank",
                                                "epochs",
                                                "binary"};
    return names;
}

Result run_experiment(std::string_view name, const Config& config) {
    if (name == "vandermonde")
        return experiment_vandermonde(config);
    if (name == "rank-formula")
        return experiment_rank_formula(config);
    if (name == "count")
        return experiment_count(config);
    if (name == "lemma-4.6")
        return experiment_lemma46(config);
    if (name == "fooling")
        return experiment_fooling(config);
    if (name == "negative")
        return experiment_negative(config);
    if (name == "sparse-rank")
        return experiment_sparse_rank(config);
    if (name == "epochs")
        return experiment_epochs(config);
    if (name == "binary")
        return experiment_binary(config);
    std::string known;
    for (const std::string& n : experiment_names())
        known += (known.empty() ? "" : ", ") + n;
    throw InvalidArgument("ioattn::ff::run_experiment: unknown experiment '" + std::string(name) +
                          "' (expected all, " + known + ")");
}

std::vector<Result> run_experiments(std::string_view name, const Config& config) {
    config.validate("ioattn::ff::run_experiments");
    std::vector<std::string> names{std::string(name)};
    if (name == "all")
        names = experiment_names();
    for (const std::string& n : names) // every sized config before anything runs
        config.sized_for(n).validate("ioattn::ff::run_experiments");
    std::vector<Result> out;
    for (const std::string& n : names)
        out.push_back(run_experiment(n, config));
    return out;
}

namespace detail {

std::vector<std::pair<std::int64_t, std::int64_t>>
shape_grid(std::int64_t n_max, std::int64_t d_max, std::int64_t n_min) {
    std::vector<std::int64_t> ns;
    for (std::int64_t n = n_min; n < n_max; n *= 2)
        ns.push_back(n);
    ns.push_back(n_max);
    std::vector<std::pair<std::int64_t, std::int64_t>> grid;
    for (std::int64_t n : ns) {
        const std::int64_t top = std::min(d_max, n);
        for (std::int64_t d = 1; d < top; d *= 2)
            grid.emplace_back(n, d);
        grid.emplace_back(n, top);
    }
    return grid;
}

void tally(Result& result, const std::vector<Outcome>& outcomes) {
    for (const Outcome& o : outcomes) {
        ++result.instances;
        if (o.ok) {
            ++result.passed;
        } else {
            ++result.failed;
            if (result.first_failure.empty())
                result.first_failure = o.failure;
        }
        // NaN-aware extrema: a NaN in the result means "no value yet"
        if (!std::isnan(o.slack) && !(o.slack >= result.min_slack))
            result.min_slack = o.slack;
        if (!std::isnan(o.tightness) && !(o.tightness <= result.max_tightness))
            result.max_tightness = o.tightness;
        if (!std::isnan(o.epoch_ratio) && !(o.epoch_ratio <= result.max_epoch_ratio))
            result.max_epoch_ratio = o.epoch_ratio;
        if (!std::isnan(o.message_ratio) && !(o.message_ratio <= result.max_message_ratio))
            result.max_message_ratio = o.message_ratio;
        if (o.row < 0 || o.row >= static_cast<std::int64_t>(result.rows.size()))
            continue;
        ResultRow& row = result.rows[static_cast<std::size_t>(o.row)];
        ++row.instances;
        row.failed += o.ok ? 0 : 1;
        if (!std::isnan(o.epoch_ratio) && !(o.epoch_ratio <= row.max_epoch_ratio))
            row.max_epoch_ratio = o.epoch_ratio;
        if (!std::isnan(o.message_ratio) && !(o.message_ratio <= row.max_message_ratio))
            row.max_message_ratio = o.message_ratio;
        if (!std::isnan(o.slack) && !(o.slack >= row.min_slack))
            row.min_slack = o.slack;
    }
}

std::string join(const std::vector<std::int64_t>& v) {
    std::string s;
    for (std::int64_t x : v)
        s += (s.empty() ? "" : ",") + std::to_string(x);
    return s;
}

std::vector<std::int64_t> random_subset(std::int64_t n, std::int64_t k, std::uint64_t seed) {
    std::vector<std::int64_t> all(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)
        all[static_cast<std::size_t>(i)] = i;
    std::mt19937_64 rng(seed);
    for (std::int64_t i = 0; i < k; ++i) {
        std::uniform_int_distribution<std::int64_t> pick(i, n - 1);
        std::swap(all[static_cast<std::size_t>(i)], all[static_cast<std::size_t>(pick(rng))]);
    }
    all.resize(static_cast<std::size_t>(k));
    std::sort(all.begin(), all.end());
    return all;
}

std::vector<std::vector<std::int64_t>> all_subsets(std::int64_t n, std::int64_t k) {
    std::vector<std::vector<std::int64_t>> out;
    std::vector<std::int64_t> c(static_cast<std::size_t>(k));
    for (std::int64_t i = 0; i < k; ++i)
        c[static_cast<std::size_t>(i)] = i;
    if (k > n)
        return out;
    while (true) {
        out.push_back(c);
        // --- next combination: bump the rightmost index that can move ---
        std::int64_t i = k - 1;
        while (i >= 0 && c[static_cast<std::size_t>(i)] == n - k + i)
            --i;
        if (i < 0)
            return out;
        ++c[static_cast<std::size_t>(i)];
        for (std::int64_t j = i + 1; j < k; ++j)
            c[static_cast<std::size_t>(j)] = c[static_cast<std::size_t>(j - 1)] + 1;
    }
}

std::int64_t binomial_capped(std::int64_t n, std::int64_t k, std::int64_t cap) {
    if (k < 0 || k > n)
        return 0;
    k = std::min(k, n - k);
    double b = 1;
    for (std::int64_t i = 1; i <= k; ++i) {
        b = b * static_cast<double>(n - k + i) / static_cast<double>(i);
        if (b > static_cast<double>(cap))
            return cap;
    }
    return std::llround(b);
}

} // namespace detail

} // namespace ioattn::ff
