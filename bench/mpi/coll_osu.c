/* The Open MPI side of `qcg-bench coll --lab`, and both sides of `qcg-bench mpi --lab`
 * (built with qcg-mpicc and with mpicc): MPI_Bcast, MPI_Reduce, MPI_Gather,
 * MPI_Allgather and MPI_Allreduce timed with the same OSU method as the qcg ranks (barrier, warm-up,
 * every call timed on its own with a barrier after it outside the timed part, each
 * rank's mean, then the mean, min and max over ranks), and, as there, every call
 * starting at a common instant on the wall clock that rank 0 broadcasts ahead (twice
 * the worst delay of three 8-byte probes, plus 2 ms): see bench/src/coll.rs for why.
 *
 * Usage: coll_osu OPS MIN_SIZE MAX_SIZE ITERS SKIP
 *   OPS: comma-separated among bcast, reduce, allreduce, gather, allgather
 *   sizes: the powers of two from MIN_SIZE (rounded down) to MAX_SIZE; ITERS and SKIP are cut to a tenth above 8 KiB
 *   (at least 5 and 1), as the qcg side does. Reductions sum MAX(size / 8, 1) uint64.
 * Output on rank 0, one line per point: `op,size,avg_us,min_us,max_us,late`, where
 * late counts the calls, over all ranks, that got the start instant after it. */
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Nanoseconds on the wall clock, shared by every rank on one machine. */
static uint64_t wall_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Sleeps to half a millisecond before `at`, then yields; 0 when `at` had passed. */
static int wait_until(uint64_t at) {
    uint64_t now = wall_ns();
    if (now >= at)
        return 0;
    if (at - now > 500000) {
        uint64_t d = at - now - 500000;
        struct timespec ts = {(time_t)(d / 1000000000u), (long)(d % 1000000000u)};
        nanosleep(&ts, NULL);
    }
    while (wall_ns() < at)
        sched_yield();
    return 1;
}

/* Twice the worst time an 8-byte broadcast took to reach a rank in three probes,
 * plus 2 ms, in ns (the same on every rank). */
static uint64_t start_margin(void) {
    double worst = 0.0;
    for (int i = 0; i < 3; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        uint64_t t = wall_ns();
        MPI_Bcast(&t, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
        uint64_t now = wall_ns();
        double lag = now > t ? (double)(now - t) : 0.0, max;
        MPI_Allreduce(&lag, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (max > worst)
            worst = max;
    }
    return 2 * (uint64_t)worst + 2000000u;
}

static int run(const char *op, void *buf, void *out, size_t size, int rank) {
    int words = (int)(size / 8 > 0 ? size / 8 : 1);
    if (strcmp(op, "bcast") == 0)
        return MPI_Bcast(buf, (int)size, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (strcmp(op, "reduce") == 0)
        return MPI_Reduce(buf, rank == 0 ? out : NULL, words, MPI_UINT64_T, MPI_SUM, 0,
                          MPI_COMM_WORLD);
    if (strcmp(op, "allreduce") == 0)
        return MPI_Allreduce(buf, out, words, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    if (strcmp(op, "gather") == 0)
        return MPI_Gather(buf, (int)size, MPI_BYTE, rank == 0 ? out : NULL, (int)size,
                          MPI_BYTE, 0, MPI_COMM_WORLD);
    if (strcmp(op, "allgather") == 0)
        return MPI_Allgather(buf, (int)size, MPI_BYTE, out, (int)size, MPI_BYTE,
                             MPI_COMM_WORLD);
    return -1;
}

int main(int argc, char **argv) {
    int rank, np;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    if (argc != 6) {
        if (rank == 0)
            fprintf(stderr, "usage: coll_osu OPS MIN_SIZE MAX_SIZE ITERS SKIP\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    size_t min = strtoull(argv[2], NULL, 10), max = strtoull(argv[3], NULL, 10), first = 1;
    int iters = atoi(argv[4]), skip = atoi(argv[5]);
    while (first * 2 <= min)
        first *= 2;
    size_t cap = max < 8 ? 8 : max;
    char *buf = malloc(cap);
    char *out = malloc(cap * (size_t)np);
    if (!buf || !out) {
        fprintf(stderr, "coll_osu: out of memory for %zu bytes\n", cap * (size_t)np);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(buf, 1, cap);
    char *ops = strdup(argv[1]);
    for (char *op = strtok(ops, ","); op; op = strtok(NULL, ",")) {
        for (size_t size = first; size <= max; size *= 2) {
            int it = iters, sk = skip;
            if (size > 8192) {
                it = iters / 10 > 5 ? iters / 10 : 5;
                sk = skip / 10 > 1 ? skip / 10 : 1;
            }
            double total = 0.0;
            /* Measured twice, the first discarded: a first call may make the links
             * of this operation's pattern (qcg makes them on first use, Open MPI's
             * shared memory at start-up), and a margin that counted that would make
             * every call of this size wait longer before its start, which alone
             * made calls slower on a crowded node, on both sides: 16 ranks on 2
             * cores, bcast 8 B, a 2.5 ms margin 107 / 154 us (qcg / Open MPI), 5.3 ms
             * 207 / 248, 10 ms 270 / 388. */
            start_margin();
            uint64_t late = 0, margin = start_margin();
            for (int i = 0; i < sk + it; i++) {
                MPI_Barrier(MPI_COMM_WORLD);
                uint64_t at = wall_ns() + margin;
                MPI_Bcast(&at, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
                int on_time = wait_until(at);
                if (run(op, buf, out, size, rank) != MPI_SUCCESS) {
                    fprintf(stderr, "coll_osu: unknown or failed operation `%s`\n", op);
                    MPI_Abort(MPI_COMM_WORLD, 2);
                }
                uint64_t end = wall_ns();
                if (i >= sk) {
                    total += end > at ? (double)(end - at) * 1e-9 : 0.0;
                    late += !on_time;
                }
            }
            MPI_Barrier(MPI_COMM_WORLD);
            uint64_t late_all = 0;
            MPI_Reduce(&late, &late_all, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
            double mine = total / it * 1e6, sum, lo, hi;
            MPI_Reduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
            MPI_Reduce(&mine, &lo, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
            MPI_Reduce(&mine, &hi, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
            if (rank == 0) {
                printf("%s,%zu,%.3f,%.3f,%.3f,%llu\n", op, size, sum / np, lo, hi,
                       (unsigned long long)late_all);
                fflush(stdout);
            }
        }
    }
    free(ops);
    free(buf);
    free(out);
    MPI_Finalize();
    return 0;
}
