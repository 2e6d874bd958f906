// Tests of the program's instruction-set handling (ioattn/isa.hpp, apps/main.cpp): --version
// names the kernels' variant, oneTBB and the BLAS core; IOATTN_ISA forces a variant that `run
// --json` reports, with the same results and the same counted I/O as the default; avx512bf16
// runs the native bf16 kernels (the dense fused forward, the sparse tile forward) and avx512
// the widening path; an unknown or unsupported IOATTN_ISA is one usage line (exit 2), never an
// illegal instruction. And the OpenBLAS core choice of apps/blas_core.cpp (compiled into this
// test), which `bench` applies.

#include "blas_core.hpp"
#include "cli.hpp"

#include <ioattn/isa.hpp>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

using ioattn::Isa;
using ioattn::app::test::command_of;
using ioattn::app::test::lines_of;
using ioattn::app::test::require_one_line_error;
using ioattn::app::test::run_ioattn;
using nlohmann::json;

namespace {

/// Sets an environment variable for the lifetime of the guard (the program inherits it).
class EnvGuard {
public:
    EnvGuard(const char* name, const char* value)
        : name_(name) {
        if (const char* old = std::getenv(name))
            old_ = old;
        setenv(name, value, 1);
    }

    EnvGuard(const EnvGuard&) = delete;
    EnvGuard& operator=(const EnvGuard&) = delete;

    ~EnvGuard() {
        if (old_)
            setenv(name_, old_->c_str(), 1);
        else
            unsetenv(name_);
    }

private:
    const char* name_;
    std::optional<std::string> old_;
};

json run_json(const std::vector<std::string>& args) {
    const auto r = run_ioattn(args);
    INFO("command: " << command_of(args) << "\nstderr: " << r.err);
    REQUIRE(r.status == 0);
    json j;
    REQUIRE_NOTHROW(j = json::parse(r.out));
    return j;
}

Isa best_supported() {
    for (const Isa isa : ioattn::built_isas())
        if (ioattn::cpu_supports(isa))
            return isa;
    return Isa::sse2;
}

} // namespace

TEST_CASE(
    "ioattn --version names the version, the kernels' instruction set, oneTBB and the BLAS core",
    "[apps][isa]") {
    const EnvGuard clear("IOATTN_ISA", "");
    const auto r = run_ioattn({"--version"});
    REQUIRE(r.status == 0);
    const auto lines = lines_of(r.out);
    REQUIRE(lines.size() == 4);
    CHECK(lines[0].rfind("ioattn ", 0) == 0);
    CHECK(lines[1].rfind("kernels: " + std::string(ioattn::to_string(best_supported())) + " (",
                         0) == 0);
    CHECK(lines[2].rfind("oneTBB: ", 0) == 0);
    CHECK(lines[3].rfind("BLAS: OpenBLAS", 0) == 0);
    CHECK(lines[3].find("; core ") != std::string::npos);
}

TEST_CASE("IOATTN_ISA forces each supported variant: run reports it, with the default's results "
          "and counted I/O",
          "[apps][isa]") {
    const std::vector<std::string> args{"run",
                                        "--N",
                                        "200",
                                        "--d",
                                        "24",
                                        "--heads",
                                        "2",
                                        "--pattern",
                                        "window:40",
                                        "--check",
                                        "--count-io",
                                        "--json"};
    json plain;
    {
        const EnvGuard clear("IOATTN_ISA", "");
        plain = run_json(args);
    }
    CHECK(plain["isa"] == std::string(ioattn::to_string(best_supported())));
    for (const Isa isa : ioattn::built_isas()) {
        if (!ioattn::cpu_supports(isa))
            continue;
        const std::string name(ioattn::to_string(isa));
        CAPTURE(name);
        const EnvGuard force("IOATTN_ISA", name.c_str());
        const json j = run_json(args);
        CHECK(j["isa"] == name);
        CHECK(j["check"]["passed"] == true);
        CHECK(j["io"]["total"] == plain["io"]["total"]);
        CHECK(j["io"]["peak_resident"] == plain["io"]["peak_resident"]);
        const auto v = run_ioattn({"--version"});
        CHECK(lines_of(v.out).at(1).rfind("kernels: " + name + " (", 0) == 0);
    }
}

