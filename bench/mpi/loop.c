/* One collective called back to back, timed on rank 0: the cost of the call itself,
 * without the sleeps of coll_osu.c between calls (which leave caches and cores cold).
 * Built with qcg-mpicc and with mpicc, run under `qcg run -n N` and `mpirun -np N`:
 *
 *   loop SIZE ITERS OP      OP: allreduce (SIZE/8 uint64 summed), bcast (SIZE bytes)
 *
 * Prints `OP SIZE: MEAN us` after 10 warm-up calls. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int me;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 1048576;
    int iters = argc > 2 ? atoi(argv[2]) : 100;
    const char *op = argc > 3 ? argv[3] : "allreduce";
    int words = (int)(n / 8 > 0 ? n / 8 : 1);
    uint64_t *x = malloc(n + 8), *y = malloc(n + 8);
    memset(x, 1, n + 8);
    memset(y, 0, n + 8);
    int bcast = strcmp(op, "bcast") == 0;
    if (!bcast && strcmp(op, "allreduce") != 0) {
        if (me == 0)
            fprintf(stderr, "loop: unknown operation %s (allreduce, bcast)\n", op);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    double t = 0;
    for (int i = -10; i < iters; i++) {
        if (i == 0) {
            MPI_Barrier(MPI_COMM_WORLD);
            t = MPI_Wtime();
        }
        if (bcast)
            MPI_Bcast(x, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD);
        else
            MPI_Allreduce(x, y, words, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    }
    t = MPI_Wtime() - t;
    if (me == 0)
        printf("%s %zu: %.1f us\n", op, n, t / iters * 1e6);
    free(x);
    free(y);
    MPI_Finalize();
    return 0;
}
