/* Ping-pong between ranks 0 and 1, the reference for `qcg-bench pingpong --mpi`:
 * for each size, a warm-up then TRIALS trials of REPS round trips; prints the best
 * one-way time (half the round trip) per size, one line each:
 *   SIZE ONE_WAY_US
 * Busy-polls (MPI_Recv), receives into a preallocated buffer. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    int rank, trials = argc > 1 ? atoi(argv[1]) : 5, reps_small = argc > 2 ? atoi(argv[2]) : 2000;
    long sizes[] = {1, 1024, 65536, 1048576, 16777216};
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char *buf = malloc(16777216);
    memset(buf, 0x5a, 16777216);
    for (int s = 0; s < 5; s++) {
        long n = sizes[s];
        int reps = n >= 1048576 ? (n >= 16777216 ? 10 : 100) : (n > 1024 ? reps_small / 4 : reps_small);
        double best = 1e30;
        for (int t = 0; t <= trials; t++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            for (int i = 0; i < reps; i++) {
                if (rank == 0) {
                    MPI_Send(buf, (int)n, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
                    MPI_Recv(buf, (int)n, MPI_BYTE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(buf, (int)n, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(buf, (int)n, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
                }
            }
            double one_way = (MPI_Wtime() - t0) / (2.0 * reps);
            if (t > 0 && one_way < best) best = one_way; /* trial 0 is the warm-up */
        }
        if (rank == 0) printf("%ld %.3f\n", n, best * 1e6);
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
