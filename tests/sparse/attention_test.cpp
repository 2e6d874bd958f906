// Tests of the entry point (sparse/include/ioattn/attention.hpp; attention_plan.cpp,
// attention.cpp): the plan it reports is the libraries' selection and tiling, the run is
// bitwise the dispatcher's run of that plan, counted I/O equals the closed form and the dry
// run, a too-small M names the smallest M that fits (which does fit), results do not depend on
// options.threads, and every documented throw.

#include "kernel_case.hpp"

#include <ioattn/attention.hpp>
#include <ioattn/dense.hpp>
#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/io_cost.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <vector>

using ioattn::AttentionOptions;
using ioattn::AttentionPlan;
using ioattn::InvalidArgument;
using ioattn::IoCounter;
using ioattn::MemoryModel;
using ioattn::NullCounter;
using ioattn::Pass;
using ioattn::Problem;
using ioattn::Schedule;
using ioattn::Select;
using ioattn::Structure;
using ioattn::Tiling;
using ioattn::sparse::Support;
using ioattn::sparse::test::Case;

namespace {

Problem shape(std::int64_t n_q, std::int64_t n_k, bool causal = false) {
    Problem p = ioattn::sparse::test::kernel_shape(2, n_q, n_k, 8);
    p.causal = causal;
    return p.resolved();
}

AttentionOptions with(std::optional<Schedule> s, std::int64_t m, Select select = Select::cost) {
    AttentionOptions o;
    o.schedule = s;
    o.memory = MemoryModel{m};
    o.select = select;
    return o;
}

/// Runs `pass` of the entry point on a fresh case (the backward after a reference forward).
template <typename T>
Case<T> run_entry(const Problem& p,
                  Pass pass,
                  const Structure<T>& st,
                  const AttentionOptions& o,
                  ioattn::AttentionReport* report = nullptr) {
    Case<T> c(p, 5);
    if (pass == Pass::backward) {
        if (st.support != nullptr)
            ioattn::sparse::forward_reference(c.forward(), *st.support);
        else
            ioattn::dense::forward_reference(c.forward());
    }
    const auto r = pass == Pass::forward ? ioattn::attention(c.forward(), st, o)
                                         : ioattn::attention_backward(c.backward(), st, o);
    if (report != nullptr)
        *report = r;
    return c;
}

/// The same plan through the libraries' dispatchers.
template <typename T>
Case<T>
run_dispatcher(const Problem& p, Pass pass, const Structure<T>& st, const AttentionPlan& plan) {
    Case<T> c(p, 5);
    NullCounter n;
    if (pass == Pass::forward) {
        if (plan.variants) // the structure dispatcher's plan
            ioattn::sparse::forward(c.forward(), *st.support, *plan.variants, plan.memory, n);
        else if (st.support != nullptr)
            ioattn::sparse::forward(c.forward(), *st.support, plan.tiling, plan.memory, n);
        else
            ioattn::dense::forward(c.forward(), plan.tiling, plan.memory, n);
        return c;
    }
    if (st.support != nullptr) {
        ioattn::sparse::forward_reference(c.forward(), *st.support);
        if (plan.variants)
            ioattn::sparse::backward(c.backward(), *st.support, *plan.variants, plan.memory, n);
        else
            ioattn::sparse::backward(c.backward(), *st.support, plan.tiling, plan.memory, n);
    } else {
        ioattn::dense::forward_reference(c.forward());
        ioattn::dense::backward(c.backward(), plan.tiling, plan.memory, n);
    }
    return c;
}

template <typename T>
void require_same_outputs(const Case<T>& a, const Case<T>& b) {
    CHECK(a.o == b.o);
    CHECK(a.lse == b.lse);
    CHECK(a.d_q == b.d_q);
    CHECK(a.d_k == b.d_k);
    CHECK(a.d_v == b.d_v);
}

} // namespace

