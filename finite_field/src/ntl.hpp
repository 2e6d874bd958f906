#pragma once
// The one place ff includes NTL: its headers are not clean under ioattn's warning set, and the
// conversions between ioattn::ff::Matrix and NTL::mat_zz_p live here.

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wconversion"
#pragma GCC diagnostic ignored "-Wsign-conversion"
#pragma GCC diagnostic ignored "-Wold-style-cast"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wcast-align"
#pragma GCC diagnostic ignored "-Wdouble-promotion"
#pragma GCC diagnostic ignored "-Woverloaded-virtual"
#pragma GCC diagnostic ignored "-Wnon-virtual-dtor"
#include <NTL/lzz_p.h>
#include <NTL/mat_lzz_p.h>
#pragma GCC diagnostic pop

#include <ioattn/ff/matrix.hpp>

namespace ioattn::ff::detail {

static_assert(NTL_SP_NBITS >= kMaxPrimeBits, "NTL single-precision moduli are too small");

/// Copies a (entries in [0, p)) into an NTL matrix; the modulus must be installed.
inline NTL::mat_zz_p to_ntl(const Matrix& a) {
    NTL::mat_zz_p m;
    m.SetDims(static_cast<long>(a.rows()), static_cast<long>(a.cols()));
    for (std::int64_t i = 0; i < a.rows(); ++i)
        for (std::int64_t j = 0; j < a.cols(); ++j)
            m[static_cast<long>(i)][static_cast<long>(j)] =
                NTL::to_zz_p(static_cast<long>(a(i, j)));
    return m;
}

/// Copies an NTL matrix back; the modulus must be installed.
inline Matrix from_ntl(const NTL::mat_zz_p& m) {
    Matrix a(m.NumRows(), m.NumCols());
    for (long i = 0; i < m.NumRows(); ++i)
        for (long j = 0; j < m.NumCols(); ++j)
            a(i, j) = NTL::rep(m[i][j]);
    return a;
}

} // namespace ioattn::ff::detail
