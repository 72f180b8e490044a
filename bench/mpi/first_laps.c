/* 1-byte ping-pong between ranks 0 and 1 from the first message on, in blocks:
 * prints each block's one-way time (half its average round trip), so the start of a
 * link (its set-up, a ring's first lap, the ranks' first placement on cores) shows
 * beside the steady state of the later blocks.
 *
 * Usage: first_laps [BLOCKS [ROUND_TRIPS_PER_BLOCK]]   (20 blocks of 500)
 * Output on rank 0, one line per block:   block,INDEX,START_US,ONE_WAY_US
 * (START_US: when the block began, from the first message.) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int me, np;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    int blocks = argc > 1 ? atoi(argv[1]) : 20, per = argc > 2 ? atoi(argv[2]) : 500;
    if (np < 2 || blocks < 1 || per < 1) {
        if (me == 0)
            fprintf(stderr, "first_laps: needs 2 ranks, BLOCKS >= 1, ROUND_TRIPS >= 1\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    double *start = malloc(sizeof(double) * blocks), *one_way = malloc(sizeof(double) * blocks);
    char b = 0;
    double t0 = MPI_Wtime();
    for (int k = 0; k < blocks; k++) {
        double t = MPI_Wtime();
        for (int i = 0; i < per && me < 2; i++) {
            if (me == 0) {
                MPI_Send(&b, 1, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
                MPI_Recv(&b, 1, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(&b, 1, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(&b, 1, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
            }
        }
        start[k] = (t - t0) * 1e6;
        one_way[k] = (MPI_Wtime() - t) / per / 2 * 1e6;
    }
    if (me == 0)
        for (int k = 0; k < blocks; k++)
            printf("block,%d,%.0f,%.3f\n", k, start[k], one_way[k]);
    free(start);
    free(one_way);
    MPI_Finalize();
    return 0;
}
