// Tests of the native bf16 fused backward (lib/src/dense/backward_fused_bf16.cpp, docs/design.md
// section 16) through dense::backward with bf16 views. O and L are those of the bf16 forward;
// the double reference (dense::backward_reference) takes the same bf16 Q, K, V, O, dO and fp32
// L. Per element, to first order (u = 2^-8 for the bf16 roundings of P, dS and the outputs,
// g = 2 (n_q + n_k + d + d_v) u32 (1 + sigma) for the fp32 sums and S, sigma = scale max |q||k|,
// B_ij = P_ij (|dP_ij - D_i| + sum_x |dO_ix V_jx| + |D_i|) bounding dS and its fp32 error):
//   |dV - dV_ref| <= (u + g) sum_i P_ij |dO_i|         + u |dV_ref|
//   |dK - dK_ref| <= (2u + g) scale sum_i B_ij |Q_i|   + u |dK_ref|
//   |dQ - dQ_ref| <= (2u + g) scale sum_j B_ij |K_j|   + u |dQ_ref|
// and relative Frobenius errors <= 1e-2. Causal and not, GQA, odd d and d_v, ragged tiles, fully
// masked rows; bitwise equal at one thread and two; counted I/O equals io_cost and the dry run
// in words, and the closed form in bytes (2 per operand element, 4 per word of L, D and the
// dQ partials); hidden NaN rows do not leak; on the adversarial cases NaN and infinities land
// where the widening path puts them.

#include "adversarial.hpp"
#include "bf16_native.hpp"
#include "scoped_env.hpp"

#include <ioattn/bf16.hpp>
#include <ioattn/dense.hpp>
#include <ioattn/isa.hpp>

#include <catch2/catch.hpp>
#include <tbb/global_control.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace dense_bf16_backward_test {

using ioattn::bf16;
using ioattn::MemoryModel;
using ioattn::NullCounter;
using ioattn::Operand;
using ioattn::Pass;
using ioattn::Problem;
using ioattn::Schedule;
using ioattn::Tiling;
using ioattn::test::bf16_shape;
using ioattn::test::force_widening;
using ioattn::test::native_expected;
using ioattn::test::widened;

constexpr double kBwdU16 = 0x1p-8;
constexpr double kBwdU32 = 0x1p-24;

double wide(bf16 x) {
    return static_cast<double>(static_cast<float>(x));
}

/// bf16 inputs, the bf16 forward's O and L, and the gradients of the bf16 backward.
struct Grads {
    Problem p;
    std::vector<bf16> q, k, v, o, d_o, d_q, d_k, d_v;
    std::vector<float> lse;

    Grads(const Problem& problem, std::uint64_t seed)
        : p(problem.resolved("test")) {
        std::mt19937_64 rng(seed);
        std::normal_distribution<float> randn(0.0F, 1.0F);
        const auto draw = [&](std::vector<bf16>& x, std::int64_t n) {
            x.resize(static_cast<std::size_t>(n));
            for (bf16& e : x)
                e = bf16(randn(rng));
        };
        const std::int64_t qn = p.batch * p.heads * p.n_q, kn = p.batch * p.kv_heads * p.n_k;
        draw(q, qn * p.d);
        draw(k, kn * p.d);
        draw(v, kn * p.d_v);
        draw(d_o, qn * p.d_v);
        o.assign(static_cast<std::size_t>(qn * p.d_v), bf16(0.0F));
        lse.assign(static_cast<std::size_t>(qn), 0.0F);
        d_q.assign(q.size(), bf16(0.0F));
        d_k.assign(k.size(), bf16(0.0F));
        d_v.assign(v.size(), bf16(0.0F));
    }

    /// O and L from the bf16 fused forward under an ample M.
    void forward() {
        const MemoryModel m{1 << 22};
        NullCounter n;
        ioattn::dense::forward(ioattn::ForwardArgs<bf16>::packed(
                                   p, q.data(), k.data(), v.data(), o.data(), lse.data()),
                               Tiling::for_memory(Schedule::fused, m, p),
                               m,
                               n);
    }

    ioattn::BackwardArgs<bf16> args() {
        return ioattn::BackwardArgs<bf16>::packed(p,
                                                  q.data(),
                                                  k.data(),
                                                  v.data(),
                                                  o.data(),
                                                  lse.data(),
                                                  d_o.data(),
                                                  d_q.data(),
                                                  d_k.data(),
                                                  d_v.data());
    }
};