TEST_CASE("an unknown or unsupported IOATTN_ISA is one usage line, exit 2", "[apps][isa]") {
    {
        const EnvGuard bogus("IOATTN_ISA", "avx1024");
        require_one_line_error({"run", "--N", "64", "--d", "16"}, "avx1024");
        require_one_line_error({"--version"}, "avx1024");
    }
    for (const Isa isa : {Isa::avx512, Isa::avx2}) {
        if (ioattn::cpu_supports(isa))
            continue;
        const std::string name(ioattn::to_string(isa));
        const EnvGuard force("IOATTN_ISA", name.c_str());
        require_one_line_error({"run", "--N", "64", "--d", "16"}, name);
    }
}

TEST_CASE("IOATTN_ISA=avx512bf16 runs the native bf16 kernels, avx512 the widening path",
          "[apps][isa][bf16]") {
    const bool native_here = [] {
        const EnvGuard clear("IOATTN_ISA", "");
        return ioattn::bf16_kernels_native();
    }();
    if (!native_here) {
        const EnvGuard force("IOATTN_ISA", "avx512bf16");
        require_one_line_error({"run", "--N", "64", "--d", "16"}, "avx512bf16");
        return;
    }
    // the dense fused forward, and the sparse tile variant's forward (a window)
    const std::vector<std::vector<std::string>> runs{
        {"run", "--N", "200", "--d", "24", "--heads", "2", "--causal", "--schedule", "fused"},
        {"run", "--N", "300", "--d", "32", "--pattern", "window:16", "--variant", "tile"}};
    for (std::vector<std::string> args : runs) {
        CAPTURE(args[4]);
        for (const char* a : {"--dtype", "bf16", "--check", "--count-io", "--json"})
            args.emplace_back(a);
        json plain, native, widening;
        {
            const EnvGuard clear("IOATTN_ISA", "");
            plain = run_json(args);
        }
        {
            const EnvGuard force("IOATTN_ISA", "avx512bf16");
            native = run_json(args);
        }
        {
            const EnvGuard force("IOATTN_ISA", "avx512");
            widening = run_json(args);
        }
        CHECK(plain["bf16_kernels"] == "native");
        CHECK(native["bf16_kernels"] == "native");
        CHECK(widening["bf16_kernels"] == "widened");
        CHECK(native["isa"] == "avx512");
        CHECK(native["output_digest"] == plain["output_digest"]);
        CHECK(native["output_digest"] != widening["output_digest"]); // P rounded to bf16
        for (const json* j : {&native, &widening}) {
            CHECK((*j)["check"]["passed"] == true);
            CHECK((*j)["io"]["total"] == plain["io"]["total"]);
            CHECK((*j)["io"]["matches_closed_form"] == true);
        }
    }
}

TEST_CASE("the OpenBLAS core ioattn bench asks for: the best this CPU runs, never a lesser one",
          "[apps][isa][blas]") {
    using ioattn::app::better_blas_core;
    using ioattn::app::blas_core_level;
    CHECK(blas_core_level("Prescott") == 0);
    CHECK(blas_core_level("Sandybridge") == 1);
    CHECK(blas_core_level("Haswell") == 2);
    CHECK(blas_core_level("ZEN") == 2);
    CHECK(blas_core_level("SkylakeX") == 3);
    CHECK(blas_core_level("cooperlake") == 3);
    CHECK(blas_core_level("Frobnicator") == 0);
    // Intel family 6 model 207: OpenBLAS 0.3.21 runs Prescott on an AVX-512 CPU
    CHECK(better_blas_core("Prescott", Isa::avx512) == "Cooperlake");
    CHECK(better_blas_core("Haswell", Isa::avx512) == "Cooperlake");
    CHECK(better_blas_core("SkylakeX", Isa::avx512).empty());
    CHECK(better_blas_core("Prescott", Isa::avx2) == "Haswell");
    CHECK(better_blas_core("Sandybridge", Isa::avx2) == "Haswell");
    CHECK(better_blas_core("Zen", Isa::avx2).empty());
    CHECK(better_blas_core("Prescott", Isa::sse2).empty());
}
