/* Ping-pong between ranks 0 and 1 with MPI_Send/MPI_Recv, in the shape and output of
 * libqcg/examples/pingpong.rs (sizes 0 and powers of 4 up to MAX_BYTES, REPS round
 * trips each, every byte checked), to compare the C layer with the Rust API:
 *   qcg-mpicc -O2 mpi/bench/pingpong.c -o pingpong
 *   qcg run -n 2 --clusters 2 -- ./pingpong [MAX_BYTES] [REPS] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    int me, np;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    long max = argc > 1 ? atol(argv[1]) : 4L << 20;
    long reps = argc > 2 ? atol(argv[2]) : 10;
    if (np < 2) {
        fprintf(stderr, "pingpong needs at least 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long sizes[64];
    int n = 0;
    sizes[n++] = 0;
    for (long s = 1; s <= max; s *= 4) sizes[n++] = s;
    if (sizes[n - 1] != max) sizes[n++] = max;
    if (me == 0) printf("%10s %12s %12s\n", "bytes", "usec/1-way", "MB/s");
    for (int k = 0; k < n; k++) {
        long len = sizes[k];
        /* Buffers of each size's own, as the Rust example has: where they live
         * matters (a 64 KiB ping-pong between buffers that malloc took from mmap,
         * as it does above 128 KiB, ran 22-58 us one way from run to run here,
         * against a steady 22-27 us between heap buffers; no page faults per
         * round trip, cause not found; Open MPI's took 37-43 us either way). */
        unsigned char *out = malloc(len > 0 ? len : 1), *back = malloc(len > 0 ? len : 1);
        if (!out || !back) {
            fprintf(stderr, "no memory for %ld bytes\n", len);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        for (long i = 0; i < len; i++) out[i] = (unsigned char)(i * 31 + len);
        if (me == 0) {
            double t = MPI_Wtime();
            for (long r = 0; r < reps; r++) {
                MPI_Send(out, (int)len, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
                MPI_Recv(back, (int)len, MPI_BYTE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                if (len > 0 && memcmp(back, out, len) != 0) {
                    fprintf(stderr, "%ld bytes came back altered\n", len);
                    MPI_Abort(MPI_COMM_WORLD, 1);
                }
            }
            double one_way = (MPI_Wtime() - t) / (2.0 * reps);
            printf("%10ld %12.1f %12.1f\n", len, one_way * 1e6, len / one_way / 1e6);
        } else if (me == 1) {
            for (long r = 0; r < reps; r++) {
                MPI_Status st;
                int got;
                MPI_Recv(back, (int)len, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &st);
                MPI_Get_count(&st, MPI_BYTE, &got);
                MPI_Send(back, got, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
            }
        }
        free(out);
        free(back);
    }
    MPI_Finalize();
    return 0;
}
