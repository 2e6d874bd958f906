// ioattn::dist::sparse_forward / _backward: sparse attention over MPI (docs/design.md section 12.4)
// Per rank r of P, for the support Omega (n_q x n_k, the same on every rank):
//   plan from the structure: the key rows r's queries see, per owner; r's rows others see
//   MPI_Alltoallv of those K/V rows, W words each (zero counts to ranks that see none)
//   local K/V = own rows + received rows, ascending; Omega over them (ExchangePlan)
//   forward:  sparse::forward on r's query rows                        -> O, L
//   backward: sparse::backward on r's query rows                       -> dQ, local dK, dV
//             MPI_Alltoallv of the received rows' dK, dV back to their owners
//             dK, dV of an own row = the contributions summed in rank order
// W = batch * kv_heads * (d + d_v). Communication = comm_cost_sparse_forward / _backward; the
// forward receives exactly comm_lower_bound words: every row it gets is needed, once.
// Sums in a fixed order, no atomics: bitwise identical for a fixed P and sharding, any thread
// count.
// bf16 (docs/design.md section 16): the K/V rows travel in bf16 (2 bytes a word) and are widened
// exactly into the fp32 local key set; Q (O, dO) are widened once; the dK, dV rows going home
// are partial sums and travel in fp32 (4 bytes), their owner adds them in fp32 and rounds d_k,
// d_v once; O and dQ are rounded once after the kernel. Bit for bit the float pass's on the
// widened inputs, rounded. Tests: tests/dist/sparse_exchange_test.cpp,
// tests/dist/bf16_test.cpp

#include "channel.hpp"
#include "compute_shard.hpp"
#include "ring_plan.hpp"

#include <ioattn/dist/sparse_exchange.hpp>
#include <ioattn/parallel.hpp>
#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/forward.hpp>

#include <algorithm>
#include <type_traits>
#include <vector>

namespace ioattn::dist {

namespace {

using detail::KvBlock;
using detail::PassShape;

/// The MPI datatype of one K/V row (W scalars), freed on scope exit.
class RowType {
public:
    RowType(std::int64_t w, MPI_Datatype scalar) {
        MPI_Type_contiguous(static_cast<int>(w), scalar, &type_);
        MPI_Type_commit(&type_);
    }

    RowType(const RowType&) = delete;
    RowType& operator=(const RowType&) = delete;

    ~RowType() { MPI_Type_free(&type_); }

    [[nodiscard]] MPI_Datatype get() const { return type_; }

private:
    MPI_Datatype type_ = MPI_DATATYPE_NULL;
};

/// Per-rank row counts and their prefix sums, as MPI_Alltoallv takes them.
struct Counts {
    std::vector<int> count;
    std::vector<int> displ;
    std::int64_t total = 0;

    explicit Counts(const std::vector<std::vector<std::int64_t>>& rows) {
        for (const auto& r : rows) {
            displ.push_back(static_cast<int>(total));
            count.push_back(static_cast<int>(r.size()));
            total += static_cast<std::int64_t>(r.size());
        }
    }
};

/// Applies op(tensor row, words, n) to one row of K then V (every batch and kv head) and its W
/// contiguous words.
template <typename T, typename Word, typename Op>
void row_io(const TensorView<T>& k, const TensorView<T>& v, std::int64_t row, Word* words, Op op) {
    for (std::int64_t b = 0; b < k.batch; ++b)
        for (std::int64_t h = 0; h < k.heads; ++h, words += k.cols)
            op(k.row(b, h, row), words, k.cols);
    for (std::int64_t b = 0; b < v.batch; ++b)
        for (std::int64_t h = 0; h < v.heads; ++h, words += v.cols)
            op(v.row(b, h, row), words, v.cols);
}

/// Element-wise conversion (bf16 <-> float: exact widening; the exchange never narrows).
template <typename To, typename From>
void convert_n(const From* from, std::int64_t n, To* to) {
    if constexpr (std::is_same_v<From, To>)
        std::copy_n(from, n, to);
    else
        for (std::int64_t c = 0; c < n; ++c)
            to[c] = static_cast<To>(from[c]);
}

constexpr auto kToWords = [](const auto* t, auto* w, std::int64_t n) {
    convert_n<std::remove_cv_t<std::remove_pointer_t<decltype(w)>>>(t, n, w);
};
constexpr auto kFromWords = [](auto* t, const auto* w, std::int64_t n) {
    convert_n<std::remove_cv_t<std::remove_pointer_t<decltype(t)>>>(w, n, t);
};
constexpr auto kAddWords = [](auto* t, const auto* w, std::int64_t n) {
    for (std::int64_t c = 0; c < n; ++c)
        t[c] += w[c];
};

/// One pass's exchange: the plan, the local key set's K/V (in Compute), and the counted words.
/// K/V rows travel in Scalar, dK, dV rows (partial sums) in Compute.
template <typename Scalar>
class Exchange {
public:
    using Compute = Accumulator<Scalar>;

