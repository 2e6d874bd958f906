#pragma once
// The limits memory_limit() (resources.hpp) takes the smallest of: physical memory, the
// address-space and data-segment limits a user sets (setrlimit RLIMIT_AS, RLIMIT_DATA; `ulimit
// -v`, `ulimit -d`), less what the process already maps, and the memory limit of the process's
// cgroup and its ancestors (v2 memory.max, v1 memory.limit_in_bytes). Parsing is separate from
// reading, so that the rules are tested on given file contents, not on the machine's.

#include <ioattn/resources.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ioattn::detail {

inline constexpr std::uint64_t kNoLimit = std::numeric_limits<std::uint64_t>::max();

/// The figures one limit is taken from; kNoLimit where a limit is not set.
struct LimitFacts {
    std::uint64_t physical = kNoLimit;
    std::uint64_t rlimit_as = kNoLimit;   ///< RLIMIT_AS, bytes
    std::uint64_t rlimit_data = kNoLimit; ///< RLIMIT_DATA, bytes
    std::uint64_t vm_size = 0;            ///< the address space mapped now (VmSize), bytes
    std::uint64_t vm_data = 0;            ///< the private writable mappings now (VmData), bytes
    /// (file, limit) of each cgroup memory-limit file read
    std::vector<std::pair<std::string, std::uint64_t>> cgroups;
};

/// The first line of a limit file as a byte count: "max" (v2), a number past 2^62 (v1 writes
/// 9223372036854771712 for none), an empty or unreadable line all mean kNoLimit.
std::uint64_t parse_limit_line(std::string_view text);

/// VmSize and VmData of /proc/self/status ("VmSize:\t  123456 kB"), in bytes; 0 when missing.
std::pair<std::uint64_t, std::uint64_t> parse_vm_status(std::string_view status);

/// The memory-limit files that bound the process, from /proc/self/cgroup: for the v2 line
/// "0::/a/b", <v2_root>/a/b/memory.max, <v2_root>/a/memory.max and <v2_root>/memory.max; for a
/// v1 line whose controllers include "memory", "4:memory:/a/b", the same under v1_root with
/// memory.limit_in_bytes. A container often mounts its own cgroup at the root, so the root's
/// file is always listed. Each file once, innermost first.
std::vector<std::string> cgroup_limit_files(std::string_view proc_self_cgroup,
                                            std::string_view v2_root,
                                            std::string_view v1_root);

/// The smallest of the limits in `facts`, each rlimit less what the process maps already
/// (saturating at 0), named in `source`: "physical memory", "address-space limit RLIMIT_AS
/// (ulimit -v) of ..., ... of it in use", "data-segment limit RLIMIT_DATA (ulimit -d) of ...",
/// "cgroup memory limit <file>". Physical memory when nothing is set; ties keep the earlier.
MemoryLimit smallest_limit(const LimitFacts& facts);

/// smallest_limit of this machine and process: physical memory and the cgroup files read once,
/// getrlimit on every call, /proc/self/status only when an rlimit is set.
MemoryLimit machine_memory_limit();

} // namespace ioattn::detail
