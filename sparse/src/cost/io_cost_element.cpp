// ioattn::sparse element kernels' I/O: the exact closed forms of forward_element and
// backward_element from their plans (kernels/element/panels.hpp), their peaks, and the tuned
// tiling.

#include "kernels/element/panel_fill.hpp"
#include "kernels/element/panels.hpp"

#include <ioattn/error.hpp>
#include <ioattn/kernels/instantiate.hpp>
#include <ioattn/sparse/element.hpp>

#include <algorithm>
#include <string>

namespace ioattn::sparse {

namespace detail {

const ElementPanels&
element_panels(const Support& support, const Tiling& tiling, const char* where) {
    if (tiling.schedule != Schedule::fused)
        throw InvalidArgument(std::string(where) + ": tiling is for the " +
                              std::string(to_string(tiling.schedule)) + " schedule");
    if (tiling.rows < 1 || tiling.cols < 1)
        throw InvalidArgument(std::string(where) + ": tiling " + std::to_string(tiling.rows) +
                              " x " + std::to_string(tiling.cols) + " (expected sizes >= 1)");
    return support.cached_element_panels(tiling.rows, tiling.cols);
}

void check_element_peak(std::int64_t peak, const MemoryModel& memory, const char* where) {
    if (peak > memory.fast_words)
        throw CapacityError(std::string(where) + ": " + std::to_string(peak) +
                            " words resident > M = " + std::to_string(memory.fast_words));
}

std::int64_t forward_element_peak(const Problem& p, const ElementPanels& plan, ElementWords w) {
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
                                   const ElementPanels& rows,
                                   const ElementPanels& keys,
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
    const detail::ElementPanels& plan = detail::element_panels(support, tiling, kWhere);
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

#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template IoReport detail::io_cost_forward_element<Scalar>(                                     \
        const Problem&, const Support&, const Tiling&, bool);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE
#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template IoReport io_cost_forward_element<Scalar>(                                             \
        const Problem&, const Support&, const Tiling&);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

template <typename Scalar>
IoReport detail::io_cost_backward_element(const Problem& problem,
                                          const Support& support,
                                          const Tiling& tiling,
                                          bool accumulate) {
    constexpr const char* kWhere = "ioattn::sparse::io_cost_backward_element";
    const Problem p = problem.resolved(kWhere);
    if (support.n_q() != p.n_q || support.n_k() != p.n_k)
        throw InvalidArgument(std::string(kWhere) + ": support shape does not match the problem");
    const detail::ElementPanels& rows = detail::element_panels(support, tiling, kWhere);
    const detail::ElementPanels& keys =
        detail::element_panels(support.transposed(), tiling, kWhere);
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

#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template IoReport detail::io_cost_backward_element<Scalar>(                                    \
        const Problem&, const Support&, const Tiling&, bool);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE
#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template IoReport io_cost_backward_element<Scalar>(                                            \
        const Problem&, const Support&, const Tiling&);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

namespace detail {

namespace {

/// The element plans of one block height at every panel width, from the fills of Omega (and
/// of Omega^T for the backward) at the base width (panel_fill.hpp): a width's plan follows from
/// them but for the rows' runs, whose bounds bracket its peak; only a peak the bounds leave
/// undecided builds that width's plan (walking Omega once per width tried was most of the
/// planning of random:0.02, 22 walks for its forward and backward).
struct WidthSearch {
    const Problem& p;
    const Support& support;
    const MemoryModel& memory;
    ElementWords w;
    bool fwd;
    PanelFill rows;
    PanelFill keys; ///< Omega^T's, for the backward's sweep K

    static PanelFill at_width(const PanelFill& f, const Support& s, const Tiling& t) {
        return f.panel == t.cols     ? f
               : f.widens_to(t.cols) ? f.widened(t.cols)
                                     : PanelFill::build(s, t.rows, t.cols);
    }

    [[nodiscard]] std::int64_t peak(const ElementPanels& r, const ElementPanels* k) const {
        return fwd ? forward_element_peak(p, r, w) : backward_element_peak(p, r, *k, w);
    }

    /// Whether the element kernels' peak under tiling t fits M.
    [[nodiscard]] bool fits(const Tiling& t) const {
        const PanelFill r = at_width(rows, support, t);
        const PanelFill k = fwd ? PanelFill{} : at_width(keys, support.transposed(), t);
        const auto bounded = [&](RunBound b) {
            const ElementPanels rp = r.plan(b);
            const ElementPanels kp = fwd ? ElementPanels{} : k.plan(b);
            return peak(rp, &kp);
        };
        if (bounded(RunBound::upper) <= memory.fast_words)
            return true;
        if (bounded(RunBound::lower) > memory.fast_words)
            return false;
        return peak(support.cached_element_panels(t.rows, t.cols),
                    fwd ? nullptr : &support.transposed().cached_element_panels(t.rows, t.cols)) <=
               memory.fast_words;
    }