    Exchange(MPI_Comm comm, const PassShape& s, const sparse::Support& support)
        : comm_(comm)
        , s_(s)
        , plan_(ExchangePlan::build(support, s.queries, s.keys, s.rank))
        , w_(kv_row_words(s.problem))
        , row_type_(w_, detail::mpi_type<Scalar>())
        , sum_type_(w_, detail::mpi_type<Compute>())
        , kv_(plan_.keys.size() * static_cast<std::size_t>(w_)) {}

    [[nodiscard]] const ExchangePlan& plan() const { return plan_; }

    [[nodiscard]] KvBlock<Compute> local() {
        return KvBlock<Compute>::over(kv_.data(), s_.problem, key_count());
    }

    [[nodiscard]] std::int64_t key_count() const {
        return static_cast<std::int64_t>(plan_.keys.size());
    }

    [[nodiscard]] const CommReport& report() const { return report_; }

    [[nodiscard]] double wait_seconds() const { return wait_seconds_; }

    /// The K/V rows others need out, theirs in: fills local().
    void gather(const ShardForwardArgs<Scalar>& a) {
        const Counts to(plan_.send_rows);
        const Counts from(plan_.receive_rows);
        std::vector<Scalar> out(static_cast<std::size_t>(to.total * w_));
        std::vector<Scalar> in(static_cast<std::size_t>(from.total * w_));
        for_each_row(plan_.send_rows, to, [&](std::int64_t j, std::int64_t at) {
            row_io(a.k, a.v, s_.keys.local_row(s_.rank, j), out.data() + at * w_, kToWords);
        });
        alltoall(out.data(), to, in.data(), from, row_type_.get(), sizeof(Scalar));
        const KvBlock<Compute> local = this->local();
        for_each_row(plan_.receive_rows, from, [&](std::int64_t j, std::int64_t at) {
            row_io(local.k, local.v, position(j), in.data() + at * w_, kFromWords);
        });
        parallel_for_tiles(s_.keys.rows(s_.rank), [&](std::int64_t l, int /*worker*/) {
            const std::int64_t at = position(s_.keys.global_row(s_.rank, l));
            for (std::int64_t b = 0; b < s_.problem.batch; ++b)
                for (std::int64_t h = 0; h < s_.problem.kv_heads; ++h) {
                    convert_n(a.k.row(b, h, l), a.k.cols, local.k.row(b, h, at));
                    convert_n(a.v.row(b, h, l), a.v.cols, local.v.row(b, h, at));
                }
        });
    }

