// ioattn::Problem: defaults, validation and the causal visibility counts.

#include <ioattn/error.hpp>
#include <ioattn/problem.hpp>

#include <algorithm>
#include <initializer_list>
#include <ostream>
#include <sstream>
#include <string>

namespace ioattn {

namespace {

void require_positive(std::string_view where, const char* name, std::int64_t value) {
    if (value < 1)
        throw InvalidArgument(std::string(where) + ": " + name + " = " + std::to_string(value) +
                              " (expected >= 1)");
}

/// The product of the sizes when it is below 2^62, else throws ResourceError naming them.
void require_addressable(std::string_view where,
                         const char* what,
                         std::initializer_list<std::int64_t> sizes) {
    constexpr std::int64_t kLimit = std::int64_t{1} << 62;
    std::int64_t product = 1;
    for (const std::int64_t s : sizes) {
        if (product > (kLimit - 1) / s)
            throw ResourceError(std::string(where) + ": " + what +
                                ": 2^62 elements or more (cannot be addressed)");
        product *= s;
    }
}

} // namespace

Problem Problem::resolved(std::string_view where) const {
    Problem p = *this;
    if (p.kv_heads == 0)
        p.kv_heads = p.heads;
    if (p.d_v == 0)
        p.d_v = p.d;
    if (p.scale == 0.0 && p.d > 0)
        p.scale = 1.0 / std::sqrt(static_cast<double>(p.d));
    p.validate(where);
    return p;
}

void Problem::validate(std::string_view where) const {
    require_positive(where, "batch", batch);
    require_positive(where, "heads", heads);
    require_positive(where, "kv_heads", kv_heads);
    require_positive(where, "n_q", n_q);
    require_positive(where, "n_k", n_k);
    require_positive(where, "d", d);
    require_positive(where, "d_v", d_v);
    if (heads % kv_heads != 0)
        throw InvalidArgument(std::string(where) + ": heads = " + std::to_string(heads) +
                              " is not divisible by kv_heads = " + std::to_string(kv_heads));
    if (!std::isfinite(scale) || scale <= 0.0) {
        std::ostringstream os;
        os << where << ": scale = " << scale << " (expected finite and > 0)";
        throw InvalidArgument(os.str());
    }
    require_addressable(where, "Q (batch * heads * n_q * d)", {batch, heads, n_q, d});
    require_addressable(where, "K (batch * kv_heads * n_k * d)", {batch, kv_heads, n_k, d});
    require_addressable(where, "V (batch * kv_heads * n_k * d_v)", {batch, kv_heads, n_k, d_v});
    require_addressable(where, "O (batch * heads * n_q * d_v)", {batch, heads, n_q, d_v});
    require_addressable(where, "the scores (batch * heads * n_q * n_k)", {batch, heads, n_q, n_k});
}

std::int64_t Problem::visible_keys(std::int64_t i) const {
    if (!causal)
        return n_k;
    return std::clamp<std::int64_t>(i + causal_offset() + 1, 0, n_k);
}

std::int64_t Problem::allowed_pairs() const {
    if (!causal)
        return n_q * n_k;
    std::int64_t total = 0;
    for (std::int64_t i = 0; i < n_q; ++i)
        total += visible_keys(i);
    return total;
}

std::ostream& operator<<(std::ostream& os, const Problem& p) {
    os << "batch=" << p.batch << " heads=" << p.heads << " kv_heads=" << p.kv_heads
       << " n_q=" << p.n_q << " n_k=" << p.n_k << " d=" << p.d << " d_v=" << p.d_v
       << (p.causal ? " causal" : "") << " scale=" << p.scale;
    return os;
}

} // namespace ioattn
