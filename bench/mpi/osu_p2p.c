/* Point-to-point between ranks 0 and 1 with the OSU micro-benchmarks' method, for
 * `qcg-bench node` (built with qcg-mpicc and with Open MPI's mpicc):
 *
 * - latency (osu_latency): ping-pong of MPI_Send / MPI_Recv, SKIP warm-up round trips
 *   then ITERS timed ones; one-way time = the round trip's average / 2.
 * - bandwidth (osu_bw): rank 0 posts WINDOW MPI_Isend of the size, rank 1 WINDOW
 *   MPI_Irecv, both MPI_Waitall, then rank 1 sends a 4-byte ack; SKIP warm-up rounds
 *   then ITERS timed ones; MB/s = size * WINDOW * ITERS / time / 1e6. As OSU does,
 *   every send of a window reads one buffer and every receive lands in one buffer.
 *
 * Latency: above 8 KiB, ITERS and SKIP are cut to a tenth (at least 10 and 2), as
 * OSU does (1,000 and 10 there against 10,000 and 100). Bandwidth: see below; with
 * ITERS 10,000 and SKIP 100 it is osu_bw's 100 rounds and 10 warm-up (20 and 2
 * above 8 KiB). Each measure runs TRIALS times and the best trial is printed (OSU
 * prints its one trial's average; on a shared machine the best of a few is steadier
 * and favours neither side).
 *
 * Usage: osu_p2p MAX_BYTES ITERS SKIP TRIALS [WINDOW]
 *   sizes: 1, 8, 64, 1 KiB, 8 KiB, 64 KiB, 256 KiB, 1 MiB, 4 MiB, those <= MAX_BYTES
 * Output on rank 0, one line per measure and size (other ranks print nothing):
 *   p2p,lat,SIZE,ONE_WAY_US
 *   p2p,bw,SIZE,MB_PER_S
 * Ranks above 1 only take part in the barriers. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const long SIZES[] = {1, 8, 64, 1024, 8192, 65536, 262144, 1048576, 4194304};
#define NSIZES (sizeof SIZES / sizeof SIZES[0])
#define ACK_TAG 101
#define DATA_TAG 100

/* One latency trial: the one-way time in µs on rank 0. */
static double latency(int rank, char *buf, long size, int iters, int skip) {
    double t0 = 0.0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < skip + iters; i++) {
        if (i == skip)
            t0 = MPI_Wtime();
        if (rank == 0) {
            MPI_Send(buf, (int)size, MPI_CHAR, 1, DATA_TAG, MPI_COMM_WORLD);
            MPI_Recv(buf, (int)size, MPI_CHAR, 1, DATA_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(buf, (int)size, MPI_CHAR, 0, DATA_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, (int)size, MPI_CHAR, 0, DATA_TAG, MPI_COMM_WORLD);
        }
    }
    return (MPI_Wtime() - t0) * 1e6 / (2.0 * iters);
}

/* One bandwidth trial: MB/s (1e6 bytes) on rank 0. */
static double bandwidth(int rank, char *sbuf, char *rbuf, long size, int iters, int skip,
                        int window, MPI_Request *reqs) {
    double t0 = 0.0;
    char ack[4] = {0};
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < skip + iters; i++) {
        if (i == skip)
            t0 = MPI_Wtime();
        if (rank == 0) {
            for (int w = 0; w < window; w++)
                MPI_Isend(sbuf, (int)size, MPI_CHAR, 1, DATA_TAG, MPI_COMM_WORLD, &reqs[w]);
            MPI_Waitall(window, reqs, MPI_STATUSES_IGNORE);
            MPI_Recv(ack, 4, MPI_CHAR, 1, ACK_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            for (int w = 0; w < window; w++)
                MPI_Irecv(rbuf, (int)size, MPI_CHAR, 0, DATA_TAG, MPI_COMM_WORLD, &reqs[w]);
            MPI_Waitall(window, reqs, MPI_STATUSES_IGNORE);
            MPI_Send(ack, 4, MPI_CHAR, 0, ACK_TAG, MPI_COMM_WORLD);
        }
    }
    double t = MPI_Wtime() - t0;
    return (double)size * window * iters / t / 1e6;
}

int main(int argc, char **argv) {
    int rank, np;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    if (argc < 5 || argc > 6) {
        if (rank == 0)
            fprintf(stderr, "usage: osu_p2p MAX_BYTES ITERS SKIP TRIALS [WINDOW]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long max = atol(argv[1]);
    int iters = atoi(argv[2]), skip = atoi(argv[3]), trials = atoi(argv[4]);
    int window = argc > 5 ? atoi(argv[5]) : 64;
    if (np < 2 || max < 1 || iters < 1 || skip < 0 || trials < 1 || window < 1) {
        if (rank == 0)
            fprintf(stderr, "osu_p2p: needs 2 ranks, MAX_BYTES >= 1, ITERS >= 1, SKIP >= 0, "
                            "TRIALS >= 1, WINDOW >= 1 (got %d ranks, %s %s %s %s %d)\n",
                    np, argv[1], argv[2], argv[3], argv[4], window);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long cap = max < SIZES[NSIZES - 1] ? max : SIZES[NSIZES - 1];
    char *sbuf = malloc((size_t)cap), *rbuf = malloc((size_t)cap);
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * (size_t)window);
    if (!sbuf || !rbuf || !reqs) {
        fprintf(stderr, "osu_p2p: out of memory for %ld bytes\n", cap);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(sbuf, 'a', (size_t)cap);
    memset(rbuf, 'b', (size_t)cap);
    for (size_t k = 0; k < NSIZES && SIZES[k] <= max; k++) {
        long size = SIZES[k];
        int it = iters, sk = skip;
        if (size > 8192) {
            it = iters / 10 > 10 ? iters / 10 : 10;
            sk = skip / 10 > 2 ? skip / 10 : 2;
        }
        double best = 1e300;
        for (int t = 0; t < trials; t++) {
            double us = latency(rank, sbuf, size, it, sk);
            if (us < best)
                best = us;
        }
        if (rank == 0) {
            printf("p2p,lat,%ld,%.3f\n", size, best);
            fflush(stdout);
        }
    }
    for (size_t k = 0; k < NSIZES && SIZES[k] <= max; k++) {
        long size = SIZES[k];
        /* osu_bw: 100 rounds and 10 warm-up up to 8 KiB, 20 and 2 above; here a
         * hundredth of ITERS (at least 10) and a tenth of SKIP (at least 2), and above
         * 8 KiB a fifth of those rounds (at least 4) and 2 warm-up. */
        int it = iters / 100 > 10 ? iters / 100 : 10, sk = skip / 10 > 2 ? skip / 10 : 2;
        if (size > 8192) {
            it = it / 5 > 4 ? it / 5 : 4;
            sk = 2;
        }
        double best = 0.0;
        for (int t = 0; t < trials; t++) {
            double mbs = bandwidth(rank, sbuf, rbuf, size, it, sk, window, reqs);
            if (mbs > best)
                best = mbs;
        }
        if (rank == 0) {
            printf("p2p,bw,%ld,%.3f\n", size, best);
            fflush(stdout);
        }
    }
    free(reqs);
    free(rbuf);
    free(sbuf);
    MPI_Finalize();
    return 0;
}
