/* Broadcasts on one node with more ranks than cores, where a message above the
 * eager limit goes from the root to every rank at once, each rank copying it from
 * the root's memory: every size around the limit, from every root, checked byte by
 * byte on every rank; then a root's buffer reused at once for the next call. */
#include "check.h"

static unsigned char at(long i, int root, int round) {
    return (unsigned char)(i * 131 + root * 7 + round * 29 + (i >> 9));
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    static const long sizes[] = {1024, 65535, 65536, 65537, 300007, (1 << 20) + 3};
    long max = (1 << 20) + 3;
    unsigned char *buf = malloc((size_t)max);
    for (int s = 0; s < (int)(sizeof sizes / sizeof sizes[0]); s++) {
        long n = sizes[s];
        for (int root = 0; root < np; root++) {
            for (int round = 0; round < 2; round++) {
                for (long i = 0; i < n; i++)
                    buf[i] = me == root ? at(i, root, round) : 0xEE;
                MPI_Bcast(buf, (int)n, MPI_BYTE, root, MPI_COMM_WORLD);
                long bad = -1;
                for (long i = 0; i < n && bad < 0; i++)
                    if (buf[i] != at(i, root, round))
                        bad = i;
                CHECK(bad < 0, "bcast of %ld bytes from %d, round %d: byte %ld is %d", n, root, round,
                      bad, bad < 0 ? 0 : buf[bad]);
            }
        }
    }
    free(buf);
    DONE("bcast_node");
    MPI_Finalize();
    return 0;
}
