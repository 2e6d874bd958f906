// Tests of the counters: IoCounter, NullCounter, DryRunCounter.

#include "printing.hpp"

#include <ioattn/error.hpp>
#include <ioattn/io_counter.hpp>

#include <catch2/catch.hpp>

#include <sstream>
#include <type_traits>

using ioattn::Block;
using ioattn::CapacityError;
using ioattn::IoCounter;
using ioattn::IoReport;
using ioattn::Operand;

TEST_CASE("IoCounter counts words read and written", "[io_counter]") {
    IoCounter c(100);
    c.read(Block{Operand::q, 0, 0, 3, 0, 4});
    c.read(Block{Operand::k, 1, 5, 2, 0, 4});
    c.write(Block{Operand::o, 0, 0, 3, 0, 5});
    const IoReport r = c.report();
    CHECK(r.reads == 20);
    CHECK(r.writes == 15);
    CHECK(r.total() == 35);
    CHECK(r.peak == 0);
    CHECK(c.fast_words() == 100);
}

TEST_CASE("IoCounter tracks residency and throws past M", "[io_counter][throws]") {
    IoCounter c(10);
    c.acquire(6);
    c.acquire(4); // exactly M is fine
    CHECK(c.resident() == 10);
    CHECK_THROWS_AS(c.acquire(1), CapacityError);
    IoCounter r(10);
    r.acquire(8);
    r.release(5);
    CHECK(r.resident() == 3);
    r.acquire(6);
    CHECK(r.report().peak == 9);
    IoCounter zero(0);
    CHECK_THROWS_AS(zero.acquire(1), CapacityError);
}

TEST_CASE("IoCounter fork and merge: sums and the max of the peaks", "[io_counter]") {
    IoCounter root(50, true);
    IoCounter a = root.fork();
    IoCounter b = root.fork();
    CHECK(a.fast_words() == 50);
    a.acquire(30);
    a.read(Block{Operand::q, 0, 0, 2, 0, 3});
    b.acquire(40);
    b.write(Block{Operand::o, 0, 0, 1, 0, 7});
    b.complete(Block{Operand::scores, 0, 0, 1, 0, 1});
    root.merge(a);
    root.merge(b);
    CHECK(root.report() == IoReport{6, 7, 40});
    using Kind = ioattn::TraceEvent::Kind;
    REQUIRE(root.trace().size() == 5); // a's events, then b's: acquires are recorded too
    CHECK(root.trace()[0].kind == Kind::acquire);
    CHECK(root.trace()[0].words == 30);
    CHECK(root.trace()[1].kind == Kind::read);
    CHECK(root.trace()[2].kind == Kind::acquire);
    CHECK(root.trace()[2].words == 40);
    CHECK(root.trace()[3].kind == Kind::write);
    CHECK(root.trace()[4].kind == Kind::complete);
    CHECK(root.trace()[4].block.operand == Operand::scores);
    IoCounter quiet(50);
    quiet.read(Block{Operand::q, 0, 0, 2, 0, 3});
    CHECK(quiet.trace().empty());
}

TEST_CASE("IoCounter records acquire, release and sparse reads", "[io_counter]") {
    using Kind = ioattn::TraceEvent::Kind;
    IoCounter c(20, true);
    CHECK(c.recording());
    c.acquire(12);
    c.read(Block{Operand::q, 0, 2, 3, 0, 4}, 5); // 5 stored entries inside a 3 x 4 block
    c.read(Block{Operand::k, 0, 0, 1, 0, 4});
    c.release(12);
    CHECK(c.report() == IoReport{9, 0, 12});
    CHECK(c.resident() == 0);
    const auto& t = c.trace();
    REQUIRE(t.size() == 4);
    CHECK(t[0].kind == Kind::acquire);
    CHECK(t[0].moved() == 12);
    CHECK(t[1].kind == Kind::read);
    CHECK(t[1].block == Block{Operand::q, 0, 2, 3, 0, 4});
    CHECK(t[1].moved() == 5);
    CHECK(t[2].moved() == 4);
    CHECK(t[3].kind == Kind::release);
    CHECK(t[3].moved() == 12);
    // a hand-made event without words moves its whole block
    CHECK(ioattn::TraceEvent{Kind::read, Block{Operand::v, 0, 0, 2, 0, 3}}.moved() == 6);
    // counting without recording is the same
    IoCounter quiet(20);
    CHECK_FALSE(quiet.recording());
    quiet.acquire(12);
    quiet.read(Block{Operand::q, 0, 2, 3, 0, 4}, 5);
    quiet.read(Block{Operand::k, 0, 0, 1, 0, 4});
    quiet.release(12);
    CHECK(quiet.report() == c.report());
    CHECK(quiet.trace().empty());
}

