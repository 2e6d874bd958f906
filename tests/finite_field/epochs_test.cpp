// Tests of ioattn/ff/epochs.hpp: epoch cutting on hand-made traces (dense and sparse inputs,
// supports), the budgets per inner dimension, the replay with the recorded start state, and
// traces that must fail (an inflated epoch, a start state the cache cannot hold, reads outside
// any scope, reads that do not match the stored entries).

#include <ioattn/error.hpp>
#include <ioattn/ff/construct.hpp>
#include <ioattn/ff/epochs.hpp>

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

TraceEvent acquire(std::int64_t words) {
    return {TraceEvent::Kind::acquire, {}, words};
}

TraceEvent release(std::int64_t words) {
    return {TraceEvent::Kind::release, {}, words};
}

RowPattern pattern(const std::vector<std::vector<std::int64_t>>& rows) {
    RowPattern p;
    for (const auto& r : rows) {
        p.cols.insert(p.cols.end(), r.begin(), r.end());
        p.offsets.push_back(static_cast<std::int64_t>(p.cols.size()));
    }
    return p;
}

// A fused-like trace of 2 x 2 scores, d = 2, M = 6: Q (4 words) and K_0 fill epoch 0; K_1
// opens epoch 1 and replaces K_0 after the first completion.
std::vector<TraceEvent> fused_trace() {
    return {acquire(6),
            read(Operand::q, 0, 2, 0, 2),
            read(Operand::k, 0, 1, 0, 2),
            done(0, 2, 0, 1),
            read(Operand::k, 1, 1, 0, 2),
            done(0, 2, 1, 1),
            release(6)};
}

} // namespace

TEST_CASE("epoch_stats cuts a hand-made trace", "[ff][epochs]") {
    const EpochStats s = epoch_stats(fused_trace(), 2, 2, 2, 6);
    CHECK(s.total_io == 8);
    CHECK(s.epochs == 2);
    CHECK(s.max_entries == 2); // the completion after word 6 lies in epoch 0, after 8 in 1
    CHECK(s.busiest == 0);
    CHECK(s.worst_w == 2);
    CHECK(s.complete_once);
    CHECK(s.within_budget);
    CHECK(s.zero_entries == 0);
    CHECK(s.max_rank_rows == 2);
    CHECK(s.max_rank_cols == 2);
    CHECK(s.entry_limit == Approx(72.0)); // max(8*36/4, 48)
    CHECK(s.max_ratio == Approx(2.0 / 72.0));
    // M = 4: Q alone fills epoch 0, both completions lie in epoch 1
    const EpochStats s4 = epoch_stats(fused_trace(), 2, 2, 2, 4);
    CHECK(s4.max_entries == 4);
    CHECK(s4.busiest == 1);
    CHECK(s4.max_rank_rows == 4);
}

TEST_CASE("the replay takes the start state from the trace", "[ff][epochs]") {
    const Prime p{101};
    const Matrix q = random_matrix(2, 2, p, 1);
    const Matrix k = vandermonde(2, 2, p);
    // epoch 1 reads K_1 (2 words); Q and K_0 (6 words) are held in the open scope
    const ProtocolReplay r = replay_epoch(fused_trace(), q, k, 6, 1, p);
    CAPTURE(r.detail);
    CHECK(r.entries == 2);
    CHECK(r.resident_words == 6);
    CHECK(r.live_words == 6);
    CHECK(r.read_words == 2);
    CHECK(r.start_words == 4); // Q, not K_0
    CHECK(r.partial_sums == 0);
    CHECK(r.message == 6);
    CHECK(r.start_fits);
    CHECK(r.recomputed);
    CHECK(r.holds);
    const ProtocolReplay r0 = replay_epoch(fused_trace(), q, k, 6, 0, p);
    CHECK(r0.entries == 2);
    CHECK(r0.live_words == 0);
    CHECK(r0.read_words == 6);
    CHECK(r0.holds);
}

