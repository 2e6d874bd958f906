// The library called from several application threads at once: 8 std::threads run
// 8 different kernels (dense and sparse, forward and backward, fused and materializing, counted
// and not) at the same time, repeatedly: outside any arena, inside one shared task_arena, each
// in an arena of its own, and as tasks of a task_group inside the shared arena. Every output is
// bitwise equal to the same kernel's single-threaded result, and every counted run reports the
// single-threaded counts. The four sparse calls share one Support, so its lazily built
// transpose and tile views are built under contention.

#include "kernel_case.hpp"

#include <ioattn/dense.hpp>
#include <ioattn/io_counter.hpp>
#include <ioattn/parallel.hpp>
#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/forward.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>
#include <tbb/global_control.h>
#include <tbb/task_arena.h>
#include <tbb/task_group.h>

#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace sp = ioattn::sparse;
using ioattn::IoCounter;
using ioattn::IoReport;
using ioattn::MemoryModel;
using ioattn::NullCounter;
using ioattn::Pass;
using ioattn::Schedule;
using ioattn::Tiling;

namespace {

/// One kernel call with its own operands; run() overwrites its outputs (and counts, if counted).
struct Call {
    std::string name;
    sp::test::Case<float> data;
    std::function<IoReport(sp::test::Case<float>&)> run;

    /// The outputs the call writes, in one vector.
    [[nodiscard]] std::vector<float> outputs() const {
        std::vector<float> all = data.o;
        for (const auto* x : {&data.lse, &data.d_q, &data.d_k, &data.d_v})
            all.insert(all.end(), x->begin(), x->end());
        return all;
    }
};

template <typename Kernel>
std::function<IoReport(sp::test::Case<float>&)> counted(const MemoryModel& m, Kernel kernel) {
    return [m, kernel](sp::test::Case<float>& c) {
        IoCounter counter(m.fast_words);
        kernel(c, counter);
        return counter.report();
    };
}

template <typename Kernel>
std::function<IoReport(sp::test::Case<float>&)> uncounted(Kernel kernel) {
    return [kernel](sp::test::Case<float>& c) {
        NullCounter counter;
        kernel(c, counter);
        return IoReport{};
    };
}

std::vector<Call> make_calls(const sp::Support& support) {
    const ioattn::Problem p = sp::test::kernel_shape(2, 48, 40, 16);
    const MemoryModel m{6000};
    const Tiling ff =
        Tiling::for_memory(Schedule::fused, m, p, Pass::forward, ioattn::Kernels::sparse);
    const Tiling fm =
        Tiling::for_memory(Schedule::materialized, m, p, Pass::forward, ioattn::Kernels::sparse);
    const Tiling bf =
        Tiling::for_memory(Schedule::fused, m, p, Pass::backward, ioattn::Kernels::sparse);
    const Tiling bm =
        Tiling::for_memory(Schedule::materialized, m, p, Pass::backward, ioattn::Kernels::sparse);
    const sp::Support* s = &support;
    std::vector<Call> calls;
    const auto add = [&](std::string name, auto run) {
        calls.push_back({std::move(name), sp::test::Case<float>(p, calls.size() + 1), run});
        sp::test::run_forward_reference(calls.back().data, support); // O, L for the backward
    };
    add("dense forward_fused",
        uncounted([=](auto& c, auto& k) { ioattn::dense::forward_fused(c.forward(), ff, m, k); }));
    add("dense forward_materialized, counted", counted(m, [=](auto& c, auto& k) {
            ioattn::dense::forward_materialized(c.forward(), fm, m, k);
        }));
    add("dense backward_fused, counted", counted(m, [=](auto& c, auto& k) {
            ioattn::dense::backward_fused(c.backward(), bf, m, k);
        }));
    add("dense backward_materialized", uncounted([=](auto& c, auto& k) {
            ioattn::dense::backward_materialized(c.backward(), bm, m, k);
        }));
    add("sparse forward_fused, counted",
        counted(m, [=](auto& c, auto& k) { sp::forward_fused(c.forward(), *s, ff, m, k); }));
    add("sparse forward_materialized",
        uncounted([=](auto& c, auto& k) { sp::forward_materialized(c.forward(), *s, fm, m, k); }));
    add("sparse backward_fused",
        uncounted([=](auto& c, auto& k) { sp::backward_fused(c.backward(), *s, bf, m, k); }));
    add("sparse backward_materialized, counted", counted(m, [=](auto& c, auto& k) {
            sp::backward_materialized(c.backward(), *s, bm, m, k);
        }));
    return calls;
}

/// Where each application thread makes its calls: outside any arena, inside one task_arena
/// shared by all threads, inside an arena of its own, or as a task of a task_group inside the
/// shared arena (the library's loops then nest inside a running task).
enum class Where { no_arena, shared_arena, own_arena, nested_task };

/// One call handed to whichever thread runs it: the caller's own, a worker of the arena or of
/// the group, or another application thread inside the shared arena (task_arena::execute runs
/// a caller's functor there when the arena has no free slot). TSan cannot see libtbb hand it
/// over, so the handoff is stated with ForkJoinOrder (as with_threads does); the order is the
/// first member, reached from `this` with no read, so that the runner acquires before it reads
/// anything the caller wrote (a lambda's captures would be read first: a reported race).
struct Once {
    mutable ioattn::ForkJoinOrder order;
    Call* call;
    std::vector<IoReport>* io;

