#pragma once
/// The checks of one TensorView that ForwardArgs / BackwardArgs::validate (view.cpp) and
/// ioattn::decode (its query, cache and output views) share. Each throws InvalidArgument
/// "<where>: <name> ..." naming the values.

#include <ioattn/error.hpp>
#include <ioattn/view.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace ioattn::detail {

/// "[b][h][r][c]".
inline std::string view_dims(std::int64_t b, std::int64_t h, std::int64_t r, std::int64_t c) {
    return "[" + std::to_string(b) + "][" + std::to_string(h) + "][" + std::to_string(r) + "][" +
           std::to_string(c) + "]";
}

/// Throws unless v has shape [b][h][r][c].
template <typename T>
void check_view_shape(std::string_view where,
                      const char* name,
                      const TensorView<T>& v,
                      std::int64_t b,
                      std::int64_t h,
                      std::int64_t r,
                      std::int64_t c) {
    if (v.batch != b || v.heads != h || v.rows != r || v.cols != c)
        throw InvalidArgument(std::string(where) + ": " + name + " has shape " +
                              view_dims(v.batch, v.heads, v.rows, v.cols) + ", expected " +
                              view_dims(b, h, r, c));
}

/// Throws unless v's sizes are non-negative, its strides non-negative with rows that do not
/// overlap, its span within its extent, and its data non-null (unless shape_only, or
/// `allow_empty` and the view addresses nothing).
template <typename T>
void check_view_layout(std::string_view where,
                       const char* name,
                       const TensorView<T>& v,
                       bool shape_only,
                       bool allow_empty = false) {
    const std::string w(where);
    if (v.batch < 0 || v.heads < 0 || v.rows < 0 || v.cols < 0)
        throw InvalidArgument(w + ": " + name + " has shape " +
                              view_dims(v.batch, v.heads, v.rows, v.cols));
    if (v.stride_batch < 0 || v.stride_head < 0 || v.stride_row < v.cols)
        throw InvalidArgument(w + ": " + name + " strides (" + std::to_string(v.stride_batch) +
                              ", " + std::to_string(v.stride_head) + ", " +
                              std::to_string(v.stride_row) + ") are negative or overlap rows of " +
                              std::to_string(v.cols) + " elements");
    if (v.span() > v.extent)
        throw InvalidArgument(w + ": " + name + " addresses " + std::to_string(v.span()) +
                              " elements but its extent is " + std::to_string(v.extent));
    if (v.data == nullptr && !shape_only && !(allow_empty && v.span() == 0))
        throw InvalidArgument(w + ": " + name + " has null data");
}

/// Whether the memory two views address intersects (views without data or span never do).
template <typename A, typename B>
bool views_overlap(const TensorView<A>& a, const TensorView<B>& b) {
    if (a.data == nullptr || b.data == nullptr || a.span() == 0 || b.span() == 0)
        return false;
    const auto* a0 = reinterpret_cast<const char*>(a.data);
    const auto* b0 = reinterpret_cast<const char*>(b.data);
    const auto* a1 = a0 + static_cast<std::size_t>(a.span()) * sizeof(A);
    const auto* b1 = b0 + static_cast<std::size_t>(b.span()) * sizeof(B);
    return a0 < b1 && b0 < a1;
}

} // namespace ioattn::detail
