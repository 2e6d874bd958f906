// Tests of ioattn/ff/experiments.hpp: every experiment on small parameters passes, the
// negative controls fail as expected, results do not depend on the thread count, bad configs
// throw.

#include <ioattn/error.hpp>
#include <ioattn/ff/experiments.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>

using ioattn::InvalidArgument;
using namespace ioattn::ff;

namespace {

Config small() {
    Config c;
    c.n = 16;
    c.d = 4;
    c.trials = 2;
    c.seed = 3;
    return c;
}

} // namespace

TEST_CASE("every experiment passes on small parameters", "[ff][experiments]") {
    for (const std::string& name : experiment_names()) {
        const Result r = run_experiment(name, small());
        CAPTURE(name, r.first_failure, r.note);
        CHECK(r.name == name);
        CHECK(r.instances > 0);
        CHECK(r.failed == 0);
        CHECK(r.passed == r.instances);
        CHECK(r.ok());
        CHECK(r.first_failure.empty());
    }
}

TEST_CASE("lemma-4.6 reports slack and tightness", "[ff][experiments]") {
    const Result r = experiment_lemma46(small());
    REQUIRE_FALSE(std::isnan(r.min_slack));
    CHECK(r.min_slack >= 0);
    CHECK(r.max_tightness >= 1.0);
}

TEST_CASE("results do not depend on the thread count", "[ff][experiments]") {
    Config one = small();
    one.threads = 1;
    Config two = small();
    two.threads = 2;
    for (const std::string& name : {std::string("rank-formula"),
                                    std::string("lemma-4.6"),
                                    std::string("fooling"),
                                    std::string("sparse-rank"),
                                    std::string("epochs")}) {
        const Result a = run_experiment(name, one);
        const Result b = run_experiment(name, two);
        CAPTURE(name);
        CHECK(a.instances == b.instances);
        CHECK(a.passed == b.passed);
        CHECK(((std::isnan(a.min_slack) && std::isnan(b.min_slack)) || a.min_slack == b.min_slack));
        CHECK(((std::isnan(a.max_epoch_ratio) && std::isnan(b.max_epoch_ratio)) ||
               a.max_epoch_ratio == b.max_epoch_ratio));
        CHECK(a.first_failure == b.first_failure);
        REQUIRE(a.rows.size() == b.rows.size());
        for (std::size_t i = 0; i < a.rows.size(); ++i)
            CHECK(a.rows[i].instances == b.rows[i].instances);
    }
}

TEST_CASE("epochs checks every schedule and reports each one", "[ff][experiments]") {
    const Result r = experiment_epochs(small());
    CAPTURE(r.first_failure, r.note);
    CHECK(r.ok());
    REQUIRE(r.rows.size() >= 5); // the dense kinds, the sparse ones if built, the controls
    CHECK(r.rows.back().label == "controls (must fail)");
    CHECK(r.rows.back().instances == 1);
    CHECK(r.rows.back().failed == 0);
    std::int64_t counted = 0;
    for (std::size_t i = 0; i + 1 < r.rows.size(); ++i) {
        const ResultRow& row = r.rows[i];
        CAPTURE(row.label);
        CHECK(row.instances > 0);
        CHECK(row.failed == 0);
        CHECK(row.max_epoch_ratio > 0);
        CHECK(row.max_epoch_ratio <= 1);
        CHECK(row.max_message_ratio > 0);
        CHECK(row.max_message_ratio <= 1);
        counted += row.instances;
    }
    CHECK(counted + 1 == r.instances);
    CHECK(r.max_epoch_ratio <= 1);
    CHECK(r.rows[0].label == "dense forward fused");
    CHECK(r.rows[2].label == "dense backward fused");
}

TEST_CASE("epochs with one pattern runs the sparse schedules on it", "[ff][experiments]") {
    Config c = small();
    c.pattern = "window:2+global:1";
    const Result one = experiment_epochs(c);
    const Result all = experiment_epochs(small());
    CHECK(one.ok());
    CHECK_THAT(one.note, Catch::Contains("pattern window:2+global:1"));
    if (all.rows.size() > 5) // sparse kinds built: one spec instead of every family
        CHECK(one.instances < all.instances);
    c.pattern = "window:16"; // half-width N: does not fit
    CHECK_THROWS_WITH(experiment_epochs(c), Catch::Contains("does not fit N = 16"));
    c.pattern = "windows:2";
    CHECK_THROWS_AS(experiment_epochs(c), InvalidArgument);
    CHECK_THROWS_AS(run_experiments("all", c), InvalidArgument);
    c.pattern = "window:40"; // ignored by the experiments without a support
    CHECK(experiment_fooling(c).ok());
}

