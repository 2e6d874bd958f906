// Tests of apps/main.cpp through the built program: the command line as a whole (subcommand
// required, CLI11 parse errors exit 2 with one line on stderr) and --help of every subcommand
// (exit 0, its options listed on stdout).

#include "cli.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using ioattn::app::test::command_of;
using ioattn::app::test::require_one_line_error;
using ioattn::app::test::run_ioattn;

TEST_CASE("ioattn without a known subcommand is a usage error", "[apps][main]") {
    require_one_line_error({}, "subcommand");
    require_one_line_error({"frobnicate"}, "subcommand");
}

TEST_CASE("command-line parse errors exit 2 with one line naming the token", "[apps][main]") {
    SECTION("an unknown option") {
        require_one_line_error({"run", "--N", "64", "--d", "16", "--bogus"}, "--bogus");
        require_one_line_error({"io", "--N", "64", "--frobnicate", "3"}, "--frobnicate");
    }
    SECTION("a value that is not a number") {
        require_one_line_error({"run", "--N", "abc"}, "abc");
    }
    SECTION("a value outside an option's set") {
        require_one_line_error({"run", "--pass", "sideways"}, "sideways");
        require_one_line_error({"run", "--schedule", "fastest"}, "fastest");
        require_one_line_error({"run", "--dtype", "half"}, "half");
    }
    SECTION("a value outside an option's range") {
        require_one_line_error({"run", "--threads", "-1"}, "-1");
        require_one_line_error({"run", "--repeat", "0"}, "--repeat");
    }
    SECTION("options that exclude each other") {
        require_one_line_error({"run", "--N", "64", "--d", "16", "--json", "--csv"}, "--csv");
        require_one_line_error({"run", "--N", "64", "--n-q", "32"}, "--n-q");
        require_one_line_error({"run", "--M", "100", "--M-bytes", "400"}, "--M");
    }
}

TEST_CASE("help of each subcommand exits 0 and lists its options", "[apps][main]") {
    struct Help {
        std::string subcommand;
        std::vector<std::string> options;
    };

    const std::vector<std::string> problem{"--pass",
                                           "--N",
                                           "--n-q",
                                           "--n-k",
                                           "--d",
                                           "--d-v",
                                           "--batch",
                                           "--heads",
                                           "--kv-heads",
                                           "--causal",
                                           "--pattern",
                                           "--dtype"};
    const auto with_problem = [&](std::vector<std::string> extra) {
        extra.insert(extra.end(), problem.begin(), problem.end());
        return extra;
    };
    std::vector<Help> helps{
        {"run",
         with_problem({"--schedule",
                       "--select",
                       "--M",
                       "--M-bytes",
                       "--threads",
                       "--seed",
                       "--json",
                       "--csv",
                       "--check",
                       "--count-io",
                       "--repeat",
                       "--input-density"})},
        {"io", with_problem({"--json", "--csv", "--M-range", "--plot", "--no-dry-run"})},
        {"bound",
         with_problem({"--schedule",
                       "--select",
                       "--M",
                       "--M-bytes",
                       "--json",
                       "--word-bytes",
                       "--bandwidth",
                       "--peak",
                       "--preset"})},
        {"bench",
         {"--suite",
          "--quick",
          "--count-io",
          "--json",
          "--csv",
          "--threads",
          "--repeat",
          "--seed",
          "--N",
          "--d",
          "--patterns"}},
        {"demo", {"--threads", "--seed"}},
    };
#ifdef IOATTN_APPS_WITH_VERIFY
    helps.push_back({"verify",
                     {"experiment",
                      "--N",
                      "--d",
                      "--p",
                      "--M",
                      "--trials",
                      "--seed",
                      "--threads",
                      "--negative-control",
                      "--pattern",
                      "--quick",
                      "--json"}});
#endif
    for (const Help& h : helps) {
        for (const std::string flag : {"--help", "-h"}) {
            const std::vector<std::string> args{h.subcommand, flag};
            const auto r = run_ioattn(args);
            INFO("command: " << command_of(args));
            INFO("stderr: " << r.err);
            CHECK(r.status == 0);
            CHECK(r.err.empty());
            CHECK(r.out.find("Usage:") != std::string::npos);
            CHECK(r.out.find(h.subcommand) != std::string::npos);
            for (const std::string& option : h.options) {
                INFO("option: " << option);
                CHECK(r.out.find(option) != std::string::npos);
            }
        }
    }
}

TEST_CASE("ioattn --help lists every subcommand", "[apps][main]") {
    const auto r = run_ioattn({"--help"});
    CHECK(r.status == 0);
    CHECK(r.err.empty());
    std::vector<std::string> subcommands{"demo", "run", "io", "bound", "bench"};
#ifdef IOATTN_APPS_WITH_VERIFY
    subcommands.emplace_back("verify");
#endif
    for (const std::string& s : subcommands) {
        INFO("subcommand: " << s);
        CHECK(r.out.find("\n  " + s + " ") != std::string::npos);
    }
}