/// The double reference on the run's inputs, and the first-order bound of the file header.
struct Reference {
    std::vector<double> d_q, d_k, d_v;
    std::vector<double> bq, bk, bv; // per element bounds

    explicit Reference(const Grads& g) {
        const Problem& p = g.p;
        std::vector<double> q = widened(g.q), k = widened(g.k), v = widened(g.v), o = widened(g.o),
                            d_o = widened(g.d_o);
        std::vector<double> lse(g.lse.begin(), g.lse.end());
        d_q.assign(q.size(), 0.0);
        d_k.assign(k.size(), 0.0);
        d_v.assign(v.size(), 0.0);
        ioattn::dense::backward_reference(ioattn::BackwardArgs<double>::packed(p,
                                                                               q.data(),
                                                                               k.data(),
                                                                               v.data(),
                                                                               o.data(),
                                                                               lse.data(),
                                                                               d_o.data(),
                                                                               d_q.data(),
                                                                               d_k.data(),
                                                                               d_v.data()));
        bound(p, q, k, v, o, d_o, lse);
    }

    void bound(const Problem& p,
               const std::vector<double>& q,
               const std::vector<double>& k,
               const std::vector<double>& v,
               const std::vector<double>& o,
               const std::vector<double>& d_o,
               const std::vector<double>& lse) {
        bq.assign(q.size(), 0.0);
        bk.assign(k.size(), 0.0);
        bv.assign(v.size(), 0.0);
        double sigma = 0;
        std::vector<double> pr(static_cast<std::size_t>(p.batch_heads() * p.n_q * p.n_k), 0.0);
        std::vector<double> b(pr.size(), 0.0);
        for (std::int64_t s = 0; s < p.batch_heads(); ++s) {
            const std::int64_t kv = s / p.heads * p.kv_heads + s % p.heads / p.group();
            for (std::int64_t i = 0; i < p.n_q; ++i) {
                const double* qi = &q[static_cast<std::size_t>((s * p.n_q + i) * p.d)];
                const double* oi = &o[static_cast<std::size_t>((s * p.n_q + i) * p.d_v)];
                const double* gi = &d_o[static_cast<std::size_t>((s * p.n_q + i) * p.d_v)];
                double dd = 0, dabs = 0;
                for (std::int64_t x = 0; x < p.d_v; ++x) {
                    dd += gi[x] * oi[x];
                    dabs += std::fabs(gi[x] * oi[x]);
                }
                const double l = lse[static_cast<std::size_t>(s * p.n_q + i)];
                for (std::int64_t j = 0; j < p.visible_keys(i) && std::isfinite(l); ++j) {
                    const double* kj = &k[static_cast<std::size_t>((kv * p.n_k + j) * p.d)];
                    const double* vj = &v[static_cast<std::size_t>((kv * p.n_k + j) * p.d_v)];
                    double sc = 0, sabs = 0, dp = 0, dpabs = 0;
                    for (std::int64_t x = 0; x < p.d; ++x) {
                        sc += qi[x] * kj[x];
                        sabs += std::fabs(qi[x] * kj[x]);
                    }
                    for (std::int64_t x = 0; x < p.d_v; ++x) {
                        dp += gi[x] * vj[x];
                        dpabs += std::fabs(gi[x] * vj[x]);
                    }
                    sigma = std::max(sigma, p.scale * sabs);
                    const auto at = static_cast<std::size_t>((s * p.n_q + i) * p.n_k + j);
                    pr[at] = std::exp(p.scale * sc - l);
                    b[at] = pr[at] * (std::fabs(dp - dd) + dpabs + dabs);
                }
            }
        }
        const double g = 2.0 * static_cast<double>(p.n_q + p.n_k + p.d + p.d_v) * kBwdU32;
        const double one = kBwdU16 + g * (1 + sigma), two = 2 * kBwdU16 + g * (1 + sigma);
        for (std::int64_t s = 0; s < p.batch_heads(); ++s) {
            const std::int64_t kv = s / p.heads * p.kv_heads + s % p.heads / p.group();
            for (std::int64_t i = 0; i < p.n_q; ++i)
                for (std::int64_t j = 0; j < p.n_k; ++j) {
                    const auto at = static_cast<std::size_t>((s * p.n_q + i) * p.n_k + j);
                    const std::int64_t qi = s * p.n_q + i, kj = kv * p.n_k + j;
                    const auto ix = [](std::int64_t e) { return static_cast<std::size_t>(e); };
                    for (std::int64_t x = 0; x < p.d_v; ++x)
                        bv[ix(kj * p.d_v + x)] += one * pr[at] * std::fabs(d_o[ix(qi * p.d_v + x)]);
                    for (std::int64_t x = 0; x < p.d; ++x) {
                        bk[ix(kj * p.d + x)] +=
                            two * p.scale * b[at] * std::fabs(q[ix(qi * p.d + x)]);
                        bq[ix(qi * p.d + x)] +=
                            two * p.scale * b[at] * std::fabs(k[ix(kj * p.d + x)]);
                    }
                }
        }
        const auto add_output = [](std::vector<double>& bd, const std::vector<double>& ref) {
            for (std::size_t i = 0; i < bd.size(); ++i)
                bd[i] += kBwdU16 * std::fabs(ref[i]) + 1e-30;
        };
        add_output(bq, d_q);
        add_output(bk, d_k);
        add_output(bv, d_v);
    }
};

