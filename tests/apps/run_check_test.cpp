// The --check of `ioattn run --pattern` (apps/run_check.cpp): outputs a kernel got wrong fail
// it, whatever output they are (O, L, a row with no allowed key).

#include "run_check.hpp"

#include <ioattn/problem.hpp>
#include <ioattn/sparse/forward.hpp>
#include <ioattn/sparse/support.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <vector>

using ioattn::Problem;
using ioattn::app::check_json;
using ioattn::app::Data;
using ioattn::sparse::Support;

namespace {

/// 6 x 6: row i sees keys [0, i] except row 2, which sees none.
Support with_empty_row() {
    std::vector<std::int64_t> offsets{0}, cols;
    for (std::int64_t i = 0; i < 6; ++i) {
        for (std::int64_t j = 0; j <= i && i != 2; ++j)
            cols.push_back(j);
        offsets.push_back(static_cast<std::int64_t>(cols.size()));
    }
    return {6, 6, offsets, cols};
}

/// Data whose O and L are the sparse reference's, computed in float.
Data<float> reference_outputs(const Support& s) {
    Problem p;
    p.n_q = 6;
    p.n_k = 6;
    p.d = 4;
    p.d_v = 4;
    Data<float> data = ioattn::app::seeded_data<float>(p.resolved("test"), 17);
    ioattn::sparse::forward_reference(data.forward(), s);
    return data;
}

} // namespace

TEST_CASE("run --check: the reference's own outputs pass, any wrong output fails",
          "[apps][check]") {
    const Support s = with_empty_row();
    Data<float> data = reference_outputs(s);
    CHECK(check_json(data, &s, false)["passed"].get<bool>());
    SECTION("a wrong L (the naive computation writes its own)") {
        data.lse[4] += 0.5F;
        CHECK_FALSE(check_json(data, &s, false)["passed"].get<bool>());
    }
    SECTION("a nonzero O in the row with no allowed key (the math says 0)") {
        CHECK(data.o[2 * 4] == 0.0F);
        data.o[2 * 4 + 1] = 1.0F;
        CHECK_FALSE(check_json(data, &s, false)["passed"].get<bool>());
    }
    SECTION("a finite L in the row with no allowed key (the math says -inf)") {
        data.lse[2] = 0.0F;
        CHECK_FALSE(check_json(data, &s, false)["passed"].get<bool>());
    }
    SECTION("a wrong O in a row with keys") {
        data.o[5 * 4 + 3] += 0.25F;
        CHECK_FALSE(check_json(data, &s, false)["passed"].get<bool>());
    }
}
