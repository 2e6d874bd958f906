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
    for (const std::string& name :
         {std::string("rank-formula"), std::string("lemma-4.6"), std::string("fooling")}) {
        const Result a = run_experiment(name, one);
        const Result b = run_experiment(name, two);
        CAPTURE(name);
        CHECK(a.instances == b.instances);
        CHECK(a.passed == b.passed);
        CHECK(((std::isnan(a.min_slack) && std::isnan(b.min_slack)) || a.min_slack == b.min_slack));
    }
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
    c.n = 0;
    CHECK_THROWS_AS(run_experiments("all", c), InvalidArgument);
    c = small();
    c.trials = -2;
    CHECK_THROWS_AS(run_experiments("all", c), InvalidArgument);
    CHECK_THROWS_WITH(run_experiments("nope", small()),
                      Catch::Contains("unknown experiment 'nope'"));
    CHECK_THROWS_AS(run_experiment("all", small()), InvalidArgument);
}