    /// The received rows' dK, dV back to their owners (partial sums, in Compute); d_k, d_v of
    /// own rows (`a`'s, in Compute) = the contributions (`grads` over the local key set here,
    /// the received ones from other ranks) in rank order.
    void scatter(const KvBlock<Compute>& grads, const ShardBackwardArgs<Compute>& a) {
        const Counts to(plan_.receive_rows);
        const Counts from(plan_.send_rows);
        std::vector<Compute> out(static_cast<std::size_t>(to.total * w_));
        std::vector<Compute> in(static_cast<std::size_t>(from.total * w_));
        const KvBlock<const Compute> g{grads.k, grads.v};
        for_each_row(plan_.receive_rows, to, [&](std::int64_t j, std::int64_t at) {
            row_io(g.k, g.v, position(j), out.data() + at * w_, kToWords);
        });
        alltoall(out.data(), to, in.data(), from, sum_type_.get(), sizeof(Compute));
        detail::fill_view(a.d_k, Compute(0));
        detail::fill_view(a.d_v, Compute(0));
        for (int src = 0; src < s_.keys.ranks(); ++src) {
            if (src != s_.rank) {
                for_each_row(
                    plan_.send_rows,
                    from,
                    [&](std::int64_t j, std::int64_t at) {
                        row_io(a.d_k,
                               a.d_v,
                               s_.keys.local_row(s_.rank, j),
                               in.data() + at * w_,
                               kAddWords);
                    },
                    src);
                continue;
            }
            parallel_for_tiles(s_.keys.rows(s_.rank), [&](std::int64_t l, int /*worker*/) {
                const std::int64_t at = position(s_.keys.global_row(s_.rank, l));
                for (std::int64_t b = 0; b < s_.problem.batch; ++b)
                    for (std::int64_t h = 0; h < s_.problem.kv_heads; ++h) {
                        kAddWords(a.d_k.row(b, h, l), g.k.row(b, h, at), a.d_k.cols);
                        kAddWords(a.d_v.row(b, h, l), g.v.row(b, h, at), a.d_v.cols);
                    }
            });
        }
    }

private:
    [[nodiscard]] std::int64_t position(std::int64_t global) const {
        return std::lower_bound(plan_.keys.begin(), plan_.keys.end(), global) - plan_.keys.begin();
    }

    /// fn(global row, row index in the message buffer) for the rows of every rank (or of rank
    /// `only`), in parallel within a rank.
    template <typename Fn>
    void for_each_row(const std::vector<std::vector<std::int64_t>>& rows,
                      const Counts& counts,
                      const Fn& fn,
                      int only = -1) const {
        for (std::size_t r = 0; r < rows.size(); ++r) {
            if (only >= 0 && r != static_cast<std::size_t>(only))
                continue;
            const auto& list = rows[r];
            parallel_for_tiles(static_cast<std::int64_t>(list.size()), [&](std::int64_t i, int) {
                fn(list[static_cast<std::size_t>(i)], counts.displ[r] + i);
            });
        }
    }

    /// MPI_Alltoallv of whole rows of `row` (W words of `word_bytes`), counted: a message per
    /// nonzero count.
    void alltoall(const void* out,
                  const Counts& to,
                  void* in,
                  const Counts& from,
                  MPI_Datatype row,
                  std::size_t word_bytes) {
        const double t0 = MPI_Wtime();
        MPI_Alltoallv(out,
                      to.count.data(),
                      to.displ.data(),
                      row,
                      in,
                      from.count.data(),
                      from.displ.data(),
                      row,
                      comm_);
        wait_seconds_ += MPI_Wtime() - t0;
        for (std::size_t r = 0; r < to.count.size(); ++r) {
            report_.sent_words += to.count[r] * w_;
            report_.sent_messages += to.count[r] > 0 ? 1 : 0;
            report_.received_words += from.count[r] * w_;
            report_.received_messages += from.count[r] > 0 ? 1 : 0;
            const auto bytes = static_cast<std::int64_t>(word_bytes);
            report_.sent_bytes += to.count[r] * w_ * bytes;
            report_.received_bytes += from.count[r] * w_ * bytes;
        }
    }

