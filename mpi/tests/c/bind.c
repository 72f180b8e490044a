/* Prints the cores this rank may run on after MPI_Init: `rank R cores N first F`
 * (how many, and the lowest). qcg pins the ranks of a crowded node (QCG_BIND). */
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdio.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) {
        perror("sched_getaffinity");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int first = -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set)) {
            first = c;
            break;
        }
    printf("rank %d cores %d first %d\n", rank, CPU_COUNT(&set), first);
    MPI_Finalize();
    return 0;
}
