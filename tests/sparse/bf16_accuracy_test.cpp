// Accuracy of bf16 attention (docs/design.md section 16) on randn inputs rounded to bf16,
// against the double reference on the same rounded inputs: max|O - O_ref| <= (2^-8 +
// 2 (n_k + d) 2^-24) max|O_ref| (plus 2^-8 max|V| where a native bf16 forward rounds P to
// bf16: the dense fused one and the sparse tile variant's) and, per gradient,
// ||G - G_ref||_F / ||G_ref||_F <= 2.5 * 2^-8.
// At N = 4096, d = 64 and 128: every forced variant of the sparse fused schedule and the
// materializing schedule on a window-plus-random support, and the dense fused forward on
// sampled rows (the whole double reference would take seconds); the dense backward and both
// dense schedules in full at N = 1024.

#include <ioattn/attention.hpp>
#include <ioattn/bf16.hpp>
#include <ioattn/dense.hpp>
#include <ioattn/isa.hpp>
#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/forward.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <vector>

namespace bf16_accuracy_test {

using ioattn::bf16;
using ioattn::Pass;
using ioattn::Problem;
using ioattn::Schedule;

constexpr double kU16 = 0x1p-8;
constexpr double kU32 = 0x1p-24;

/// One problem: inputs randn rounded to bf16 (as double and bf16), outputs of the bf16 run.
struct Run {
    Problem p;
    std::vector<double> q, k, v, d_o;
    std::vector<bf16> q16, k16, v16, d_o16, o16, dq16, dk16, dv16;
    std::vector<float> lse;

    Run(std::int64_t n, std::int64_t d, std::uint64_t seed) {
        p.batch = p.heads = 1;
        p.n_q = p.n_k = n;
        p.d = d;
        p = p.resolved("test");
        std::mt19937_64 rng(seed);
        std::normal_distribution<float> randn(0.0F, 1.0F);
        const auto draw = [&](std::vector<double>& x, std::vector<bf16>& x16, std::int64_t size) {
            x16.resize(static_cast<std::size_t>(size));
            x.resize(x16.size());
            for (std::size_t i = 0; i < x.size(); ++i) {
                x16[i] = bf16(randn(rng));
                x[i] = static_cast<double>(static_cast<float>(x16[i]));
            }
        };
        draw(q, q16, n * d);
        draw(k, k16, n * d);
        draw(v, v16, n * d);
        draw(d_o, d_o16, n * d);
        o16.resize(q16.size());
        dq16.resize(q16.size());
        dk16.resize(q16.size());
        dv16.resize(q16.size());
        lse.resize(static_cast<std::size_t>(n));
    }

    ioattn::BackwardArgs<bf16> args() {
        return ioattn::BackwardArgs<bf16>::packed(p,
                                                  q16.data(),
                                                  k16.data(),
                                                  v16.data(),
                                                  o16.data(),
                                                  lse.data(),
                                                  d_o16.data(),
                                                  dq16.data(),
                                                  dk16.data(),
                                                  dv16.data());
    }
};

/// The double reference of `r` (support null: dense), every output.
struct Reference {
    std::vector<double> o, lse, d_q, d_k, d_v;

    Reference(Run& r, const ioattn::sparse::Support* support, bool grads) {
        const Problem& p = r.p;
        o.resize(r.q.size());
        lse.resize(static_cast<std::size_t>(p.n_q));
        d_q.resize(r.q.size());
        d_k.resize(r.k.size());
        d_v.resize(r.v.size());
        const auto a = ioattn::BackwardArgs<double>::packed(p,
                                                            r.q.data(),
                                                            r.k.data(),
                                                            r.v.data(),
                                                            o.data(),
                                                            lse.data(),
                                                            r.d_o.data(),
                                                            d_q.data(),
                                                            d_k.data(),
                                                            d_v.data());
        if (support != nullptr) {
            ioattn::sparse::forward_reference(a, *support);
            if (grads)
                ioattn::sparse::backward_reference(a, *support);
        } else {
            ioattn::dense::forward_reference(a);
            if (grads)
                ioattn::dense::backward_reference(a);
        }
    }
};

double max_abs(const std::vector<double>& x) {
    double m = 0;
    for (const double e : x)
        m = std::max(m, std::fabs(e));
    return m;
}

double o_tolerance(const Problem& p, const std::vector<double>& o_ref) {
    return (kU16 + 2.0 * static_cast<double>(p.n_k + p.d) * kU32) * max_abs(o_ref);
}

/// A native bf16 kernel's one extra rounding (P to bf16 before P V) adds at most u max|V| to
/// O (docs/design.md section 16); the widening path does not round P.
double p_rounding(const std::vector<double>& v, bool native) {
    return native ? kU16 * max_abs(v) : 0.0;
}

double max_error(const std::vector<bf16>& x, const std::vector<double>& ref) {
    double e = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        const double d = std::fabs(static_cast<double>(static_cast<float>(x[i])) - ref[i]);
        e = std::isnan(d) ? d : std::max(e, d);
    }
    return e;
}

