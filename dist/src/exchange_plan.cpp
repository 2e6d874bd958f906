// ioattn::dist::ExchangePlan: who sends which key rows to whom in the sparse exchange, from the
// support alone, and the local support over the rows a rank ends up holding.

#include <ioattn/dist/sparse_exchange.hpp>
#include <ioattn/error.hpp>

#include <algorithm>
#include <string>

namespace ioattn::dist {

namespace {

void check_plan_args(const sparse::Support& support,
                     const Sharding& queries,
                     const Sharding& keys,
                     int rank) {
    constexpr const char* kWhere = "ioattn::dist::ExchangePlan::build";
    if (support.n_q() != queries.n() || support.n_k() != keys.n())
        throw InvalidArgument(std::string(kWhere) + ": the support is " +
                              std::to_string(support.n_q()) + " x " +
                              std::to_string(support.n_k()) + ", the shardings cover " +
                              std::to_string(queries.n()) + " x " + std::to_string(keys.n()));
    if (queries.ranks() != keys.ranks() || rank < 0 || rank >= keys.ranks())
        throw InvalidArgument(std::string(kWhere) + ": rank " + std::to_string(rank) + " of " +
                              std::to_string(queries.ranks()) + " query and " +
                              std::to_string(keys.ranks()) + " key ranks");
}

} // namespace

ExchangePlan ExchangePlan::build(const sparse::Support& support,
                                 const Sharding& queries,
                                 const Sharding& keys,
                                 int rank) {
    check_plan_args(support, queries, keys, rank);
    const auto ranks = static_cast<std::size_t>(keys.ranks());
    ExchangePlan plan;
    plan.receive_rows.resize(ranks);
    plan.send_rows.resize(ranks);
    // --- receive: the keys of other ranks this rank's queries see, per owner, ascending ---
    std::vector<char> seen(static_cast<std::size_t>(keys.n()), 0);
    for (const Range& q : queries.ranges(rank))
        for (std::int64_t i = q.begin; i < q.end; ++i)
            for (const std::int64_t j : support.row(i))
                seen[static_cast<std::size_t>(j)] = 1;
    for (std::int64_t j = 0; j < keys.n(); ++j)
        if (seen[static_cast<std::size_t>(j)] != 0 && keys.owner(j) != rank)
            plan.receive_rows[static_cast<std::size_t>(keys.owner(j))].push_back(j);
    // --- send: this rank's keys each other rank's queries see ---
    std::vector<int> mark(static_cast<std::size_t>(keys.n()), -1);
    for (int s = 0; s < keys.ranks(); ++s) {
        if (s == rank)
            continue;
        auto& rows = plan.send_rows[static_cast<std::size_t>(s)];
        for (const Range& q : queries.ranges(s))
            for (std::int64_t i = q.begin; i < q.end; ++i)
                for (const std::int64_t j : support.row(i)) {
                    int& m = mark[static_cast<std::size_t>(j)];
                    if (m != s && keys.owner(j) == rank) {
                        m = s;
                        rows.push_back(j);
                    }
                }
        std::sort(rows.begin(), rows.end());
    }
    // --- the local key set and the local support over it ---
    for (const Range& k : keys.ranges(rank))
        for (std::int64_t j = k.begin; j < k.end; ++j)
            plan.keys.push_back(j);
    for (const auto& rows : plan.receive_rows)
        plan.keys.insert(plan.keys.end(), rows.begin(), rows.end());
    std::sort(plan.keys.begin(), plan.keys.end());
    std::vector<std::int64_t> offsets{0};
    std::vector<std::int64_t> cols;
    for (const Range& q : queries.ranges(rank))
        for (std::int64_t i = q.begin; i < q.end; ++i) {
            for (const std::int64_t j : support.row(i))
                cols.push_back(std::lower_bound(plan.keys.begin(), plan.keys.end(), j) -
                               plan.keys.begin());
            offsets.push_back(static_cast<std::int64_t>(cols.size()));
        }
    plan.support = sparse::Support(queries.rows(rank),
                                   static_cast<std::int64_t>(plan.keys.size()),
                                   std::move(offsets),
                                   std::move(cols));
    return plan;
}

std::vector<int> ExchangePlan::peers() const {
    std::vector<int> p;
    for (std::size_t s = 0; s < receive_rows.size(); ++s)
        if (!receive_rows[s].empty() || !send_rows[s].empty())
            p.push_back(static_cast<int>(s));
    return p;
}

} // namespace ioattn::dist
