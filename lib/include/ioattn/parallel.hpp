#pragma once
/// The only place ioattn talks to oneTBB's scheduling: task loops whose results do not depend
/// on the thread count, per-worker workspace indices, and thread-count control.

#include <tbb/blocked_range.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <thread>
#include <vector>

#if defined(__SANITIZE_THREAD__)
#define IOATTN_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define IOATTN_TSAN 1
#endif
#endif
#ifdef IOATTN_TSAN
#include <sanitizer/tsan_interface.h>
// ThreadSanitizer's runtime (tsan_interface_ann.cpp): reads between the two are not watched.
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
#endif

namespace ioattn {

/// The ordering oneTBB guarantees around a parallel loop, told to ThreadSanitizer: what the
/// caller did before the loop happens before every task, and every task before what the caller
/// does after it. TBB provides it inside libtbb, which Debian does not build instrumented, so
/// TSan would otherwise report every read of an input and every write of an output as a race.
/// Tasks stay unordered among themselves, so races between tasks are still reported. Empty
/// unless built with -fsanitize=thread.
/// A task that throws (a dry run's CapacityError) makes oneTBB cancel the loop and rethrow on
/// the caller: the scopes below state the order on that path too.
class ForkJoinOrder {
public:
    void fork() { release(&fork_); } ///< the caller, before the loop

    void task_begin() { acquire(&fork_); } ///< each task, first

    void task_end() { release(&join_); } ///< each task, last

    void join() { acquire(&join_); } ///< the caller, after the loop

    /// (order.*Enter)() now and (order.*Exit)() when the scope ends, by return or by exception.
    template <void (ForkJoinOrder::*Enter)(), void (ForkJoinOrder::*Exit)()>
    class Scope {
    public:
        explicit Scope(ForkJoinOrder& order)
            : order_(order) {
            (order_.*Enter)();
        }

        ~Scope() { (order_.*Exit)(); }

        Scope(const Scope&) = delete;
        Scope& operator=(const Scope&) = delete;

    private:
        ForkJoinOrder& order_;
    };

    using Loop = Scope<&ForkJoinOrder::fork, &ForkJoinOrder::join>;           ///< the caller's
    using Task = Scope<&ForkJoinOrder::task_begin, &ForkJoinOrder::task_end>; ///< each task's

    /// A copy of x, which a task reads from its own task object, unwatched. oneTBB's start_for
    /// copies the loop body's closure into each task object on the thread that splits the range,
    /// after fork(), and libtbb hands the object over. tests/tsan.supp names that constructor,
    /// but a suppression matches only a stack TSan still holds: on long tests (sparse:bf16
    /// accuracy at N = 1024) the write was too old even with history_size=7.
    template <typename T>
    static T handed_over(const T& x) {
#ifdef IOATTN_TSAN
        AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
        const T copy = x;
        AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
        return copy;
#else
        return x;
#endif
    }

private:
#ifdef IOATTN_TSAN
    static void release(char* at) {
        __tsan_release(at);
    }

    static void acquire(char* at) {
        __tsan_acquire(at);
    }
#else
    static void release(char* /*at*/) {}

    static void acquire(char* /*at*/) {}
#endif
    char fork_ = 0;
    char join_ = 0;
};

/// Number of workers that may run tasks of the current arena (>= 1).
inline int max_concurrency() {
    return tbb::this_task_arena::max_concurrency();
}

/// Index in [0, max_concurrency()) of the worker running the caller, for per-worker
/// workspace. Only valid inside a task of the current arena.
inline int worker_index() {
    const int i = tbb::this_task_arena::current_thread_index();
    return i < 0 ? 0 : i;
}

/// Runs body(task, worker) for task in [0, n_tasks) in parallel, one call per task. Each task
/// must write disjoint outputs; the result is then independent of the thread count.
template <typename Body>
void parallel_for_tiles(std::int64_t n_tasks, const Body& body) {
    struct Shared { // what the loop's closure holds
        ForkJoinOrder* order;
        const Body* body;
    };

    ForkJoinOrder order;
    const ForkJoinOrder::Loop loop(order);
    tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, n_tasks, 1),
                      [shared = Shared{&order, &body}](const tbb::blocked_range<std::int64_t>& r) {
                          const Shared s = ForkJoinOrder::handed_over(shared);
                          const ForkJoinOrder::Task task(*s.order);
                          const int w = worker_index();
                          for (std::int64_t t = r.begin(); t != r.end(); ++t)
                              (*s.body)(t, w);
                      });
}

/// heavy_first's default: a task of at least 4x the mean work is heavy.
inline constexpr double kHeavyFactor = 4.0;

