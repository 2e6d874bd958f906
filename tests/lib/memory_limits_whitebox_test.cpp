// Whitebox tests of the limits memory_limit() takes the smallest of (lib/src/memory_limits.hpp),
// on given file contents and figures, never the machine's: limit lines, /proc/self/status,
// /proc/self/cgroup for v1 and v2, and which limit wins and how its source is named.

#include "memory_limits.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace lim = ioattn::detail;

namespace {

constexpr std::uint64_t kGiBLimits = std::uint64_t{1} << 30;

bool names(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

} // namespace

TEST_CASE("parse_limit_line reads byte counts and treats max and huge values as no limit",
          "[resources][limits]") {
    CHECK(lim::parse_limit_line("1073741824\n") == kGiBLimits);
    CHECK(lim::parse_limit_line("  536870912 \n") == kGiBLimits / 2);
    CHECK(lim::parse_limit_line("max\n") == lim::kNoLimit);
    CHECK(lim::parse_limit_line("9223372036854771712\n") == lim::kNoLimit); // v1 unlimited
    CHECK(lim::parse_limit_line("") == lim::kNoLimit);
    CHECK(lim::parse_limit_line("12abc") == lim::kNoLimit);
    CHECK(lim::parse_limit_line("7\n8\n") == 7);
}

TEST_CASE("parse_vm_status reads VmSize and VmData in bytes", "[resources][limits]") {
    const std::string status = "Name:\tioattn\nVmPeak:\t  999999 kB\nVmSize:\t  204800 kB\n"
                               "VmLck:\t       0 kB\nVmData:\t   10240 kB\nVmStk:\t  132 kB\n";
    const auto [size, data] = lim::parse_vm_status(status);
    CHECK(size == 204800ULL << 10);
    CHECK(data == 10240ULL << 10);
    CHECK(lim::parse_vm_status("Name:\tx\n") == std::pair<std::uint64_t, std::uint64_t>{0, 0});
}

TEST_CASE("cgroup_limit_files lists the cgroup and its ancestors, v2 and v1",
          "[resources][limits]") {
    const std::string v2 = "0::/user.slice/job-7.scope\n";
    CHECK(lim::cgroup_limit_files(v2, "/cg", "/cg/memory") ==
          std::vector<std::string>{"/cg/user.slice/job-7.scope/memory.max",
                                   "/cg/user.slice/memory.max",
                                   "/cg/memory.max"});
    const std::string v1 = "9:name=systemd:/\n5:cpu,cpuacct:/x\n4:memory:/box/abc\n0::/\n";
    CHECK(lim::cgroup_limit_files(v1, "/cg", "/cg/memory") ==
          std::vector<std::string>{"/cg/memory/box/abc/memory.limit_in_bytes",
                                   "/cg/memory/box/memory.limit_in_bytes",
                                   "/cg/memory/memory.limit_in_bytes",
                                   "/cg/memory.max"});
    const std::string joined = "3:blkio,memory:/j\n";
    CHECK(lim::cgroup_limit_files(joined, "/r", "/m") ==
          std::vector<std::string>{"/m/j/memory.limit_in_bytes", "/m/memory.limit_in_bytes"});
    CHECK(lim::cgroup_limit_files("", "/r", "/m").empty());
}

TEST_CASE("smallest_limit takes the smallest limit and names it", "[resources][limits]") {
    lim::LimitFacts f;
    f.physical = 24 * kGiBLimits;
    SECTION("nothing set: physical memory") {
        const ioattn::MemoryLimit m = lim::smallest_limit(f);
        CHECK(m.bytes == 24 * kGiBLimits);
        CHECK(m.source == "physical memory");
    }
    SECTION("RLIMIT_AS less the address space in use") {
        f.rlimit_as = 16 * kGiBLimits;
        f.vm_size = kGiBLimits;
        const ioattn::MemoryLimit m = lim::smallest_limit(f);
        CHECK(m.bytes == 15 * kGiBLimits);
        CHECK(names(m.source, "RLIMIT_AS"));
        CHECK(names(m.source, "ulimit -v"));
        CHECK(names(m.source, std::to_string(16 * kGiBLimits)));
    }
    SECTION("RLIMIT_AS already exhausted leaves nothing") {
        f.rlimit_as = kGiBLimits;
        f.vm_size = 2 * kGiBLimits;
        CHECK(lim::smallest_limit(f).bytes == 0);
    }
    SECTION("RLIMIT_DATA below RLIMIT_AS") {
        f.rlimit_as = 16 * kGiBLimits;
        f.rlimit_data = 8 * kGiBLimits;
        f.vm_size = 3 * kGiBLimits;
        f.vm_data = kGiBLimits;
        const ioattn::MemoryLimit m = lim::smallest_limit(f);
        CHECK(m.bytes == 7 * kGiBLimits);
        CHECK(names(m.source, "RLIMIT_DATA"));
    }
    SECTION("a cgroup limit below the rest names its file") {
        f.rlimit_as = 16 * kGiBLimits;
        f.cgroups = {{"/cg/a/memory.max", 6 * kGiBLimits}, {"/cg/memory.max", 4 * kGiBLimits}};
        const ioattn::MemoryLimit m = lim::smallest_limit(f);
        CHECK(m.bytes == 4 * kGiBLimits);
        CHECK(m.source == "cgroup memory limit /cg/memory.max");
    }
}