TEST_CASE("the replay sends partial sums of products whose words are gone", "[ff][epochs]") {
    // materialized-like: a 1 x 1 score tile over d = 2 in chunks of one column, M = 3: the
    // first chunk's scope is released before epoch 1, so S_00 starts as a partial sum
    const std::vector<TraceEvent> trace{acquire(1),
                                        acquire(2),
                                        read(Operand::q, 0, 1, 0, 1),
                                        read(Operand::k, 0, 1, 0, 1),
                                        release(2),
                                        acquire(2),
                                        read(Operand::q, 0, 1, 1, 1),
                                        read(Operand::k, 0, 1, 1, 1),
                                        release(2),
                                        done(0, 1, 0, 1),
                                        release(1)};
    const Prime p{101};
    const Matrix q = random_matrix(1, 2, p, 3);
    const Matrix k = random_matrix(1, 2, p, 4);
    const ProtocolReplay r = replay_epoch(trace, q, k, 3, 1, p);
    CAPTURE(r.detail);
    CHECK(r.entries == 1);
    CHECK(r.resident_words == 3); // the tile and the second chunk's scope
    CHECK(r.live_words == 1);     // Q_01, read just before the epoch
    CHECK(r.start_words == 1);
    CHECK(r.partial_sums == 1); // Q_00 K_00, accumulated in the tile
    CHECK(r.read_words == 1);   // K_01
    CHECK(r.message == 3);
    CHECK(r.holds);
}

TEST_CASE("replays that must fail", "[ff][epochs]") {
    const Prime p{101};
    const Matrix q = random_matrix(1, 2, p, 3);
    const Matrix k = random_matrix(1, 2, p, 4);
    SECTION("an entry completed without its words: no cache could hold its partial sum") {
        const ProtocolReplay r =
            replay_epoch({read(Operand::v, 0, 1, 0, 4), done(0, 1, 0, 1)}, q, k, 4, 0, p);
        CHECK(r.recomputed);
        CHECK(r.partial_sums == 1);
        CHECK_FALSE(r.start_fits);
        CHECK_FALSE(r.holds);
    }
    SECTION("a read outside any acquired scope") {
        const ProtocolReplay r =
            replay_epoch({read(Operand::q, 0, 1, 0, 2), done(0, 1, 0, 1)}, q, k, 4, 0, p);
        CHECK_FALSE(r.holds);
        CHECK_THAT(r.detail, Catch::Contains("outside any acquired scope"));
    }
    SECTION("held words beyond the acquired words") {
        const ProtocolReplay r =
            replay_epoch({acquire(1), read(Operand::q, 0, 1, 0, 2)}, q, k, 4, 0, p);
        CHECK_FALSE(r.holds);
        CHECK_THAT(r.detail, Catch::Contains("exceed the acquired words"));
    }
    SECTION("a trace holding more than M words") {
        const std::vector<TraceEvent> t{acquire(4),
                                        read(Operand::q, 0, 1, 0, 2),
                                        read(Operand::k, 0, 1, 0, 2),
                                        done(0, 1, 0, 1),
                                        release(4)};
        const ProtocolReplay r = replay_epoch(t, q, k, 1, 3, p); // M = 1, the last word's epoch
        CHECK(r.recomputed);
        CHECK(r.resident_words == 4);
        CHECK_FALSE(r.start_fits);
        CHECK_FALSE(r.holds);
        CHECK_THAT(r.detail, Catch::Contains("cannot hold"));
    }
    SECTION("a sparse read whose words do not match the stored entries") {
        const RowPattern qp = pattern({{1}});
        const EpochShape shape{1, 1, 2, nullptr, &qp, nullptr};
        Matrix qs(1, 2);
        qs(0, 1) = 5;
        const std::vector<TraceEvent> t{
            acquire(4),
            {TraceEvent::Kind::read, Block{Operand::q, 0, 0, 1, 0, 2}, 2},
            done(0, 1, 0, 1)};
        const ProtocolReplay r = replay_epoch(t, shape, qs, k, 4, 0, p);
        CHECK_FALSE(r.holds);
        CHECK_THAT(r.detail, Catch::Contains("stores 1"));
    }
}

