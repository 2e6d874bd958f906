// The GraphBLAS peer of `ioattn bench --suite sparse` (see graphblas_peer.hpp).

#include "graphblas_peer.hpp"

#include <ioattn/error.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

extern "C" {
#include <GraphBLAS.h>
}

namespace ioattn::app {

namespace {

void ok(GrB_Info info, const char* what) {
    if (info != GrB_SUCCESS && info != GrB_NO_VALUE)
        throw Error(std::string("GraphBLAS peer: ") + what + " failed (GrB_Info " +
                    std::to_string(static_cast<int>(info)) + ")");
}

/// A full row-major matrix owned by GraphBLAS (copied from `x`).
GrB_Matrix full(const float* x, std::int64_t rows, std::int64_t cols) {
    const auto n = static_cast<std::size_t>(rows * cols);
    void* data = std::malloc(std::max<std::size_t>(n, 1) * sizeof(float));
    if (data == nullptr)
        throw Error("GraphBLAS peer: out of memory");
    std::memcpy(data, x, n * sizeof(float));
    GrB_Matrix a = nullptr;
    ok(GxB_Matrix_import_FullR(&a,
                               GrB_FP32,
                               static_cast<GrB_Index>(rows),
                               static_cast<GrB_Index>(cols),
                               &data,
                               n * sizeof(float),
                               false,
                               nullptr),
       "import");
    return a;
}

} // namespace

struct GraphBlasAttention::State {
    GrB_Matrix mask = nullptr, q = nullptr, k = nullptr, v = nullptr;
    std::int64_t n_q = 0, n_k = 0, d_v = 0;
    std::vector<GrB_Index> rows, cols;
    std::vector<float> vals;
};

GraphBlasAttention::GraphBlasAttention(const sparse::Support& omega,
                                       const float* q,
                                       const float* k,
                                       const float* v,
                                       std::int64_t d,
                                       std::int64_t d_v,
                                       int threads)
    : s_(std::make_unique<State>()) {
    static const bool initialised = [] {
        ok(GrB_init(GrB_NONBLOCKING), "GrB_init");
        return true;
    }();
    (void)initialised;
    ok(GxB_Global_Option_set(GxB_GLOBAL_NTHREADS, threads), "set threads");
    s_->n_q = omega.n_q();
    s_->n_k = omega.n_k();
    s_->d_v = d_v;
    std::vector<GrB_Index> ii, jj;
    std::vector<bool> one;
    ii.reserve(static_cast<std::size_t>(omega.z_qk()));
    jj.reserve(static_cast<std::size_t>(omega.z_qk()));
    for (std::int64_t i = 0; i < omega.n_q(); ++i)
        for (const std::int64_t j : omega.row(i)) {
            ii.push_back(static_cast<GrB_Index>(i));
            jj.push_back(static_cast<GrB_Index>(j));
        }
    ok(GrB_Matrix_new(
           &s_->mask, GrB_BOOL, static_cast<GrB_Index>(s_->n_q), static_cast<GrB_Index>(s_->n_k)),
       "mask");
    const std::vector<char> ones(ii.size(), 1);
    ok(GrB_Matrix_build_BOOL(s_->mask,
                             ii.data(),
                             jj.data(),
                             reinterpret_cast<const bool*>(ones.data()),
                             ii.size(),
                             GrB_LOR),
       "mask build");
    s_->q = full(q, s_->n_q, d);
    s_->k = full(k, s_->n_k, d);
    s_->v = full(v, s_->n_k, d_v);
    const auto n = static_cast<std::size_t>(s_->n_q * d_v);
    s_->rows.resize(n);
    s_->cols.resize(n);
    s_->vals.resize(n);
}

GraphBlasAttention::~GraphBlasAttention() {
    GrB_Matrix_free(&s_->mask);
    GrB_Matrix_free(&s_->q);
    GrB_Matrix_free(&s_->k);
    GrB_Matrix_free(&s_->v);
}

void GraphBlasAttention::run(float scale, float* o) {
    State& s = *s_;
    const auto nq = static_cast<GrB_Index>(s.n_q), nk = static_cast<GrB_Index>(s.n_k);
    GrB_Matrix sc = nullptr, t = nullptr, dm = nullptr, out = nullptr;
    GrB_Vector m = nullptr, l = nullptr;
    ok(GrB_Matrix_new(&sc, GrB_FP32, nq, nk), "S");
    // S<Omega, struct> = Q K^T (SDDMM)
    ok(GrB_mxm(sc, s.mask, nullptr, GrB_PLUS_TIMES_SEMIRING_FP32, s.q, s.k, GrB_DESC_ST1), "SDDMM");
    ok(GrB_Matrix_apply_BinaryOp2nd_FP32(sc, nullptr, nullptr, GrB_TIMES_FP32, sc, scale, nullptr),
       "scale");
    // m = rowmax(S); T<S, struct> = diag(m) S's pattern; S = exp(S - T)
    ok(GrB_Vector_new(&m, GrB_FP32, nq), "m");
    ok(GrB_Matrix_reduce_Monoid(m, nullptr, nullptr, GrB_MAX_MONOID_FP32, sc, nullptr), "rowmax");
    ok(GrB_Matrix_diag(&dm, m, 0), "diag(m)");
    ok(GrB_Matrix_new(&t, GrB_FP32, nq, nk), "T");
    ok(GrB_mxm(t, sc, nullptr, GxB_ANY_FIRST_FP32, dm, sc, GrB_DESC_S), "broadcast max");
    ok(GrB_Matrix_eWiseMult_BinaryOp(sc, nullptr, nullptr, GrB_MINUS_FP32, sc, t, nullptr),
       "S - m");
    ok(GrB_Matrix_apply(sc, nullptr, nullptr, GxB_EXP_FP32, sc, nullptr), "exp");
    // P = diag(1 / rowsum) S
    ok(GrB_Vector_new(&l, GrB_FP32, nq), "l");
    ok(GrB_Matrix_reduce_Monoid(l, nullptr, nullptr, GrB_PLUS_MONOID_FP32, sc, nullptr), "rowsum");
    ok(GrB_Vector_apply(l, nullptr, nullptr, GrB_MINV_FP32, l, nullptr), "1/l");
    GrB_Matrix_free(&dm);
    ok(GrB_Matrix_diag(&dm, l, 0), "diag(1/l)");
    ok(GrB_mxm(sc, nullptr, nullptr, GrB_PLUS_TIMES_SEMIRING_FP32, dm, sc, nullptr), "normalise");
    // O = P V (SpMM)
    ok(GrB_Matrix_new(&out, GrB_FP32, nq, static_cast<GrB_Index>(s.d_v)), "O");
    ok(GrB_mxm(out, nullptr, nullptr, GrB_PLUS_TIMES_SEMIRING_FP32, sc, s.v, nullptr), "SpMM");
    GrB_Index n = s.vals.size();
    ok(GrB_Matrix_extractTuples_FP32(s.rows.data(), s.cols.data(), s.vals.data(), &n, out),
       "extract O");
    std::fill(o, o + s.n_q * s.d_v, 0.0F);
    for (GrB_Index e = 0; e < n; ++e)
        o[s.rows[e] * static_cast<GrB_Index>(s.d_v) + s.cols[e]] = s.vals[e];
    GrB_Matrix_free(&sc);
    GrB_Matrix_free(&t);
    GrB_Matrix_free(&dm);
    GrB_Matrix_free(&out);
    GrB_Vector_free(&m);
    GrB_Vector_free(&l);
}

} // namespace ioattn::app