    void operator()() const {
        order.task_begin();
        io->push_back(call->run(call->data));
        order.task_end();
    }
};

/// A Once run as a task of a task_group, from whichever thread runs this (stated as Once).
struct InGroup {
    mutable ioattn::ForkJoinOrder order;
    const Once* once;

    void operator()() const {
        order.task_begin();
        tbb::task_group group;
        group.run_and_wait(*once);
        order.task_end();
    }
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

} // namespace

TEST_CASE("8 application threads calling different kernels at once get their serial results",
          "[concurrency]") {
    const sp::Support serial_support =
        sp::parse_pattern("window:6+random:0.15", 48, 40, 11); // its own caches
    std::vector<Call> calls = make_calls(serial_support);
    std::vector<std::vector<float>> expected;
    std::vector<IoReport> expected_io;
    {
        tbb::global_control one(tbb::global_control::max_allowed_parallelism, 1);
        for (Call& c : calls) {
            expected_io.push_back(c.run(c.data));
            expected.push_back(c.outputs());
        }
    }
    for (const Where where :
         {Where::no_arena, Where::shared_arena, Where::own_arena, Where::nested_task}) {
        CAPTURE(static_cast<int>(where));
        const sp::Support shared =
            sp::parse_pattern("window:6+random:0.15", 48, 40, 11); // fresh caches
        std::vector<Call> now = make_calls(shared);
        std::vector<std::vector<std::vector<float>>> got(now.size());
        std::vector<std::vector<IoReport>> got_io(now.size());
        tbb::task_arena arena(2);
        std::vector<std::thread> threads;
        for (std::size_t t = 0; t < now.size(); ++t)
            threads.emplace_back([&, t] {
                for (int rep = 0; rep < 3; ++rep) {
                    Once once{{}, &now[t], &got_io[t]};
                    once.order.fork();
                    if (where == Where::shared_arena) {
                        arena.execute(once);
                    } else if (where == Where::nested_task) {
                        const InGroup nested{{}, &once};
                        nested.order.fork();
                        arena.execute(nested);
                        nested.order.join();
                    } else if (where == Where::own_arena) {
                        tbb::task_arena own(static_cast<int>(t % 3) + 1);
                        own.execute(once);
                    } else {
                        once();
                    }
                    once.order.join();
                    got[t].push_back(now[t].outputs());
                }
            });
        for (std::thread& th : threads)
            th.join();
        for (std::size_t t = 0; t < now.size(); ++t) {
            CAPTURE(now[t].name);
            REQUIRE(got[t].size() == 3);
            for (int rep = 0; rep < 3; ++rep) {
                CHECK(same_bits(got[t][static_cast<std::size_t>(rep)], expected[t]));
                CHECK(got_io[t][static_cast<std::size_t>(rep)] == expected_io[t]);
            }
        }
    }
}
