#pragma once
// A family of structures (ioattn::sparse::Support::family): the spec and shape
// support_cache::pattern draws supports from, whatever their seed. The variant planner
// (plan/variant_plan.cpp) keeps here, per plan key, the decision it took for one structure of
// the family (its tile height and how its pairs split), and plans the family's next structure
// by it instead of pricing every candidate again: a structure drawn afresh from a seeded spec
// (a random mask per training step) is, for the planner's prices, the same structure again.
// Thread-safe (a mutex); at most kKept decisions, the least recently used dropped.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace ioattn::sparse {

struct SupportFamily {
    static constexpr std::size_t kKept = 16;

    /// The decision kept for `key`, null when there is none; a hit becomes the most recent.
    std::shared_ptr<const void> find(const std::string& key) {
        const std::lock_guard<std::mutex> lock(mutex);
        for (auto it = decisions.begin(); it != decisions.end(); ++it)
            if (it->first == key) {
                auto entry = std::move(*it);
                decisions.erase(it);
                decisions.push_back(std::move(entry));
                return decisions.back().second;
            }
        return nullptr;
    }

    /// Keeps `decision` for `key` (replacing one kept), dropping the least recent past kKept.
    void keep(const std::string& key, std::shared_ptr<const void> decision) {
        const std::lock_guard<std::mutex> lock(mutex);
        for (auto it = decisions.begin(); it != decisions.end(); ++it)
            if (it->first == key) {
                decisions.erase(it);
                break;
            }
        decisions.emplace_back(key, std::move(decision));
        if (decisions.size() > kKept)
            decisions.erase(decisions.begin());
    }

    std::mutex mutex;
    std::vector<std::pair<std::string, std::shared_ptr<const void>>> decisions; ///< LRU first
};

namespace detail {

/// Plans made from a family's decision since the process started or support_cache::clear().
inline std::atomic<std::uint64_t>& family_plans() {
    static std::atomic<std::uint64_t> count{0};
    return count;
}

} // namespace detail

} // namespace ioattn::sparse