TEST_CASE("attention runs the plan it reports, bitwise as the dispatchers", "[sparse][attention]") {
    const Support window = ioattn::sparse::parse_pattern("window:3+global:1", 23, 19, 1);
    const Pass pass = GENERATE(Pass::forward, Pass::backward);
    const std::optional<Schedule> schedule =
        GENERATE(std::optional<Schedule>{}, Schedule::fused, Schedule::materialized);
    const bool sparse = GENERATE(false, true);
    CAPTURE(pass, schedule.has_value(), sparse);
    const Problem p = shape(23, 19, !sparse);
    Structure<float> st;
    st.support = sparse ? &window : nullptr;
    const AttentionOptions o = with(schedule, 1500); // the smallest fused backward: 1263
    const AttentionPlan plan = ioattn::plan_attention(p, pass, st, o);
    CHECK(plan.problem == p);
    CHECK(plan.pass == pass);
    CHECK(plan.sparse == sparse);
    CHECK(plan.memory.fast_words == 1500);
    CHECK(plan.selected_by.has_value() == !schedule.has_value());
    CHECK(plan.tiling.schedule == plan.schedule);
    const Tiling tuned = sparse ? ioattn::sparse::tuned_tiling(plan.schedule, plan.memory, p, pass)
                                : Tiling::tuned(plan.schedule, plan.memory, p, pass);
    if (plan.variants) { // the dispatcher's tile height: the tuned one, one less or half
        CHECK(plan.tiling.cols == tuned.cols);
        CHECK((plan.tiling.rows == tuned.rows || plan.tiling.rows == tuned.rows - 1 ||
               plan.tiling.rows == tuned.rows / 2));
    } else {
        CHECK(plan.tiling == tuned);
    }
    CHECK(plan.z_qk == (sparse ? window.z_qk() : p.allowed_pairs()));
    CHECK(plan.z_input == ioattn::sparse::z_input(p, pass));
    // the structure dispatcher plans every sparse fused call over dense operands
    CHECK(plan.variants.has_value() == (sparse && plan.schedule == Schedule::fused));
    if (plan.variants)
        CHECK(plan.variants->tile == plan.tiling);
    if (schedule)
        CHECK(plan.schedule == *schedule);
    ioattn::AttentionReport report;
    const Case<float> got = run_entry(p, pass, st, o, &report);
    CHECK(report.plan.tiling == plan.tiling);
    CHECK_FALSE(report.io.has_value());
    require_same_outputs(got, run_dispatcher(p, pass, st, plan));
}

TEST_CASE("auto selects as the libraries' selectors", "[sparse][attention]") {
    const Support band = ioattn::sparse::parse_pattern("window:2", 40, 40, 1);
    const Problem p = shape(40, 40);
    const Select select = GENERATE(Select::cost, Select::theory);
    for (const std::int64_t m : {70, 150, 400, 2000, 20000}) {
        CAPTURE(m, select);
        const MemoryModel mem{m};
        const auto plan = [&](Pass pass, const Support* s) {
            Structure<float> st;
            st.support = s;
            return ioattn::plan_attention(p, pass, st, with(std::nullopt, m, select)).schedule;
        };
        CHECK(plan(Pass::forward, nullptr) == ioattn::select_schedule(p, mem, select));
        CHECK(plan(Pass::backward, nullptr) ==
              ioattn::select_schedule(p, mem, select, Pass::backward));
        const std::int64_t z_in = ioattn::sparse::z_input(p, Pass::forward);
        CHECK(plan(Pass::forward, &band) ==
              ioattn::sparse::select_schedule(p, band, mem, select, z_in));
        // the sparse backward: cost compares the exact words; theory the crossover
        const auto f = Tiling::try_for_memory(
            Schedule::fused, mem, p, Pass::backward, ioattn::Kernels::sparse);
        const auto t = Tiling::try_for_memory(
            Schedule::materialized, mem, p, Pass::backward, ioattn::Kernels::sparse);
        Schedule want = f ? Schedule::fused : Schedule::materialized;
        if (f && t) {
            const std::int64_t zb = ioattn::sparse::z_input(p, Pass::backward);
            const bool fused =
                select == Select::theory
                    ? static_cast<double>(m) >= ioattn::sparse::crossover(band, zb)
                    : ioattn::sparse::io_cost_backward_fused(p, band, *f).total() <=
                          ioattn::sparse::io_cost_backward_materialized(p, band, *t).total();
            want = fused ? Schedule::fused : Schedule::materialized;
        }
        CHECK(plan(Pass::backward, &band) == want);
    }
}

