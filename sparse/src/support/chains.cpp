// ioattn::sparse::detail::chain_links (see chains.hpp).

#include "support/chains.hpp"

#include <ioattn/parallel.hpp>

#include <algorithm>

namespace ioattn::sparse::detail {

std::shared_ptr<const std::vector<std::int64_t>> chain_links(const Support& s) {
    return std::static_pointer_cast<const std::vector<std::int64_t>>(
        s.cached_value("chain-links", [&] {
            const std::int64_t n_q = s.n_q();
            auto links =
                std::make_shared<std::vector<std::int64_t>>(static_cast<std::size_t>(n_q), 0);
            const std::int64_t step = 256;
            // a row of a declared run of equal rows or of a declared chain is linked uncompared
            // (block:64:0.1 at N = 16384: 27 million words compared)
            const RowRuns runs = s.row_runs(), chains = s.chain_runs();
            const auto declared = [&](std::int64_t i) { // rows i - 1, i in one run or chain
                return (runs.period > 1 && runs.one_run(i - 1, i + 1)) ||
                       (chains.period > 1 && chains.one_run(i - 1, i + 1));
            };
            parallel_for_tiles((n_q + step - 1) / step, [&](std::int64_t t, int) {
                for (std::int64_t i = std::max<std::int64_t>(1, t * step);
                     i < std::min(n_q, (t + 1) * step);
                     ++i) {
                    const auto before = s.row(i - 1), row = s.row(i);
                    if (declared(i)) {
                        (*links)[static_cast<std::size_t>(i)] =
                            static_cast<std::int64_t>(before.size());
                        continue;
                    }
                    const bool interval = !row.empty() && row.back() - row.front() + 1 ==
                                                              static_cast<std::int64_t>(row.size());
                    if (!interval && !before.empty() && before.size() <= row.size() &&
                        std::equal(before.begin(), before.end(), row.begin()))
                        (*links)[static_cast<std::size_t>(i)] =
                            static_cast<std::int64_t>(before.size());
                }
            });
            return std::shared_ptr<const std::vector<std::int64_t>>(std::move(links));
        }));
}

} // namespace ioattn::sparse::detail
