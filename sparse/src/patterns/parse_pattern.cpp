// ioattn::sparse::parse_pattern: spec strings -> supports.
// Recursive descent over  expr := term ('+' term)*,  term := factor ('&' factor)*,
// factor := '(' expr ')' | atom,  atom := NAME (':' ARG)*  ('+' union, '&' intersection).
// Each atom's arguments are parsed and range-checked here, so errors name the token; the
// builders then run. Cost: the builders' plus one union/intersection per operator.
// Tests: tests/sparse/parse_pattern_test.cpp

#include "fail.hpp"
#include "patterns/pattern_util.hpp"

#include <ioattn/error.hpp>
#include <ioattn/sparse/matrix_market.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <array>
#include <charconv>
#include <cmath>
#include <string>
#include <vector>

namespace ioattn::sparse {

namespace {

constexpr std::string_view kParseWhere = "ioattn::sparse::parse_pattern";

struct Term {
    std::string_view name;
    std::size_t args;
    std::string_view usage;
};

constexpr std::array<Term, 17> kTerms = {{
    {"dense", 0, "dense"},
    {"causal", 0, "causal"},
    {"window", 1, "window:W"},
    {"causal-window", 1, "causal-window:W"},
    {"dilated", 2, "dilated:W:S"},
    {"global", 1, "global:G"},
    {"bigbird", 3, "bigbird:W:G:R"},
    {"bigbird-block", 4, "bigbird-block:B:W:G:R"},
    {"strided", 1, "strided:L"},
    {"block", 2, "block:B:DENSITY"},
    {"random", 1, "random:DENSITY"},
    {"powerlaw", 1, "powerlaw:AVG_DEGREE"},
    {"varlen", 1, "varlen:L1,L2,..."},
    {"causal-varlen", 1, "causal-varlen:L1,L2,..."},
    {"window-varlen", 2, "window-varlen:W:L1,L2,..."},
    {"causal-window-varlen", 2, "causal-window-varlen:W:L1,L2,..."},
    {"file", 1, "file:PATH"},
}};

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
        s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
        s.remove_suffix(1);
    return s;
}

class Parser {
public:
    Parser(std::string_view spec, std::int64_t n_q, std::int64_t n_k, std::uint64_t seed)
        : spec_(spec)
        , n_q_(n_q)
        , n_k_(n_k)
        , seed_(seed) {}

    Support parse() {
        if (trim(spec_).empty())
            detail::fail(kParseWhere, "empty pattern spec");
        Support s = expr();
        skip_spaces();
        if (pos_ < spec_.size())
            detail::fail(kParseWhere,
                         "unexpected '",
                         spec_[pos_],
                         "' at position ",
                         pos_,
                         " in '",
                         spec_,
                         "'");
        return s;
    }

private:
    // --- grammar ---
    Support expr() {
        Support s = term();
        while (peek() == '+') {
            ++pos_;
            s = union_of(s, term());
        }
        return s;
    }

    Support term() {
        Support s = factor();
        while (peek() == '&') {
            ++pos_;
            s = intersection_of(s, factor());
        }
        return s;
    }

    Support factor() {
        if (peek() != '(')
            return atom();
        const std::size_t open = pos_++;
        if (++depth_ > kMaxDepth) // each level is three frames of this recursive descent
            detail::fail(kParseWhere,
                         "parentheses nested deeper than ",
                         kMaxDepth,
                         " at position ",
                         open,
                         " in '",
                         spec_.substr(0, 64),
                         spec_.size() > 64 ? "...'" : "'");
        Support s = expr();
        if (peek() != ')')
            detail::fail(kParseWhere, "'(' at position ", open, " is not closed in '", spec_, "'");
        ++pos_;
        --depth_;
        return s;
    }

    Support atom() {
        skip_spaces();
        const std::size_t start = pos_;
        while (pos_ < spec_.size() && std::string_view("+&()").find(spec_[pos_]) == kNpos)
            ++pos_;
        const std::string_view token = trim(spec_.substr(start, pos_ - start));
        if (token.empty())
            detail::fail(kParseWhere, "empty term at position ", start, " in '", spec_, "'");
        return build(token);
    }

