// Tests of ioattn::sparse::read_matrix_market / write_matrix_market
// (sparse/src/patterns/matrix_market.cpp, sparse/src/patterns/matrix_market_scan.cpp): round trips,
// the accepted variants, and one error naming the line for each malformed file.

#include "brute_force.hpp"

#include <ioattn/error.hpp>
#include <ioattn/sparse/matrix_market.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>

#include <string>

namespace sp = ioattn::sparse;
using ioattn::sparse::read_matrix_market;
using ioattn::sparse::Support;
using ioattn::sparse::test::TempFile;

namespace {

Support read_text(const std::string& content) {
    const TempFile f("read.mtx", content);
    return read_matrix_market(f.path());
}

/// The message of the error reading `content` throws, with the temp path replaced by "F".
std::string error_of(const std::string& content) {
    const TempFile f("bad.mtx", content);
    try {
        (void)read_matrix_market(f.path());
    } catch (const ioattn::InvalidArgument& e) {
        std::string m = e.what();
        const auto at = m.find(f.path());
        if (at != std::string::npos)
            m.replace(at, f.path().size(), "F");
        return m;
    }
    return "no error";
}

const std::string pattern_header = "%%MatrixMarket matrix coordinate pattern general\n";
const std::string real_header = "%%MatrixMarket matrix coordinate real general\n";

} // namespace

TEST_CASE("matrix market: write then read round-trips", "[matrix_market]") {
    for (const auto& [n_q, n_k] : sp::test::small_shapes()) {
        for (const Support& s : {sp::pattern_random(n_q, n_k, 0.3, 2),
                                 sp::pattern_causal(n_q, n_k),
                                 sp::pattern_dense(n_q, n_k),
                                 Support::none(n_q, n_k)}) {
            CAPTURE(n_q, n_k, s.z_qk());
            const TempFile f("roundtrip.mtx", "");
            sp::write_matrix_market(f.path(), s);
            CHECK(read_matrix_market(f.path()) == s);
        }
    }
    const Support big = sp::pattern_bigbird(300, 200, 3, 2, 4, 1);
    const TempFile f("roundtrip_big.mtx", "");
    sp::write_matrix_market(f.path(), big);
    CHECK(read_matrix_market(f.path()) == big);
}

TEST_CASE("matrix market: accepted variants", "[matrix_market]") {
    const Support expected(3, 4, {0, 2, 2, 3}, {0, 3, 1});
    SECTION("pattern, comments, blank lines, CRLF, case-insensitive header") {
        CHECK(read_text("%%MatrixMarket MATRIX Coordinate Pattern GENERAL\r\n% a comment\r\n\r\n"
                        "3 4 3\r\n1 1\r\n  1   4  \r\n3 2\r\n\r\n") == expected);
    }
    SECTION("real values, explicit zeros kept") {
        CHECK(read_text(real_header + "3 4 3\n1 1 0.0\n1 4 -2.5e3\n3 2 1\n") == expected);
    }
    SECTION("integer values") {
        CHECK(read_text("%%MatrixMarket matrix coordinate integer general\n3 4 3\n1 1 7\n1 4 0\n"
                        "3 2 -1\n") == expected);
    }
    SECTION("entries in any order, duplicates count once") {
        CHECK(read_text(pattern_header + "3 4 4\n3 2\n1 4\n1 1\n1 4\n") == expected);
    }
    SECTION("symmetric lower triangle is mirrored") {
        const Support sym(3, 3, {0, 2, 3, 5}, {0, 2, 2, 0, 1});
        CHECK(read_text(
                  "%%MatrixMarket matrix coordinate pattern symmetric\n3 3 3\n1 1\n3 1\n3 2\n") ==
              sym);
        CHECK(read_text("%%MatrixMarket matrix coordinate real symmetric\n3 3 3\n1 1 1\n3 1 2\n"
                        "3 2 3\n") == sym);
    }
    SECTION("no entries") {
        CHECK(read_text(pattern_header + "2 5 0\n") == Support::none(2, 5));
    }
}

