// The program's own allocations of 4 KiB and more start on a 64-byte boundary (the replaceable
// global operator new; the executable only, not the libraries or the fuzz target). Its operands
// are std::vectors, and glibc hands large blocks out at 16 mod 64, so every 256-byte row of K
// and V (d = 64, fp32) spanned five cache lines instead of four: the element kernels gather
// whole rows, and a gather is bound by the lines in flight. Measured (N = 16384, d = 64, 2
// threads, `ioattn run --pattern P --schedule fused --repeat 10`, 3 runs each, 16 mod 64 ->
// 64-aligned): powerlaw:32 15.6 -> 19.5 GFLOP/s (1.25x), random:0.02 31.0 -> 36.4-38.6 (1.2x),
// bigbird:64:2:3 1.00x forward, 1.04x backward, the dense kernel unchanged. torch allocates on
// 64-byte boundaries too; numpy's default is 16 (README, "Aligned rows").
// Blocks of 4 MiB and more start on a 2 MiB boundary and are advised to transparent huge pages
// (MADV_HUGEPAGE; Debian's default THP mode is madvise, so without the advice every 4 KiB page
// of K and V took a TLB entry, and a gathered row a page walk whenever the 2048 pages of
// K and V at N = 16384 crowded the second-level TLB). numpy advises the same for arrays of
// 4 MB and more (np.core.multiarray._get_madvise_hugepage()). Measured as above, `--repeat
// 20`, medians of 4 alternated: powerlaw:32 1.20x forward, 1.13x backward; bigbird:64:2:3
// 1.10x / 1.06x; random:0.02 1.03x; the dense kernel 1.03x / 1.05x (README, "Huge pages").
// Under a sanitizer the runtime's own operator new stays, so that it keeps its checks.

#include "sanitized.hpp"

#include <cstddef>
#include <cstdlib>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#if !defined(IOATTN_SANITIZED)

namespace {

constexpr std::size_t kAlignFrom = 4096; ///< bytes: operands and workspaces, not small objects
constexpr std::size_t kAlign = 64;
constexpr std::size_t kHugeFrom = std::size_t{4} << 20; ///< bytes: K or V at N = 16384, d = 64
constexpr std::size_t kHugePage = std::size_t{2} << 20;

void* allocate(std::size_t n) noexcept {
    if (n == 0)
        n = 1;
    if (n < kAlignFrom)
        return std::malloc(n);
    void* p = nullptr;
    if (n < kHugeFrom)
        return posix_memalign(&p, kAlign, n) == 0 ? p : nullptr;
    if (posix_memalign(&p, kHugePage, n) != 0)
        return nullptr;
#if defined(MADV_HUGEPAGE)
    (void)madvise(p, n, MADV_HUGEPAGE); // advice: where the kernel has no huge page, 4 KiB ones
#endif
    return p;
}

} // namespace

void* operator new(std::size_t n) {
    if (void* p = allocate(n))
        return p;
    throw std::bad_alloc();
}

void* operator new[](std::size_t n) {
    if (void* p = allocate(n))
        return p;
    throw std::bad_alloc();
}

void* operator new(std::size_t n, const std::nothrow_t& /*tag*/) noexcept {
    return allocate(n);
}

void* operator new[](std::size_t n, const std::nothrow_t& /*tag*/) noexcept {
    return allocate(n);
}

void operator delete(void* p) noexcept {
    std::free(p);
}

void operator delete[](void* p) noexcept {
    std::free(p);
}

void operator delete(void* p, std::size_t /*n*/) noexcept {
    std::free(p);
}

void operator delete[](void* p, std::size_t /*n*/) noexcept {
    std::free(p);
}

void operator delete(void* p, const std::nothrow_t& /*tag*/) noexcept {
    std::free(p);
}

void operator delete[](void* p, const std::nothrow_t& /*tag*/) noexcept {
    std::free(p);
}

#endif
