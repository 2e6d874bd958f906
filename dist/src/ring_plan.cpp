// The ring passes' shared helpers (see ring_plan.hpp): rectangles of a block pair, piece sizes,
// element-wise view operations, the log-sum-exp merge and the collective entry validation.

#include "ring_plan.hpp"

#include <ioattn/bf16.hpp>
#include <ioattn/error.hpp>
#include <ioattn/parallel.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace ioattn::dist::detail {

namespace {

/// Rows per task of the element-wise loops below.
constexpr std::int64_t kRowsPerTask = 64;

/// Runs fn(b, h, i) for every row of a [batch][heads][rows] shape, in parallel.
template <typename Fn>
void for_rows(std::int64_t batch, std::int64_t heads, std::int64_t rows, const Fn& fn) {
    const std::int64_t blocks = (rows + kRowsPerTask - 1) / kRowsPerTask;
    parallel_for_tiles(batch * heads * blocks, [&](std::int64_t task, int /*worker*/) {
        const std::int64_t slice = task / blocks;
        const std::int64_t i0 = task % blocks * kRowsPerTask;
        const std::int64_t i1 = std::min(rows, i0 + kRowsPerTask);
        for (std::int64_t i = i0; i < i1; ++i)
            fn(slice / heads, slice % heads, i);
    });
}

} // namespace

Rects rectangles(std::int64_t m, std::int64_t n, std::int64_t t, bool causal) {
    Rects r;
    if (!causal) {
        r.rect[0] = {0, m, 0, n, false};
        r.count = 1;
        return r;
    }
    // row i sees keys [0, min(n, i + t + 1)): none before i0, a prefix up to and including
    // all n keys before i1 (one causal rectangle), all n keys after
    const std::int64_t i0 = std::clamp<std::int64_t>(-t, 0, m);
    const std::int64_t i1 = std::clamp<std::int64_t>(n - t, i0, m);
    if (i1 > i0)
        r.rect[static_cast<std::size_t>(r.count++)] = {i0, i1, 0, i1 + t, true};
    if (m > i1)
        r.rect[static_cast<std::size_t>(r.count++)] = {i1, m, 0, n, false};
    return r;
}

std::int64_t
piece_rows(const Problem& problem, const Tiling& tiling, std::int64_t other, double flops) {
    const double per_row = 2.0 * static_cast<double>(problem.batch_heads()) *
                           static_cast<double>(std::max<std::int64_t>(other, 1)) *
                           static_cast<double>(problem.d + problem.d_v);
    const auto rows = static_cast<std::int64_t>(std::min(flops / per_row, 1e15));
    return std::max(tiling.rows, rows / tiling.rows * tiling.rows);
}

template <typename From, typename To>
void copy_view(const TensorView<const From>& from, const TensorView<To>& to) {
    for_rows(
        from.batch, from.heads, from.rows, [&](std::int64_t b, std::int64_t h, std::int64_t i) {
            const From* x = from.row(b, h, i);
            To* y = to.row(b, h, i);
            if constexpr (std::is_same_v<From, To>)
                std::copy_n(x, from.cols, y);
            else if constexpr (std::is_same_v<From, bf16>)
                widen(x, y, from.cols);
            else
                narrow(x, y, from.cols);
        });
}

template <typename Scalar>
void add_view(const TensorView<const Scalar>& from, const TensorView<Scalar>& to) {
    for_rows(
        from.batch, from.heads, from.rows, [&](std::int64_t b, std::int64_t h, std::int64_t i) {
            const Scalar* x = from.row(b, h, i);
            Scalar* y = to.row(b, h, i);
            for (std::int64_t c = 0; c < from.cols; ++c)
                y[c] += x[c];
        });
}

template <typename Scalar>
void fill_view(const TensorView<Scalar>& to, Scalar value) {
    for_rows(to.batch, to.heads, to.rows, [&](std::int64_t b, std::int64_t h, std::int64_t i) {
        std::fill_n(to.row(b, h, i), to.cols, value);
    });
}