/// Checks every element of x within its bound; returns the relative Frobenius error.
double check_gradient(const std::vector<bf16>& x,
                      const std::vector<double>& ref,
                      const std::vector<double>& bound) {
    double err = 0, norm = 0;
    std::size_t outside = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        const double e = std::fabs(wide(x[i]) - ref[i]);
        if (!(e <= bound[i]))
            ++outside;
        err += e * e;
        norm += ref[i] * ref[i];
    }
    CHECK(outside == 0);
    const double rel = norm > 0 ? std::sqrt(err / norm) : std::sqrt(err);
    CHECK(rel <= 1e-2);
    return rel;
}

/// The closed form in bytes: io_cost's words with L, D and the dQ partials at 4 bytes, the
/// rest at 2 (backward_fused.cpp's events, summed per query head).
std::int64_t closed_form_bytes(const Problem& p, const Tiling& t) {
    const std::int64_t words = ioattn::io_cost(p, t, Pass::backward).total();
    const std::int64_t k_blocks = (p.n_k + t.rows - 1) / t.rows;
    const std::int64_t groups = ioattn::backward_dq_groups(p, k_blocks);
    const auto first_row = [&](std::int64_t j) {
        return p.causal ? std::clamp<std::int64_t>(j - p.causal_offset(), 0, p.n_q) : 0;
    };
    std::int64_t fp32 = p.n_q;                    // D written
    for (std::int64_t j = 0; j < k_blocks; ++j) { // L, D, dQ^g (read after the first block)
        const std::int64_t rows = p.n_q - first_row(j * t.rows);
        fp32 += rows * (2 + p.d * (j >= groups ? 2 : 1));
    }
    for (std::int64_t g = 0; g < groups; ++g) // pass R reads each partial once
        fp32 += (p.n_q - first_row(g * t.rows)) * p.d;
    fp32 *= p.batch_heads();
    return 2 * (words - fp32) + 4 * fp32;
}

TEST_CASE("bf16 native backward: runs on this CPU and differs from the widening path",
          "[bf16][dense][backward]") {
    CHECK(ioattn::bf16_kernels_native() == native_expected());
    if (!ioattn::bf16_kernels_native()) {
        WARN("the native bf16 kernel does not run here: nothing to compare");
        return;
    }
    Grads g(bf16_shape(70, 90, 16, 24, false, 4, 2), 1);
    g.forward();
    const MemoryModel m{1 << 14};
    const Tiling t = Tiling::for_memory(Schedule::fused, m, g.p, Pass::backward);
    NullCounter n;
    ioattn::dense::backward(g.args(), t, m, n);
    const std::vector<bf16> native = g.d_k;
    {
        const auto env = force_widening();
        ioattn::dense::backward(g.args(), t, m, n);
    }
    CHECK_FALSE(native == g.d_k); // P and dS rounded to bf16: some element differs
}

