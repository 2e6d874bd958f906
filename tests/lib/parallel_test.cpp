// Tests of ioattn/parallel.hpp: task loops, counted loops and thread control.

#include "printing.hpp"

#include <ioattn/io_counter.hpp>
#include <ioattn/parallel.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

TEST_CASE("parallel_for_tiles runs every task once", "[parallel]") {
    std::vector<int> hits(1000, 0);
    std::vector<int> worker(1000, -1);
    ioattn::parallel_for_tiles(1000, [&](std::int64_t t, int w) {
        hits[static_cast<std::size_t>(t)] += 1; // one task per element: no race
        worker[static_cast<std::size_t>(t)] = w;
    });
    const int workers = ioattn::max_concurrency();
    for (std::size_t t = 0; t < hits.size(); ++t) {
        CHECK(hits[t] == 1);
        CHECK(worker[t] >= 0); // a valid per-worker workspace index
        CHECK(worker[t] < workers);
    }
}

TEST_CASE("parallel_for_counted merges per-task counters in task order", "[parallel]") {
    ioattn::IoCounter counter(100, true);
    ioattn::parallel_for_counted(64, counter, [](std::int64_t t, int, ioattn::IoCounter& c) {
        c.acquire(t + 1);
        c.read(ioattn::Block{ioattn::Operand::q, t, 0, 1, 0, t + 1});
        c.release(t + 1);
    });
    const ioattn::IoReport r = counter.report();
    CHECK(r.reads == 64 * 65 / 2);
    CHECK(r.peak == 64);
    REQUIRE(counter.trace().size() == 3 * 64); // acquire, read, release per task
    for (std::size_t t = 0; t < 64; ++t) {
        CHECK(counter.trace()[3 * t].kind == ioattn::TraceEvent::Kind::acquire);
        CHECK(counter.trace()[3 * t + 1].block.slice == static_cast<std::int64_t>(t));
    }
}

TEST_CASE("parallel_for_counted: recording or not, the same counts", "[parallel]") {
    // recording runs the tasks in order through one restarted task counter: each task still
    // starts from nothing resident (a task that keeps words would overflow M otherwise)
    const auto body = [](std::int64_t t, int, ioattn::IoCounter& c) {
        c.acquire(60);
        c.read(ioattn::Block{ioattn::Operand::k, 0, t, 1, 0, 3});
        c.write(ioattn::Block{ioattn::Operand::o, 0, t, 1, 0, 2});
    };
    ioattn::IoCounter recorded(100, true);
    ioattn::IoCounter counted(100);
    ioattn::parallel_for_counted(40, recorded, body);
    ioattn::parallel_for_counted(40, counted, body);
    CHECK(recorded.report() == counted.report());
    CHECK(recorded.report() == ioattn::IoReport{120, 80, 60});
    REQUIRE(recorded.trace().size() == 3 * 40);
    for (std::size_t t = 0; t < 40; ++t)
        CHECK(recorded.trace()[3 * t + 1].block.row0 == static_cast<std::int64_t>(t));
    CHECK(counted.trace().empty());
}

TEST_CASE("a task that throws: the caller gets the exception, then owns what the tasks touched",
          "[parallel]") {
    // Under the tsan preset, also the fork/join order on the exception's path: the caller's
    // writes after the catch must not be reported as races with the tasks.
    for (int round = 0; round < 50; ++round) {
        std::vector<std::int64_t> seen(256, 0);
        std::string what;
        try {
            ioattn::parallel_for_tiles(256, [&](std::int64_t t, int) {
                const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
                while (std::chrono::steady_clock::now() < until) {
                } // long enough that every worker takes tasks
                seen[static_cast<std::size_t>(t)] = t;
                if (t == 200)
                    throw std::runtime_error("task " + std::to_string(t));
            });
        } catch (const std::runtime_error& e) {
            what = e.what();
        }
        REQUIRE(what == "task 200");
        CHECK(seen[200] == 200);
        seen.assign(seen.size(), -1); // the caller's again
        try {
            ioattn::with_threads(1, [&] {
                seen[0] = 1;
                throw std::runtime_error("in the arena");
            });
        } catch (const std::runtime_error& e) {
            what = e.what();
        }
        CHECK(what == "in the arena");
        CHECK(seen[0] == 1);
        seen[0] = 2;
    }
}

TEST_CASE("with_threads limits the workers", "[parallel]") {
    CHECK(ioattn::with_threads(1, [] { return ioattn::max_concurrency(); }) == 1);
    CHECK(ioattn::with_threads(0, [] { return 7; }) == 7);
    CHECK(ioattn::max_concurrency() >= 1);
}

TEST_CASE("parallel_for_blocks: timed runs take the heavy blocks first, counting runs index order",
          "[parallel]") {
    const std::vector<std::int64_t> work{1, 1, 50, 1, 1, 1, 1, 1, 60, 1}; // mean 11.8
    const auto work_of = [&](std::int64_t b) { return work[static_cast<std::size_t>(b)]; };
    const std::vector<std::int64_t> heavy_order{8, 2, 0, 1, 3, 4, 5, 6, 7, 9};
    const std::int64_t slices = 3, blocks = 10;
    // every (slice, block) once, on every worker count
    std::vector<int> hits(static_cast<std::size_t>(slices * blocks), 0);
    ioattn::NullCounter none;
    ioattn::parallel_for_blocks(
        slices, blocks, work_of, none, [&](std::int64_t s, std::int64_t b, int, auto&) {
            hits[static_cast<std::size_t>(s * blocks + b)] += 1; // one task per element
        });
    for (const int h : hits)
        CHECK(h == 1);
    // one worker takes the tasks in task order: each slice's blocks in the timed order
    std::vector<std::int64_t> seen;
    ioattn::with_threads(1, [&] {
        ioattn::parallel_for_blocks(
            slices, blocks, work_of, none, [&](std::int64_t s, std::int64_t b, int, auto&) {
                if (s == 1)
                    seen.push_back(b);
            });
    });
    CHECK(seen == heavy_order);
    // a recorded run: the sequential schedule's trace, blocks in index order
    ioattn::IoCounter recorded(100, true);
    ioattn::parallel_for_blocks(slices,
                                blocks,
                                work_of,
                                recorded,
                                [](std::int64_t s, std::int64_t b, int, ioattn::IoCounter& c) {
                                    c.read(ioattn::Block{ioattn::Operand::q, s, b, 1, 0, 1});
                                });
    REQUIRE(recorded.trace().size() == static_cast<std::size_t>(slices * blocks));
    for (std::size_t t = 0; t < recorded.trace().size(); ++t) {
        CHECK(recorded.trace()[t].block.slice == static_cast<std::int64_t>(t) / blocks);
        CHECK(recorded.trace()[t].block.row0 == static_cast<std::int64_t>(t) % blocks);
    }
}