TEST_CASE("epoch_stats over a support with sparse inputs", "[ff][epochs]") {
    // Omega = {(0,0), (0,1), (1,1)}; T_0 = {0}, T_1 = {0,1}; U_0 = {1}, U_1 = {0,1}:
    // w_00 = 0 (identically zero), w_01 = 1, w_11 = 2
    const RowPattern omega = pattern({{0, 1}, {1}});
    const RowPattern qp = pattern({{0}, {0, 1}});
    const RowPattern kp = pattern({{1}, {0, 1}});
    const EpochShape shape{2, 2, 2, &omega, &qp, &kp};
    const EpochStats s = epoch_stats({done(0, 2, 0, 2)}, shape, 1);
    CHECK(s.complete_once);
    CHECK(s.zero_entries == 1);
    CHECK(s.max_entries == 2);
    CHECK(s.worst_w == 1);
    CHECK(s.max_ratio == Approx(2.0 / 8.0)); // B(1, 1) = B(1, 2) = 8
    CHECK(s.max_rank_rows == 2);             // w = 1: rows 0 and 1 one entry each
    CHECK(s.max_rank_cols == 1);             // w = 1: column 1 holds two, capped at 1
    CHECK_FALSE(epoch_stats({done(0, 2, 0, 1)}, shape, 1).complete_once); // (0,1), (1,1) missing
    CHECK_FALSE(epoch_stats({done(0, 2, 0, 2), done(1, 1, 1, 1)}, shape, 1).complete_once);
    // the replay of the same epoch: Bob needs only the stored words of the informative entries
    const Prime p{101};
    Matrix q(2, 2), k(2, 2);
    q(0, 0) = 3;
    q(1, 0) = 4;
    q(1, 1) = 5;
    k(0, 1) = 6;
    k(1, 0) = 7;
    k(1, 1) = 8;
    const std::vector<TraceEvent> t{acquire(6),
                                    {TraceEvent::Kind::read, Block{Operand::q, 0, 0, 2, 0, 2}, 3},
                                    {TraceEvent::Kind::read, Block{Operand::k, 0, 0, 2, 0, 2}, 3},
                                    done(0, 2, 0, 2),
                                    release(6)};
    const ProtocolReplay r = replay_epoch(t, shape, q, k, 8, 0, p);
    CAPTURE(r.detail);
    CHECK(r.entries == 2);
    CHECK(r.read_words == 6);
    CHECK(r.holds);
}

TEST_CASE("the sparse budget grows as the inner dimension shrinks", "[ff][epochs]") {
    // 16 x 16 scores, d = 4, M = 4: B_max = max(8*16/16, 32) = 32 with dense inputs, while
    // entries of inner dimension 1 have B(4, 1) = max(128, 32) = 128
    const RowPattern one = pattern(std::vector<std::vector<std::int64_t>>(16, {0}));
    const EpochShape sparse{16, 16, 4, nullptr, &one, &one};
    const std::vector<TraceEvent> eight_rows{done(0, 8, 0, 16)}; // 128 entries in epoch 0
    const EpochStats dense = epoch_stats(eight_rows, 16, 16, 4, 4);
    CHECK_FALSE(dense.within_budget);
    CHECK(dense.max_ratio == Approx(128.0 / 32.0));
    const EpochStats s = epoch_stats(eight_rows, sparse, 4);
    CHECK(s.within_budget);
    CHECK(s.worst_w == 1);
    CHECK(s.max_ratio == Approx(1.0));
    const EpochStats over = epoch_stats({done(0, 9, 0, 16)}, sparse, 4); // 144 > 128
    CHECK_FALSE(over.within_budget);
    CHECK(over.max_rank_rows == 9); // r_R^1 = 9 rows
    CHECK(over.max_rank_cols == 16);
}

