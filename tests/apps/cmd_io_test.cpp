// Tests of apps/cmd_io.cpp through the built program: `ioattn io` sweeps M in powers of two,
// prints a CSV header and rows of equal width, JSON rows whose counts are consistent with the
// bounds and the selection rule, and the data and script of its plot; forward and backward.
// The rendered SVG is checked by plot_check.py (when gnuplot is installed).

#include "cli.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

using ioattn::app::test::command_of;
using ioattn::app::test::csv_fields;
using ioattn::app::test::lines_of;
using ioattn::app::test::Outcome;
using ioattn::app::test::require_one_line_error;
using ioattn::app::test::run_ioattn;
using ioattn::app::test::scratch_dir;
using nlohmann::json;

namespace {

Outcome run_ok(const std::vector<std::string>& args) {
    const auto r = run_ioattn(args);
    INFO("command: " << command_of(args));
    INFO("stderr: " << r.err);
    REQUIRE(r.status == 0);
    return r;
}

} // namespace

TEST_CASE("io --csv prints a header and one row per M", "[apps][io]") {
    const std::string pass = GENERATE("forward", "backward");
    CAPTURE(pass);
    const auto r = run_ok({"io", "--N", "128", "--d", "16", "--pass", pass, "--csv"});
    CHECK(r.err.empty());
    const auto lines = lines_of(r.out);
    // default sweep 4d .. N d = 64, 128, ..., 2048
    REQUIRE(lines.size() == 1 + 6);
    const auto head = csv_fields(lines[0]);
    REQUIRE(head.size() >= 2);
    CHECK(head[0] == "M");
    std::int64_t m = 64;
    for (std::size_t i = 1; i < lines.size(); ++i, m *= 2) {
        const auto row = csv_fields(lines[i]);
        INFO("row: " << lines[i]);
        REQUIRE(row.size() == head.size());
        CHECK(row[0] == std::to_string(m));
        for (std::size_t c = 0; c < row.size(); ++c) {
            INFO("column: " << head[c]);
            CHECK(!row[c].empty());
            if (head[c] == "fused dry" || head[c] == "mat dry")
                CHECK((row[c] == "=" || row[c] == "-"));
        }
    }
}

TEST_CASE("io --M-range sweeps the given powers of two", "[apps][io]") {
    const auto r = run_ok({"io", "--N", "128", "--d", "16", "--M-range", "256:1024", "--csv"});
    const auto lines = lines_of(r.out);
    REQUIRE(lines.size() == 4);
    CHECK(csv_fields(lines[1])[0] == "256");
    CHECK(csv_fields(lines[2])[0] == "512");
    CHECK(csv_fields(lines[3])[0] == "1024");
    require_one_line_error({"io", "--N", "128", "--d", "16", "--M-range", "100:50"}, "100:50");
    require_one_line_error({"io", "--N", "128", "--d", "16", "--M-range", "5"}, "'5'");
}

TEST_CASE("io --json rows: counts agree with the dry runs and sit above the bounds", "[apps][io]") {
    const std::string pass = GENERATE("forward", "backward");
    CAPTURE(pass);
    const auto r = run_ok({"io", "--N", "256", "--d", "64", "--pass", pass, "--json"});
    CHECK(r.err.empty());
    json j;
    REQUIRE_NOTHROW(j = json::parse(r.out));
    CHECK(j.at("pass") == pass);
    CHECK(j.at("d_squared") == 4096);
    CHECK(j.at("problem").at("n_q") == 256);
    const json& rows = j.at("rows");
    REQUIRE(rows.size() == 7); // M = 4d, 8d, ..., N d
    REQUIRE(j.at("crossover").is_number_integer());
    const auto crossover = j.at("crossover").get<std::int64_t>();
    CHECK(crossover >= 256);
    CHECK(crossover <= 16384);
    std::int64_t with_explicit = 0;
    for (const json& row : rows) {
        const auto m = row.at("M").get<std::int64_t>();
        CAPTURE(m);
        const json& b = row.at("bound");
        CHECK(b.at("regime") == (m < 4096 ? "small-cache" : "large-cache"));
        with_explicit += b.at("explicit").get<double>() > 0.0 ? 1 : 0;
        for (const char* s : {"fused", "materialized"}) {
            const json& pt = row.at(s);
            if (pt.is_null())
                continue;
            CAPTURE(s);
            const auto total = pt.at("total").get<std::int64_t>();
            CHECK(total ==
                  pt.at("reads").get<std::int64_t>() + pt.at("writes").get<std::int64_t>());
            CHECK(static_cast<double>(total) >= b.at("explicit").get<double>());
            CHECK(static_cast<double>(total) >= b.at("compulsory").get<double>());
            CHECK(pt.at("peak_resident").get<std::int64_t>() <= m);
            CHECK(pt.at("dry_run") == "agrees");
        }
        // --select cost picks the schedule that moves fewer words
        const json& f = row.at("fused");
        const json& mat = row.at("materialized");
        const std::string cost = row.at("choice").at("cost").get<std::string>();
        if (!f.is_null() && !mat.is_null()) {
            const auto ft = f.at("total").get<std::int64_t>();
            const auto mt = mat.at("total").get<std::int64_t>();
            if (ft < mt)
                CHECK(cost == "fused");
            if (mt < ft)
                CHECK(cost == "materialized");
            if (m >= crossover)
                CHECK(ft <= mt); // the measured crossover: fused from here on
        } else if (!mat.is_null()) {
            CHECK(cost == "materialized");
        }
        // --select theory: fused iff M >= d^2 and a fused tiling fits M (the backward's
        // smallest, 16 lane-padded key rows, needs more than d^2 at d = 64)
        CHECK(row.at("choice").at("theory") ==
              (m >= 4096 && !f.is_null() ? "fused" : "materialized"));
    }
    CHECK(with_explicit > 0); // the explicit-bound check above is not vacuous
}

