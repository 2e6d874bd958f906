// Catch2 entry point shared by the ioattn test executables.
//
// ctest also re-runs the kernel suites under each instruction-set variant (tests/CMakeLists.txt:
// IOATTN_ISA=<variant> with IOATTN_TEST_VARIANT_RUN set). Such a re-run is skipped (exit 77,
// ctest's SKIP_RETURN_CODE) when this CPU cannot execute the variant, and when the variant is
// the one the plain run already uses, so every variant the CPU supports runs exactly once.
//
// GCC 12 at -O2 with -fsanitize=address reports a false -Wmaybe-uninitialized inside Catch2's
// std::regex use; it is third-party code, so that one warning is silenced for this file only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#define CATCH_CONFIG_RUNNER
#include <ioattn/error.hpp>
#include <ioattn/isa.hpp>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <iostream>

namespace {

constexpr int kSkipped = 77;

/// The variant a plain run takes: the best built one this CPU supports.
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
                std::cout << "skipped: variant " << ioattn::to_string(isa)
                          << " is the default here; the plain run covers it\n";
                return kSkipped;
            }
            std::cout << "running under variant " << ioattn::to_string(isa) << '\n';
        } catch (const ioattn::Error& e) {
            std::cout << "skipped: " << e.what() << '\n';
            return kSkipped;
        }
    }
    return Catch::Session().run(argc, argv);
}