double relative_frobenius(const std::vector<bf16>& x, const std::vector<double>& ref) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        const double d = static_cast<double>(static_cast<float>(x[i])) - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    return std::sqrt(num / den);
}

/// Runs the forward and backward of `r` under `o` and checks both against `ref`.
void check_run(Run& r,
               const Reference& ref,
               const ioattn::Structure<bf16>& s,
               const ioattn::AttentionOptions& o) {
    auto a = r.args();
    const auto report = ioattn::attention<bf16>(a, s, o);
    const double tol = o_tolerance(r.p, ref.o);
    CHECK(tol <= 5e-3 * max_abs(ref.o));
    const bool native = ioattn::bf16_runs_native(report.plan, s);
    CHECK(max_error(r.o16, ref.o) <= tol + p_rounding(r.v, native));
    (void)ioattn::attention_backward<bf16>(a, s, o);
    CHECK(relative_frobenius(r.dq16, ref.d_q) <= 2.5 * kU16);
    CHECK(relative_frobenius(r.dk16, ref.d_k) <= 2.5 * kU16);
    CHECK(relative_frobenius(r.dv16, ref.d_v) <= 2.5 * kU16);
}

TEST_CASE("bf16 accuracy at N = 4096: every sparse variant and the materializing schedule",
          "[bf16][accuracy]") {
    using ioattn::sparse::Variant;
    for (const std::int64_t d : {64, 128}) {
        Run r(4096, d, 11 + static_cast<std::uint64_t>(d));
        const auto support = ioattn::sparse::parse_pattern("window:48+random:0.002", 4096, 4096, 3);
        const Reference ref(r, &support, true);
        ioattn::Structure<bf16> s;
        s.support = &support;
        for (const Variant v :
             {Variant::tile, Variant::element, Variant::split, Variant::permuted}) {
            CAPTURE(d, ioattn::sparse::to_string(v));
            ioattn::AttentionOptions o;
            o.schedule = Schedule::fused;
            o.variant = v;
            check_run(r, ref, s, o);
        }
        CAPTURE(d, "materialized");
        ioattn::AttentionOptions o;
        o.schedule = Schedule::materialized;
        check_run(r, ref, s, o);
    }
}

TEST_CASE("bf16 accuracy: dense schedules in full at N = 1024", "[bf16][accuracy]") {
    for (const std::int64_t d : {64, 128}) {
        Run r(1024, d, 21 + static_cast<std::uint64_t>(d));
        const Reference ref(r, nullptr, true);
        for (const Schedule s : {Schedule::fused, Schedule::materialized}) {
            CAPTURE(d, ioattn::to_string(s));
            ioattn::AttentionOptions o;
            o.schedule = s;
            check_run(r, ref, {}, o);
        }
    }
}

TEST_CASE("bf16 accuracy at N = 4096: the dense fused forward on sampled rows",
          "[bf16][accuracy]") {
    for (const std::int64_t d : {64, 128}) {
        CAPTURE(d);
        Run r(4096, d, 31 + static_cast<std::uint64_t>(d));
        ioattn::AttentionOptions o;
        o.schedule = Schedule::fused;
        auto a = r.args();
        const auto report = ioattn::attention<bf16>(a, {}, o);
        const Problem& p = r.p;
        std::vector<double> s(static_cast<std::size_t>(p.n_k)), o_ref, o_got;
        for (std::int64_t i = 0; i < p.n_q; i += 16) { // every 16th row, exactly in double
            double m = -INFINITY, l = 0;
            for (std::int64_t j = 0; j < p.n_k; ++j) {
                double dot = 0;
                for (std::int64_t c = 0; c < d; ++c)
                    dot += r.q[static_cast<std::size_t>(i * d + c)] *
                           r.k[static_cast<std::size_t>(j * d + c)];
                s[static_cast<std::size_t>(j)] = dot * p.scale;
                m = std::max(m, dot * p.scale);
            }
            for (double& e : s) {
                e = std::exp(e - m);
                l += e;
            }
            for (std::int64_t c = 0; c < d; ++c) {
                double acc = 0;
                for (std::int64_t j = 0; j < p.n_k; ++j)
                    acc +=
                        s[static_cast<std::size_t>(j)] * r.v[static_cast<std::size_t>(j * d + c)];
                o_ref.push_back(acc / l);
                o_got.push_back(static_cast<double>(
                    static_cast<float>(r.o16[static_cast<std::size_t>(i * d + c)])));
            }
            CHECK(std::fabs(static_cast<double>(r.lse[static_cast<std::size_t>(i)]) -
                            (m + std::log(l))) <=
                  2.0 * static_cast<double>(p.n_k + d) * kU32 * (1.0 + std::fabs(m + std::log(l))));
        }
        double err = 0;
        for (std::size_t x = 0; x < o_ref.size(); ++x)
            err = std::max(err, std::fabs(o_got[x] - o_ref[x]));
        CHECK(err <=
              o_tolerance(p, o_ref) + p_rounding(r.v, ioattn::bf16_runs_native(report.plan, {})));
    }
}

} // namespace bf16_accuracy_test
