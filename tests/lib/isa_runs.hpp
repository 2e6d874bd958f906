#pragma once
// The runners of the per-instruction-set kernel checks (strip_test.cpp, pack_test.cpp): each
// check is compiled once per ISA target built into the library (strip_checks.cpp,
// pack_checks.cpp) and run for every variant this CPU can execute; one it cannot is reported
// and skipped, never run. Included by ordinary (baseline) translation units only.

#include <ioattn/isa.hpp>
#include <ioattn/kernels/dispatch.hpp>

#include <catch2/catch.hpp>

#include <string>

namespace ioattn::test {

/// Whether this CPU runs the ISA target in namespace `ns` ("isa_avx2", ...); warns when not.
inline bool runs_variant(const std::string& ns) {
    const ioattn::Isa isa = ioattn::parse_isa(ns.substr(ns.find('_') + 1));
    if (!ioattn::cpu_supports(isa)) {
        WARN("variant " << ns << " skipped: this CPU cannot execute it");
        return false;
    }
    return true;
}

} // namespace ioattn::test

#define IOATTN_STRING(x) #x
/// Runs ns::isa::check<TestType>() when this CPU executes variant `isa`.
#define IOATTN_RUN_VARIANT(ns, check, isa)                                                         \
    if (ioattn::test::runs_variant(IOATTN_STRING(isa))) {                                          \
        INFO("variant " IOATTN_STRING(isa));                                                       \
        ns::isa::check<TestType>();                                                                \
    }
