/* Handles made again: a derived datatype freed and made anew (libqcgmpi hands the
 * freed number out again, as MPICH and Open MPI do) is the new type in the very next
 * send and receive, never the one an earlier call looked up; a communicator freed and
 * duplicated anew carries the messages named on it. Run with 4 ranks (pairs 0-1,
 * 2-3). */
#include "check.h"

static void exchange(MPI_Comm c, MPI_Datatype t, int peer, int tag, int *out, int *in,
                     MPI_Status *st) {
    if (me < peer) {
        MPI_Send(out, 1, t, peer, tag, c);
        MPI_Recv(in, 1, t, peer, tag, c, st);
    } else {
        MPI_Recv(in, 1, t, peer, tag, c, st);
        MPI_Send(out, 1, t, peer, tag, c);
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    int peer = me ^ 1;
    MPI_Status st;
    for (int round = 1; round <= 4; round++) {
        MPI_Datatype t;
        MPI_Type_contiguous(round, MPI_INT, &t);
        MPI_Type_commit(&t);
        int out[8], in[8];
        for (int i = 0; i < 8; i++) out[i] = me * 100 + round * 10 + i;
        /* Twice: the second exchange finds what the first looked up. */
        for (int k = 0; k < 2; k++) {
            for (int i = 0; i < 8; i++) in[i] = -1;
            exchange(MPI_COMM_WORLD, t, peer, k, out, in, &st);
            int count = -1;
            MPI_Get_count(&st, MPI_INT, &count);
            CHECK(count == round, "round %d: %d ints received, want %d", round, count, round);
            for (int i = 0; i < round; i++)
                CHECK(in[i] == peer * 100 + round * 10 + i, "round %d: int %d is %d", round, i,
                      in[i]);
            CHECK(in[round] == -1, "round %d: int %d written (%d)", round, round, in[round]);
        }
        MPI_Type_free(&t);
    }
    for (int round = 0; round < 3; round++) {
        MPI_Comm d;
        MPI_Comm_dup(MPI_COMM_WORLD, &d);
        int out[2] = {me, round}, in[2] = {-1, -1};
        for (int k = 0; k < 2; k++) {
            /* A message on the world with the same tag must not be taken for it. */
            int decoy = -7, got = 0;
            if (me < peer) {
                MPI_Send(&decoy, 1, MPI_INT, peer, k, MPI_COMM_WORLD);
                MPI_Send(out, 2, MPI_INT, peer, k, d);
            } else {
                MPI_Recv(in, 2, MPI_INT, peer, k, d, &st);
                MPI_Recv(&got, 1, MPI_INT, peer, k, MPI_COMM_WORLD, &st);
                CHECK(in[0] == peer && in[1] == round, "dup %d: got %d %d", round, in[0],
                      in[1]);
                CHECK(got == decoy, "dup %d: the world's message is %d", round, got);
            }
        }
        MPI_Comm_free(&d);
    }
    DONE("handles");
    MPI_Finalize();
    return 0;
}