TEST_CASE("epoch_stats detects a duplicate or missing completion", "[ff][epochs]") {
    CHECK_FALSE(epoch_stats({done(0, 1, 0, 1)}, 1, 2, 1, 4).complete_once);
    CHECK_FALSE(epoch_stats({done(0, 1, 0, 1), done(0, 1, 0, 1)}, 1, 1, 1, 4).complete_once);
}

TEST_CASE("a trace completing everything without I/O breaks the epoch bound", "[ff][epochs]") {
    const EpochStats s = epoch_stats({done(0, 16, 0, 16)}, 16, 16, 4, 2);
    CHECK(s.max_entries == 256);
    CHECK_FALSE(s.within_budget);
    CHECK(s.max_ratio > 1.0);
    CHECK(s.max_rank_rows > 4); // > 2M
}

TEST_CASE("epochs bad input", "[ff][epochs][throws]") {
    const Prime p{11};
    CHECK_THROWS_AS(epoch_stats({}, 2, 2, 2, 0), InvalidArgument); // M < 1
    CHECK_THROWS_AS(epoch_stats({}, 2, 2, 0, 4), InvalidArgument);
    CHECK_THROWS_AS(epoch_stats({done(0, 3, 0, 1)}, 2, 2, 2, 4), InvalidArgument);
    CHECK_THROWS_AS(replay_epoch({}, Matrix(2, 2), Matrix(2, 3), 4, 0, p), InvalidArgument);
    CHECK_THROWS_AS(replay_epoch({}, Matrix(2, 2), Matrix(2, 2), 0, 0, p), InvalidArgument);
    CHECK_THROWS_AS(replay_epoch({acquire(1), release(2)}, Matrix(2, 2), Matrix(2, 2), 4, 0, p),
                    InvalidArgument);                  // a release of more than acquired
    const RowPattern bad_rows = pattern({{0}});        // 1 row for 2
    const RowPattern bad_col = pattern({{0, 2}, {1}}); // column 2 >= d
    const RowPattern unsorted = pattern({{1, 0}, {1}});
    for (const RowPattern* bad : {&bad_rows, &bad_col, &unsorted}) {
        CHECK_THROWS_AS(epoch_stats({}, EpochShape{2, 2, 2, nullptr, bad, nullptr}, 4),
                        InvalidArgument);
        CHECK_THROWS_AS(epoch_stats({}, EpochShape{2, 2, 2, bad, nullptr, nullptr}, 4),
                        InvalidArgument);
    }
}

TEST_CASE("epoch_stats: empty complete blocks count nothing, with or without a support",
          "[ff][epochs]") {
    // one epoch completing row 0 (4 entries) after empty blocks touching rows 0 and 1: at
    // d = 2, r_R = min(4, 2) = 2 and r_C = 4 x min(1, 2) = 4, however often a row was touched
    const std::vector<TraceEvent> trace{read(Operand::q, 0, 1, 0, 2),
                                        done(0, 2, 0, 0),
                                        done(0, 1, 0, 4),
                                        done(1, 0, 0, 4),
                                        done(0, 2, 2, 0)};
    const EpochStats s = epoch_stats(trace, 2, 4, 2, 100);
    CHECK(s.max_entries == 4);
    CHECK(s.max_rank_rows == 2);
    CHECK(s.max_rank_cols == 4);
    CHECK_FALSE(s.complete_once); // row 1 never completes
    const RowPattern omega = pattern({{0, 1, 2, 3}, {}});
    const EpochStats t = epoch_stats(trace, EpochShape{2, 4, 2, &omega, nullptr, nullptr}, 100);
    CHECK(t.max_entries == 4);
    CHECK(t.max_rank_rows == 2);
    CHECK(t.max_rank_cols == 4);
    CHECK(t.complete_once); // row 1 holds no allowed entry
}
