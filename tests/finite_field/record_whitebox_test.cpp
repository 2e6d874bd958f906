// Whitebox tests of finite_field/src/record.hpp: the recorded traces of every schedule satisfy
// the epoch budgets and replay on every epoch, count what the kernels count, name the rows they
// read; the pattern families and the fit check of a spec.

#include "record.hpp"

#include <ioattn/error.hpp>
#include <ioattn/ff/construct.hpp>
#include <ioattn/ff/epochs.hpp>
#include <ioattn/io_cost.hpp>
#include <ioattn/tiling.hpp>

#ifdef IOATTN_FF_WITH_SPARSE
#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/forward.hpp>
#include <ioattn/sparse/pattern.hpp>
#endif

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <set>
#include <string>

using namespace ioattn;
using namespace ioattn::ff;

namespace {

std::optional<detail::Recorded> record(const detail::ScheduleKind& kind,
                                       const std::string& spec,
                                       std::int64_t n,
                                       std::int64_t d,
                                       std::int64_t m) {
    return kind.sparse ? detail::record_sparse(kind, spec, n, d, m, 7)
                       : detail::record_dense(kind, n, d, m);
}

Matrix values(const std::optional<RowPattern>& pat, Matrix dense, const Prime& p) {
    if (!pat)
        return dense;
    Matrix out(dense.rows(), dense.cols());
    for (std::int64_t r = 0; r < pat->rows(); ++r)
        for (std::int64_t e = pat->offsets[static_cast<std::size_t>(r)];
             e < pat->offsets[static_cast<std::size_t>(r + 1)];
             ++e)
            out(r, pat->cols[static_cast<std::size_t>(e)]) = 1 + (r * 7 + e) % (p.p - 1);
    return out;
}

std::int64_t moved(const std::vector<TraceEvent>& trace) {
    std::int64_t words = 0;
    for (const TraceEvent& e : trace)
        if (e.kind == TraceEvent::Kind::read || e.kind == TraceEvent::Kind::write)
            words += e.moved();
    return words;
}

} // namespace

TEST_CASE("every schedule's trace meets the budgets and replays on every epoch", "[ff][record]") {
    const Prime p{1009};
    const std::int64_t n = 32, d = 4;
    for (const detail::ScheduleKind& kind : detail::schedule_kinds()) {
        std::int64_t recorded = 0;
        const std::vector<std::string> specs =
            kind.sparse ? detail::pattern_families(n) : std::vector<std::string>{""};
        // from the schedule's smallest M (the fused backward needs ~1000 words at d = 4)
        const std::int64_t m0 = std::max<std::int64_t>(
            ioattn::smallest_memory(
                detail::square_problem(n, d), kind.pass, kind.schedule, kind.kernels()),
            64);
        for (const std::string& spec : specs)
            for (std::int64_t m : {m0, 2 * m0, 4 * m0}) {
                const auto rec = record(kind, spec, n, d, m);
                if (!rec)
                    continue;
                ++recorded;
                CAPTURE(detail::label(kind), spec, m);
                const EpochShape shape = rec->shape();
                const EpochStats s = epoch_stats(rec->trace, shape, m);
                REQUIRE(s.complete_once);
                REQUIRE(s.within_budget);
                REQUIRE(s.max_rank_rows <= 2 * m);
                REQUIRE(s.max_rank_cols <= 2 * m);
                const Matrix q = values(rec->q, random_matrix(n, d, p, 3), p);
                const Matrix k = values(rec->k, vandermonde(n, d, p), p);
                for (std::int64_t t = 0; t < s.epochs; ++t) {
                    const ProtocolReplay r = replay_epoch(rec->trace, shape, q, k, m, t, p);
                    CAPTURE(t, r.detail);
                    REQUIRE(r.holds);
                }
            }
        CAPTURE(detail::label(kind));
        CHECK(recorded > 0);
    }
}