template <typename Scalar>
void merge_partial(const TensorView<const Scalar>& o_part,
                   const TensorView<const Scalar>& lse_part,
                   const TensorView<Scalar>& o,
                   const TensorView<Scalar>& lse) {
    constexpr double kNone = -std::numeric_limits<double>::infinity();
    for_rows(o.batch, o.heads, o.rows, [&](std::int64_t b, std::int64_t h, std::int64_t i) {
        const auto lp = static_cast<double>(*lse_part.row(b, h, i));
        const auto la = static_cast<double>(*lse.row(b, h, i));
        const Scalar* xp = o_part.row(b, h, i);
        Scalar* x = o.row(b, h, i);
        if (lp == kNone)
            return; // the partial saw no key
        if (la == kNone) {
            std::copy_n(xp, o.cols, x);
            *lse.row(b, h, i) = static_cast<Scalar>(lp);
            return;
        }
        // L' = m + log(e^(L - m) + e^(Lp - m)); O' = e^(L - L') O + e^(Lp - L') Op
        const double m = la > lp ? la : lp; // NaN in either reaches L' and O'
        const double ea = std::exp(la - m);
        const double ep = std::exp(lp - m);
        const double l = ea + ep;
        const double wa = ea / l;
        const double wp = ep / l;
        for (std::int64_t c = 0; c < o.cols; ++c)
            x[c] = static_cast<Scalar>(wa * static_cast<double>(x[c]) +
                                       wp * static_cast<double>(xp[c]));
        *lse.row(b, h, i) = static_cast<Scalar>(m + std::log(l));
    });
}

Problem local_problem(const Problem& global, std::int64_t rows_q, std::int64_t rows_k) {
    Problem p = global;
    p.n_q = rows_q;
    p.n_k = rows_k;
    p.causal = false;
    return p;
}

namespace {

template <typename Scalar>
void validate_views(const PassShape& s,
                    const ShardForwardArgs<Scalar>& args,
                    const ShardBackwardArgs<Scalar>* backward,
                    const char* where) {
    const Problem local = local_problem(s.problem, s.queries.rows(s.rank), s.keys.rows(s.rank));
    ForwardArgs<Scalar> f{local, args.q, args.k, args.v, args.o, args.lse};
    if (backward == nullptr) {
        f.validate(where);
        return;
    }
    BackwardArgs<Scalar> b;
    static_cast<ForwardArgs<Scalar>&>(b) = f;
    b.d_o = backward->d_o;
    b.d_q = backward->d_q;
    b.d_k = backward->d_k;
    b.d_v = backward->d_v;
    b.validate(where);
}

/// The fields every rank must agree on.
template <typename Scalar>
std::vector<std::int64_t> fingerprint(const PassShape& s,
                                      Layout layout,
                                      const sparse::Support* support,
                                      const Tiling& tiling,
                                      const PassOptions& options,
                                      Pass pass) {
    const Problem& p = s.problem;
    std::vector<std::int64_t> f = {p.batch,
                                   p.heads,
                                   p.kv_heads,
                                   p.n_q,
                                   p.n_k,
                                   p.d,
                                   p.d_v,
                                   p.causal ? 1 : 0,
                                   std::bit_cast<std::int64_t>(p.scale),
                                   static_cast<std::int64_t>(layout),
                                   static_cast<std::int64_t>(sizeof(Scalar)),
                                   static_cast<std::int64_t>(tiling.schedule),
                                   tiling.rows,
                                   tiling.cols,
                                   options.communication_only ? 1 : 0,
                                   std::bit_cast<std::int64_t>(options.poll_flops),
                                   static_cast<std::int64_t>(pass)};
    if (support != nullptr) {
        // FNV-1a over the CSR structure: the same support on every rank
        std::uint64_t h = 14695981039346656037ULL;
        const auto mix = [&](std::int64_t x) {
            h = (h ^ static_cast<std::uint64_t>(x)) * 1099511628211ULL;
        };
        for (const std::int64_t x : support->row_offsets())
            mix(x);
        for (const std::int64_t x : support->col_indices())
            mix(x);
        f.push_back(support->z_qk());
        f.push_back(static_cast<std::int64_t>(h >> 1));
    }
    return f;
}

void check_support(const Problem& p, const sparse::Support& support, const char* where) {
    if (p.causal)
        throw InvalidArgument(std::string(where) +
                              ": problem.causal is set (the support carries the mask: use the "
                              "causal pattern)");
    if (support.n_q() != p.n_q || support.n_k() != p.n_k)
        throw InvalidArgument(std::string(where) + ": the support is " +
                              std::to_string(support.n_q()) + " x " +
                              std::to_string(support.n_k()) + ", the problem " +
                              std::to_string(p.n_q) + " x " + std::to_string(p.n_k));
}

} // namespace

