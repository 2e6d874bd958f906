// ioattn: exact attention on CPUs measured in data movement. The program's main: everything is
// in ioattn::app::program_main (program.cpp), which the fuzz target of the command line calls
// in-process too.

#include "program.hpp"

int main(int argc, char** argv) {
    return ioattn::app::program_main(argc, argv);
}