TEST_CASE("counted I/O equals the closed form and the dry run", "[sparse][attention]") {
    const Support s = ioattn::sparse::parse_pattern("bigbird:2:1:2", 21, 21, 3);
    const Pass pass = GENERATE(Pass::forward, Pass::backward);
    const Schedule schedule = GENERATE(Schedule::fused, Schedule::materialized);
    const bool sparse = GENERATE(false, true);
    const bool tuned = GENERATE(false, true);
    CAPTURE(pass, schedule, sparse, tuned);
    const Problem p = shape(21, 21);
    Structure<double> st;
    st.support = sparse ? &s : nullptr;
    AttentionOptions o = with(schedule, 1500);
    o.tuned = tuned;
    o.count_io = true;
    ioattn::AttentionReport counted;
    (void)run_entry(p, pass, st, o, &counted);
    REQUIRE(counted.io.has_value());
    REQUIRE(counted.closed_form.has_value());
    CHECK(*counted.io == *counted.closed_form);
    CHECK(counted.io->peak <= 1500);
    if (!tuned)
        CHECK(counted.plan.tiling ==
              Tiling::for_memory(schedule,
                                 MemoryModel{1500},
                                 p,
                                 pass,
                                 sparse ? ioattn::Kernels::sparse : ioattn::Kernels::dense));
    o.objective = ioattn::Objective::speed; // the plan the run counted
    const auto dry = ioattn::io_count(p, pass, st, o);
    CHECK(*dry.io == *counted.io);
    CHECK(*dry.closed_form == *counted.closed_form);
    o.objective.reset(); // io_count's own: the fewest words, its walk equal to its closed form
    const auto fewest = ioattn::io_count(p, pass, st, o);
    CHECK(fewest.plan.objective == ioattn::Objective::io);
    CHECK(fewest.plan.planned_for <= 1500);
    CHECK(*fewest.io == *fewest.closed_form);
    CHECK(fewest.io->peak <= fewest.plan.planned_for);
    // a caller's counter receives the same counts
    IoCounter mine(1500);
    o.count_io = false;
    o.counter = &mine;
    ioattn::AttentionReport into;
    (void)run_entry(p, pass, st, o, &into);
    CHECK(mine.report() == *counted.io);
    CHECK(*into.io == *counted.io);
}

TEST_CASE("the materialized plan takes the largest tiles for scattered rows, exactly",
          "[sparse][attention]") {
    const std::int64_t n = 640, m = 1 << 17; // Tiling::for_memory: squares wider than 64
    const Problem p = shape(n, n);
    const Pass pass = GENERATE(Pass::forward, Pass::backward);
    CAPTURE(pass);
    const MemoryModel mem{m};
    const Tiling tuned = ioattn::sparse::tuned_tiling(Schedule::materialized, mem, p, pass);
    const Tiling largest =
        Tiling::for_memory(Schedule::materialized, mem, p, pass, ioattn::Kernels::sparse);
    REQUIRE(largest.rows > tuned.rows);
    for (const std::string spec : {"random:0.02", "strided:32", "window:40", "block:64:0.2"}) {
        CAPTURE(spec);
        const Support s = ioattn::sparse::parse_pattern(spec, n, n, 7);
        Structure<float> st;
        st.support = &s;
        AttentionOptions o = with(Schedule::materialized, m);
        o.count_io = true;
        ioattn::AttentionReport r;
        const Case<float> got = run_entry(p, pass, st, o, &r);
        // scattered rows (most 64 x 64 tiles under 1/4 full) take the largest squares
        const bool scattered = spec == "random:0.02" || spec == "strided:32";
        CHECK(r.plan.tiling == (scattered ? largest : tuned));
        CHECK(r.plan.tiling ==
              ioattn::sparse::materialized_tiling(s, mem, p, pass)); // as the library plans it
        REQUIRE(r.io.has_value());
        CHECK(*r.io == *r.closed_form);
        CHECK(r.io->peak <= m);
        require_same_outputs(got, run_dispatcher(p, pass, st, r.plan));
    }
}

TEST_CASE("a too-small M names the smallest M that fits", "[sparse][attention]") {
    const Pass pass = GENERATE(Pass::forward, Pass::backward);
    const std::optional<Schedule> schedule =
        GENERATE(std::optional<Schedule>{}, Schedule::fused, Schedule::materialized);
    CAPTURE(pass, schedule.has_value());
    const Problem p = shape(30, 30);
    const std::int64_t need = ioattn::smallest_memory(p, pass, schedule);
    REQUIRE(need > 1);
    AttentionOptions o = with(schedule, need - 1);
    o.where = "caller";
    const Structure<float> st;
    CHECK_THROWS_WITH(ioattn::plan_attention(p, pass, st, o),
                      Catch::StartsWith("caller: M = " + std::to_string(need - 1) + " words") &&
                          Catch::Contains("(needs M >= " + std::to_string(need) + ")"));
    CHECK_THROWS_AS(ioattn::plan_attention(p, pass, st, o), InvalidArgument);
    o.memory = MemoryModel{need};
    CHECK_NOTHROW(ioattn::plan_attention(p, pass, st, o));
    // under auto the smaller of the two schedules' smallest M
    if (!schedule)
        CHECK(need == std::min(ioattn::smallest_memory(p, pass, Schedule::fused),
                               ioattn::smallest_memory(p, pass, Schedule::materialized)));
}