    MPI_Comm comm_;
    const PassShape& s_;
    ExchangePlan plan_;
    std::int64_t w_;
    RowType row_type_; ///< a K/V row in Scalar
    RowType sum_type_; ///< a dK, dV row in Compute
    std::vector<Compute> kv_;
    CommReport report_;
    double wait_seconds_ = 0;
};

template <typename Scalar>
PassStats stats_of(const Exchange<Scalar>& x, double t0, std::int64_t calls) {
    PassStats st;
    st.comm = x.report();
    st.wait_seconds = x.wait_seconds();
    st.kernel_calls = calls;
    st.seconds = MPI_Wtime() - t0;
    return st;
}

} // namespace

template <typename Scalar, typename Counter>
PassStats sparse_forward(MPI_Comm comm,
                         const ShardForwardArgs<Scalar>& args,
                         const sparse::Support& support,
                         const Tiling& tiling,
                         const MemoryModel& memory,
                         Counter& counter,
                         const PassOptions& options) {
    constexpr const char* kWhere = "ioattn::dist::sparse_forward";
    const double t0 = MPI_Wtime();
    using Compute = Accumulator<Scalar>;
    const PassShape s = detail::validate_pass<Scalar>(
        comm, args, nullptr, &support, tiling, memory, options, kWhere);
    const detail::ComputeShard<Scalar> shard(args, nullptr);
    const ShardForwardArgs<Compute>& a = shard.forward();
    Exchange<Scalar> x(comm, s, support);
    x.gather(args);
    if (options.communication_only)
        return stats_of(x, t0, 0);
    const KvBlock<Compute> local = x.local();
    const ForwardArgs<Compute> f{
        detail::local_problem(s.problem, s.queries.rows(s.rank), x.key_count()),
        a.q,
        local.k,
        local.v,
        a.o,
        a.lse};
    sparse::forward(f, x.plan().support, tiling, memory, counter);
    shard.round_o(); // bf16: the one rounding of O
    return stats_of(x, t0, 1);
}

template <typename Scalar, typename Counter>
PassStats sparse_backward(MPI_Comm comm,
                          const ShardBackwardArgs<Scalar>& args,
                          const sparse::Support& support,
                          const Tiling& tiling,
                          const MemoryModel& memory,
                          Counter& counter,
                          const PassOptions& options) {
    constexpr const char* kWhere = "ioattn::dist::sparse_backward";
    const double t0 = MPI_Wtime();
    using Compute = Accumulator<Scalar>;
    const PassShape s =
        detail::validate_pass<Scalar>(comm, args, &args, &support, tiling, memory, options, kWhere);
    const detail::ComputeShard<Scalar> shard(args, &args);
    const ShardBackwardArgs<Compute>& a = shard.backward();
    Exchange<Scalar> x(comm, s, support);
    x.gather(args);
    std::vector<Compute> grads(static_cast<std::size_t>(x.key_count() * kv_row_words(s.problem)));
    const auto g = KvBlock<Compute>::over(grads.data(), s.problem, x.key_count());
    if (!options.communication_only) {
        const KvBlock<Compute> local = x.local();
        BackwardArgs<Compute> b;
        static_cast<ForwardArgs<Compute>&>(b) = {
            detail::local_problem(s.problem, s.queries.rows(s.rank), x.key_count()),
            a.q,
            local.k,
            local.v,
            a.o,
            a.lse};
        b.d_o = a.d_o;
        b.d_q = a.d_q;
        b.d_k = g.k;
        b.d_v = g.v;
        sparse::backward(b, x.plan().support, tiling, memory, counter);
    }
    x.scatter(g, a);
    shard.round_dq(); // bf16: the one rounding of dQ, and of d_k, d_v after every contribution
    shard.round_dkv();
    return stats_of(x, t0, options.communication_only ? 0 : 1);
}

#define IOATTN_DIST_INSTANTIATE(T, C)                                                              \
    template PassStats sparse_forward<T, C>(MPI_Comm,                                              \
                                            const ShardForwardArgs<T>&,                            \
                                            const sparse::Support&,                                \
                                            const Tiling&,                                         \
                                            const MemoryModel&,                                    \
                                            C&,                                                    \
                                            const PassOptions&);                                   \
    template PassStats sparse_backward<T, C>(MPI_Comm,                                             \
                                             const ShardBackwardArgs<T>&,                          \
                                             const sparse::Support&,                               \
                                             const Tiling&,                                        \
                                             const MemoryModel&,                                   \
                                             C&,                                                   \
                                             const PassOptions&);

IOATTN_DIST_FOR_EACH_PASS_TYPE(IOATTN_DIST_INSTANTIATE)
#undef IOATTN_DIST_INSTANTIATE

} // namespace ioattn::dist