TEST_CASE("IoCounter restart and reuse_trace keep the storage, not the contents", "[io_counter]") {
    IoCounter c(20, true);
    c.acquire(12);
    c.read(Block{Operand::q, 0, 0, 2, 0, 3});
    const auto* storage = c.trace().data();
    c.restart(); // a fresh fork in the same buffer
    CHECK(c.report() == IoReport{});
    CHECK(c.resident() == 0);
    CHECK(c.trace().empty());
    c.acquire(20); // the whole of M again: resident started from 0
    c.read(Block{Operand::k, 0, 0, 1, 0, 4});
    REQUIRE(c.trace().size() == 2);
    CHECK(c.trace().data() == storage);
    CHECK(c.report() == IoReport{4, 0, 20});
    // a recorded run into a larger spare buffer: its capacity is kept, its contents dropped
    std::vector<ioattn::TraceEvent> spare(100);
    const auto* spare_storage = spare.data();
    IoCounter r(20, true);
    r.reuse_trace(std::move(spare));
    CHECK(r.trace().empty());
    r.read(Block{Operand::q, 0, 0, 1, 0, 1});
    CHECK(r.trace().data() == spare_storage);
    CHECK(r.trace().size() == 1);
    IoCounter quiet(20); // not recording: no effect
    std::vector<ioattn::TraceEvent> other(10);
    quiet.reuse_trace(std::move(other));
    quiet.read(Block{Operand::q, 0, 0, 1, 0, 1});
    CHECK(quiet.trace().empty());
}

TEST_CASE("NullCounter and DryRunCounter", "[io_counter]") {
    STATIC_REQUIRE(!ioattn::NullCounter::kCounts);
    STATIC_REQUIRE(ioattn::NullCounter::kComputes);
    STATIC_REQUIRE(ioattn::IoCounter::kCounts);
    STATIC_REQUIRE(ioattn::DryRunCounter::kCounts);
    STATIC_REQUIRE(!ioattn::DryRunCounter::kComputes);
    ioattn::NullCounter n(5);
    n.acquire(100);
    n.read(Block{Operand::q, 0, 0, 10, 0, 10});
    n.read(Block{Operand::q, 0, 0, 10, 0, 10}, 7);
    STATIC_REQUIRE(!ioattn::NullCounter::recording());
    STATIC_REQUIRE(std::is_empty_v<ioattn::NullCounter>); // zero-cost: no state at all
    CHECK(n.report() == IoReport{});
    ioattn::DryRunCounter d(8);
    ioattn::DryRunCounter f = d.fork();
    CHECK(f.fast_words() == 8);
    f.acquire(8);
    CHECK_THROWS_AS(f.acquire(1), CapacityError);
}

TEST_CASE("IoReport prints its fields", "[io_counter]") {
    std::ostringstream os;
    os << IoReport{11, 22, 33};
    CHECK_THAT(os.str(), Catch::Contains("11") && Catch::Contains("22") && Catch::Contains("33"));
}

TEST_CASE("IoCounter counts words per stream and bytes at each stream's element size",
          "[io_counter][bf16]") {
    IoCounter c(100);
    c.read(Block{Operand::q, 0, 0, 3, 0, 4});        // 12 operand words
    c.read(Block{Operand::index, 0, 0, 1, 0, 8}, 5); // 5 index words of a block of 8
    c.write(Block{Operand::o, 0, 0, 2, 0, 4});       // 8 operand words
    c.write(Block{Operand::lse, 0, 0, 2, 0, 1});     // 2 statistic words
    CHECK(c.words(Operand::q) == 12);
    CHECK(c.words(Operand::index) == 5);
    CHECK(c.words(Operand::k) == 0);
    CHECK(c.bytes(2, 4) == 2 * (12 + 8) + 4 * (5 + 2));
    CHECK(c.bytes(4, 4) == 4 * c.report().total());
    IoCounter d = c.fork();
    d.read(Block{Operand::d_o, 0, 0, 1, 0, 3});
    c.merge(d);
    CHECK(c.words(Operand::d_o) == 3);
    CHECK(c.bytes(8, 8) == 8 * c.report().total());
    c.restart();
    CHECK(c.bytes(2, 4) == 0);
    STATIC_REQUIRE(ioattn::is_operand_stream(Operand::d_v));
    STATIC_REQUIRE(!ioattn::is_operand_stream(Operand::stats));
}