TEST_CASE("bf16 native backward: within the derived bound, exact I/O, thread-count invariant",
          "[bf16][dense][backward]") {
    const std::vector<Problem> shapes = {
        bf16_shape(70, 90, 16, 24, false, 4, 2), // GQA, ragged tiles
        bf16_shape(70, 90, 16, 24, true, 4, 2),
        bf16_shape(100, 100, 7, 5, true),  // odd d, d_v
        bf16_shape(33, 200, 64, 64, true), // n_q < n_k: the diagonal cut
        bf16_shape(1, 1, 1, 1, false),
        bf16_shape(130, 17, 3, 9, true), // n_q > n_k: fully masked rows
        bf16_shape(300, 257, 128, 128, false),
    };
    for (const MemoryModel m : {MemoryModel{1 << 13}, MemoryModel{1 << 17}})
        for (std::size_t s = 0; s < shapes.size(); ++s) {
            Grads g(shapes[s], 10 + s);
            const auto fits = Tiling::try_for_memory(Schedule::fused, m, g.p, Pass::backward);
            if (!fits)
                continue;
            const Tiling t = *fits;
            CAPTURE(s, m.fast_words, t.rows, t.cols);
            g.forward();
            ioattn::IoCounter c(m.fast_words);
            ioattn::dense::backward(g.args(), t, m, c);
            CHECK(c.report() == ioattn::io_cost(g.p, t, Pass::backward));
            CHECK(c.report() == ioattn::dense::dry_run_backward(g.p, t, m));
            CHECK(c.bytes(2, 4) == closed_form_bytes(g.p, t));
            const Reference ref(g);
            check_gradient(g.d_q, ref.d_q, ref.bq);
            check_gradient(g.d_k, ref.d_k, ref.bk);
            check_gradient(g.d_v, ref.d_v, ref.bv);
            const std::vector<bf16> q_all = g.d_q, k_all = g.d_k, v_all = g.d_v;
            {
                tbb::global_control one(tbb::global_control::max_allowed_parallelism, 1);
                NullCounter n;
                ioattn::dense::backward(g.args(), t, m, n);
            }
            CHECK(g.d_q == q_all);
            CHECK(g.d_k == k_all);
            CHECK(g.d_v == v_all);
        }
}

TEST_CASE("bf16 native backward: relative Frobenius error at d = 64 and 128",
          "[bf16][dense][backward]") {
    for (const std::int64_t d : {64, 128})
        for (const bool causal : {false, true}) {
            CAPTURE(d, causal);
            Problem p = bf16_shape(512, 512, d, d, causal, 2, 2);
            p.batch = 1;
            Grads g(p, 7);
            g.forward();
            const MemoryModel m{1 << 18};
            const Tiling t = Tiling::tuned(Schedule::fused, m, g.p, Pass::backward);
            NullCounter n;
            ioattn::dense::backward(g.args(), t, m, n);
            const Reference ref(g);
            const double eq = check_gradient(g.d_q, ref.d_q, ref.bq);
            const double ek = check_gradient(g.d_k, ref.d_k, ref.bk);
            const double ev = check_gradient(g.d_v, ref.d_v, ref.bv);
            INFO("relative Frobenius dQ " << eq << ", dK " << ek << ", dV " << ev);
            CHECK(std::max({eq, ek, ev}) < 2 * kBwdU16);
        }
}

TEST_CASE("bf16 native backward: fully masked rows and hidden NaN rows stay out",
          "[bf16][dense][backward][bad_values]") {
    const MemoryModel m{1 << 12};
    { // rows that see no key: dQ exactly 0, whatever Q and dO hold there
        Grads g(bf16_shape(30, 12, 6, 5, true), 21);
        g.forward();
        const Tiling t = Tiling::for_memory(Schedule::fused, m, g.p, Pass::backward);
        NullCounter n;
        ioattn::dense::backward(g.args(), t, m, n);
        const std::vector<bf16> clean_k = g.d_k, clean_v = g.d_v, clean_q = g.d_q;
        const std::int64_t masked = g.p.n_q - g.p.n_k;
        for (std::int64_t s = 0; s < g.p.batch_heads(); ++s)
            for (std::int64_t i = 0; i < masked; ++i) {
                for (std::int64_t x = 0; x < g.p.d; ++x)
                    g.q[static_cast<std::size_t>((s * g.p.n_q + i) * g.p.d + x)] =
                        bf16(std::numeric_limits<float>::quiet_NaN());
                for (std::int64_t x = 0; x < g.p.d_v; ++x)
                    g.d_o[static_cast<std::size_t>((s * g.p.n_q + i) * g.p.d_v + x)] =
                        bf16(std::numeric_limits<float>::infinity());
            }
        ioattn::dense::backward(g.args(), t, m, n);
        CHECK(g.d_k == clean_k);
        CHECK(g.d_v == clean_v);
        CHECK(g.d_q == clean_q);
        for (std::int64_t s = 0; s < g.p.batch_heads(); ++s)
            for (std::int64_t i = 0; i < masked; ++i)
                for (std::int64_t x = 0; x < g.p.d; ++x)
                    CHECK(g.d_q[static_cast<std::size_t>((s * g.p.n_q + i) * g.p.d + x)].bits == 0);
    }
    { // NaN in a key and value row hidden from the first rows: their dQ stays finite
        Grads g(bf16_shape(24, 40, 8, 5, true), 8);
        const std::int64_t j = 30, first_seeing = j - (g.p.n_k - g.p.n_q);
        g.forward();
        for (std::int64_t x = 0; x < g.p.d; ++x)
            g.k[static_cast<std::size_t>(j * g.p.d + x)] =
                bf16(std::numeric_limits<float>::quiet_NaN());
        for (std::int64_t x = 0; x < g.p.d_v; ++x)
            g.v[static_cast<std::size_t>(j * g.p.d_v + x)] =
                bf16(std::numeric_limits<float>::quiet_NaN());
        const Tiling t = Tiling::for_memory(Schedule::fused, m, g.p, Pass::backward);
        NullCounter n;
        ioattn::dense::backward(g.args(), t, m, n);
        bool finite = true;
        for (std::int64_t h = 0; h < g.p.heads; ++h)
            for (std::int64_t i = 0; i < first_seeing; ++i)
                for (std::int64_t x = 0; x < g.p.d; ++x)
                    finite = finite &&
                             std::isfinite(wide(
                                 g.d_q[static_cast<std::size_t>((h * g.p.n_q + i) * g.p.d + x)]));
        CHECK(finite);
    }
}

