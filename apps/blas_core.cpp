// OpenBLAS core choice for the benchmarks (see blas_core.hpp).

#include "blas_core.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include <measure.hpp>
#include <unistd.h>

namespace ioattn::app {

namespace {

/// Set in the re-executed process: the core OpenBLAS had picked before.
constexpr const char* kReexecMarker = "IOATTN_BLAS_REEXEC";

std::string lower(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) {
        return static_cast<char>(std::tolower(c));
    });
    return out;
}

Isa best_cpu_isa() {
    for (const Isa isa : {Isa::avx512, Isa::avx2})
        if (cpu_supports(isa))
            return isa;
    return Isa::sse2;
}

} // namespace

int blas_core_level(std::string_view core) {
    const std::string c = lower(core);
    for (const char* name : {"skylakex", "cooperlake", "sapphirerapids"})
        if (c == name)
            return 3;
    for (const char* name : {"haswell", "zen", "excavator"})
        if (c == name)
            return 2;
    for (const char* name : {"sandybridge", "bulldozer", "piledriver", "steamroller"})
        if (c == name)
            return 1;
    return 0;
}

std::string better_blas_core(std::string_view core, Isa cpu) {
    const int have = blas_core_level(core);
    if (cpu == Isa::avx512 && have < 3)
        return "Cooperlake";
    if (cpu == Isa::avx2 && have < 2)
        return "Haswell";
    return "";
}

void prefer_best_blas_core(char** argv) {
    if (const char* before = std::getenv(kReexecMarker)) {
        const std::string from = before;
        unsetenv(kReexecMarker);
        const char* asked = std::getenv("OPENBLAS_CORETYPE");
        std::cerr << "ioattn: OpenBLAS picked its " << from << " kernels on this CPU; running "
                  << measure::blas_core() << " instead (OPENBLAS_CORETYPE=" << (asked ? asked : "")
                  << "; set OPENBLAS_CORETYPE yourself to choose)\n";
        return;
    }
    if (std::getenv("OPENBLAS_CORETYPE") != nullptr)
        return; // the user's choice
    const std::string core = measure::blas_core();
    const std::string want = better_blas_core(core, best_cpu_isa());
    if (want.empty())
        return;
    setenv("OPENBLAS_CORETYPE", want.c_str(), 1);
    setenv(kReexecMarker, core.c_str(), 1);
    execv("/proc/self/exe", argv);
    const int err = errno;
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv(kReexecMarker);
    std::cerr << "ioattn: OpenBLAS runs its " << core << " kernels, slower than this CPU allows "
              << "(re-running with OPENBLAS_CORETYPE=" << want << " failed: " << std::strerror(err)
              << ")\n";
}

} // namespace ioattn::app
