// Tests of ioattn/ff/epochs.hpp: epoch cutting on hand-made traces, the bounds on real dry-run
// traces of the dense forward schedules, the protocol replay, and a trace that must fail.

#include <ioattn/dense/forward.hpp>
#include <ioattn/error.hpp>
#include <ioattn/ff/construct.hpp>
#include <ioattn/ff/epochs.hpp>
#include <ioattn/tiling.hpp>
#include <ioattn/view.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

using ioattn::Block;
using ioattn::InvalidArgument;
using ioattn::Operand;
using ioattn::TraceEvent;
using namespace ioattn::ff;

namespace {

TraceEvent
read(Operand op, std::int64_t row0, std::int64_t rows, std::int64_t col0, std::int64_t cols) {
    return {TraceEvent::Kind::read, Block{op, 0, row0, rows, col0, cols}};
}

TraceEvent done(std::int64_t row0, std::int64_t rows, std::int64_t col0, std::int64_t cols) {
    return {TraceEvent::Kind::complete, Block{Operand::scores, 0, row0, rows, col0, cols}};
}

std::vector<TraceEvent>
dry_run(ioattn::Schedule s, std::int64_t n, std::int64_t d, std::int64_t m) {
    ioattn::Problem problem;
    problem.n_q = n;
    problem.n_k = n;
    problem.d = d;
    ioattn::ForwardArgs<float> args;
    args.problem = problem;
    args.q = ioattn::TensorView<const float>::packed(nullptr, 1, 1, n, d);
    args.k = ioattn::TensorView<const float>::packed(nullptr, 1, 1, n, d);
    args.v = ioattn::TensorView<const float>::packed(nullptr, 1, 1, n, d);
    args.o = ioattn::TensorView<float>::packed(nullptr, 1, 1, n, d);
    args.lse = ioattn::TensorView<float>::packed(nullptr, 1, 1, n, 1);
    const ioattn::MemoryModel memory{m};
    const ioattn::Tiling t = ioattn::Tiling::for_memory(s, memory, problem);
    ioattn::DryRunCounter counter(m, true);
    if (s == ioattn::Schedule::fused)
        ioattn::dense::forward_fused<float, ioattn::DryRunCounter>(args, t, memory, counter);
    else
        ioattn::dense::forward_materialized<float, ioattn::DryRunCounter>(args, t, memory, counter);
    return counter.trace();
}

} // namespace

TEST_CASE("epoch_stats cuts a hand-made trace", "[ff][epochs]") {
    // 2 x 2 scores, d = 2, M = 4: Q (4 words) fills epoch 0; K_0 opens epoch 1
    const std::vector<TraceEvent> trace{read(Operand::q, 0, 2, 0, 2),
                                        read(Operand::k, 0, 1, 0, 2),
                                        done(0, 2, 0, 1),
                                        read(Operand::k, 1, 1, 0, 2),
                                        done(0, 2, 1, 1)};
    const EpochStats s = epoch_stats(trace, 2, 2, 2, 4);
    CHECK(s.total_io == 8);
    CHECK(s.epochs == 2);
    CHECK(s.max_entries == 4); // completions after words 6 and 8 both lie in epoch 1
    CHECK(s.busiest == 1);
    CHECK(s.complete_once);
    CHECK(s.max_rank_rows == 4);
    CHECK(s.max_rank_cols == 4);
    CHECK(s.entry_limit == Approx(32.0)); // max(8*16/4, 32)
    // the replay of epoch 1: reads K (4 words); Q (4 words) comes from the start state
    const Prime p{101};
    const Matrix q = random_matrix(2, 2, p, 1);
    const Matrix k = vandermonde(2, 2, p);
    const ProtocolReplay r = replay_epoch(trace, q, k, 4, 1, p);
    CHECK(r.entries == 4);
    CHECK(r.read_words == 4);
    CHECK(r.start_words == 4);
    CHECK_FALSE(r.start_as_partial_sums); // a tie goes to the words
    CHECK(r.recomputed);
    CHECK(r.message == 8);
    // a trace whose start state is cheaper as partial sums: one entry, Q row and K row unread
    const std::vector<TraceEvent> late{read(Operand::v, 0, 1, 0, 4), done(0, 1, 0, 1)};
    const ProtocolReplay rp = replay_epoch(late, q, k, 4, 0, p);
    CHECK(rp.start_as_partial_sums);
    CHECK(rp.start_words == 1);
    CHECK(rp.recomputed);
    const ProtocolReplay r0 = replay_epoch(trace, q, k, 4, 0, p);
    CHECK(r0.entries == 0);
    CHECK(r0.recomputed);
}

