/* Failures that must stop the job, naming the rank (not run under Open MPI):
 *   aborts fatal       rank 1 sends to a rank that does not exist (default handler)
 *   aborts nofinalize  rank 2 returns from main without MPI_Finalize
 *   aborts abort       rank 3 calls MPI_Abort(MPI_COMM_WORLD, 7)
 *   aborts mismatch    rank 0 calls MPI_Gatherv with root 0, the others with root 1 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int me, np, x = 1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "fatal") == 0 && me == 1) MPI_Send(&x, 1, MPI_INT, np + 5, 0, MPI_COMM_WORLD);
    if (strcmp(mode, "nofinalize") == 0 && me == 2) return 0;
    if (strcmp(mode, "abort") == 0 && me == 3) MPI_Abort(MPI_COMM_WORLD, 7);
    if (strcmp(mode, "mismatch") == 0) {
        int counts[64], displs[64], all[64];
        for (int i = 0; i < np; i++) { counts[i] = 1; displs[i] = i; }
        MPI_Gatherv(&me, 1, MPI_INT, all, counts, displs, MPI_INT, me == 0 ? 0 : 1, MPI_COMM_WORLD);
    }
    /* The others wait for a message that never comes: the job must be stopped. */
    if (strcmp(mode, "ok") != 0) MPI_Recv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Finalize();
    return 0;
}
