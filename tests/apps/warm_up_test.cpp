// Tests of the timed loops' warm-up (measure/measure.hpp warm_up_calls, median_seconds): the
// first warm-up of a process calls its function until kFirstWarmUpSeconds have passed, every
// later one calls it once, and median_seconds times `repeat` calls after it. Each test case runs
// in a process of its own (ctest), so the first call here is the process's first warm-up.

#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include <measure.hpp>

namespace {

using namespace std::chrono_literals;

TEST_CASE("warm-up: the first runs for kFirstWarmUpSeconds, later ones one call", "[measure]") {
    int calls = 0;
    const auto call = [&] {
        ++calls;
        std::this_thread::sleep_for(20ms);
    };
    const auto t0 = std::chrono::steady_clock::now();
    ioattn::measure::warm_up_calls(call);
    const double first =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(first >= ioattn::measure::kFirstWarmUpSeconds);
    CHECK(calls >= 2);
    CHECK(calls <= 16); // 20 ms each: no more than 0.3 s needs, plus the one that crosses it

    calls = 0;
    ioattn::measure::warm_up_calls(call);
    CHECK(calls == 1);

    calls = 0;
    (void)ioattn::measure::median_seconds(3, call);
    CHECK(calls == 4); // one warm-up call, three timed
    calls = 0;
    (void)ioattn::measure::median_seconds(3, call, false);
    CHECK(calls == 3);
}

} // namespace