TEST_CASE("epoch_stats detects a duplicate or missing completion", "[ff][epochs]") {
    CHECK_FALSE(epoch_stats({done(0, 1, 0, 1)}, 1, 2, 1, 4).complete_once);
    CHECK_FALSE(epoch_stats({done(0, 1, 0, 1), done(0, 1, 0, 1)}, 1, 1, 1, 4).complete_once);
}

TEST_CASE("a trace completing everything without I/O breaks the epoch bound", "[ff][epochs]") {
    const EpochStats s = epoch_stats({done(0, 16, 0, 16)}, 16, 16, 4, 2);
    CHECK(s.max_entries == 256);
    CHECK(static_cast<double>(s.max_entries) > s.entry_limit);
    CHECK(s.max_rank_rows > 4); // > 2M
}

TEST_CASE("real dense forward traces satisfy the epoch bounds and the replay", "[ff][epochs]") {
    const Prime p{1000003};
    // the fused schedule's smallest tiling holds a lane-padded block of 16 query rows
    // (Tiling::resident_words): about 200 words at d = 4
    for (auto schedule : {ioattn::Schedule::fused, ioattn::Schedule::materialized})
        for (std::int64_t m : schedule == ioattn::Schedule::fused
                                  ? std::vector<std::int64_t>{256, 512}
                                  : std::vector<std::int64_t>{32, 64, 256}) {
            const std::int64_t n = schedule == ioattn::Schedule::fused ? 48 : 16;
            const std::int64_t d = 4;
            const auto trace = dry_run(schedule, n, d, m);
            const EpochStats s = epoch_stats(trace, n, n, d, m);
            CAPTURE(ioattn::to_string(schedule), m);
            REQUIRE(s.complete_once);
            REQUIRE(static_cast<double>(s.max_entries) <= s.entry_limit);
            REQUIRE(s.max_rank_rows <= 2 * m);
            REQUIRE(s.max_rank_cols <= 2 * m);
            const Matrix q = random_matrix(n, d, p, 5);
            const Matrix k = vandermonde(n, d, p);
            for (std::int64_t t = 0; t < s.epochs; ++t) {
                const ProtocolReplay r = replay_epoch(trace, q, k, m, t, p);
                CAPTURE(t, r.detail);
                REQUIRE(r.recomputed);
                REQUIRE(r.message <= 2 * m);
            }
        }
}

TEST_CASE("epochs bad input", "[ff][epochs]") {
    const Prime p{11};
    CHECK_THROWS_AS(epoch_stats({}, 2, 2, 2, 0), InvalidArgument); // M < 1
    CHECK_THROWS_AS(epoch_stats({}, 2, 2, 0, 4), InvalidArgument);
    CHECK_THROWS_AS(epoch_stats({done(0, 3, 0, 1)}, 2, 2, 2, 4), InvalidArgument);
    CHECK_THROWS_AS(replay_epoch({}, Matrix(2, 2), Matrix(2, 3), 4, 0, p), InvalidArgument);
    CHECK_THROWS_AS(replay_epoch({}, Matrix(2, 2), Matrix(2, 2), 0, 0, p), InvalidArgument);
}
