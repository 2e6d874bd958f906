// Shards, gathers and the seeded data of `ioattn run --dist` (see run_dist_data.hpp).

#include "run_dist_data.hpp"

#include <algorithm>
#include <type_traits>
#include <utility>

#include <measure.hpp>

namespace ioattn::app {

namespace {

std::size_t sz(std::int64_t n) {
    return static_cast<std::size_t>(n);
}

template <typename Scalar>
MPI_Datatype mpi_scalar() {
    if constexpr (std::is_same_v<Scalar, bf16>)
        return MPI_UINT16_T; // the bits as they are
    else
        return sizeof(Scalar) == sizeof(float) ? MPI_FLOAT : MPI_DOUBLE;
}

/// The generated values in the storage type: as they are, or rounded to bf16.
template <typename Scalar, typename Source>
std::vector<Scalar> stored(std::vector<Source>&& x) {
    if constexpr (std::is_same_v<Scalar, Source>) {
        return std::move(x);
    } else {
        std::vector<Scalar> out(x.size());
        narrow(x.data(), out.data(), static_cast<std::int64_t>(x.size()));
        return out;
    }
}

} // namespace

template <typename Scalar>
std::vector<Scalar> shard_rows(const std::vector<Scalar>& global,
                               std::int64_t batch,
                               std::int64_t heads,
                               std::int64_t cols,
                               const dist::Sharding& s,
                               int rank) {
    const std::int64_t rows = s.rows(rank);
    std::vector<Scalar> out(sz(batch * heads * rows * cols));
    for (std::int64_t slice = 0; slice < batch * heads; ++slice)
        for (std::int64_t l = 0; l < rows; ++l)
            std::copy_n(global.data() + (slice * s.n() + s.global_row(rank, l)) * cols,
                        cols,
                        out.data() + (slice * rows + l) * cols);
    return out;
}

template <typename Scalar>
std::vector<Scalar> gather_rows(MPI_Comm comm,
                                const std::vector<Scalar>& local,
                                std::int64_t batch,
                                std::int64_t heads,
                                std::int64_t cols,
                                const dist::Sharding& s) {
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    std::vector<int> counts;
    std::vector<int> displs;
    std::int64_t total = 0;
    for (int r = 0; r < s.ranks(); ++r) {
        counts.push_back(static_cast<int>(batch * heads * s.rows(r) * cols));
        displs.push_back(static_cast<int>(total));
        total += counts.back();
    }
    std::vector<Scalar> all(rank == 0 ? sz(total) : 0);
    MPI_Gatherv(local.data(),
                static_cast<int>(local.size()),
                mpi_scalar<Scalar>(),
                all.data(),
                counts.data(),
                displs.data(),
                mpi_scalar<Scalar>(),
                0,
                comm);
    if (rank != 0)
        return {};
    std::vector<Scalar> global(sz(total));
    for (int r = 0; r < s.ranks(); ++r) {
        const std::int64_t rows = s.rows(r);
        const Scalar* from = all.data() + displs[sz(r)];
        for (std::int64_t slice = 0; slice < batch * heads; ++slice)
            for (std::int64_t l = 0; l < rows; ++l)
                std::copy_n(from + (slice * rows + l) * cols,
                            cols,
                            global.data() + (slice * s.n() + s.global_row(r, l)) * cols);
    }
    return global;
}

template <typename Scalar>
DistData<Scalar>::DistData(
    const Problem& problem, dist::Layout layout_, int ranks, int rank_, std::uint64_t seed)
    : p(problem.resolved("run"))
    , layout(layout_)
    , queries(layout_, p.n_q, ranks)
    , keys(layout_, p.n_k, ranks)
    , rank(rank_) {
    using Source = Accumulator<Scalar>; // bf16: drawn in float, then rounded
    measure::ForwardData<Source> data(p, seed);
    q = stored<Scalar>(std::move(data.q));
    k = stored<Scalar>(std::move(data.k));
    v = stored<Scalar>(std::move(data.v));
    std::vector<Source> grad(sz(p.batch_heads() * p.n_q * p.d_v));
    measure::fill_uniform(grad, seed + 3);
    d_o = stored<Scalar>(std::move(grad));
    lq = shard_rows(q, p.batch, p.heads, p.d, queries, rank);
    lk = shard_rows(k, p.batch, p.kv_heads, p.d, keys, rank);
    lv = shard_rows(v, p.batch, p.kv_heads, p.d_v, keys, rank);
    ld_o = shard_rows(d_o, p.batch, p.heads, p.d_v, queries, rank);
    const std::int64_t rq = queries.rows(rank);
    const std::int64_t rk = keys.rows(rank);
    lo.assign(sz(p.batch_heads() * rq * p.d_v), Scalar(0));
    llse.assign(sz(p.batch_heads() * rq), Accumulator<Scalar>(0));
    ldq.assign(sz(p.batch_heads() * rq * p.d), Scalar(0));
    ldk.assign(sz(p.batch * p.kv_heads * rk * p.d), Scalar(0));
    ldv.assign(sz(p.batch * p.kv_heads * rk * p.d_v), Scalar(0));
}

template <typename Scalar>
dist::ShardForwardArgs<Scalar> DistData<Scalar>::forward() {
    using In = TensorView<const Scalar>;
    using Out = TensorView<Scalar>;
    const std::int64_t rq = queries.rows(rank);
    const std::int64_t rk = keys.rows(rank);
    return {p,
            layout,
            In::packed(lq.data(), p.batch, p.heads, rq, p.d),
            In::packed(lk.data(), p.batch, p.kv_heads, rk, p.d),
            In::packed(lv.data(), p.batch, p.kv_heads, rk, p.d_v),
            Out::packed(lo.data(), p.batch, p.heads, rq, p.d_v),
            TensorView<Accumulator<Scalar>>::packed(llse.data(), p.batch, p.heads, rq, 1)};
}

template <typename Scalar>
dist::ShardBackwardArgs<Scalar> DistData<Scalar>::backward() {
    using Out = TensorView<Scalar>;
    const std::int64_t rq = queries.rows(rank);
    const std::int64_t rk = keys.rows(rank);
    dist::ShardBackwardArgs<Scalar> a;
    static_cast<dist::ShardForwardArgs<Scalar>&>(a) = forward();
    a.d_o = TensorView<const Scalar>::packed(ld_o.data(), p.batch, p.heads, rq, p.d_v);
    a.d_q = Out::packed(ldq.data(), p.batch, p.heads, rq, p.d);
    a.d_k = Out::packed(ldk.data(), p.batch, p.kv_heads, rk, p.d);
    a.d_v = Out::packed(ldv.data(), p.batch, p.kv_heads, rk, p.d_v);
    return a;
}

template struct DistData<float>;
template struct DistData<double>;
template struct DistData<bf16>;
template std::vector<bf16> gather_rows(MPI_Comm,
                                       const std::vector<bf16>&,
                                       std::int64_t,
                                       std::int64_t,
                                       std::int64_t,
                                       const dist::Sharding&);
template std::vector<float> gather_rows(MPI_Comm,
                                        const std::vector<float>&,
                                        std::int64_t,
                                        std::int64_t,
                                        std::int64_t,
                                        const dist::Sharding&);
template std::vector<double> gather_rows(MPI_Comm,
                                         const std::vector<double>&,
                                         std::int64_t,
                                         std::int64_t,
                                         std::int64_t,
                                         const dist::Sharding&);

} // namespace ioattn::app
