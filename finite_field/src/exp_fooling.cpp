// ioattn::ff::experiment_fooling: no linear compressor with fewer than r_R outputs computes
// (Q K^T)|_I: for a random one, an explicit fooling pair Q, Q' (same message, different entries)
// Field: F_p, p = config.prime(); K = vandermonde(N, d, p).
// Construction: C is a random m x N d matrix, m < r_R(I). Its kernel has dimension >= Nd - m >
//   Nd - r_R = dim ker(query_map), so some kernel basis vector delta has query_map delta != 0;
//   Q random, Q' = Q - delta. Checked directly: C vec(Q) = C vec(Q') and the restricted
//   products (computed naively) differ.
// Instances: N in {4, 8, 16}, d in {1, 2, 4} (<= N, <= config d), `trials` (default 8) random
//   nonempty index sets each, m uniform in [0, r_R - 1].
// Ops: one NTL kernel of an m x N d matrix and a few naive products per instance.
// Tests: tests/finite_field/experiments_test.cpp

#include "experiments_impl.hpp"

#include <ioattn/ff/construct.hpp>
#include <ioattn/ff/index_set.hpp>
#include <ioattn/ff/rank_map.hpp>

#include <random>
#include <string>

namespace ioattn::ff {

namespace {

struct FoolingInstance {
    std::int64_t n = 0;
    std::int64_t d = 0;
    std::uint64_t seed = 0;
};

// vec(Q) as an (n d) x 1 column.
Matrix column(const Matrix& q) {
    Matrix c(q.rows() * q.cols(), 1);
    for (std::int64_t i = 0; i < q.rows(); ++i)
        for (std::int64_t j = 0; j < q.cols(); ++j)
            c(i * q.cols() + j, 0) = q(i, j);
    return c;
}

detail::Outcome run_one(const FoolingInstance& in, const Prime& p, bool repeated_points) {
    std::mt19937_64 rng(in.seed);
    const Matrix k = vandermonde(in.n, in.d, p, repeated_points);
    const std::int64_t size = std::uniform_int_distribution<std::int64_t>(1, in.n * in.n)(rng);
    const IndexSet set = uniform_random(in.n, size, rng());
    const std::int64_t r_row = rank_rows(set, in.d);
    const std::int64_t m = std::uniform_int_distribution<std::int64_t>(0, r_row - 1)(rng);
    const Matrix c = random_matrix(m, in.n * in.d, p, rng());
    const Matrix phi = query_map(set, k, p);
    // --- a kernel vector of C outside the kernel of Q -> (Q K^T)|_I ---
    const Matrix ker = kernel(c, p);
    std::int64_t pick = -1;
    for (std::int64_t r = 0; r < ker.rows() && pick < 0; ++r) {
        Matrix delta(ker.cols(), 1);
        for (std::int64_t j = 0; j < ker.cols(); ++j)
            delta(j, 0) = ker(r, j);
        const Matrix image = multiply(phi, delta, p);
        for (std::int64_t j = 0; j < image.rows(); ++j)
            if (image(j, 0) != 0)
                pick = r;
    }
    const std::string where = "fooling N=" + std::to_string(in.n) + " d=" + std::to_string(in.d) +
                              " p=" + std::to_string(p.p) + " seed=" + std::to_string(in.seed) +
                              " |I|=" + std::to_string(set.size()) +
                              " r_R=" + std::to_string(r_row) + " m=" + std::to_string(m);
    detail::Outcome o;
    if (pick < 0) {
        o.ok = false;
        o.failure = where + ": every kernel vector of C is in the kernel of the map";
        return o;
    }
    // --- Q' = Q - delta; check the pair directly ---
    const Matrix q = random_matrix(in.n, in.d, p, rng());
    Matrix q2 = q;
    for (std::int64_t i = 0; i < in.n; ++i)
        for (std::int64_t j = 0; j < in.d; ++j)
            q2(i, j) = sub_mod(q(i, j), ker(pick, i * in.d + j), p);
    const bool same_message = multiply(c, column(q), p) == multiply(c, column(q2), p);
    const bool entries_differ =
        restricted_product(q, k, set, p) != restricted_product(q2, k, set, p);
    if (!same_message || !entries_differ) {
        o.ok = false;
        o.failure = where + (same_message ? ": entries agree" : ": messages differ");
    }
    return o;
}

} // namespace

Result experiment_fooling(const Config& given) {
    const Config config = given.sized_for("fooling");
    config.validate("ioattn::ff::experiment_fooling");
    const detail::Stopwatch clock;
    const Prime p = Prime::for_size(
        config.prime(), std::min<std::int64_t>(16, config.n), config.negative_control);
    const std::int64_t trials = detail::trials_or(config, 8);
    std::vector<FoolingInstance> inst;
    for (std::int64_t n : {4, 8, 16})
        for (std::int64_t d : {1, 2, 4})
            if (n <= config.n && d <= config.d && d <= n)
                for (std::int64_t t = 0; t < trials; ++t)
                    inst.push_back(
                        {n,
                         d,
                         derive_seed(config.seed, 50, static_cast<std::uint64_t>(inst.size()))});
    Result result;
    result.name = "fooling";
    detail::tally(
        result,
        detail::run_instances(config, static_cast<std::int64_t>(inst.size()), [&](std::int64_t i) {
            return run_one(inst[static_cast<std::size_t>(i)], p, config.negative_control);
        }));
    result.note =
        "N in {4,8,16}, d in {1,2,4}, random C with m < r_R outputs, p=" + std::to_string(p.p);
    result.seconds = clock.seconds();
    return result;
}

} // namespace ioattn::ff
