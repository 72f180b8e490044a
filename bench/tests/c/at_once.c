/*
 * Two ranks that speak first at the same moment (issue 20): ranks 1 and 2 send to each
 * other at once (MPI_Sendrecv), then every rank enters a barrier. Rank 0 only takes
 * part in MPI_Init (whose collectives link every rank to rank 0, one dialling at a
 * time) and the barrier: ranks 1 and 2 have no link yet when they exchange, so they
 * dial each other at once. Prints one line per rank; exits 1 on a wrong value.
 *
 * AT_ONCE_START (optional): a CLOCK_REALTIME instant in nanoseconds; ranks 1 and 2
 * wait for it after MPI_Init, so that their first messages leave within microseconds
 * of each other (as after a barrier that released both), not as the ranks' launch
 * happens to order them. A rank that reaches it late says so on stderr.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void wait_until(int rank, const char *ns)
{
    long long t = atoll(ns);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    long long ahead = t - ((long long)now.tv_sec * 1000000000LL + now.tv_nsec);
    if (ahead < 0)
        fprintf(stderr, "rank %d: at_once: late for the start by %lld us\n", rank,
                -ahead / 1000);
    struct timespec at = {.tv_sec = (time_t)(t / 1000000000LL),
                          .tv_nsec = (long)(t % 1000000000LL)};
    while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &at, NULL) != 0) {
    }
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 3) {
        fprintf(stderr, "at_once: needs 3 ranks, got %d\n", size);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int ok = 1;
    if (rank > 0) {
        const char *start = getenv("AT_ONCE_START");
        if (start != NULL)
            wait_until(rank, start);
        int peer = 3 - rank;
        long out = 1000 + rank, in = -1;
        MPI_Sendrecv(&out, 1, MPI_LONG, peer, 7, &in, 1, MPI_LONG, peer, 7, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        ok = in == 1000 + peer;
        printf("rank %d: at_once: got %ld from rank %d: %s\n", rank, in, peer,
               ok ? "ok" : "WRONG");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return ok ? 0 : 1;
}
