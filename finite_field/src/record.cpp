// ioattn::ff::detail::record_dense and the schedule kinds of the epoch experiments: recorded
// dry runs of the dense kernels (forward, backward; fused, materialized)
// Field: none (the trace is data-independent: DryRunCounter walks the schedule without data).
// Instances: one slice, n_q = n_k = N, d_v = d, not causal, float, Tiling::try_for_memory.
// Ops: one dry run per call; the trace holds every read, write, complete, acquire, release.
// Tests: tests/finite_field/epochs_test.cpp, tests/finite_field/experiments_test.cpp

#include "record.hpp"

#include <ioattn/dense/backward.hpp>
#include <ioattn/dense/forward.hpp>
#include <ioattn/ff/field.hpp>
#include <ioattn/view.hpp>

#include <algorithm>
#include <numeric>
#include <random>

namespace ioattn::ff::detail {

std::string label(const ScheduleKind& kind) {
    std::string s = std::string(kind.sparse ? "sparse " : "dense ") +
                    std::string(to_string(kind.pass)) + " " + std::string(to_string(kind.schedule));
    if (kind.sparse)
        s += kind.sparse_inputs ? ", sparse inputs" : ", dense inputs";
    return s;
}

std::vector<ScheduleKind> schedule_kinds() {
    std::vector<ScheduleKind> out;
    for (bool sparse : {false, true}) {
        if (sparse && !sparse_available())
            break;
        for (Pass pass : {Pass::forward, Pass::backward})
            for (Schedule s : {Schedule::fused, Schedule::materialized})
                for (bool inputs : {false, true})
                    if (sparse || !inputs)
                        out.push_back({pass, s, sparse, inputs});
    }
    return out;
}

std::int64_t smallest_memory(const ScheduleKind& kind, std::int64_t n, std::int64_t d) {
    Problem problem;
    problem.n_q = n;
    problem.n_k = n;
    problem.d = d;
    const auto fits = [&](std::int64_t m) {
        return Tiling::try_for_memory(kind.schedule,
                                      MemoryModel{m},
                                      problem,
                                      kind.pass,
                                      kind.sparse ? Kernels::sparse : Kernels::dense)
            .has_value();
    };
    std::int64_t lo = 1, hi = 64 * n * d; // a tiling that fits M fits every larger M
    if (!fits(hi))
        return 0;
    while (lo < hi) {
        const std::int64_t mid = lo + (hi - lo) / 2;
        if (fits(mid))
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

std::optional<Recorded>
record_dense(const ScheduleKind& kind, std::int64_t n, std::int64_t d, std::int64_t m) {
    Problem problem;
    problem.n_q = n;
    problem.n_k = n;
    problem.d = d;
    const MemoryModel memory{m};
    const auto tiling = Tiling::try_for_memory(kind.schedule, memory, problem, kind.pass);
    if (!tiling)
        return std::nullopt;
    DryRunCounter counter(m, true);
    if (kind.pass == Pass::forward) {
        const auto args =
            ForwardArgs<float>::packed(problem, nullptr, nullptr, nullptr, nullptr, nullptr);
        dense::forward<float, DryRunCounter>(args, *tiling, memory, counter);
    } else {
        const auto args = BackwardArgs<float>::packed(problem,
                                                      nullptr,
                                                      nullptr,
                                                      nullptr,
                                                      nullptr,
                                                      nullptr,
                                                      nullptr,
                                                      nullptr,
                                                      nullptr,
                                                      nullptr);
        dense::backward<float, DryRunCounter>(args, *tiling, memory, counter);
    }
    Recorded r;
    r.tiling = *tiling;
    r.trace = counter.take_trace();
    r.n = n;
    r.d = d;
    return r;
}

RowPattern
sparse_input_pattern(std::int64_t rows, std::int64_t d, std::uint64_t seed, std::uint64_t stream) {
    RowPattern pat;
    pat.offsets.reserve(static_cast<std::size_t>(rows + 1));
    std::vector<std::int64_t> cols(static_cast<std::size_t>(d));
    for (std::int64_t r = 0; r < rows; ++r) {
        std::mt19937_64 rng(derive_seed(seed, stream, static_cast<std::uint64_t>(r)));
        std::iota(cols.begin(), cols.end(), std::int64_t{0});
        const std::int64_t size =
            1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(d));
        for (std::int64_t x = 0; x < size; ++x) { // partial Fisher-Yates: a uniform size-subset
            const auto y = x + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(d - x));
            std::swap(cols[static_cast<std::size_t>(x)], cols[static_cast<std::size_t>(y)]);
        }
        std::sort(cols.begin(), cols.begin() + size);
        pat.cols.insert(pat.cols.end(), cols.begin(), cols.begin() + size);
        pat.offsets.push_back(static_cast<std::int64_t>(pat.cols.size()));
    }
    return pat;
}

} // namespace ioattn::ff::detail