TEST_CASE("bf16 native backward: adversarial inputs land where the widening path puts them",
          "[bf16][dense][backward][adversarial]") {
    namespace adv = ioattn::test::adversarial;
    for (std::uint64_t seed = 0; seed < 60; ++seed) {
        const adv::Case<float> c = adv::make_case<float>(seed * 7 + 3, false);
        CAPTURE(seed, adv::kKinds[c.kind]);
        Grads g(c.p, 1);
        const auto put = [](std::vector<bf16>& to, const std::vector<float>& from) {
            for (std::size_t i = 0; i < to.size(); ++i)
                to[i] = bf16(from[i]);
        };
        put(g.q, c.q);
        put(g.k, c.k);
        put(g.v, c.v);
        put(g.d_o, c.d_o);
        g.forward();
        const MemoryModel m{1 << 12};
        const Tiling t = Tiling::for_memory(Schedule::fused, m, g.p, Pass::backward);
        NullCounter n;
        ioattn::dense::backward(g.args(), t, m, n);
        const std::vector<bf16> native[] = {g.d_q, g.d_k, g.d_v};
        {
            const auto env = force_widening();
            ioattn::dense::backward(g.args(), t, m, n);
        }
        const std::vector<bf16>* widening[] = {&g.d_q, &g.d_k, &g.d_v};
        bool same_class = true;
        for (int o = 0; o < 3; ++o)
            for (std::size_t i = 0; i < native[o].size(); ++i) {
                const double a = wide(native[o][i]), b = wide((*widening[o])[i]);
                same_class = same_class && std::isnan(a) == std::isnan(b) &&
                             std::isinf(a) == std::isinf(b) && (!std::isinf(a) || a == b);
            }
        // finite inputs, conditioned scores (not 1e30 spans, not one enormous key whose 1e30
        // products cancel in the fp32 sums of S and dP, not a huge scale): every element within
        // the derived bound of the double reference where that is finite
        bool finite = true;
        for (const auto* x : {&g.q, &g.k, &g.v, &g.d_o})
            for (const bf16 e : *x)
                finite = finite && std::isfinite(wide(e));
        for (const float l : g.lse) // L of a row that sees a key (L = -inf where none)
            finite = finite && (std::isfinite(l) || l == -std::numeric_limits<float>::infinity());
        if (finite && c.kind != 0 && c.kind != 1 && c.kind != 9) {
            const Reference ref(g);
            const std::vector<double>* want[] = {&ref.d_q, &ref.d_k, &ref.d_v};
            const std::vector<double>* bound[] = {&ref.bq, &ref.bk, &ref.bv};
            for (int o = 0; o < 3; ++o) {
                std::size_t outside = 0; // where the oracle is finite (it may overflow)
                for (std::size_t i = 0; i < native[o].size(); ++i) {
                    const double want_i = (*want[o])[i], bound_i = (*bound[o])[i];
                    if (std::isfinite(want_i) && std::isfinite(bound_i) &&
                        !(std::fabs(wide(native[o][i]) - want_i) <= bound_i))
                        ++outside;
                }
                CAPTURE(o);
                CHECK(outside == 0);
            }
        }
        CHECK(same_class);
    }
}

} // namespace dense_bf16_backward_test
