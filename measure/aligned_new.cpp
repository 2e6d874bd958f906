// The program's own allocations of 4 KiB and more start on a 64-byte boundary (the replaceable
// global operator new; the executable only, not the libraries or the fuzz target). Its operands
// are std::vectors, and glibc hands large blocks out at 16 mod 64, where every 256-byte row of K
// and V (d = 64, fp32) spans five cache lines instead of four: the element kernels gather whole
// rows, and a gather is bound by the lines in flight. 1.25x on powerlaw:32 (ioattn run --N 16384
// --d 64 --pattern powerlaw:32 --schedule fused --threads 2 --repeat 10). torch allocates on
// 64-byte boundaries too; numpy's default is 16 (docs/performance.md section 10).
// Blocks of 4 MiB and more start on a 2 MiB boundary and are advised to transparent huge pages
// (MADV_HUGEPAGE; Debian's default THP mode is madvise, so without the advice every 4 KiB page
// of K and V takes a TLB entry, and a gathered row a page walk whenever the 2048 pages of K and
// V at N = 16384 crowd the second-level TLB). numpy advises the same for arrays of 4 MB and more
// (np.core.multiarray._get_madvise_hugepage()). 1.20x on powerlaw:32 (same command, --repeat
// 20; docs/performance.md section 10).
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
