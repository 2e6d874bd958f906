// `ioattn run --dtype bf16` (run_variants.hpp): the operands of the float run (same seed)
// rounded to bf16, L in fp32, through ioattn::attention<bf16> (any pass, pattern, schedule and
// variant; --input-density gives bf16 sparse operands). --check compares with the double
// reference computed on the same bf16-rounded inputs, with the tolerance of docs/design.md
// section 16: forward max|O - O_ref| <= (u + 2 (n_k + d) u32) max|O_ref| (+ u max|V| where the
// native bf16 kernel rounds P), u = 2^-8, and
// |L - L_ref| <= 2 (n_k + d) u32 (1 + |L_ref|); backward, per gradient, the relative
// Frobenius error <= 2.5 u.

#include "digest.hpp"
#include "run_check.hpp"
#include "run_operands.hpp"
#include "run_variants.hpp"

#include <ioattn/attention.hpp>
#include <ioattn/bf16.hpp>
#include <ioattn/dense.hpp>
#include <ioattn/isa.hpp>
#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/forward.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include <measure.hpp>

namespace ioattn::app {

namespace {

constexpr double kUnit16 = 0x1p-8; ///< unit roundoff of bf16 (8 significant bits)
constexpr double kUnit32 = 0x1p-24;

std::vector<bf16> to_bf16(const std::vector<float>& x) {
    std::vector<bf16> out(x.size());
    narrow(x.data(), out.data(), static_cast<std::int64_t>(x.size()));
    return out;
}

std::vector<float> to_float(const std::vector<bf16>& x) {
    std::vector<float> out(x.size());
    widen(x.data(), out.data(), static_cast<std::int64_t>(x.size()));
    return out;
}

/// The bf16 operands of a run (L fp32) and its bf16 sparse operands.
struct Bf16Data : measure::OwnedArgs<bf16, float> {
    std::optional<sparse::SparseRows<bf16>> sq, sk, sv;

    Bf16Data(const Data<float>& x, const Operands<float>& ops)
        : measure::OwnedArgs<bf16, float>{x.p,
                                          to_bf16(x.q),
                                          to_bf16(x.k),
                                          to_bf16(x.v),
                                          to_bf16(x.o),
                                          to_bf16(x.d_o),
                                          to_bf16(x.d_q),
                                          to_bf16(x.d_k),
                                          to_bf16(x.d_v),
                                          x.lse} {
        const auto rows = [](const sparse::SparseRows<float>& r) {
            const auto& val = r.values();
            std::vector<float> f(val.begin(), val.end());
            return sparse::SparseRows<bf16>(
                r.rows(),
                r.cols(),
                std::vector<std::int64_t>(r.offsets().begin(), r.offsets().end()),
                std::vector<std::int64_t>(r.indices().begin(), r.indices().end()),
                to_bf16(f));
        };
        if (ops.q) {
            sq.emplace(rows(*ops.q));
            sk.emplace(rows(*ops.k));
            sv.emplace(rows(*ops.v));
        }
    }

    Structure<bf16> structure(const Operands<float>& ops) const {
        Structure<bf16> s;
        s.support = ops.support ? &*ops.support : nullptr;
        if (sq)
            s.inputs = {&*sq, &*sk, &*sv};
        return s;
    }
};

double max_abs(const std::vector<double>& x) {
    double m = 0;
    for (const double e : x)
        m = std::max(m, std::isinf(e) ? 0.0 : std::fabs(e));
    return m;
}

/// ||x - ref||_F / ||ref||_F (NaN if any is NaN; 0 / 0 = 0).
double relative_frobenius(const std::vector<float>& x, const std::vector<double>& ref) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        const double e = static_cast<double>(x[i]) - ref[i];
        num += e * e;
        den += ref[i] * ref[i];
    }
    return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

/// The --check of a bf16 run: `x` holds the bf16-rounded inputs and the run's outputs widened.
nlohmann::json
check_bf16(const Data<float>& x, const sparse::Support* support, bool grads, bool p_rounded) {
    const Problem& p = x.p;
    Data<double> ref = converted<double>(x); // the inputs exactly; the outputs recomputed in double
    if (support != nullptr) {
        sparse::forward_reference(ref.forward(), *support);
        if (grads)
            sparse::backward_reference(ref.backward(), *support);
    } else {
        dense::forward_reference(ref.forward());
        if (grads)
            dense::backward_reference(ref.backward());
    }
    const double acc32 = 2.0 * static_cast<double>(p.n_k + p.d) * kUnit32;
    if (grads) {
        const double tol = 2.5 * kUnit16;
        const double eq = relative_frobenius(x.d_q, ref.d_q);
        const double ek = relative_frobenius(x.d_k, ref.d_k);
        const double ev = relative_frobenius(x.d_v, ref.d_v);
        const double worst = std::max({eq, ek, ev});
        return {{"relative_frobenius", {{"d_q", eq}, {"d_k", ek}, {"d_v", ev}}},
                {"tolerance", tol},
                {"max_relative_error", worst},
                {"passed", worst <= tol}}; // false for NaN
    }
    // the native kernel rounds P to bf16 before P V: at most u max|V| more
    std::vector<double> v(x.v.begin(), x.v.end());
    const double tol_o =
        (kUnit16 + acc32) * max_abs(ref.o) + (p_rounded ? kUnit16 * max_abs(v) : 0.0);
    double err_o = 0, err_l = 0;
    bool l_ok = true;
    for (std::size_t i = 0; i < x.o.size(); ++i) {
        const double e = std::fabs(static_cast<double>(x.o[i]) - ref.o[i]);
        err_o = std::isnan(e) || e > err_o ? e : err_o;
    }
    for (std::size_t i = 0; i < x.lse.size(); ++i) {
        const double l = static_cast<double>(x.lse[i]), r = ref.lse[i];
        const double e = std::isinf(l) && l == r ? 0.0 : std::fabs(l - r);
        err_l = std::isnan(e) || e > err_l ? e : err_l;
        l_ok = l_ok && e <= acc32 * (1.0 + std::fabs(r));
    }
    return {{"max_abs_error", err_o},
            {"tolerance", tol_o},
            {"lse_max_abs_error", err_l},
            {"passed", err_o <= tol_o && l_ok}};
}

} // namespace