TEST_CASE("matrix market: each malformed file gives one error naming the line",
          "[matrix_market][throws]") {
    using Catch::Contains;
    CHECK_THAT(error_of(""), Contains("read_matrix_market: F: empty file"));
    CHECK_THAT(error_of("3 4 1\n1 1\n"), Contains("F:1: missing '%%MatrixMarket' header"));
    CHECK_THAT(error_of("%%MatrixMarket matrix coordinate pattern\n"),
               Contains("F:1: header has 4 fields"));
    CHECK_THAT(error_of("%%MatrixMarket vector coordinate pattern general\n"),
               Contains("F:1: object 'vector'"));
    CHECK_THAT(error_of("%%MatrixMarket matrix array real general\n3 4\n"),
               Contains("F:1: array (dense) format not supported"));
    CHECK_THAT(error_of("%%MatrixMarket matrix sparse real general\n"),
               Contains("F:1: unknown format 'sparse'"));
    CHECK_THAT(error_of("%%MatrixMarket matrix coordinate complex general\n3 4 1\n1 1 1 0\n"),
               Contains("F:1: complex field not supported"));
    CHECK_THAT(error_of("%%MatrixMarket matrix coordinate double general\n"),
               Contains("F:1: unknown field 'double'"));
    CHECK_THAT(error_of("%%MatrixMarket matrix coordinate real hermitian\n"),
               Contains("F:1: symmetry 'hermitian' not supported"));
    CHECK_THAT(error_of("%%MatrixMarket matrix coordinate real skew-symmetric\n"),
               Contains("symmetry 'skew-symmetric' not supported"));
    CHECK_THAT(error_of(pattern_header + "% only comments\n"),
               Contains("F:2: truncated: no size line"));
    CHECK_THAT(error_of(pattern_header + "%c\n3 4\n"), Contains("F:3: size line has 2 fields"));
    CHECK_THAT(error_of(pattern_header + "3 x 1\n"), Contains("F:2: cols 'x' is not an integer"));
    CHECK_THAT(error_of(pattern_header + "3 -4 1\n"), Contains("F:2: cols = -4"));
    CHECK_THAT(error_of("%%MatrixMarket matrix coordinate pattern symmetric\n3 4 1\n1 1\n"),
               Contains("F:2: symmetric matrix is 3 x 4"));
    CHECK_THAT(error_of(pattern_header + "3 4 2\n1 1\n2 2 5\n"),
               Contains("F:4: entry has 3 fields (expected 'i j')"));
    CHECK_THAT(error_of(real_header + "3 4 2\n1 1 1\n2 2\n"),
               Contains("F:4: entry has 2 fields (expected 'i j value')"));
    CHECK_THAT(error_of(pattern_header + "3 4 1\n1.5 1\n"),
               Contains("F:3: row index '1.5' is not an integer"));
    CHECK_THAT(error_of(pattern_header + "3 4 1\n1 b\n"), Contains("F:3: column index 'b'"));
    CHECK_THAT(error_of(pattern_header + "3 4 2\n1 1\n0 1\n"),
               Contains("F:4: row index 0 out of range [1, 3]"));
    CHECK_THAT(error_of(pattern_header + "3 4 2\n4 1\n1 1\n"),
               Contains("F:3: row index 4 out of range"));
    CHECK_THAT(error_of(pattern_header + "3 4 1\n1 5\n"),
               Contains("F:3: column index 5 out of range [1, 4]"));
    CHECK_THAT(error_of("%%MatrixMarket matrix coordinate pattern symmetric\n3 3 1\n1 2\n"),
               Contains("F:3: entry (1, 2) above the diagonal"));
    CHECK_THAT(error_of("%%MatrixMarket matrix coordinate integer general\n3 4 1\n1 1 2.5\n"),
               Contains("F:3: value '2.5' is not an integer"));
    CHECK_THAT(error_of(real_header + "3 4 1\n1 1 abc\n"),
               Contains("F:3: value 'abc' is not a real"));
    CHECK_THAT(error_of(pattern_header + "3 4 3\n1 1\n2 2\n"),
               Contains("F:4: truncated: 2 of 3 entries present"));
    CHECK_THAT(error_of(pattern_header + "3 4 3\n1 1\n2 2\n3"),
               Contains("F:5: entry has 1 fields"));
    CHECK_THAT(error_of(pattern_header + "3 4 1\n1 1\n2 2\n"),
               Contains("F:4: more entries than the 1 declared"));
    CHECK_THAT(error_of(pattern_header + "%" + std::string(2000, 'x') + "\n3 4 0\n"),
               Contains("F:2: line longer than 1024 characters"));
    CHECK_THAT(error_of(pattern_header), Contains("truncated: no size line"));
    CHECK_THAT(error_of(pattern_header + "1 1 1\n1 1\n\x01\x02\x03\n"),
               Contains("F:4: more entries"));
    CHECK_THAT(error_of("\x7f"
                        "ELF\x02\x01\x01"),
               Contains("F:1: missing '%%MatrixMarket' header"));
    CHECK_THAT(error_of(pattern_header + "3 4 1\n1 1\n"), Contains("no error"));
    CHECK_THROWS_WITH(read_matrix_market("/nonexistent/dir/x.mtx"),
                      Contains("read_matrix_market: cannot open '/nonexistent/dir/x.mtx'"));
}

TEST_CASE("matrix market: sizes CHOLMOD cannot hold exactly, or memory cannot, are refused",
          "[matrix_market][throws]") {
    using Catch::Contains;
    // The fuzz finding: CHOLMOD reads sizes through doubles (22222222222222223 became ...224)
    // and sizes its workspace by rows + cols, which under ASan aborted instead of throwing.
    CHECK_THAT(error_of(pattern_header + "4 22222222222222223 3\n1 2\n1 2\n2 3\n"),
               Contains("F:2: cols = 22222222222222223 (expected <= 2^53 = 9007199254740992)"));
    CHECK_THAT(error_of(pattern_header + "9007199254740993 4 0\n"),
               Contains("F:2: rows = 9007199254740993 (expected <= 2^53"));
    // 2^52 columns fit a double exactly, but CHOLMOD's workspace of rows + cols integers
    // (32 PiB) does not fit memory: a ResourceError before CHOLMOD runs.
    const TempFile wide("wide.mtx", pattern_header + "4 4503599627370496 1\n1 2\n");
    CHECK_THROWS_MATCHES(read_matrix_market(wide.path()),
                         ioattn::ResourceError,
                         Catch::Matchers::Predicate<ioattn::ResourceError>(
                             [](const ioattn::ResourceError& e) {
                                 const std::string m = e.what();
                                 return m.find("read_matrix_market: needs") != std::string::npos &&
                                        m.find("support of a 4 x 4503599627370496 file") !=
                                            std::string::npos;
                             },
                             "names the call and the file's shape"));
}

TEST_CASE("matrix market: writing to a bad path throws", "[matrix_market][throws]") {
    CHECK_THROWS_WITH(sp::write_matrix_market("/nonexistent/dir/x.mtx", Support::none(1, 1)),
                      Catch::Contains("write_matrix_market: cannot open"));
}
