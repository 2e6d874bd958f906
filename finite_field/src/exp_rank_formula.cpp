// ioattn::ff::experiment_rank_formula: rank(Q -> (Q K^T)|_I) = r_R(I), and rank(K -> (Q K^T)|_I)
// = r_C(I), for Vandermonde K (resp. Q) and every family of index_set.hpp
// Field: F_p, p = config.prime() > N; K = Q = vandermonde(N, d, p).
// Check per instance: the NTL rank through the block structure (sum of rank(K_{R_i})) equals
//   r_R, the same for columns, and where |I| N d <= 2^18 the NTL rank of the full |I| x N d map
//   matrices agrees too. Plus all index sets of the 3 x 3 matrix for d = 1, 2.
// Ops: block route n ranks of |R_i| x d (memoised per distinct R_i; a row whose first d columns
//   already give rank d has rank d, exactly, since d bounds it).
// Tests: tests/finite_field/experiments_test.cpp

#include "experiments_impl.hpp"

#include <ioattn/ff/construct.hpp>
#include <ioattn/ff/index_set.hpp>
#include <ioattn/ff/rank_map.hpp>

#include <map>
#include <string>

namespace ioattn::ff {

namespace {

// sum over groups of rank(m_group): the block route, with the rank-d shortcut and memo.
std::int64_t
block_rank(const std::vector<std::vector<std::int64_t>>& groups, const Matrix& m, const Prime& p) {
    const std::int64_t d = m.cols();
    std::map<std::vector<std::int64_t>, std::int64_t> memo;
    std::int64_t total = 0;
    for (const auto& g : groups) {
        if (g.empty())
            continue;
        auto it = memo.find(g);
        if (it == memo.end()) {
            std::int64_t r = 0;
            if (static_cast<std::int64_t>(g.size()) > d) {
                const std::vector<std::int64_t> head(g.begin(), g.begin() + d);
                r = rank(m.select_rows(head), p);
            }
            if (r != d) // rank of all of g, when the first d rows did not already reach d
                r = rank(m.select_rows(g), p);
            it = memo.emplace(g, r).first;
        }
        total += it->second;
    }
    return total;
}

} // namespace

detail::Outcome detail::rank_formula_check(const NamedSet& named, const Matrix& k, const Prime& p) {
    constexpr std::int64_t kFullLimit = std::int64_t{1} << 18;
    const IndexSet& set = named.set;
    const std::int64_t d = k.cols();
    std::vector<std::vector<std::int64_t>> by_row(static_cast<std::size_t>(set.n_rows()));
    std::vector<std::vector<std::int64_t>> by_col(static_cast<std::size_t>(set.n_cols()));
    for (const Entry& e : set.entries()) {
        by_row[static_cast<std::size_t>(e.row)].push_back(e.col);
        by_col[static_cast<std::size_t>(e.col)].push_back(e.row);
    }
    const std::int64_t r_row = rank_rows(set, d);
    const std::int64_t r_col = rank_cols(set, d);
    const std::int64_t b_row = block_rank(by_row, k, p); // K_{R_i} per row
    const std::int64_t b_col = block_rank(by_col, k, p); // Q_{C_j} per column (Q = K)
    std::int64_t f_row = b_row;
    std::int64_t f_col = b_col;
    if (set.size() * set.n_rows() * d <= kFullLimit) {
        f_row = rank(query_map(set, k, p), p);
        f_col = rank(key_map(set, k, p), p);
    }
    detail::Outcome o;
    if (r_row != b_row || r_col != b_col || f_row != b_row || f_col != b_col) {
        o.ok = false;
        o.failure = "rank-formula " + named.name + " d=" + std::to_string(d) +
                    " p=" + std::to_string(p.p) + ": r_R=" + std::to_string(r_row) +
                    " blocks=" + std::to_string(b_row) + " full=" + std::to_string(f_row) +
                    "; r_C=" + std::to_string(r_col) + " blocks=" + std::to_string(b_col) +
                    " full=" + std::to_string(f_col);
    }
    return o;
}

Result experiment_rank_formula(const Config& given) {
    const Config config = given.sized_for("rank-formula");
    config.validate("ioattn::ff::experiment_rank_formula");
    const detail::Stopwatch clock;
    const Prime p = Prime::for_size(config.prime(), config.n, config.negative_control);
    const std::int64_t random_sets = detail::trials_or(config, 6);

    // --- one batch per shape (the families of one shape at a time bound the memory) ---
    const auto grid = detail::shape_grid(config.n, config.d);
    Result result;
    result.name = "rank-formula";
    auto run_batch = [&](const Matrix& k, const std::vector<NamedSet>& sets) {
        detail::tally(result,
                      detail::run_instances(
                          config, static_cast<std::int64_t>(sets.size()), [&](std::int64_t i) {
                              return detail::rank_formula_check(
                                  sets[static_cast<std::size_t>(i)], k, p);
                          }));
    };
    for (std::size_t s = 0; s < grid.size(); ++s) {
        const auto [n, d] = grid[s];
        run_batch(vandermonde(n, d, p, config.negative_control),
                  standard_families(n, d, derive_seed(config.seed, 20, s), random_sets, 3, 2000));
    }
    // --- all 512 index sets of a 3 x 3 matrix, d = 1 and 2 (when N >= 3) ---
    if (config.n >= 3)
        for (std::int64_t d = 1; d <= std::min<std::int64_t>(2, config.d); ++d) {
            std::vector<NamedSet> sets;
            for (std::uint64_t mask = 0; mask < 512; ++mask)
                sets.push_back(
                    {"from_mask(n=3,mask=" + std::to_string(mask) + ")", from_mask(3, mask)});
            run_batch(vandermonde(3, d, p, config.negative_control), sets);
        }

    result.note = std::to_string(grid.size()) + " shapes N<=" + std::to_string(config.n) +
                  " d<=" + std::to_string(config.d) +
                  " x families, all sets of 3x3, p=" + std::to_string(p.p);
    result.seconds = clock.seconds();
    return result;
}

} // namespace ioattn::ff
