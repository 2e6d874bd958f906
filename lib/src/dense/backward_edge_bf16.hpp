#pragma once
// The per-block state and the scalar mask-edge paths of the native bf16 fused backward
// (backward_fused_bf16.cpp), for the avx512bf16 target region only. On a causal diagonal block
// whose streamed rows (Q_i, dO_i) or resident K_j rows hold Inf or NaN, a hidden pair's zero
// weight times that value would be NaN: these paths multiply each key (dK, dV) or query row
// (dQ) by the rows it sees only, from the same bf16-rounded P and dS the vector path uses.
//
//   fill_hidden:  T[x][y] = value for the keys y query x does not see (and the pad lanes)
//   dkv_edge:     dV_j^T += dO_i^T P, dK_j^T += Q_i^T dS, key y from its first visible row
//   dq_edge:      dQ^g_i (+)= dS K_j, row x over its visible keys only
//   write_rows:   rows of a bf16 view = scale T^T, rounded (dK, dV from their fp32 transposes)

#include <ioattn/bf16.hpp>
#include <ioattn/dense/backward.hpp>
#include <ioattn/kernels/pack_bf16.hpp>

#include <algorithm>
#include <cstdint>

#if !defined(IOATTN_TARGET_AVX512BF16)
#error "dense/backward_edge_bf16.hpp: for the avx512bf16 target region only"
#endif

namespace ioattn::dense::IOATTN_ISA {

using kernels::p_at;
using kernels::pack_p;
using kernels::pairs;

/// First query row that sees key j (n_q if none).
inline std::int64_t first_row(const Problem& p, std::int64_t j) {
    return p.causal ? std::clamp<std::int64_t>(j - p.causal_offset(), 0, p.n_q) : 0;
}

/// One (key block, query block) step: c queries from i0 of head h, r keys from j0.
struct Step {
    std::int64_t b = 0, h = 0, i0 = 0, c = 0, j0 = 0, r = 0, offset = 0;
    bool first = false;      ///< the group's first key block: dQ^g is written, not added to
    bool diagonal = false;   ///< a causal block with hidden pairs
    bool k_finite = true;    ///< K_j holds no Inf or NaN
    const bf16* k = nullptr; ///< K_j's rows
    std::int64_t ldk = 0;
    const float* delta = nullptr; ///< D_i
    float* dq = nullptr;          ///< the rows of dQ^g_i

    void set(const Problem& p,
             std::int64_t b_,
             std::int64_t h_,
             std::int64_t i0_,
             std::int64_t c_,
             std::int64_t j0_,
             std::int64_t r_,
             bool first_) {
        b = b_, h = h_, i0 = i0_, c = c_, j0 = j0_, r = r_, first = first_;
        offset = p.causal_offset();
        diagonal = p.causal && j0 + r - 1 > i0 + offset;
    }

    /// Keys [0, seen(x)) of the block are visible from query row x.
    [[nodiscard]] std::int64_t seen(std::int64_t x) const {
        return std::clamp<std::int64_t>(i0 + x + offset + 1 - j0, 0, r);
    }

    /// Key y of the block is visible from query rows [from(y), c).
    [[nodiscard]] std::int64_t from(std::int64_t y) const {
        return std::clamp<std::int64_t>(j0 + y - offset - i0, 0, c);
    }
};

/// T[x][y] = value for y in [seen(x), ld), x < c.
inline void fill_hidden(float* t, std::int64_t ld, const Step& st, float value) {
    for (std::int64_t x = 0; x < st.c; ++x)
        std::fill(t + x * ld + st.seen(x), t + (x + 1) * ld, value);
}

/// dV^T[x][y] += sum_{q >= from(y)} dO[q][x] P[q][y] and dK^T likewise with Q and dS, P and dS
/// as pack_p's pairs over queries (pp, dsp; ld lanes).
inline void dkv_edge(const float* pp,
                     const float* dsp,
                     std::int64_t ld,
                     const bf16* d_o,
                     std::int64_t ldo,
                     const bf16* q,
                     std::int64_t ldq,
                     const Problem& p,
                     const Step& st,
                     float* dvt,
                     float* dkt) {
    for (std::int64_t y = 0; y < st.r; ++y) {
        const std::int64_t from = st.from(y);
        for (std::int64_t x = 0; x < p.d_v; ++x) {
            float acc = dvt[x * ld + y];
            for (std::int64_t i = from; i < st.c; ++i)
                acc += p_at(pp, ld, i, y) * static_cast<float>(d_o[i * ldo + x]);
            dvt[x * ld + y] = acc;
        }
        for (std::int64_t x = 0; x < p.d; ++x) {
            float acc = dkt[x * ld + y];
            for (std::int64_t i = from; i < st.c; ++i)
                acc += p_at(dsp, ld, i, y) * static_cast<float>(q[i * ldq + x]);
            dkt[x * ld + y] = acc;
        }
    }
}

/// out[x][z] (+)= sum_{y < seen(x)} dS[x][y] K[y][z] for x < c (dS's bf16 rows at stride ld;
/// out rows dw wide, the lanes past d zero).
inline void dq_edge(const bf16* ds,
                    std::int64_t ld,
                    const bf16* k,
                    std::int64_t ldk,
                    const Problem& p,
                    const Step& st,
                    float* out,
                    std::int64_t dw) {
    for (std::int64_t x = 0; x < st.c; ++x) {
        const std::int64_t seen = st.seen(x);
        for (std::int64_t z = 0; z < dw; ++z) {
            float acc = st.first ? 0.0F : out[x * dw + z];
            for (std::int64_t y = 0; z < p.d && y < seen; ++y)
                acc += static_cast<float>(ds[x * ld + y]) * static_cast<float>(k[y * ldk + z]);
            out[x * dw + z] = acc;
        }
    }
}

/// Rows [j0, j0 + r) of x (head g of batch b) = scale T^T (T: x.cols x ld), rounded to bf16.
inline void write_rows(const float* t,
                       std::int64_t ld,
                       float scale,
                       const TensorView<bf16>& x,
                       std::int64_t b,
                       std::int64_t g,
                       std::int64_t j0,
                       std::int64_t r) {
    for (std::int64_t y = 0; y < r; ++y) {
        bf16* row = x.row(b, g, j0 + y);
        for (std::int64_t z = 0; z < x.cols; ++z)
            row[z] = bf16(scale * t[z * ld + y]);
    }
}

} // namespace ioattn::dense::IOATTN_ISA