TEST_CASE("attention results do not depend on options.threads", "[sparse][attention]") {
    const Support s = ioattn::sparse::parse_pattern("random:0.3", 50, 50, 2);
    const Pass pass = GENERATE(Pass::forward, Pass::backward);
    const bool sparse = GENERATE(false, true);
    Structure<float> st;
    st.support = sparse ? &s : nullptr;
    AttentionOptions o = with(Schedule::fused, 1500);
    o.threads = 1;
    const Case<float> one = run_entry(shape(50, 50), pass, st, o);
    o.threads = 2;
    require_same_outputs(one, run_entry(shape(50, 50), pass, st, o));
}

TEST_CASE("the default M is the per-core L2 in words of the working type", "[sparse][attention]") {
    const Problem p = shape(8, 8);
    CHECK(ioattn::plan_attention(p, Pass::forward, Structure<float>{}).memory ==
          MemoryModel::per_core_l2(4));
    CHECK(ioattn::plan_attention(p, Pass::forward, Structure<double>{}).memory ==
          MemoryModel::per_core_l2(8));
}

TEST_CASE("a cache size plans for MemoryModel::for_cache of the working type",
          "[sparse][attention]") {
    const Problem p = shape(40, 40);
    AttentionOptions o;
    o.cache_bytes = 256 * 1024;
    o.where = "caller";
    CHECK(ioattn::plan_attention(p, Pass::forward, Structure<float>{}, o).memory ==
          MemoryModel::for_cache(256 * 1024, 4));
    CHECK(ioattn::plan_attention(p, Pass::backward, Structure<double>{}, o).memory ==
          MemoryModel{256 * 1024 / 8 / ioattn::kCacheSlack});
    // a cache too small for a fused tiling names the smallest M like a given M
    o.cache_bytes = 2 * 4 * (ioattn::smallest_memory(p, Pass::forward, Schedule::fused) - 1);
    o.schedule = Schedule::fused;
    CHECK_THROWS_WITH(ioattn::plan_attention(p, Pass::forward, Structure<float>{}, o),
                      Catch::Contains("needs M >= "));
    o.schedule.reset();
    o.cache_bytes = 7;
    CHECK_THROWS_WITH(ioattn::plan_attention(p, Pass::forward, Structure<float>{}, o),
                      Catch::StartsWith("caller: a cache of 7 bytes leaves M = 0 words"));
    o.cache_bytes = 1 << 20;
    o.memory = MemoryModel{1000};
    CHECK_THROWS_AS(ioattn::plan_attention(p, Pass::forward, Structure<float>{}, o),
                    InvalidArgument);
}

TEST_CASE("a sparse plan's bound counts only the used inputs of its pass", "[sparse][attention]") {
    // block:4:0.2 leaves rows and keys without any allowed pair
    const Support s = ioattn::sparse::parse_pattern("block:4:0.2", 32, 32, 4);
    const Pass pass = GENERATE(Pass::forward, Pass::backward);
    const Problem p = shape(32, 32);
    Structure<float> st;
    st.support = &s;
    const AttentionPlan plan = ioattn::plan_attention(p, pass, st, with(std::nullopt, 4000));
    const std::int64_t used = ioattn::sparse::used_input_words(p, s, pass);
    const ioattn::Bound want =
        ioattn::sparse::bound(p, s, MemoryModel{4000}, plan.z_input, used, pass);
    CHECK(plan.bound.compulsory == want.compulsory);
    CHECK(plan.bound.leading == want.leading);
    CHECK(plan.bound.regime == want.regime);
    CHECK(used < ioattn::sparse::used_input_words(p, ioattn::sparse::pattern_dense(32, 32), pass));
}