template <typename Scalar>
PassShape validate_pass(MPI_Comm comm,
                        const ShardForwardArgs<Scalar>& args,
                        const ShardBackwardArgs<Scalar>* backward,
                        const sparse::Support* support,
                        const Tiling& tiling,
                        const MemoryModel& memory,
                        const PassOptions& options,
                        const char* where) {
    require_mpi(where);
    int ranks = 1;
    int rank = 0;
    MPI_Comm_size(comm, &ranks);
    MPI_Comm_rank(comm, &rank);
    const Pass pass = backward != nullptr ? Pass::backward : Pass::forward;
    PassShape s{
        Problem{}, Sharding(Layout::contiguous, 1, 1), Sharding(Layout::contiguous, 1, 1), rank};
    agree(comm, where, [&] {
        s.problem = args.problem.resolved(where);
        if (tiling.schedule == Schedule::reference)
            throw InvalidArgument(
                std::string(where) +
                ": tiling.schedule is reference (expected fused or materialized)");
        if (support != nullptr)
            check_support(s.problem, *support, where);
        if (!(options.poll_flops > 0.0)) // NaN too
            throw InvalidArgument(std::string(where) + ": options.poll_flops = " +
                                  std::to_string(options.poll_flops) + " (expected > 0)");
        s.queries = Sharding(args.layout, s.problem.n_q, ranks);
        s.keys = Sharding(args.layout, s.problem.n_k, ranks);
        const Problem block = local_problem(s.problem, s.queries.rows(rank), s.keys.max_rows());
        tiling.validate(where, memory, block, pass);
        validate_views(s, args, backward, where);
        require_message_size(s.keys.max_rows() * kv_row_words(s.problem), where);
    });
    require_same(comm,
                 fingerprint<Scalar>(s, args.layout, support, tiling, options, pass),
                 where,
                 "the problem, layout, dtype, tiling, options or support");
    return s;
}

#define IOATTN_DIST_INSTANTIATE(T)                                                                 \
    template void copy_view<T, T>(const TensorView<const T>&, const TensorView<T>&);               \
    template void add_view<T>(const TensorView<const T>&, const TensorView<T>&);                   \
    template void fill_view<T>(const TensorView<T>&, T);                                           \
    template void merge_partial<T>(const TensorView<const T>&,                                     \
                                   const TensorView<const T>&,                                     \
                                   const TensorView<T>&,                                           \
                                   const TensorView<T>&);                                          \
    template PassShape validate_pass<T>(MPI_Comm,                                                  \
                                        const ShardForwardArgs<T>&,                                \
                                        const ShardBackwardArgs<T>*,                               \
                                        const sparse::Support*,                                    \
                                        const Tiling&,                                             \
                                        const MemoryModel&,                                        \
                                        const PassOptions&,                                        \
                                        const char*);

IOATTN_DIST_INSTANTIATE(float)
IOATTN_DIST_INSTANTIATE(double)
#undef IOATTN_DIST_INSTANTIATE

// bf16: storage only (the arithmetic, merges and sums are fp32)
template void copy_view<bf16, bf16>(const TensorView<const bf16>&, const TensorView<bf16>&);
template void copy_view<bf16, float>(const TensorView<const bf16>&, const TensorView<float>&);
template void copy_view<float, bf16>(const TensorView<const float>&, const TensorView<bf16>&);
template PassShape validate_pass<bf16>(MPI_Comm,
                                       const ShardForwardArgs<bf16>&,
                                       const ShardBackwardArgs<bf16>*,
                                       const sparse::Support*,
                                       const Tiling&,
                                       const MemoryModel&,
                                       const PassOptions&,
                                       const char*);

} // namespace ioattn::dist::detail
