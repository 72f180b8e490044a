/* Windows of 1-byte messages from rank 0 to rank 1, as osu_bw's smallest size:
 * rank 0 posts 64 MPI_Isend, rank 1 64 MPI_Irecv, both MPI_Waitall, then rank 1
 * answers with a 4-byte MPI_Send. Prints the time per message, so the cost of the
 * non-blocking path (a request made, matched, completed and freed per message) can
 * be compared between libraries, or counted with `valgrind --tool=callgrind` in
 * front of the program.
 *
 * Usage: small_window [WINDOWS]   (20000)
 * Output on rank 0:   window,MESSAGES,NS_PER_MESSAGE */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define WINDOW 64

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int me, np;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    int windows = argc > 1 ? atoi(argv[1]) : 20000;
    if (np < 2 || windows < 1) {
        if (me == 0)
            fprintf(stderr, "small_window: needs 2 ranks and WINDOWS >= 1\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    char s[WINDOW] = {0}, r[WINDOW], ack[4] = {0};
    MPI_Request q[WINDOW];
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int w = 0; w < windows && me < 2; w++) {
        if (me == 0) {
            for (int i = 0; i < WINDOW; i++)
                MPI_Isend(s + i, 1, MPI_CHAR, 1, 100, MPI_COMM_WORLD, &q[i]);
            MPI_Waitall(WINDOW, q, MPI_STATUSES_IGNORE);
            MPI_Recv(ack, 4, MPI_CHAR, 1, 101, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            for (int i = 0; i < WINDOW; i++)
                MPI_Irecv(r + i, 1, MPI_CHAR, 0, 100, MPI_COMM_WORLD, &q[i]);
            MPI_Waitall(WINDOW, q, MPI_STATUSES_IGNORE);
            MPI_Send(ack, 4, MPI_CHAR, 0, 101, MPI_COMM_WORLD);
        }
    }
    double t = MPI_Wtime() - t0;
    if (me == 0)
        printf("window,%d,%.1f\n", WINDOW, t / windows / WINDOW * 1e9);
    MPI_Finalize();
    return 0;
}
