// Consumer of the installed ioattn package: one counted fused forward pass, checked against a
// naive computation and against the closed-form I/O. Exit 0 on agreement, 1 otherwise.

#include <ioattn/dense.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

int main() {
    ioattn::Problem p;
    p.heads = 2;
    p.n_q = 37;
    p.n_k = 29;
    p.d = 16;
    p.causal = true;
    const ioattn::Problem r = p.resolved();
    const std::int64_t nq = r.n_q, nk = r.n_k, d = r.d, h = r.heads;

    std::mt19937 rng(1);
    std::uniform_real_distribution<float> uni(-1.0F, 1.0F);
    std::vector<float> q(static_cast<std::size_t>(h * nq * d));
    std::vector<float> k(static_cast<std::size_t>(h * nk * d));
    std::vector<float> v(static_cast<std::size_t>(h * nk * d));
    std::vector<float> o(static_cast<std::size_t>(h * nq * d));
    std::vector<float> lse(static_cast<std::size_t>(h * nq));
    for (auto* t : {&q, &k, &v})
        for (float& x : *t)
            x = uni(rng);

    ioattn::ForwardArgs<float> args;
    args.problem = p;
    args.q = ioattn::TensorView<float>::packed(q.data(), 1, h, nq, d);
    args.k = ioattn::TensorView<float>::packed(k.data(), 1, h, nk, d);
    args.v = ioattn::TensorView<float>::packed(v.data(), 1, h, nk, d);
    args.o = ioattn::TensorView<float>::packed(o.data(), 1, h, nq, d);
    args.lse = ioattn::TensorView<float>::packed(lse.data(), 1, h, nq, 1);

    const ioattn::MemoryModel memory{800}; // two row blocks
    const ioattn::Tiling tiling = ioattn::Tiling::for_memory(ioattn::Schedule::fused, memory, r);
    ioattn::IoCounter counter(memory.fast_words);
    ioattn::dense::forward_fused<float, ioattn::IoCounter>(args, tiling, memory, counter);

    double worst = 0;
    const auto at = [](const std::vector<float>& t, std::int64_t e) {
        return static_cast<double>(t[static_cast<std::size_t>(e)]);
    };
    for (std::int64_t hh = 0; hh < h; ++hh) {
        for (std::int64_t i = 0; i < nq; ++i) {
            const std::int64_t visible = std::min(nk, i + (nk - nq) + 1);
            std::vector<double> s(static_cast<std::size_t>(nk), 0.0);
            double m = -INFINITY;
            for (std::int64_t j = 0; j < visible; ++j) {
                double dot = 0;
                for (std::int64_t c = 0; c < d; ++c)
                    dot += at(q, (hh * nq + i) * d + c) * at(k, (hh * nk + j) * d + c);
                s[static_cast<std::size_t>(j)] = r.scale * dot;
                m = std::max(m, s[static_cast<std::size_t>(j)]);
            }
            if (visible <= 0) {
                worst = std::max(worst, std::isinf(at(lse, hh * nq + i)) ? 0.0 : 1.0);
                for (std::int64_t c = 0; c < d; ++c)
                    worst = std::max(worst, std::fabs(at(o, (hh * nq + i) * d + c)));
                continue;
            }
            double l = 0;
            std::vector<double> acc(static_cast<std::size_t>(d), 0.0);
            for (std::int64_t j = 0; j < visible; ++j) {
                const double e = std::exp(s[static_cast<std::size_t>(j)] - m);
                l += e;
                for (std::int64_t c = 0; c < d; ++c)
                    acc[static_cast<std::size_t>(c)] += e * at(v, (hh * nk + j) * d + c);
            }
            for (std::int64_t c = 0; c < d; ++c)
                worst = std::max(
                    worst,
                    std::fabs(acc[static_cast<std::size_t>(c)] / l - at(o, (hh * nq + i) * d + c)));
            worst = std::max(worst, std::fabs(m + std::log(l) - at(lse, hh * nq + i)));
        }
    }
    const bool io_ok = counter.report() == ioattn::io_cost_forward_fused(r, tiling);
    std::printf("ioattn consumer: tiling %lldx%lld, max error %.3g, I/O %lld words (%s)\n",
                static_cast<long long>(tiling.rows),
                static_cast<long long>(tiling.cols),
                worst,
                static_cast<long long>(counter.report().total()),
                io_ok ? "matches io_cost" : "MISMATCH");
    return worst < 1e-4 && io_ok ? 0 : 1;
}