TEST_CASE("a trace without its scopes or with an inflated epoch fails", "[ff][record]") {
    // N = 128, d = 32 at the fused forward's smallest M: N^2 entries exceed B_max
    const std::int64_t n = 128, d = 32;
    const detail::ScheduleKind fused{Pass::forward, Schedule::fused, false, false};
    const std::int64_t m = ioattn::smallest_memory(
        detail::square_problem(n, d), fused.pass, fused.schedule, fused.kernels());
    const auto rec = detail::record_dense(fused, n, d, m);
    REQUIRE(rec);
    REQUIRE(static_cast<double>(n * n) > ioattn::epoch_entry_limit(m, d));
    std::vector<TraceEvent> inflated;
    std::vector<TraceEvent> unscoped;
    for (const TraceEvent& ev : rec->trace) {
        if (ev.kind == TraceEvent::Kind::complete)
            inflated.insert(inflated.begin(), ev); // every entry in epoch 0
        else
            inflated.push_back(ev);
        if (ev.kind != TraceEvent::Kind::acquire && ev.kind != TraceEvent::Kind::release)
            unscoped.push_back(ev);
    }
    CHECK(epoch_stats(rec->trace, n, n, d, m).within_budget);
    const EpochStats s = epoch_stats(inflated, n, n, d, m);
    CHECK_FALSE(s.within_budget);
    CHECK(s.max_entries == n * n);
    const Prime p{1009};
    const ProtocolReplay r =
        replay_epoch(unscoped, random_matrix(n, d, p, 1), vandermonde(n, d, p), m, 1, p);
    CHECK_FALSE(r.holds);
    CHECK(replay_epoch(rec->trace, random_matrix(n, d, p, 1), vandermonde(n, d, p), m, 1, p).holds);
}

TEST_CASE("the smallest M is the first with a tiling", "[ff][record]") {
    Problem problem;
    problem.n_q = 64;
    problem.n_k = 64;
    problem.d = 16;
    for (const detail::ScheduleKind& kind : detail::schedule_kinds()) {
        const std::int64_t m = ioattn::smallest_memory(
            detail::square_problem(64, 16), kind.pass, kind.schedule, kind.kernels());
        CAPTURE(detail::label(kind), m);
        REQUIRE(m > 0);
        const auto kernels = kind.sparse ? ioattn::Kernels::sparse : ioattn::Kernels::dense;
        CHECK(Tiling::try_for_memory(kind.schedule, MemoryModel{m}, problem, kind.pass, kernels));
        CHECK_FALSE(
            Tiling::try_for_memory(kind.schedule, MemoryModel{m - 1}, problem, kind.pass, kernels));
    }
}

TEST_CASE("sparse input patterns", "[ff][record]") {
    const RowPattern a = detail::sparse_input_pattern(50, 8, 3, 91);
    CHECK(a == detail::sparse_input_pattern(50, 8, 3, 91));
    CHECK_FALSE(a == detail::sparse_input_pattern(50, 8, 3, 92));
    REQUIRE(a.rows() == 50);
    std::set<std::int64_t> sizes;
    for (std::int64_t r = 0; r < a.rows(); ++r) {
        sizes.insert(a.row_size(r));
        CHECK(a.row_size(r) >= 1);
        CHECK(a.row_size(r) <= 8);
        for (std::int64_t e = a.offsets[static_cast<std::size_t>(r)] + 1;
             e < a.offsets[static_cast<std::size_t>(r + 1)];
             ++e)
            CHECK(a.cols[static_cast<std::size_t>(e - 1)] < a.cols[static_cast<std::size_t>(e)]);
    }
    CHECK(sizes.size() > 3); // sizes vary
}

#ifdef IOATTN_FF_WITH_SPARSE

