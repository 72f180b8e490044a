/* A profiling library as mpiP or Score-P would be: it defines MPI_Send,
 * MPI_Allreduce and MPI_Finalize, counts the calls and hands each one to the
 * implementation through its PMPI_ name. Built as a shared library and linked
 * ahead of libqcgmpi, so the program's calls reach it first. */
#include <mpi.h>
#include <stdio.h>

static int sends, allreduces;

int MPI_Send(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
    sends++;
    return PMPI_Send(buf, count, datatype, dest, tag, comm);
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm) {
    allreduces++;
    return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}

int MPI_Finalize(void) {
    int rank;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    printf("rank %d: profiler counted %d MPI_Send, %d MPI_Allreduce\n", rank, sends, allreduces);
    fflush(stdout);
    return PMPI_Finalize();
}
