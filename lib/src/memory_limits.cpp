// ioattn::detail::machine_memory_limit and its parsers (memory_limits.hpp): the smallest of
// physical memory, RLIMIT_AS and RLIMIT_DATA less what the process maps, and the cgroup limits.

#include "memory_limits.hpp"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>

#include <sys/resource.h>
#include <unistd.h>

namespace ioattn::detail {

namespace {

/// A limit at or past 2^62 bytes is no limit (cgroup v1 writes PAGE_COUNTER_MAX pages).
constexpr std::uint64_t kUnlimitedFrom = std::uint64_t{1} << 62;

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
        s.remove_prefix(1);
    while (!s.empty() &&
           (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r'))
        s.remove_suffix(1);
    return s;
}

/// The whole file, "" when it cannot be read.
std::string file_text(const std::string& path) {
    std::ifstream in(path);
    if (!in)
        return {};
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

/// "/a/b" -> {"/a/b", "/a", ""}: the cgroup and its ancestors, innermost first.
std::vector<std::string> ancestors(std::string_view path) {
    std::vector<std::string> out;
    std::string p(trim(path));
    while (!p.empty() && p.back() == '/')
        p.pop_back();
    for (;;) {
        out.push_back(p);
        if (p.empty())
            break;
        const std::size_t slash = p.rfind('/');
        p.resize(slash == std::string::npos ? 0 : slash);
    }
    return out;
}

std::string
rlimit_source(const char* name, const char* shell, std::uint64_t limit, std::uint64_t used) {
    return std::string(name) + " (" + shell + ") of " + std::to_string(limit) + " bytes (" +
           format_bytes(limit) + "), " + format_bytes(used) + " of it in use";
}

/// The soft limit of `resource` in bytes, kNoLimit when unlimited or unreadable.
std::uint64_t rlimit_bytes(decltype(RLIMIT_AS) resource) {
    rlimit r{};
    if (::getrlimit(resource, &r) != 0 || r.rlim_cur == RLIM_INFINITY)
        return kNoLimit;
    return static_cast<std::uint64_t>(r.rlim_cur);
}

} // namespace

std::uint64_t parse_limit_line(std::string_view text) {
    const std::string_view line = trim(text.substr(0, text.find('\n')));
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), v);
    if (ec != std::errc() || end != line.data() + line.size() || line.empty())
        return kNoLimit;
    return v >= kUnlimitedFrom ? kNoLimit : v;
}

std::pair<std::uint64_t, std::uint64_t> parse_vm_status(std::string_view status) {
    const auto field = [&](std::string_view name) -> std::uint64_t {
        std::size_t at = 0;
        while ((at = status.find(name, at)) != std::string_view::npos) {
            if (at == 0 || status[at - 1] == '\n') {
                std::string_view rest = status.substr(at + name.size());
                rest = trim(rest.substr(0, rest.find('\n')));
                std::uint64_t kib = 0;
                const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), kib);
                if (ec != std::errc() || end == rest.data())
                    return 0;
                return kib > (kNoLimit >> 10) ? kNoLimit : kib << 10;
            }
            at += name.size();
        }
        return 0;
    };
    return {field("VmSize:"), field("VmData:")};
}

std::vector<std::string> cgroup_limit_files(std::string_view proc_self_cgroup,
                                            std::string_view v2_root,
                                            std::string_view v1_root) {
    std::vector<std::string> files;
    const auto add = [&](std::string_view root, const std::string& dir, const char* name) {
        std::string f = std::string(root) + dir + "/" + name;
        for (const std::string& g : files)
            if (g == f)
                return;
        files.push_back(std::move(f));
    };
    std::string_view rest = proc_self_cgroup;
    while (!rest.empty()) {
        const std::string_view line = rest.substr(0, rest.find('\n'));
        rest.remove_prefix(std::min(rest.size(), line.size() + 1));
        // hierarchy-ID:controller-list:cgroup-path
        const std::size_t c1 = line.find(':');
        const std::size_t c2 = c1 == std::string_view::npos ? c1 : line.find(':', c1 + 1);
        if (c2 == std::string_view::npos)
            continue;
        const std::string_view id = line.substr(0, c1);
        const std::string_view controllers = line.substr(c1 + 1, c2 - c1 - 1);
        const std::string_view path = line.substr(c2 + 1);
        if (id == "0" && controllers.empty()) {
            for (const std::string& dir : ancestors(path))
                add(v2_root, dir, "memory.max");
            continue;
        }
        std::string_view list = controllers;
        bool memory = false;
        while (!list.empty() && !memory) {
            const std::string_view one = list.substr(0, list.find(','));
            memory = one == "memory";
            list.remove_prefix(std::min(list.size(), one.size() + 1));
        }
        if (memory)
            for (const std::string& dir : ancestors(path))
                add(v1_root, dir, "memory.limit_in_bytes");
    }
    return files;
}

MemoryLimit smallest_limit(const LimitFacts& facts) {
    MemoryLimit m{facts.physical, "physical memory"};
    const auto left = [](std::uint64_t limit, std::uint64_t used) {
        return used >= limit ? 0 : limit - used;
    };
    if (facts.rlimit_as != kNoLimit && left(facts.rlimit_as, facts.vm_size) < m.bytes)
        m = {left(facts.rlimit_as, facts.vm_size),
             rlimit_source(
                 "address-space limit RLIMIT_AS", "ulimit -v", facts.rlimit_as, facts.vm_size)};
    if (facts.rlimit_data != kNoLimit && left(facts.rlimit_data, facts.vm_data) < m.bytes)
        m = {left(facts.rlimit_data, facts.vm_data),
             rlimit_source(
                 "data-segment limit RLIMIT_DATA", "ulimit -d", facts.rlimit_data, facts.vm_data)};
    for (const auto& [file, limit] : facts.cgroups)
        if (limit < m.bytes)
            m = {limit, "cgroup memory limit " + file};
    return m;
}

MemoryLimit machine_memory_limit() {
    static const LimitFacts fixed = [] {
        LimitFacts f;
        const long pages = ::sysconf(_SC_PHYS_PAGES);
        const long page = ::sysconf(_SC_PAGE_SIZE);
        if (pages > 0 && page > 0)
            f.physical = static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page);
        for (std::string& file : cgroup_limit_files(
                 file_text("/proc/self/cgroup"), "/sys/fs/cgroup", "/sys/fs/cgroup/memory")) {
            const std::uint64_t limit = parse_limit_line(file_text(file));
            if (limit != kNoLimit)
                f.cgroups.emplace_back(std::move(file), limit);
        }
        return f;
    }();
    LimitFacts f = fixed;
    f.rlimit_as = rlimit_bytes(RLIMIT_AS);
    f.rlimit_data = rlimit_bytes(RLIMIT_DATA);
    if (f.rlimit_as != kNoLimit || f.rlimit_data != kNoLimit)
        std::tie(f.vm_size, f.vm_data) = parse_vm_status(file_text("/proc/self/status"));
    return smallest_limit(f);
}

} // namespace ioattn::detail