TEST_CASE("sparse-rank: the formula, its control and the lemma's slack", "[ff][experiments]") {
    const Result r = experiment_sparse_rank(small());
    CAPTURE(r.first_failure, r.note);
    CHECK(r.ok());
    REQUIRE(r.rows.size() == 5);
    CHECK(r.rows[0].instances > 0); // consecutive exponents: rank == formula
    CHECK(r.rows[1].instances == r.rows[0].instances);
    CHECK(r.rows[2].instances == 1); // the control failed as predicted
    CHECK(r.rows[2].failed == 0);
    CHECK(r.rows[3].instances > 0);
    for (std::size_t i = 3; i < r.rows.size(); ++i)
        if (r.rows[i].instances > 0)
            CHECK(r.rows[i].min_slack >= 0);
    CHECK(r.min_slack >= 0);
    CHECK_THAT(r.note, Catch::Contains("attained on"));
}

TEST_CASE("each experiment has its default sizes", "[ff][experiments]") {
    const Config c;
    CHECK(c.sized_for("epochs").n == 1024);
    CHECK(c.sized_for("epochs").d == 64);
    CHECK(c.sized_for("rank-formula").n == 256);
    CHECK(c.sized_for("rank-formula").d == 32);
    Config q;
    q.quick = true;
    CHECK(q.sized_for("epochs").n == 256);
    CHECK(q.sized_for("lemma-4.6").n == 64);
    CHECK(q.sized_for("lemma-4.6").d == 16);
    Config given;
    given.n = 8;
    given.pattern = "causal";
    CHECK(given.sized_for("epochs").n == 8);
    CHECK(given.sized_for("epochs").d == 8); // capped at N
    CHECK(given.sized_for("epochs").pattern == "causal");
    CHECK(given.sized_for("sparse-rank").pattern == "causal");
    CHECK(given.sized_for("lemma-4.6").pattern.empty());
}

TEST_CASE("the seed changes the random instances, not the verdict", "[ff][experiments]") {
    Config c = small();
    c.seed = 99;
    const Result r = experiment_fooling(c);
    CHECK(r.ok());
}

TEST_CASE("negative controls: p <= N makes rank-formula and vandermonde fail",
          "[ff][experiments]") {
    Config c = small();
    c.n = 8;
    c.d = 3;
    c.p = 5;
    CHECK_THROWS_AS(experiment_rank_formula(c), InvalidArgument); // without the flag
    c.negative_control = true;
    const Result rank = experiment_rank_formula(c);
    CHECK(rank.failed > 0);
    CHECK_FALSE(rank.first_failure.empty());
    const Result vm = experiment_vandermonde(c);
    CHECK(vm.failed > 0);
    const Result neg = experiment_negative(small());
    CHECK(neg.ok());
    CHECK(neg.instances >= 20);
}

TEST_CASE("progress counts every instance", "[ff][experiments]") {
    Progress progress;
    Config c = small();
    c.progress = &progress;
    const Result r = experiment_vandermonde(c);
    CHECK(progress.done.load() == r.instances);
    CHECK(progress.total.load() == r.instances);
}

TEST_CASE("bad configs throw InvalidArgument before running", "[ff][experiments]") {
    Config c = small();
    c.p = 21; // not prime
    CHECK_THROWS_WITH(run_experiments("all", c), Catch::Contains("p = 21 is not prime"));
    c.p = 13; // p <= N
    CHECK_THROWS_AS(run_experiments("all", c), InvalidArgument);
    c.p = (std::int64_t{1} << 61) - 1; // prime but >= 2^60
    CHECK_THROWS_AS(run_experiments("all", c), InvalidArgument);
    c = small();
    c.d = 17; // d > N
    CHECK_THROWS_WITH(run_experiments("count", c), Catch::Contains("d = 17 > N = 16"));
    c = small();
    c.m = -1;
    CHECK_THROWS_AS(run_experiments("epochs", c), InvalidArgument);
    c = small();
    c.n = -1; // 0 is the default
    CHECK_THROWS_AS(run_experiments("all", c), InvalidArgument);
    c = small();
    c.m = (std::int64_t{1} << 40) + 1;
    CHECK_THROWS_AS(run_experiments("epochs", c), InvalidArgument);
    c = small();
    c.trials = -2;
    CHECK_THROWS_AS(run_experiments("all", c), InvalidArgument);
    CHECK_THROWS_WITH(run_experiments("nope", small()),
                      Catch::Contains("unknown experiment 'nope'"));
    CHECK_THROWS_AS(run_experiment("all", small()), InvalidArgument);
}