/// The tasks 0..n-1 in the order a parallel loop should take them when a few are much heavier
/// than the rest: those of at least `factor` (kHeavyFactor) x the mean work(task) first, most
/// first, then every other task in index order; work(t) is called once per task. A heavy task
/// started last keeps one worker busy while the others wait; the others keep their order, in
/// which neighbours share what they read (a band's row blocks share most of their keys: sorting
/// them all by work moved 1.12x the counted words through the cache check's simulated LRU cache
/// of 4M words on bigbird:16:2:3's tile forward, above its 1.10 limit).
template <typename Work>
std::vector<std::int64_t>
heavy_first(std::int64_t n, const Work& work, double factor = kHeavyFactor) {
    const auto count = static_cast<std::size_t>(std::max<std::int64_t>(n, 0));
    std::vector<double> cost(count);
    double total = 0;
    for (std::int64_t t = 0; t < n; ++t)
        total += cost[static_cast<std::size_t>(t)] = static_cast<double>(work(t));
    const double mean = n > 0 ? total / static_cast<double>(n) : 0.0;
    const auto of = [&](std::int64_t t) { return cost[static_cast<std::size_t>(t)]; };
    std::vector<char> is_heavy(count, 0);
    std::vector<std::int64_t> order;
    order.reserve(count);
    for (std::int64_t t = 0; t < n; ++t)
        if (mean > 0 && of(t) >= factor * mean) {
            is_heavy[static_cast<std::size_t>(t)] = 1;
            order.push_back(t);
        }
    std::stable_sort(
        order.begin(), order.end(), [&](std::int64_t x, std::int64_t y) { return of(x) > of(y); });
    for (std::int64_t t = 0; t < n; ++t)
        if (is_heavy[static_cast<std::size_t>(t)] == 0)
            order.push_back(t);
    return order;
}

/// parallel_for_tiles with one counter per task, forked from `counter` and merged back in task
/// order, so counts (and recorded traces) are those of the sequential schedule that runs the
/// tasks in index order. body(task, worker, Counter& task_counter). A recording counter runs
/// the tasks in that order on the calling thread instead, through one task counter restarted
/// for each task: the trace is the same, and it never exists twice (all tasks' traces at once
/// and then their merge), which made recorded runs spend their time in page faults. Recording
/// is for verification; what runs in parallel there is the instances.
template <typename Counter, typename Body>
void parallel_for_counted(std::int64_t n_tasks, Counter& counter, const Body& body) {
    if constexpr (!Counter::kCounts) {
        parallel_for_tiles(n_tasks, [&](std::int64_t t, int w) {
            Counter c;
            body(t, w, c);
        });
    } else if (counter.recording()) {
        const int w = worker_index();
        Counter c = counter.fork();
        for (std::int64_t t = 0; t < n_tasks; ++t) {
            c.restart();
            body(t, w, c);
            counter.merge(c);
        }
    } else {
        std::vector<Counter> counters;
        counters.reserve(static_cast<std::size_t>(n_tasks));
        for (std::int64_t t = 0; t < n_tasks; ++t)
            counters.push_back(counter.fork());
        parallel_for_tiles(n_tasks, [&](std::int64_t t, int w) {
            body(t, w, counters[static_cast<std::size_t>(t)]);
        });
        for (const Counter& c : counters)
            counter.merge(c);
    }
}

/// parallel_for_counted over slices x blocks tasks, body(slice, block, worker, Counter&): a
/// timed run takes each slice's blocks in heavy_first(blocks, work, factor) order, a counting
/// run in index order, whose counts and traces are the sequential schedule's. Results do not
/// depend on the order when each block writes its own rows.
template <typename Counter, typename Work, typename Body>
void parallel_for_blocks(std::int64_t slices,
                         std::int64_t blocks,
                         const Work& work,
                         Counter& counter,
                         const Body& body,
                         double factor = kHeavyFactor) {
    std::vector<std::int64_t> order;
    if constexpr (!Counter::kCounts)
        order = heavy_first(blocks, work, factor);
    parallel_for_counted(slices * blocks, counter, [&](std::int64_t task, int worker, Counter& io) {
        const std::int64_t at = task % blocks;
        body(task / blocks, order.empty() ? at : order[static_cast<std::size_t>(at)], worker, io);
    });
}

/// Runs fn() with at most `threads` workers (threads <= 0: all). Fewer than the current arena
/// has: in a task_arena of its own, so it composes with other arenas and nested calls; as many
/// or more: in the current arena, whose workers are already there (an arena made per call
/// costs its workers' joining: 0.94x (0.91-0.98) the time of a 0.7 ms call at --threads 2 on
/// 2 cores, `ioattn run --N 4096 --d 64 --heads 1 --pattern strided:64`).
template <typename Fn>
auto with_threads(int threads, Fn&& fn) -> decltype(fn()) {
    if (threads <= 0 || threads >= tbb::this_task_arena::max_concurrency())
        return fn();
    tbb::task_arena arena(threads);
    ForkJoinOrder order; // execute() may run fn on a worker of the arena
    // made before fork(): execute() calls it by reference, so the worker reads what the caller
    // wrote before the fork
    const auto task = [&]() -> decltype(fn()) {
        const ForkJoinOrder::Task in_task(order);
        return fn();
    };
    const ForkJoinOrder::Loop loop(order);
    return arena.execute(task);
}

/// Runs work() on a new thread, in an arena of `threads` slots (that thread and up to
/// threads - 1 oneTBB workers; threads <= 0: all), while the calling thread repeats idle() until
/// work() has returned: the caller stays free for another duty (ioattn::dist keeps MPI
/// progressing with it). Needs no worker thread, so it cannot stall under any
/// max_allowed_parallelism. Rethrows what work() threw.
template <typename Work, typename Idle>
void run_beside(int threads, const Work& work, const Idle& idle) {
    std::atomic<bool> done{false};
    std::exception_ptr error;
    std::thread beside([&] {
        try {
            with_threads(threads, work);
        } catch (...) {
            error = std::current_exception();
        }
        done.store(true, std::memory_order_release);
    });
    while (!done.load(std::memory_order_acquire))
        idle();
    beside.join();
    if (error)
        std::rethrow_exception(error);
}

} // namespace ioattn
