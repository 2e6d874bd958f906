#pragma once
/// The memory one call may take. Before allocating, every kernel driver (through
/// kernels::CallMemory, ioattn/kernels/workspace.hpp), the pattern builders and the ioattn
/// program compare the bytes the call needs with memory_limit() and throw ResourceError, naming
/// the call, the bytes needed and the bytes available, when it cannot fit. The limit applies to
/// one call (one kernel's workspace, one support, the program's operands), not to the process.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ioattn {

/// The bytes one call may allocate and where that figure comes from.
struct MemoryLimit {
    std::uint64_t bytes = 0;
    /// "IOATTN_MAX_BYTES", "physical memory", "address-space limit RLIMIT_AS (ulimit -v) of
    /// ...", "data-segment limit RLIMIT_DATA (ulimit -d) of ..." or "cgroup memory limit <file>"
    std::string source;
};

/// IOATTN_MAX_BYTES when it is set: a decimal byte count with an optional suffix k, M, G, T
/// (powers of 1024, an optional "iB" or "B" after it); otherwise the smallest of the machine's
/// physical memory (sysconf), the address-space and data-segment limits (getrlimit RLIMIT_AS,
/// RLIMIT_DATA) less what the process maps already (/proc/self/status VmSize, VmData), and the
/// memory limit of the process's cgroup and its ancestors (/proc/self/cgroup; v2 memory.max,
/// v1 memory.limit_in_bytes). The environment and the rlimits are read on every call, physical
/// memory and the cgroup files once.
/// Thread-safe as long as nobody changes the environment meanwhile. Throws InvalidArgument if
/// IOATTN_MAX_BYTES is not a byte count.
MemoryLimit memory_limit();

/// count * size, saturated at UINT64_MAX (the sizes of an absurd request never wrap);
/// a negative count (an overflowed product of sizes) saturates too.
std::uint64_t bytes_of(std::int64_t count, std::size_t size);

/// a + b, saturated at UINT64_MAX.
std::uint64_t add_bytes(std::uint64_t a, std::uint64_t b);

/// "1.5 GiB": bytes in the largest binary unit below them, three significant digits.
std::string format_bytes(std::uint64_t bytes);

/// Throws ResourceError "<where>: needs N bytes (1.5 GiB) of <what>, M bytes (...) available
/// (<source>)" when bytes > memory_limit().bytes, after the memory kept for reuse (see
/// on_memory_pressure) is freed and the limit read again. Also throws what memory_limit()
/// throws.
void require_memory(std::string_view where, std::uint64_t bytes, std::string_view what);

/// The environment variable `name` as a decimal count >= 0, or nullopt when it is unset or
/// empty. Throws InvalidArgument "<where>: <name> = '<text>' (expected <expected>)" for any
/// other text, or a count of `unit`s whose bytes overflow (unit > 1: a count of MiB, ...).
std::optional<std::uint64_t> environment_count(const char* name,
                                               std::string_view where,
                                               std::string_view expected,
                                               std::uint64_t unit = 1);

/// Advises the whole 2 MiB pages inside [p, p + bytes) to transparent huge pages when the range
/// spans at least 4 MiB (advice only: where the kernel has none, 4 KiB pages stay). Debian's
/// THP mode is madvise: without the advice every 4 KiB page of a fresh block faults on first
/// write, and on a virtual machine a fault costs microseconds.
void advise_huge_pages(void* p, std::size_t bytes);

/// Registers `release`, which frees memory kept for reuse (the sparse library's index pool, the
/// Python module's output pool): require_memory calls every registered function before it
/// refuses a request, so memory held for speed never makes a call fail (under an address-space
/// limit, kept blocks count against it). At most 8; thread-safe; `release` must not throw.
void on_memory_pressure(void (*release)());

/// Throws ResourceError "<where>: allocating N bytes (...) of <what> failed (M bytes ... are
/// available, <source>)": what a caught std::bad_alloc becomes.
[[noreturn]] void
throw_allocation_failed(std::string_view where, std::uint64_t bytes, std::string_view what);

class WorkspaceBlock;

/// The memory of one kernel call, opened by its driver before it declares its workspaces:
///   CallMemory memory(kWhere);          // sizes what follows
///   const kernels::Workspace<Scalar> a(...), b(...);
///   memory.allocate();                  // checks the total, then allocates a and b
/// Workspaces constructed on this thread while it is the innermost open CallMemory are sized
/// but not allocated; allocate() throws ResourceError (naming the call, their total and the
/// limit) when the total exceeds memory_limit(), else allocates them all, turning a failed
/// allocation into ResourceError too. Outside any CallMemory a workspace allocates at once
/// with the same checks. Not copyable; lives on the stack of one thread.
class CallMemory {
public:
    explicit CallMemory(const char* where);
    ~CallMemory();
    CallMemory(const CallMemory&) = delete;
    CallMemory& operator=(const CallMemory&) = delete;

    /// Checks and allocates the pending workspaces (once; later calls do nothing).
    void allocate();

    /// Bytes of the workspaces sized so far.
    [[nodiscard]] std::uint64_t bytes() const;

private:
    friend class WorkspaceBlock;
    static constexpr int kMaxBlocks = 8;
    const char* where_;
    CallMemory* outer_;
    WorkspaceBlock* pending_[kMaxBlocks] = {};
    int count_ = 0;
};

/// Untyped storage of a kernels::Workspace: `bytes` bytes, 64-byte aligned, from the calling
/// thread's kernels::ScratchPool, zero-filled when `zeroed`; allocated at once or by the open
/// CallMemory.
class WorkspaceBlock {
public:
    WorkspaceBlock(const WorkspaceBlock&) = delete;
    WorkspaceBlock& operator=(const WorkspaceBlock&) = delete;

protected:
    WorkspaceBlock(std::uint64_t bytes, bool zeroed);
    ~WorkspaceBlock();

    [[nodiscard]] void* data() const { return data_; }

    [[nodiscard]] bool ready() const { return data_ != nullptr || need_ == 0; }

private:
    friend class CallMemory;
    void allocate(const char* where);
    std::uint64_t need_;
    bool zeroed_;
    std::size_t block_ = 0; ///< the pool block's size, at least need_
    void* data_ = nullptr;
    CallMemory* pending_in_ = nullptr;
};

} // namespace ioattn
