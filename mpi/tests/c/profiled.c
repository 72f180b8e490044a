/* The program the profiler (profiler.c) wraps: each rank sends to the next
 * `rank + 1` messages, then makes two allreduces. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
    int rank, size, x = 0, sum = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    for (int i = 0; i <= rank; i++)
        MPI_Send(&rank, 1, MPI_INT, next, 7, MPI_COMM_WORLD);
    for (int i = 0; i <= prev; i++)
        MPI_Recv(&x, 1, MPI_INT, prev, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d: sum %d, last from %d\n", rank, sum, x);
    MPI_Finalize();
    return 0;
}
