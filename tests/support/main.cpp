// Catch2 entry point shared by the ioattn test executables.
//
// ctest also re-runs the kernel suites under each ISA target (tests/CMakeLists.txt:
// IOATTN_ISA=<target> with IOATTN_TEST_VARIANT_RUN set). Such a re-run is skipped (exit 77,
// ctest's SKIP_RETURN_CODE) when this CPU cannot execute the target, and when the target is
// the one the plain run already uses, so every target the CPU supports runs exactly once.
// Catch's implementation is compiled once, in catch_session.cpp.
#include "catch_session.hpp"

#include <ioattn/error.hpp>
#include <ioattn/isa.hpp>

#include <cstdlib>
#include <iostream>

namespace {

constexpr int kSkipped = 77;

/// The ISA target a plain run takes: the best built one this CPU supports.
ioattn::Isa default_isa() {
    for (const ioattn::Isa isa : ioattn::built_isas())
        if (ioattn::cpu_supports(isa))
            return isa;
    return ioattn::Isa::sse2;
}

} // namespace

int main(int argc, char* argv[]) {
    if (std::getenv("IOATTN_TEST_VARIANT_RUN") != nullptr) {
        try {
            const ioattn::Isa isa = ioattn::active_isa();
            if (isa == default_isa()) {
                std::cout << "skipped: ISA target " << ioattn::to_string(isa)
                          << " is the default here; the plain run covers it\n";
                return kSkipped;
            }
            std::cout << "running under ISA target " << ioattn::to_string(isa) << '\n';
        } catch (const ioattn::Error& e) {
            std::cout << "skipped: " << e.what() << '\n';
            return kSkipped;
        }
    }
    return run_catch_session(argc, argv);
}
