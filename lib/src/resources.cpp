// ioattn::memory_limit and require_memory: the memory budget of one call (resources.hpp), from
// IOATTN_MAX_BYTES, else the smallest of the machine's and the user's limits (memory_limits.cpp).

#include "memory_limits.hpp"

#include <ioattn/error.hpp>
#include <ioattn/kernels/workspace.hpp>
#include <ioattn/resources.hpp>

#include <array>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <new>
#include <string>

#include <unistd.h>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace ioattn {

namespace {

constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

/// IOATTN_MAX_BYTES: digits, then an optional k/M/G/T (1024-based) with an optional "iB"/"B".
std::uint64_t parse_max_bytes(std::string_view text) {
    const auto bad = [&]() {
        return InvalidArgument("ioattn::memory_limit: IOATTN_MAX_BYTES = '" + std::string(text) +
                               "' (expected a byte count such as 1048576, 512M or 2GiB)");
    };
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end == text.data())
        throw bad();
    std::string_view rest(end, static_cast<std::size_t>(text.data() + text.size() - end));
    int shift = 0;
    if (!rest.empty()) {
        const std::string_view units = "kMGT";
        const std::size_t u = units.find(rest.front() == 'K' ? 'k' : rest.front());
        if (u != std::string_view::npos) {
            shift = 10 * (static_cast<int>(u) + 1);
            rest.remove_prefix(1);
            if (rest == "iB" || rest == "B")
                rest = {};
        } else if (rest == "B") {
            rest = {};
        }
    }
    if (!rest.empty())
        throw bad();
    if (shift > 0 && v > (kMax >> shift))
        throw bad();
    return v << shift;
}

} // namespace

MemoryLimit memory_limit() {
    const char* env = std::getenv("IOATTN_MAX_BYTES"); // NOLINT(concurrency-mt-unsafe): read only
    if (env != nullptr && *env != '\0')
        return {parse_max_bytes(env), "IOATTN_MAX_BYTES"};
    return detail::machine_memory_limit();
}

std::uint64_t bytes_of(std::int64_t count, std::size_t size) {
    if (count < 0)
        return kMax;
    const auto c = static_cast<std::uint64_t>(count);
    if (size != 0 && c > kMax / size)
        return kMax;
    return c * size;
}

std::uint64_t add_bytes(std::uint64_t a, std::uint64_t b) {
    return a > kMax - b ? kMax : a + b;
}

std::string format_bytes(std::uint64_t bytes) {
    constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    auto x = static_cast<double>(bytes);
    int u = 0;
    while (x >= 1024.0 && u < 6) {
        x /= 1024.0;
        ++u;
    }
    char buf[32];
    if (u == 0)
        std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
    else
        std::snprintf(buf,
                      sizeof buf,
                      x < 10.0    ? "%.2f %s"
                      : x < 100.0 ? "%.1f %s"
                                  : "%.0f %s",
                      x,
                      kUnits[u]);
    return buf;
}

namespace {

std::string amount(std::uint64_t bytes) {
    return bytes == kMax ? "more than " + std::to_string(kMax) + " bytes"
                         : std::to_string(bytes) + " bytes (" + format_bytes(bytes) + ")";
}

} // namespace

namespace {

struct Releases {
    std::mutex mutex;
    std::array<void (*)(), 8> functions{};
    std::size_t count = 0;
};

/// The registry, never destroyed: a pool may first register while statics are torn down (a
/// support freed at exit).
Releases& releases() {
    static Releases* const r = new Releases;
    return *r;
}

/// Calls every registered release (outside the lock: a release may allocate or lock its pool).
void release_kept_memory() {
    std::array<void (*)(), 8> functions{};
    std::size_t count = 0;
    {
        Releases& r = releases();
        const std::lock_guard lock(r.mutex);
        functions = r.functions;
        count = r.count;
    }
    for (std::size_t i = 0; i < count; ++i)
        functions[i]();
}

} // namespace

std::optional<std::uint64_t> environment_count(const char* name,
                                               std::string_view where,
                                               std::string_view expected,
                                               std::uint64_t unit) {
    const char* env = std::getenv(name); // NOLINT(concurrency-mt-unsafe): read only
    if (env == nullptr || *env == '\0')
        return std::nullopt;
    const std::string_view text(env);
    std::uint64_t n = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec != std::errc() || end != text.data() + text.size() || (unit > 1 && n > kMax / unit))
        throw InvalidArgument(std::string(where) + ": " + name + " = '" + std::string(text) +
                              "' (expected " + std::string(expected) + ")");
    return n * unit;
}