nlohmann::json run_bf16(const VariantRun& r) {
    const Problem& p = r.problem;
    const bool backward = r.pass == Pass::backward;
    Data<float> data = seeded_data<float>(p, r.seed);
    for (auto* x : {&data.q, &data.k, &data.v, &data.d_o})
        for (float& e : *x)
            e = round_to_bf16(e);
    const Operands<float> operands(r, data); // zeros stay zeros: the rows stay bf16-exact
    Bf16Data h(data, operands);
    const Structure<bf16> structure = h.structure(operands);
    if (r.variant != "auto" &&
        (r.input_density < 1.0 || (r.schedule != "fused" && r.schedule != "auto")))
        throw UsageError("run: --variant " + r.variant +
                         " needs the fused schedule, a sparse --pattern and dense inputs");
    const AttentionOptions opts = attention_options(r);
    const AttentionPlan plan = plan_attention(p, r.pass, structure, opts);
    if (r.count_io && plan.schedule == Schedule::reference)
        throw UsageError("run: --count-io needs a fused or materialized schedule");
    const auto run = [&](const AttentionOptions& o) {
        return backward ? attention_backward(h.backward(), structure, plan, o)
                        : attention(h.forward(), structure, plan, o);
    };
    if (backward) { // O (bf16) and L (fp32) as a bf16 forward leaves them, under an ample M
        AttentionOptions ample = opts;
        ample.schedule =
            plan.schedule == Schedule::reference ? Schedule::reference : Schedule::fused;
        ample.memory = MemoryModel{std::max<std::int64_t>(plan.memory.fast_words, 1 << 22)};
        ample.cache_bytes.reset();
        ample.variant.reset();
        (void)attention(h.forward(), structure, ample);
    }
    const double seconds = measure::median_seconds(
        r.repeat, [&] { (void)run(opts); }, r.repeat > 1);
    const double flops = plan.sparse ? 4.0 * static_cast<double>(plan.z_qk) *
                                           static_cast<double>(p.d * p.batch_heads()) *
                                           (backward ? 2.5 : 1.0)
                                     : flop_count_convention(p, r.pass);
    nlohmann::json j = plan_json(r, plan);
    j["dtype"] = "bf16";
    // which kernels ran: the native bf16 ones (the dense fused forward and backward, the
    // sparse tile and element forwards) or the float ones widened
    const bool native = bf16_runs_native(plan, structure);
    j["bf16_kernels"] = native ? "native" : "widened";
    j["seconds"] = seconds;
    j["gflops"] = flops / seconds * 1e-9;
    data.o = to_float(h.o);
    data.lse = h.lse;
    data.d_q = to_float(h.d_q);
    data.d_k = to_float(h.d_k);
    data.d_v = to_float(h.d_v);
    j["output_digest"] = backward ? output_digest<float>({&data.d_q, &data.d_k, &data.d_v})
                                  : output_digest<float>({&data.o, &data.lse});
    j["check"] = r.check ? check_bf16(data, structure.support, backward, native) : nullptr;
    j["io"] = nullptr;
    if (r.count_io) { // the float schedule's words; operands of 2 bytes, the rest of 4
        AttentionOptions counted = opts;
        IoCounter counter(plan.memory.fast_words);
        counted.counter = &counter;
        const AttentionReport report = run(counted);
        j["io"] = counted_io_json(counter, *report.closed_form, plan.bound, 2, 4);
    }
    return j;
}

} // namespace ioattn::app