TEST_CASE("attention's documented throws", "[sparse][attention]") {
    const Problem p = shape(12, 10);
    const Support s = ioattn::sparse::pattern_window(12, 10, 2);
    const Support wrong = ioattn::sparse::pattern_window(10, 12, 2);
    Structure<float> st;
    st.support = &s;
    Problem causal = p;
    causal.causal = true;
    CHECK_THROWS_AS(ioattn::plan_attention(causal, Pass::forward, st), InvalidArgument);
    st.support = &wrong;
    CHECK_THROWS_WITH(ioattn::plan_attention(p, Pass::forward, st),
                      Catch::Contains("support is 10 x 12"));
    // sparse operands without a support, and of the wrong shape
    const std::vector<float> dense(static_cast<std::size_t>(2 * 4 * 12 * 8), 1.0F);
    const auto rows =
        ioattn::sparse::SparseRows<float>::from_dense_threshold(dense, 2 * 4 * 12, 8, 0.0F);
    Structure<float> inputs;
    inputs.inputs.q = &rows;
    CHECK_THROWS_WITH(ioattn::plan_attention(p, Pass::forward, inputs),
                      Catch::Contains("sparse operands need a support"));
    inputs.support = &s;
    CHECK_NOTHROW(ioattn::plan_attention(p, Pass::forward, inputs));
    inputs.inputs.q = nullptr;
    inputs.inputs.k = &rows; // K has 2 * 2 * 10 rows
    CHECK_THROWS_WITH(ioattn::plan_attention(p, Pass::forward, inputs),
                      Catch::Contains("sparse K is 96 x 8"));
    // counting the reference schedule, and a plan of another pass
    Case<float> c(p, 1);
    AttentionOptions o = with(Schedule::reference, 1000);
    o.count_io = true;
    CHECK_THROWS_AS(ioattn::attention(c.forward(), Structure<float>{}, o), InvalidArgument);
    CHECK_THROWS_AS(ioattn::io_count(p, Pass::forward, Structure<float>{}, o), InvalidArgument);
    const AttentionPlan backward = ioattn::plan_attention(p, Pass::backward, Structure<float>{});
    CHECK_THROWS_WITH(ioattn::attention(c.forward(), Structure<float>{}, backward),
                      Catch::Contains("another problem, pass or structure"));
    // bad views name the caller
    auto bad = c.forward();
    bad.q.rows = 11;
    AttentionOptions named;
    named.where = "caller";
    CHECK_THROWS_WITH(ioattn::attention(bad, Structure<float>{}, named),
                      Catch::StartsWith("caller: q has shape"));
}

TEST_CASE("attention forces each variant of the structure dispatcher, same answer, exact I/O",
          "[sparse][attention][variants]") {
    const Support s = ioattn::sparse::parse_pattern("random:0.2+window:2", 40, 36, 4);
    const Pass pass = GENERATE(Pass::forward, Pass::backward);
    const Problem p = shape(40, 36);
    Structure<double> st;
    st.support = &s;
    AttentionOptions base = with(Schedule::fused, 1 << 16);
    const Case<double> want = run_entry(p, pass, st, base, nullptr);
    for (const auto v : {ioattn::sparse::Variant::tile,
                         ioattn::sparse::Variant::element,
                         ioattn::sparse::Variant::split,
                         ioattn::sparse::Variant::permuted}) {
        CAPTURE(pass, ioattn::sparse::to_string(v));
        AttentionOptions o = base;
        o.variant = v;
        o.count_io = true;
        ioattn::AttentionReport report;
        const Case<double> got = run_entry(p, pass, st, o, &report);
        REQUIRE(report.plan.variants.has_value());
        if (v != ioattn::sparse::Variant::split) // a forced split cuts by fill: may be one part
            CHECK(report.plan.variants->variant == v);
        CHECK(*report.io == *report.closed_form);
        CHECK(*ioattn::io_count(p, pass, st, o).io == *report.io);
        for (std::size_t i = 0; i < want.o.size(); ++i)
            CHECK(got.o[i] == Approx(want.o[i]).margin(1e-12));
        if (pass == Pass::backward)
            for (std::size_t i = 0; i < want.d_q.size(); ++i)
                CHECK(got.d_q[i] == Approx(want.d_q[i]).margin(1e-12));
    }
    // a forced variant needs the fused schedule and a support
    AttentionOptions bad = base;
    bad.variant = ioattn::sparse::Variant::element;
    bad.schedule = Schedule::materialized;
    CHECK_THROWS_AS(ioattn::plan_attention(p, pass, st, bad), ioattn::InvalidArgument);
    bad.schedule = Schedule::fused;
    CHECK_THROWS_AS(ioattn::plan_attention(p, pass, Structure<double>{}, bad),
                    ioattn::InvalidArgument);
}