void advise_huge_pages(void* p, std::size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;
    if (p == nullptr || bytes < 2 * kHuge)
        return;
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    const std::uintptr_t lo = (a + kHuge - 1) & ~(kHuge - 1), hi = (a + bytes) & ~(kHuge - 1);
    if (hi > lo)
        (void)madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
#else
    (void)p;
    (void)bytes;
#endif
}

void on_memory_pressure(void (*release)()) {
    Releases& r = releases();
    const std::lock_guard lock(r.mutex);
    if (r.count == r.functions.size())
        throw InvalidArgument("ioattn::on_memory_pressure: 8 functions are registered already");
    r.functions[r.count++] = release;
}

void require_memory(std::string_view where, std::uint64_t bytes, std::string_view what) {
    MemoryLimit limit = memory_limit();
    if (bytes <= limit.bytes)
        return;
    release_kept_memory();
    limit = memory_limit();
    if (bytes <= limit.bytes)
        return;
    throw ResourceError(std::string(where) + ": needs " + amount(bytes) + " of " +
                        std::string(what) + ", " + amount(limit.bytes) + " available (" +
                        limit.source + ")");
}

void throw_allocation_failed(std::string_view where, std::uint64_t bytes, std::string_view what) {
    const MemoryLimit limit = memory_limit();
    throw ResourceError(std::string(where) + ": allocating " + amount(bytes) + " of " +
                        std::string(what) + " failed (" + amount(limit.bytes) + " available, " +
                        limit.source + ")");
}

// --- CallMemory and WorkspaceBlock ---

namespace {

/// The innermost open CallMemory of this thread.
CallMemory*& open_call() {
    thread_local CallMemory* open = nullptr;
    return open;
}

constexpr const char* kWorkspace = "workspace";

} // namespace

CallMemory::CallMemory(const char* where)
    : where_(where)
    , outer_(open_call()) {
    open_call() = this;
}

CallMemory::~CallMemory() {
    for (int i = 0; i < count_; ++i)
        pending_[i]->pending_in_ = nullptr;
    open_call() = outer_;
}

std::uint64_t CallMemory::bytes() const {
    std::uint64_t total = 0;
    for (int i = 0; i < count_; ++i)
        total = add_bytes(total, pending_[i]->need_);
    return total;
}

void CallMemory::allocate() {
    require_memory(where_, bytes(), kWorkspace);
    for (int i = 0; i < count_; ++i) {
        pending_[i]->pending_in_ = nullptr;
        pending_[i]->allocate(where_);
    }
    count_ = 0;
}

WorkspaceBlock::WorkspaceBlock(std::uint64_t bytes, bool zeroed)
    : need_(bytes)
    , zeroed_(zeroed) {
    if (need_ == 0)
        return;
    CallMemory* call = open_call();
    if (call == nullptr) {
        constexpr const char* kWhere = "ioattn::kernels::Workspace";
        require_memory(kWhere, need_, kWorkspace);
        allocate(kWhere);
        return;
    }
    IOATTN_CHECK(call->count_ < CallMemory::kMaxBlocks,
                 std::string(call->where_) + ": more than 8 workspaces in one CallMemory");
    call->pending_[call->count_++] = this;
    pending_in_ = call;
}

WorkspaceBlock::~WorkspaceBlock() {
    if (data_ != nullptr)
        kernels::ScratchPool::give(data_, block_);
    if (pending_in_ != nullptr) { // destroyed before its call allocated: forget it
        CallMemory& c = *pending_in_;
        for (int i = 0; i < c.count_; ++i)
            if (c.pending_[i] == this) {
                c.pending_[i] = c.pending_[--c.count_];
                break;
            }
    }
}

void WorkspaceBlock::allocate(const char* where) {
    if (need_ > std::numeric_limits<std::size_t>::max())
        throw_allocation_failed(where, need_, kWorkspace);
    try {
        const auto [block, size] = kernels::ScratchPool::take(static_cast<std::size_t>(need_));
        data_ = block;
        block_ = size;
    } catch (const std::bad_alloc&) {
        throw_allocation_failed(where, need_, kWorkspace);
    }
    if (zeroed_)
        std::memset(data_, 0, static_cast<std::size_t>(need_));
}

} // namespace ioattn