    // --- one atom ---
    Support build(std::string_view token) {
        const std::size_t colon = token.find(':');
        const std::string_view name = token.substr(0, colon);
        std::vector<std::string_view> args;
        if (name == "file" && colon != kNpos) {
            args.push_back(token.substr(colon + 1)); // a path may contain ':'
        } else if (colon != kNpos) {
            std::string_view rest = token.substr(colon + 1);
            for (std::size_t c = rest.find(':'); c != kNpos; c = rest.find(':')) {
                args.push_back(rest.substr(0, c));
                rest = rest.substr(c + 1);
            }
            args.push_back(rest);
        }
        const Term* term = nullptr;
        for (const Term& t : kTerms)
            if (t.name == name)
                term = &t;
        if (term == nullptr)
            detail::fail(kParseWhere,
                         "unknown pattern '",
                         name,
                         "' in '",
                         token,
                         "' (known: dense, causal, window, causal-window, dilated, global, "
                         "bigbird, bigbird-block, strided, block, random, powerlaw, varlen, "
                         "causal-varlen, window-varlen, causal-window-varlen, file)");
        if (args.size() != term->args)
            detail::fail(kParseWhere,
                         "'",
                         token,
                         "' has ",
                         args.size(),
                         " argument(s) (expected ",
                         term->usage,
                         ")");
        return make(*term, token, args);
    }

    Support make(const Term& t, std::string_view token, const std::vector<std::string_view>& a) {
        const std::string_view n = t.name;
        if (n == "dense")
            return pattern_dense(n_q_, n_k_);
        if (n == "causal")
            return pattern_causal(n_q_, n_k_);
        if (n == "window")
            return pattern_window(n_q_, n_k_, integer(t, token, a[0], "W", 0));
        if (n == "causal-window")
            return pattern_causal_window(n_q_, n_k_, integer(t, token, a[0], "W", 0));
        if (n == "dilated")
            return pattern_dilated(
                n_q_, n_k_, integer(t, token, a[0], "W", 0), integer(t, token, a[1], "S", 1));
        if (n == "global")
            return pattern_global(n_q_, n_k_, integer(t, token, a[0], "G", 0));
        if (n == "strided")
            return pattern_strided(n_q_, n_k_, integer(t, token, a[0], "L", 1));
        if (n == "bigbird") {
            const std::int64_t w = integer(t, token, a[0], "W", 0);
            const std::int64_t g = integer(t, token, a[1], "G", 0);
            const std::int64_t r = integer(t, token, a[2], "R", 0);
            return pattern_bigbird(n_q_, n_k_, w, g, r, next_seed());
        }
        if (n == "bigbird-block") {
            const std::int64_t b = integer(t, token, a[0], "B", 1);
            const std::int64_t w = integer(t, token, a[1], "W", 0);
            const std::int64_t g = integer(t, token, a[2], "G", 0);
            const std::int64_t r = integer(t, token, a[3], "R", 0);
            return pattern_bigbird_block(n_q_, n_k_, b, w, g, r, next_seed());
        }
        if (n == "powerlaw")
            return pattern_powerlaw(
                n_q_, n_k_, positive(t, token, a[0], "AVG_DEGREE"), next_seed());
        if (n == "block") {
            const std::int64_t b = integer(t, token, a[0], "B", 1);
            const double density = fraction(t, token, a[1], "DENSITY");
            return pattern_block(n_q_, n_k_, b, density, next_seed());
        }
        if (n == "random")
            return pattern_random(n_q_, n_k_, fraction(t, token, a[0], "DENSITY"), next_seed());
        if (n == "varlen" || n == "causal-varlen")
            return varlen(t, token, a[0], n == "causal-varlen", -1);
        if (n == "window-varlen" || n == "causal-window-varlen")
            return varlen(
                t, token, a[1], n == "causal-window-varlen", integer(t, token, a[0], "W", 0));
        return file(token, trim(a[0]));
    }

    Support file(std::string_view token, std::string_view path) {
        if (path.empty())
            detail::fail(kParseWhere, "'", token, "': missing PATH (expected file:PATH)");
        Support s;
        try {
            s = read_matrix_market(path);
        } catch (const InvalidArgument& e) {
            detail::fail(kParseWhere, "'", token, "': ", e.what());
        }
        if (s.n_q() != n_q_ || s.n_k() != n_k_)
            detail::fail(kParseWhere,
                         "'",
                         token,
                         "' is ",
                         s.n_q(),
                         " x ",
                         s.n_k(),
                         " (expected n_q x n_k = ",
                         n_q_,
                         " x ",
                         n_k_,
                         ")");
        return s;
    }

