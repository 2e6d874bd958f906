// The bf16 rows of `ioattn bench --suite dense` (bench_dense_bf16.hpp): B = 1, H = 8, the
// suite's fp32 inputs rounded to bf16 (L fp32), through ioattn::attention<bf16> planned once,
// as the fp32 fused row runs; x fp32 = the fp32 fused row's seconds over these, x bf16 peak =
// GFLOP/s over measure_bf16_dot_peak on the same threads.

#include "bench_dense_bf16.hpp"

#include "output.hpp"

#include <ioattn/bf16.hpp>
#include <ioattn/isa.hpp>

namespace ioattn::app {

double bf16_peak_or_zero(int threads) {
    return cpu_supports_avx512_bf16() && bf16_kernels_native() ? measure_bf16_dot_peak(threads)
                                                               : 0.0;
}

Bf16Row bench_bf16_forward(const measure::ForwardData<float>& data,
                           const AttentionOptions& options,
                           int repeat,
                           double fp32_seconds,
                           double peak) {
    const Problem& p = data.problem;
    const auto rounded = [](const std::vector<float>& x) {
        std::vector<bf16> out(x.size());
        narrow(x.data(), out.data(), static_cast<std::int64_t>(x.size()));
        return out;
    };
    const std::vector<bf16> q = rounded(data.q), k = rounded(data.k), v = rounded(data.v);
    std::vector<bf16> o(data.o.size());
    std::vector<float> lse(data.lse.size());
    const auto args =
        ForwardArgs<bf16>::packed(p, q.data(), k.data(), v.data(), o.data(), lse.data());
    const AttentionPlan plan = plan_attention<bf16>(p, Pass::forward, {}, options);
    const double s =
        measure::median_seconds(repeat, [&] { (void)attention(args, {}, plan, options); });
    Bf16Row r;
    r.n = p.n_q;
    r.d = p.d;
    r.tiling = std::to_string(plan.tiling.rows) + "x" + std::to_string(plan.tiling.cols);
    r.kernels = bf16_kernels_native() ? "native" : "widened";
    r.seconds = s;
    r.gflops = flop_count_convention(p, Pass::forward) / s * 1e-9;
    r.x_fp32 = fp32_seconds / s;
    r.x_peak = peak > 0 ? r.gflops / peak : 0.0;
    return r;
}

void print_bf16_rows(std::ostream& out, const std::vector<Bf16Row>& rows, double peak) {
    Table t({"what", "N", "d", "tiling", "kernels", "seconds", "GFLOP/s", "x fp32", "x bf16 peak"});
    for (const Bf16Row& r : rows)
        t.add({"fused bf16",
               std::to_string(r.n),
               std::to_string(r.d),
               r.tiling,
               r.kernels,
               sig(r.seconds),
               fixed(r.gflops, 1),
               fixed(r.x_fp32, 2),
               peak > 0 ? fixed(r.x_peak, 3) : std::string("-")});
    out << "bf16 forward (Q, K, V, O bf16, L fp32): bf16 dot peak "
        << (peak > 0 ? fixed(peak, 1) + " GFLOP/s" : std::string("- (no AVX512_BF16 kernels)"))
        << "; x fp32 = the fp32 fused row's seconds / these\n";
    t.print(out);
}

nlohmann::json bf16_rows_json(const std::vector<Bf16Row>& rows, double peak) {
    nlohmann::json j;
    j["bf16_dot_peak_gflops"] = peak > 0 ? nlohmann::json(peak) : nlohmann::json(nullptr);
    j["rows"] = nlohmann::json::array();
    for (const Bf16Row& r : rows)
        j["rows"].push_back({{"what", "fused bf16"},
                             {"N", r.n},
                             {"d", r.d},
                             {"tiling", r.tiling},
                             {"kernels", r.kernels},
                             {"seconds", r.seconds},
                             {"gflops", r.gflops},
                             {"ratio_to_fp32_fused", r.x_fp32},
                             {"ratio_to_bf16_peak",
                              peak > 0 ? nlohmann::json(r.x_peak) : nlohmann::json(nullptr)}});
    return j;
}

} // namespace ioattn::app