TEST_CASE("recorded sparse traces move what the kernels count", "[ff][record]") {
    const std::int64_t n = 48, d = 6;
    for (const detail::ScheduleKind& kind : detail::schedule_kinds()) {
        if (!kind.sparse)
            continue;
        const std::int64_t m = std::max<std::int64_t>(
            ioattn::smallest_memory(
                detail::square_problem(n, d), kind.pass, kind.schedule, kind.kernels()),
            256);
        for (const std::string spec : {"strided:5", "bigbird:2:1:3", "random:0.2"}) {
            CAPTURE(detail::label(kind), spec);
            const auto rec = detail::record_sparse(kind, spec, n, d, m, 7);
            REQUIRE(rec);
            Problem problem;
            problem.n_q = n;
            problem.n_k = n;
            problem.d = d;
            const sparse::Support support = sparse::parse_pattern(spec, n, n, 7);
            const auto rows = [&](std::uint64_t stream) {
                const RowPattern pat = detail::sparse_input_pattern(n, d, 7, stream);
                return sparse::SparseRows<float>(
                    n, d, pat.offsets, pat.cols, std::vector<float>(pat.cols.size(), 1.0F));
            };
            const sparse::SparseRows<float> q = rows(91), k = rows(92), v = rows(93);
            sparse::SparseInputs<float> inputs;
            if (kind.sparse_inputs)
                inputs = {&q, &k, &v};
            const MemoryModel memory{m};
            const IoReport counted =
                kind.pass == Pass::forward
                    ? sparse::dry_run_forward(problem, support, inputs, rec->tiling, memory)
                    : sparse::dry_run_backward(problem, support, inputs, rec->tiling, memory);
            CHECK(moved(rec->trace) == counted.total());
        }
    }
}

TEST_CASE("gathered reads name the rows they read", "[ff][record]") {
    // strided:4 lets a row block see keys that are not consecutive: each K read of the fused
    // forward must lie inside the keys the current Q block may see
    const std::int64_t n = 64, d = 4;
    const sparse::Support support = sparse::parse_pattern("strided:4", n, n, 7);
    for (bool sparse_inputs : {false, true}) {
        const detail::ScheduleKind kind{Pass::forward, Schedule::fused, true, sparse_inputs};
        const auto rec = detail::record_sparse(kind, "strided:4", n, d, 512, 7);
        REQUIRE(rec);
        std::set<std::int64_t> visible;
        std::int64_t k_reads = 0;
        for (const TraceEvent& e : rec->trace) {
            if (e.kind != TraceEvent::Kind::read)
                continue;
            if (e.block.operand == Operand::q) {
                visible.clear();
                for (std::int64_t i = e.block.row0; i < e.block.row0 + e.block.rows; ++i)
                    for (std::int64_t j : support.row(i))
                        visible.insert(j);
            } else if (e.block.operand == Operand::k) {
                ++k_reads;
                for (std::int64_t j = e.block.row0; j < e.block.row0 + e.block.rows; ++j) {
                    CAPTURE(sparse_inputs, j);
                    CHECK(visible.count(j) == 1);
                }
            }
        }
        CHECK(k_reads > 0);
    }
}

TEST_CASE("pattern specs must fit N", "[ff][record][throws]") {
    CHECK(detail::pattern_families(64).size() == 10);
    for (const std::string& spec : detail::pattern_families(16)) {
        CAPTURE(spec);
        CHECK(detail::pattern_fits(spec, 16));
    }
    CHECK(detail::pattern_fits("window:15", 16));
    CHECK_FALSE(detail::pattern_fits("window:16", 16));
    CHECK_FALSE(detail::pattern_fits("dense+(causal&window:40)", 32));
    CHECK_FALSE(detail::pattern_fits("dilated:4:4", 16)); // reach 16
    CHECK(detail::pattern_fits("dilated:3:5", 16));
    CHECK_FALSE(detail::pattern_fits("block:17:0.5", 16));
    CHECK_FALSE(detail::pattern_fits("bigbird:2:2:17", 16));
    CHECK_THROWS_AS(detail::check_pattern_fits("window:99", 64, "here"), InvalidArgument);
    CHECK_THROWS_WITH(detail::check_pattern_fits("window:99", 64, "here"),
                      Catch::Contains("does not fit N = 64"));
    CHECK_THROWS_AS(detail::check_pattern_fits("nonsense:1", 64, "here"), InvalidArgument);
    const RowPattern omega = detail::support_pattern("causal", 8, 1);
    CHECK(omega.size() == 36);
}

#endif
