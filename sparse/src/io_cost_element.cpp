// ioattn::sparse element kernels' I/O: the exact closed forms of forward_element and
// backward_element from their plans (element_plan.hpp), their peaks, and the tuned tiling.

#include "element_plan.hpp"

#include <ioattn/error.hpp>
#include <ioattn/sparse/element.hpp>

#include <algorithm>
#include <string>

namespace ioattn::sparse {

namespace detail {

const ElementPlan& element_plan(const Support& support, const Tiling& tiling, const char* where) {
    if (tiling.schedule != Schedule::fused)
        throw InvalidArgument(std::string(where) + ": tiling is for the " +
                              std::string(to_string(tiling.schedule)) + " schedule");
    if (tiling.rows < 1 || tiling.cols < 1)
        throw InvalidArgument(std::string(where) + ": tiling " + std::to_string(tiling.rows) +
                              " x " + std::to_string(tiling.cols) + " (expected sizes >= 1)");
    return support.cached_element_plan(tiling.rows, tiling.cols);
}

void check_element_peak(std::int64_t peak, const MemoryModel& memory, const char* where) {
    if (peak > memory.fast_words)
        throw CapacityError(std::string(where) + ": " + std::to_string(peak) +
                            " words resident > M = " + std::to_string(memory.fast_words));
}

std::int64_t forward_element_peak(const Problem& p, const ElementPlan& plan, ElementWords w) {
    std::int64_t peak = 0;
    for (std::int64_t b = 0; b < plan.blocks(); ++b) {
        const std::int64_t r = plan.rows(b);
        std::int64_t panel = 0;
        for (const PanelVisit& v : plan.visits_of(b))
            panel = std::max(panel, v.keys * (w.pad(p.d) + w.pad(p.d_v)) + w.indices(v.run));
        peak =
            std::max(peak, r * (w.pad(p.d) + w.pad(p.d_v)) + 2 * w.pad(r) + w.indices(r) + panel);
    }
    return peak;
}

std::int64_t backward_element_peak(const Problem& p,
                                   const ElementPlan& rows,
                                   const ElementPlan& keys,
                                   ElementWords w) {
    const std::int64_t pd = w.pad(p.d), pdv = w.pad(p.d_v);
    std::int64_t peak = 0;
    for (std::int64_t b = 0; b < rows.blocks(); ++b) { // sweep Q
        const std::int64_t r = rows.rows(b);
        std::int64_t panel = pdv; // one O row while D is formed
        for (const PanelVisit& v : rows.visits_of(b))
            panel = std::max(panel, v.keys * (pd + pdv) + w.indices(v.run));
        peak = std::max(peak, r * (2 * pd + pdv) + 2 * w.pad(r) + w.indices(r) + panel);
    }
    for (std::int64_t b = 0; b < keys.blocks(); ++b) { // sweep K
        const std::int64_t c = keys.rows(b);
        std::int64_t panel = 0;
        for (const PanelVisit& v : keys.visits_of(b))
            panel = std::max(panel, v.keys * (pd + pdv + w.pad(2)) + w.indices(v.run));
        peak = std::max(peak, c * (2 * pd + 2 * pdv) + w.indices(c) + panel);
    }
    return peak;
}

} // namespace detail

template <typename Scalar>
IoReport detail::io_cost_forward_element(const Problem& problem,
                                         const Support& support,
                                         const Tiling& tiling,
                                         bool resume) {
    constexpr const char* kWhere = "ioattn::sparse::io_cost_forward_element";
    const Problem p = problem.resolved(kWhere);
    if (support.n_q() != p.n_q || support.n_k() != p.n_k)
        throw InvalidArgument(std::string(kWhere) + ": support shape does not match the problem");
    const detail::ElementPlan& plan = detail::element_plan(support, tiling, kWhere);
    const auto words = detail::ElementWords::of(sizeof(Scalar));
    std::int64_t keys = 0, indices = 0;
    for (const detail::PanelVisit& v : plan.visits) {
        keys += v.keys;
        indices += v.reads;
    }
    const std::int64_t reads = p.n_q * p.d + keys * (p.d + p.d_v) + indices * words.index +
                               (resume ? p.n_q * (p.d_v + 1) : 0);
    return {reads * p.batch_heads(),
            p.n_q * (p.d_v + 1) * p.batch_heads(),
            detail::forward_element_peak(p, plan, detail::ElementWords::of(sizeof(Scalar)))};
}

template <typename Scalar>
IoReport
io_cost_forward_element(const Problem& problem, const Support& support, const Tiling& tiling) {
    return detail::io_cost_forward_element<Scalar>(problem, support, tiling, false);
}

template IoReport
detail::io_cost_forward_element<float>(const Problem&, const Support&, const Tiling&, bool);
template IoReport
detail::io_cost_forward_element<double>(const Problem&, const Support&, const Tiling&, bool);
template IoReport io_cost_forward_element<float>(const Problem&, const Support&, const Tiling&);
template IoReport io_cost_forward_element<double>(const Problem&, const Support&, const Tiling&);

template <typename Scalar>
IoReport detail::io_cost_backward_element(const Problem& problem,
                                          const Support& support,
                                          const Tiling& tiling,
                                          bool accumulate) {
    constexpr const char* kWhere = "ioattn::sparse::io_cost_backward_element";
    const Problem p = problem.resolved(kWhere);
    if (support.n_q() != p.n_q || support.n_k() != p.n_k)
        throw InvalidArgument(std::string(kWhere) + ": support shape does not match the problem");
    const detail::ElementPlan& rows = detail::element_plan(support, tiling, kWhere);
    const detail::ElementPlan& keys = detail::element_plan(support.transposed(), tiling, kWhere);
    const auto words = detail::ElementWords::of(sizeof(Scalar));
    std::int64_t row_keys = 0, key_queries = 0, indices = 0;
    for (const detail::PanelVisit& v : rows.visits) {
        row_keys += v.keys;
        indices += v.reads;
    }
    for (const detail::PanelVisit& v : keys.visits) {
        key_queries += v.keys;
        indices += v.reads;
    }
    const std::int64_t per_head = p.n_q * (p.d + 2 * p.d_v + 1) + row_keys * (p.d + p.d_v) +
                                  key_queries * (p.d + p.d_v + 2) + indices * words.index;
    const std::int64_t kv = p.batch * p.kv_heads;
    const std::int64_t added =
        accumulate ? p.n_q * p.d * p.batch_heads() + kv * p.n_k * (p.d + p.d_v) : 0;
    return {per_head * p.batch_heads() + kv * p.n_k * (p.d + p.d_v) + added,
            p.n_q * (p.d + 2) * p.batch_heads() + kv * p.n_k * (p.d + p.d_v),
            detail::backward_element_peak(p, rows, keys, detail::ElementWords::of(sizeof(Scalar)))};
}

template <typename Scalar>
IoReport
io_cost_backward_element(const Problem& problem, const Support& support, const Tiling& tiling) {
    return detail::io_cost_backward_element<Scalar>(problem, support, tiling, false);
}

template IoReport
detail::io_cost_backward_element<float>(const Problem&, const Support&, const Tiling&, bool);
template IoReport
detail::io_cost_backward_element<double>(const Problem&, const Support&, const Tiling&, bool);
template IoReport io_cost_backward_element<float>(const Problem&, const Support&, const Tiling&);
template IoReport io_cost_backward_element<double>(const Problem&, const Support&, const Tiling&);

namespace detail {

template <typename Scalar>
Tiling widened_element_tiling(const Problem& p,
                              const Support& support,
                              const Tiling& base,
                              const MemoryModel& memory,
                              Pass pass) {
    // Every (row, panel) a row has keys in costs a softmax update and every block's visit to a
    // panel reads the panel's keys once, so the widest panels and the most rows that fit M win:
    // of the widest panels for blocks of R, R/2 and R/4 rows, the largest R x P (ties: more
    // rows). Measured against the rule before (widen only below 4 keys per row and 512-key
    // panel, take the widest panel at any R) on the AVX-512 Zen 5 machine, N = 16384, d = 64,
    // 2 threads, medians of 8 alternated `ioattn run --pattern P --pass F --schedule fused
    // --repeat 3`: random:0.02 forward 23.9 -> 34.4 GFLOP/s (256 x 512 -> 256 x 1024),
    // backward 22.4 -> 26.4; powerlaw:32 and bigbird:64:2:3 unchanged (0.99-1.01x).
    // Ties went to wider panels until the Xeon model 167 (2 MiB L2): random:0.02's forward took
    // 128 x 4096, whose panel alone fills the L2 and whose keys serve 2.8 rows each, against
    // 5.2 for 256 x 2048: 29.5 -> 35.7 GFLOP/s (three runs of `--repeat 5` each; 512 x 1024
    // 36.8, 512 x 512 30.8, 1024 x 512 28.6); the other patterns' choices are unchanged.
    if (support.z_qk() == 0)
        return base;
    const auto w = ElementWords::of(sizeof(Scalar));
    const auto fits = [&](const Tiling& t) {
        const ElementPlan& rows = support.cached_element_plan(t.rows, t.cols);
        const std::int64_t peak =
            pass == Pass::forward
                ? forward_element_peak(p, rows, w)
                : backward_element_peak(
                      p, rows, support.transposed().cached_element_plan(t.rows, t.cols), w);
        return peak <= memory.fast_words;
    };
    // the widest panels for blocks of base.rows, base.rows / 2 and / 4 rows (fewer rows see
    // fewer keys per panel); the largest rows x cols wins, the widest panels of equals
    Tiling best = base;
    const std::int64_t widest = std::max(support.n_q(), support.n_k()); // the backward's keys
    for (std::int64_t r = base.rows; r >= std::max<std::int64_t>(1, base.rows / 4); r /= 2) {
        Tiling t{Schedule::fused, r, base.cols};
        while (t.cols < widest) {
            const Tiling wider{Schedule::fused, r, std::min(2 * t.cols, widest)};
            if (!fits(wider))
                break;
            t = wider;
        }
        if (t.rows * t.cols > best.rows * best.cols) // ties: the first, with more rows
            best = t;
        if (r == 1)
            break;
    }
    return best;
}

template Tiling widened_element_tiling<float>(
    const Problem&, const Support&, const Tiling&, const MemoryModel&, Pass);
template Tiling widened_element_tiling<double>(
    const Problem&, const Support&, const Tiling&, const MemoryModel&, Pass);

} // namespace detail

template <typename Scalar>
Tiling element_tiling(const Problem& problem, const MemoryModel& memory, Pass pass) {
    constexpr const char* kWhere = "ioattn::sparse::element_tiling";
    const Problem p = problem.resolved(kWhere);
    const auto w = detail::ElementWords::of(sizeof(Scalar));
    const std::int64_t pd = w.pad(p.d), pdv = w.pad(p.d_v);
    // the peak when every panel holds P distinct keys and a walk of P + 1 indices
    const auto bound = [&](std::int64_t r, std::int64_t c) {
        const std::int64_t panel = c * (pd + pdv) + w.indices(c + 1);
        const std::int64_t fwd = r * (pd + pdv) + 2 * w.pad(r) + w.indices(r) + panel;
        if (pass == Pass::forward)
            return fwd;
        const std::int64_t sweep_q =
            r * (2 * pd + pdv) + 2 * w.pad(r) + w.indices(r) + std::max(pdv, panel);
        const std::int64_t sweep_k =
            r * (2 * pd + 2 * pdv) + w.indices(r) + c * (pd + pdv + w.pad(2)) + w.indices(c + 1);
        return std::max(sweep_q, sweep_k);
    };
    // 256 rows x 512 keys: state and panel in half the 512 KiB L2 of the Zen 3 machine and the
    // 1 MiB one of the AVX-512 machine (measured in the README's sparse table); halved to fit M.
    std::int64_t r = std::min<std::int64_t>(256, p.n_q), c = std::min<std::int64_t>(512, p.n_k);
    while (bound(r, c) > memory.fast_words && (r > 1 || c > 1)) {
        if (c >= r && c > 1)
            c = (c + 1) / 2;
        else
            r = (r + 1) / 2;
    }
    if (bound(r, c) > memory.fast_words)
        throw CapacityError(std::string(kWhere) + ": M = " + std::to_string(memory.fast_words) +
                            " words is below the element kernels' smallest footprint (" +
                            std::to_string(bound(1, 1)) + ")");
    return {Schedule::fused, std::max<std::int64_t>(1, r), std::max<std::int64_t>(1, c)};
}

template Tiling element_tiling<float>(const Problem&, const MemoryModel&, Pass);
template Tiling element_tiling<double>(const Problem&, const MemoryModel&, Pass);

} // namespace ioattn::sparse