    /// The varlen terms: LENGTHS is a comma-separated list of integers >= 0 summing to n_q.
    Support varlen(const Term& t,
                   std::string_view token,
                   std::string_view list,
                   bool causal,
                   std::int64_t window) const {
        std::vector<std::int64_t> lengths;
        for (;;) {
            const std::size_t comma = list.find(',');
            lengths.push_back(integer(t, token, trim(list.substr(0, comma)), "a length", 0));
            if (comma == kNpos)
                break;
            list.remove_prefix(comma + 1);
        }
        try {
            return pattern_varlen(n_q_, n_k_, lengths, causal, window);
        } catch (const InvalidArgument& e) {
            detail::fail(kParseWhere, "'", token, "': ", e.what());
        }
    }

    // --- arguments ---
    static std::int64_t integer(const Term& t,
                                std::string_view token,
                                std::string_view arg,
                                const char* what,
                                std::int64_t min) {
        if (arg.empty())
            detail::fail(
                kParseWhere, "'", token, "': missing value of ", what, " (expected ", t.usage, ")");
        std::int64_t v = 0;
        const auto [end, ec] = std::from_chars(arg.data(), arg.data() + arg.size(), v);
        if (ec != std::errc() || end != arg.data() + arg.size())
            detail::fail(kParseWhere,
                         "'",
                         token,
                         "': ",
                         what,
                         " = '",
                         arg,
                         "' is not an integer (expected ",
                         t.usage,
                         ")");
        if (v < min)
            detail::fail(
                kParseWhere, "'", token, "': ", what, " = ", v, " (expected >= ", min, ")");
        return v;
    }

    /// A finite number, or a failure naming the term's usage.
    static double
    real(const Term& t, std::string_view token, std::string_view arg, const char* what) {
        if (arg.empty())
            detail::fail(
                kParseWhere, "'", token, "': missing value of ", what, " (expected ", t.usage, ")");
        double v = 0.0;
        const auto [end, ec] = std::from_chars(arg.data(), arg.data() + arg.size(), v);
        if (ec != std::errc() || end != arg.data() + arg.size() || !std::isfinite(v))
            detail::fail(kParseWhere,
                         "'",
                         token,
                         "': ",
                         what,
                         " = '",
                         arg,
                         "' is not a number (expected ",
                         t.usage,
                         ")");
        return v;
    }

    static double
    fraction(const Term& t, std::string_view token, std::string_view arg, const char* what) {
        const double v = real(t, token, arg, what);
        if (v < 0.0 || v > 1.0)
            detail::fail(kParseWhere, "'", token, "': ", what, " = ", arg, " (expected in [0, 1])");
        return v;
    }

    static double
    positive(const Term& t, std::string_view token, std::string_view arg, const char* what) {
        const double v = real(t, token, arg, what);
        if (v <= 0.0)
            detail::fail(kParseWhere, "'", token, "': ", what, " = ", arg, " (expected > 0)");
        return v;
    }

    // --- helpers ---
    void skip_spaces() {
        while (pos_ < spec_.size() && (spec_[pos_] == ' ' || spec_[pos_] == '\t'))
            ++pos_;
    }

    char peek() {
        skip_spaces();
        return pos_ < spec_.size() ? spec_[pos_] : '\0';
    }

    std::uint64_t next_seed() {
        const std::uint64_t k = random_terms_++;
        return k == 0 ? seed_ : detail::mix64(seed_ ^ detail::mix64(k));
    }

    static constexpr std::size_t kNpos = std::string_view::npos;
    /// Deeper nesting overflowed the stack (60000 levels: a segmentation fault).
    static constexpr int kMaxDepth = 256;

    std::string_view spec_;
    std::int64_t n_q_;
    std::int64_t n_k_;
    std::uint64_t seed_;
    std::size_t pos_ = 0;
    int depth_ = 0;
    std::uint64_t random_terms_ = 0;
};

} // namespace

Support
parse_pattern(std::string_view spec, std::int64_t n_q, std::int64_t n_k, std::uint64_t seed) {
    detail::check_shape(kParseWhere, n_q, n_k);
    return Parser(spec, n_q, n_k, seed).parse();
}

} // namespace ioattn::sparse
