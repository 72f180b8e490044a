/* Failures that must stop the job, naming the rank (not run under Open MPI):
 *   aborts fatal       rank 1 sends to a rank that does not exist (default handler)
 *   aborts nofinalize  rank 2 returns from main without MPI_Finalize
 *   aborts abort       rank 3 calls MPI_Abort(MPI_COMM_WORLD, 7)
 *   aborts mismatch    rank 0 calls MPI_Gatherv with root 0, the others with root 1
 *   aborts op          rank 2 calls MPI_Allreduce with MPI_MAX, the others MPI_SUM
 *   aborts root        rank 3 calls MPI_Reduce with root 1, the others root 0
 *   aborts ldtype      rank 1 reduces MPI_LONG, the others MPI_DOUBLE (same size)
 *   aborts bigop       op and ldtype at once, with 32768 elements (a direct reduction:
 *                      rank 2 MPI_MAX, rank 1 MPI_LONG, the others MPI_SUM of MPI_DOUBLE)
 *   aborts a2av        rank 0 sends rank 1 one int where rank 1 expects two
 *   aborts bcastroot   rank 3 calls MPI_Bcast with root 3 (itself), the others root 0,
 *                      then every rank calls MPI_Finalize
 *   aborts neighbor    on a periodic ring, rank 0 sends its neighbours one int where
 *                      they expect two (MPI_Neighbor_allgather)
 *   aborts noneighbor  on a periodic ring, rank 2 skips MPI_Neighbor_allgather */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
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
    if (strcmp(mode, "op") == 0) {
        int y = 0;
        MPI_Allreduce(&x, &y, 1, MPI_INT, me == 2 ? MPI_MAX : MPI_SUM, MPI_COMM_WORLD);
        printf("rank %d: allreduce gave %d\n", me, y);
    }
    if (strcmp(mode, "root") == 0) {
        int y = 0;
        MPI_Reduce(&x, &y, 1, MPI_INT, MPI_SUM, me == 3 ? 1 : 0, MPI_COMM_WORLD);
        printf("rank %d: reduce gave %d\n", me, y);
    }
    if (strcmp(mode, "ldtype") == 0) {
        double d = 1.0, e = 0;
        MPI_Allreduce(&d, &e, 1, me == 1 ? MPI_LONG : MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        printf("rank %d: allreduce gave %g\n", me, e);
    }
    if (strcmp(mode, "bigop") == 0) {
        int n = 32768;
        double *d = calloc(n, sizeof *d), *e = calloc(n, sizeof *e);
        MPI_Allreduce(d, e, n, me == 1 ? MPI_LONG : MPI_DOUBLE, me == 2 ? MPI_MAX : MPI_SUM,
                      MPI_COMM_WORLD);
        printf("rank %d: allreduce gave %g\n", me, e[0]);
        free(d);
        free(e);
    }
    if (strcmp(mode, "a2av") == 0) {
        int sc[64], sd[64], rc[64], rd[64], sb[128], rb[128];
        for (int i = 0; i < np; i++) {
            sc[i] = rc[i] = 2;
            sd[i] = rd[i] = 2 * i;
            sb[2 * i] = sb[2 * i + 1] = me;
        }
        if (me == 0) sc[1] = 1;
        MPI_Alltoallv(sb, sc, sd, MPI_INT, rb, rc, rd, MPI_INT, MPI_COMM_WORLD);
        printf("rank %d: alltoallv gave %d %d\n", me, rb[0], rb[1]);
    }
    if (strcmp(mode, "bcastroot") == 0) {
        int root = me == 3 ? 3 : 0, v = me == root ? 100 + me : -1;
        MPI_Bcast(&v, 1, MPI_INT, root, MPI_COMM_WORLD);
        printf("rank %d: bcast gave %d\n", me, v);
        fflush(stdout);
    }
    if (strcmp(mode, "neighbor") == 0) {
        int dims[1] = {np}, periods[1] = {1}, sb[2] = {me, me}, rb[4];
        MPI_Comm ring;
        MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring);
        MPI_Neighbor_allgather(sb, me == 0 ? 1 : 2, MPI_INT, rb, 2, MPI_INT, ring);
        printf("rank %d: neighbor allgather gave %d %d\n", me, rb[0], rb[2]);
    }
    if (strcmp(mode, "noneighbor") == 0) {
        int dims[1] = {np}, periods[1] = {1}, rb[2];
        MPI_Comm ring;
        MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring);
        if (me != 2) {
            MPI_Neighbor_allgather(&me, 1, MPI_INT, rb, 1, MPI_INT, ring);
            printf("rank %d: neighbor allgather gave %d %d\n", me, rb[0], rb[1]);
        }
    }
    /* The others wait for a message that never comes: the job must be stopped. */
    if (strcmp(mode, "ok") != 0 && strcmp(mode, "bcastroot") != 0) MPI_Recv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Finalize();
    return 0;
}
