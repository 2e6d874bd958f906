// ioattn: exact attention on CPUs measured in data movement. The program's main: what concerns
// the process (the OpenBLAS core re-exec of bench and demo, OpenBLAS's idle workers), then
// ioattn::app::program_main (program.cpp), which the fuzz target of the command line calls
// in-process too.

#include "blas_core.hpp"
#include "program.hpp"

#include <string_view>

#include <measure.hpp>

int main(int argc, char** argv) {
    // bench and demo time OpenBLAS: make sure it runs the kernels this CPU allows (blas_core.hpp).
    if (argc > 1 && (std::string_view(argv[1]) == "bench" || std::string_view(argv[1]) == "demo"))
        ioattn::app::prefer_best_blas_core(argv);
    // OpenBLAS's workers spin for about 0.1 s after the library loads: not beside the first
    // timed runs of a kernel (measure.hpp)
    ioattn::measure::park_blas_threads();
    return ioattn::app::program_main(argc, argv);
}