TEST_CASE("io --plot without gnuplot: one line, exit 1, the data and the script written",
          "[apps][io]") {
    // PATH of an empty directory: the program is started by its full path, gnuplot not found
    const std::filesystem::path empty = scratch_dir() / "empty_path";
    std::filesystem::create_directories(empty);
    const std::string svg = (scratch_dir() / "io_nognuplot.svg").string();
    const std::string csv = (scratch_dir() / "io_nognuplot.csv").string();
    const std::string gp = (scratch_dir() / "io_nognuplot.gp").string();
    const auto r =
        run_ioattn({"io", "--N", "128", "--d", "16", "--plot", svg}, {{"PATH", empty.string()}});
    INFO("stderr: " << r.err);
    CHECK(r.status == 1);
    REQUIRE(lines_of(r.err).size() == 1);
    CHECK(r.err.find("gnuplot is not on PATH") != std::string::npos);
    CHECK(r.err.find("gnuplot " + gp) != std::string::npos);      // how to render it later
    CHECK(r.out.find("measured crossover") != std::string::npos); // the sweep came first
    CHECK(!std::filesystem::exists(svg));
    // the data: a header naming every series, then one row per M of the sweep (4d = 64 ... Nd)
    std::ifstream in(csv);
    REQUIRE(in);
    std::string line;
    std::vector<std::string> rows;
    while (std::getline(in, line))
        rows.push_back(line);
    REQUIRE(rows.size() == 1 + 6);
    CHECK(csv_fields(rows[0]) == std::vector<std::string>{"M (words)",
                                                          "fused",
                                                          "materialized",
                                                          "objective io (fewest words)",
                                                          "bound max(compulsory; leading)",
                                                          "explicit bound (Thm 4.8)"});
    CHECK(csv_fields(rows[1]).at(0) == "64");
    CHECK(csv_fields(rows[6]).at(0) == "2048");
    // the script reads that data and writes that image
    std::ifstream script(gp);
    const std::string text{std::istreambuf_iterator<char>(script),
                           std::istreambuf_iterator<char>()};
    CHECK(text.find("set output '" + svg + "'") != std::string::npos);
    CHECK(text.find("plot '" + csv + "'") != std::string::npos);
    CHECK(text.find("title 'materialized'") != std::string::npos);
    CHECK(text.find("d^2 = 256") != std::string::npos);
}