    /// kRowVisit * (rows x visits) + (key rows read) of the plan under t (the backward's sweep
    /// K walks Omega^T's plan too).
    [[nodiscard]] std::int64_t cost(const Tiling& t) const {
        constexpr std::int64_t kRowVisit = 7; // key rows a (row, visit) costs
        const auto plan_cost = [](const ElementPanels& plan) {
            std::int64_t c = 0;
            for (std::int64_t b = 0; b < plan.blocks(); ++b) {
                const auto visits = plan.visits_of(b);
                c += kRowVisit * plan.rows(b) * static_cast<std::int64_t>(visits.size());
                for (const PanelVisit& v : visits)
                    c += v.keys;
            }
            return c;
        };
        const std::int64_t r = plan_cost(at_width(rows, support, t).plan(RunBound::lower));
        return fwd ? r
                   : r + plan_cost(at_width(keys, support.transposed(), t).plan(RunBound::lower));
    }
};

} // namespace

template <typename Scalar>
Tiling widened_element_tiling(const Problem& p,
                              const Support& support,
                              const Tiling& base,
                              const MemoryModel& memory,
                              Pass pass) {
    // Every (row, visit) a block's row is walked in costs its softmax update and every visit
    // reads its keys' K and V rows, so of the widest panels that fit M for blocks of R, R/2 and
    // R/4 rows, the least kRowVisit * (rows x visits) + (key rows read) wins (ties: more rows),
    // over the plan of Omega and, for the backward, of Omega^T too. kRowVisit = 7 key rows,
    // fitted to the element kernels' rates (the choices are the same for 4 to 15): powerlaw:32
    // takes 128 x 8192, 1.13x over the largest R x P, 256 x 8192 (ioattn run --N 16384 --d 64
    // --pattern powerlaw:32 --schedule fused --threads 2 --repeat 10).
    if (support.z_qk() == 0)
        return base;
    const auto w = ElementWords::of(sizeof(Scalar));
    const bool fwd = pass == Pass::forward;
    // the widest panels for blocks of base.rows, base.rows / 2 and / 4 rows (fewer rows see
    // fewer keys per panel); the cheapest wins, the first (more rows) of equals
    Tiling best = base;
    std::int64_t best_cost = -1;
    const std::int64_t widest = std::max(support.n_q(), support.n_k()); // the backward's keys
    for (std::int64_t r = base.rows; r >= std::max<std::int64_t>(1, base.rows / 4); r /= 2) {
        const WidthSearch search{p,
                                 support,
                                 memory,
                                 w,
                                 fwd,
                                 PanelFill::build(support, r, base.cols),
                                 fwd ? PanelFill{}
                                     : PanelFill::build(support.transposed(), r, base.cols)};
        Tiling t{Schedule::fused, r, base.cols};
        while (t.cols < widest) {
            const Tiling wider{Schedule::fused, r, std::min(2 * t.cols, widest)};
            if (!search.fits(wider))
                break;
            t = wider;
        }
        if (search.fits(t)) {
            const std::int64_t c = search.cost(t);
            if (best_cost < 0 || c < best_cost) {
                best = t;
                best_cost = c;
            }
        }
        if (r == 1)
            break;
    }
    return best;
}

template <typename Scalar>
bool element_tiling_fits(const Problem& p,
                         const Support& support,
                         const Tiling& t,
                         const MemoryModel& memory,
                         Pass pass) {
    const auto w = ElementWords::of(sizeof(Scalar));
    const ElementPanels& rows = support.cached_element_panels(t.rows, t.cols);
    const std::int64_t peak =
        pass == Pass::forward
            ? forward_element_peak(p, rows, w)
            : backward_element_peak(
                  p, rows, support.transposed().cached_element_panels(t.rows, t.cols), w);
    return peak <= memory.fast_words;
}

#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template Tiling widened_element_tiling<Scalar>(                                                \
        const Problem&, const Support&, const Tiling&, const MemoryModel&, Pass);                  \
    template bool element_tiling_fits<Scalar>(                                                     \
        const Problem&, const Support&, const Tiling&, const MemoryModel&, Pass);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

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
    // 1 MiB one of the AVX-512 machine; halved to fit M.
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

#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template Tiling element_tiling<Scalar>(const Problem&, const MemoryModel&, Pass);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

} // namespace ioattn::sparse
