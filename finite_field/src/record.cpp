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

Problem square_problem(std::int64_t n, std::int64_t d) {
    Problem problem;
    problem.n_q = n;
    problem.n_k = n;
    problem.d = d;
    return problem;
}

std::vector<TraceEvent> TraceBuffers::take() {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (free_.empty())
        return {};
    const auto largest =
        std::max_element(free_.begin(), free_.end(), [](const auto& a, const auto& b) {
            return a.capacity() < b.capacity();
        });
    std::vector<TraceEvent> out = std::move(*largest);
    free_.erase(largest);
    return out;
}

void TraceBuffers::give(std::vector<TraceEvent>&& trace) {
    trace.clear();
    const std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(std::move(trace));
}

std::optional<Recorded> record_dense(const ScheduleKind& kind,
                                     std::int64_t n,
                                     std::int64_t d,
                                     std::int64_t m,
                                     std::vector<TraceEvent> buffer) {
    const Problem problem = square_problem(n, d);
    const MemoryModel memory{m};
    const auto tiling = Tiling::try_for_memory(kind.schedule, memory, problem, kind.pass);
    if (!tiling)
        return std::nullopt;
    DryRunCounter counter(m, true);
    counter.reuse_trace(std::move(buffer));
    if (kind.pass == Pass::forward) {
        const auto args = ForwardArgs<float>::shape_only(problem);
        dense::forward<float, DryRunCounter>(args, *tiling, memory, counter);
    } else {
        const auto args = BackwardArgs<float>::shape_only(problem);
        dense::backward<float, DryRunCounter>(args, *tiling, memory, counter);
    }
    Recorded r;
    r.tiling = *tiling;
    r.trace = counter.take_trace();
    r.n = n;
    r.d = d;
    return r;
}

namespace {

// SplitMix64 from a row's seed: a cheap stream per row (an mt19937_64 per row costs more to
// seed than the row does to draw, and the epoch experiments draw ~10^7 rows).
class RowStream {
public:
    explicit RowStream(std::uint64_t seed)
        : state_(seed) {}

    std::uint64_t below(std::uint64_t n) { // uniform enough for n <= 4096: bias < 2^-50
        state_ += 0x9E3779B97F4A7C15ULL;
        std::uint64_t z = state_;
        z = (z ^ (z >> 30U)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27U)) * 0x94D049BB133111EBULL;
        return (z ^ (z >> 31U)) % n;
    }

private:
    std::uint64_t state_;
};

} // namespace

RowPattern
sparse_input_pattern(std::int64_t rows, std::int64_t d, std::uint64_t seed, std::uint64_t stream) {
    RowPattern pat;
    pat.offsets.reserve(static_cast<std::size_t>(rows + 1));
    std::vector<std::int64_t> cols(static_cast<std::size_t>(d));
    const auto ud = static_cast<std::uint64_t>(d);
    for (std::int64_t r = 0; r < rows; ++r) {
        RowStream rng(derive_seed(seed, stream, static_cast<std::uint64_t>(r)));
        std::iota(cols.begin(), cols.end(), std::int64_t{0});
        const auto size = 1 + static_cast<std::int64_t>(rng.below(ud));
        for (std::int64_t x = 0; x < size; ++x) { // partial Fisher-Yates: a uniform size-subset
            const auto y =
                x + static_cast<std::int64_t>(rng.below(ud - static_cast<std::uint64_t>(x)));
            std::swap(cols[static_cast<std::size_t>(x)], cols[static_cast<std::size_t>(y)]);
        }
        std::sort(cols.begin(), cols.begin() + size);
        pat.cols.insert(pat.cols.end(), cols.begin(), cols.begin() + size);
        pat.offsets.push_back(static_cast<std::int64_t>(pat.cols.size()));
    }
    return pat;
}

} // namespace ioattn::ff::detail