TEST_CASE("io --pattern --plot: every variant's words, the io objective's and the bound over M",
          "[apps][io]") {
    // gnuplot kept off PATH: the data and the script are written, the image is not
    const std::filesystem::path empty = scratch_dir() / "empty_path";
    std::filesystem::create_directories(empty);
    const std::string svg = (scratch_dir() / "io_sparse_plot.svg").string();
    const std::string csv = (scratch_dir() / "io_sparse_plot.csv").string();
    const auto r =
        run_ioattn({"io", "--N", "256", "--d", "16", "--pattern", "window:16", "--plot", svg},
                   {{"PATH", empty.string()}});
    INFO("stderr: " << r.err);
    CHECK(r.status == 1);
    CHECK(r.err.find("gnuplot is not on PATH") != std::string::npos);
    CHECK(r.out.find("measured crossover") != std::string::npos);
    std::ifstream in(csv);
    REQUIRE(in);
    std::string line;
    std::vector<std::vector<std::string>> rows;
    while (std::getline(in, line))
        rows.push_back(csv_fields(line));
    REQUIRE(rows.size() == 1 + 7); // M = 4d = 64, 128, ..., N d = 4096
    CHECK(rows[0] ==
          std::vector<std::string>{"M (words)",
                                   "tile",
                                   "element",
                                   "split",
                                   "permuted",
                                   "materialized",
                                   "objective io (fewest words)",
                                   "bound max(compulsory; leading) (Li et al. Thm 4.5)"});
    // the io objective's words are the fewest of the row
    int fused_rows = 0;
    for (std::size_t i = 1; i < rows.size(); ++i) {
        CAPTURE(rows[i]);
        const double io = std::stod(rows[i].at(6));
        for (std::size_t c = 1; c <= 5; ++c) {
            if (rows[i].at(c) == "NaN")
                continue;
            fused_rows += c == 1 ? 1 : 0;
            CHECK(io <= std::stod(rows[i].at(c)));
        }
    }
    CHECK(fused_rows > 0); // some M fits a fused variant: the comparison covers them
}

TEST_CASE("io --plot needs a .svg name", "[apps][io]") {
    require_one_line_error({"io", "--N", "128", "--d", "16", "--plot", "io.png"}, "io.png");
}

TEST_CASE("io --plot into a missing directory is a runtime error in one line", "[apps][io]") {
    const std::string svg = (scratch_dir() / "no_such_dir" / "io.svg").string();
    const auto r = run_ioattn({"io", "--N", "128", "--d", "16", "--plot", svg});
    INFO("stderr: " << r.err);
    CHECK(r.status == 1);
    CHECK(lines_of(r.err).size() == 1);
    CHECK(r.err.find(svg) != std::string::npos);
}

TEST_CASE("io --pattern counts each variant of the sparse fused schedule", "[apps][io]") {
    const std::vector<std::string> args{
        "io", "--N", "128", "--d", "16", "--pattern", "random:0.05", "--M-range", "4096:8192"};
    const auto r = run_ok(args);
    for (const char* variant : {"tile", "element", "split", "permuted"}) {
        INFO("variant: " << variant);
        CHECK(r.out.find(variant) != std::string::npos);
    }
}

TEST_CASE("io --dtype counts bytes at the element sizes: bf16 operands 2, L 4", "[apps][io]") {
    // the fused forward moves Q, K, V, O (operands) and writes L once per query row: bytes =
    // operand bytes x (words - n_q) + L's bytes x n_q
    const std::int64_t n = 512;
    const std::string dtype = GENERATE("float", "double", "bf16");
    CAPTURE(dtype);
    const std::int64_t operand = dtype == "double" ? 8 : dtype == "bf16" ? 2 : 4;
    const std::int64_t other = dtype == "double" ? 8 : 4;
    const json j = json::parse(
        run_ok({"io", "--N", std::to_string(n), "--d", "32", "--dtype", dtype, "--json"}).out);
    CHECK(j.at("dtype") == dtype);
    CHECK(j.at("element_bytes").at("operands") == operand);
    int fused_rows = 0;
    for (const json& r : j.at("rows")) {
        const json& f = r.at("fused");
        if (f.is_null() || f.at("bytes").is_null())
            continue;
        ++fused_rows;
        const std::int64_t words = f.at("total").get<std::int64_t>();
        CHECK(f.at("bytes").get<std::int64_t>() == operand * (words - n) + other * n);
    }
    CHECK(fused_rows > 0);
    // the sparse sweep's variants carry the same bytes
    const json s = json::parse(run_ok({"io",
                                       "--N",
                                       std::to_string(n),
                                       "--d",
                                       "32",
                                       "--pattern",
                                       "window:32",
                                       "--dtype",
                                       dtype,
                                       "--json"})
                                   .out);
    const json& tile = s.at("rows").back().at("tile");
    REQUIRE_FALSE(tile.is_null());
    CHECK(tile.at("bytes").get<std::int64_t>() ==
          operand * (tile.at("total").get<std::int64_t>() - n) + other * n);
}
