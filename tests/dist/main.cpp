// Catch2 entry point of ioattn_tests_dist, run under mpirun: every rank runs the same test cases
// in the same order (their collectives match), and the exit status is the worst over the ranks.
// Catch's implementation is compiled once, in support/catch_session.cpp.
#include "catch_session.hpp"

#include <mpi.h>

int main(int argc, char** argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    const int result = run_catch_session(argc, argv);
    int worst = 0;
    MPI_Allreduce(&result, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return worst;
}
