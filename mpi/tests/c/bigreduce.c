/* Large allreduces on the ranks of one node: a sum of 64-bit integers and a
 * non-commutative user operation (composition of affine maps t -> a*t + b, modulo
 * 2^64), at sizes around the split of the vector between the ranks, each result
 * checked element by element against the sequential one. */
#include "check.h"
#include <stdint.h>

/* inout = in ∘ inout, `in` being the lower ranks' part: (a1,b1)∘(a2,b2) is the map
 * t -> a1*(a2*t + b2) + b1. */
static void compose(void *in, void *inout, int *len, MPI_Datatype *t) {
    (void)t;
    uint64_t *x = in, *y = inout;
    for (int i = 0; i < *len; i++) {
        uint64_t a1 = x[2 * i], b1 = x[2 * i + 1], a2 = y[2 * i], b2 = y[2 * i + 1];
        y[2 * i] = a1 * a2;
        y[2 * i + 1] = a1 * b2 + b1;
    }
}

static uint64_t val(int r, long i) { return (uint64_t)(r + 1) * 0x9E3779B97F4A7C15u + (uint64_t)i * 7u; }

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    MPI_Datatype map;
    MPI_Type_contiguous(2, MPI_UINT64_T, &map);
    MPI_Type_commit(&map);
    MPI_Op op;
    MPI_Op_create(compose, 0, &op);
    const long counts[] = {8191, 16384, 65537, 131072, 262147};
    for (unsigned c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        long n = counts[c];
        uint64_t *x = malloc(n * 16), *y = malloc(n * 16);
        for (long i = 0; i < n; i++)
            x[i] = val(me, i);
        MPI_Allreduce(x, y, (int)n, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
        long bad = -1;
        for (long i = 0; i < n && bad < 0; i++) {
            uint64_t s = 0;
            for (int r = 0; r < np; r++)
                s += val(r, i);
            if (y[i] != s)
                bad = i;
        }
        CHECK(bad < 0, "sum of %ld: element %ld differs", n, bad);
        long m = n / 2;
        for (long i = 0; i < m; i++) {
            x[2 * i] = val(me, i) | 1;
            x[2 * i + 1] = val(me, i + 1);
        }
        MPI_Allreduce(x, y, (int)m, map, op, MPI_COMM_WORLD);
        bad = -1;
        for (long i = 0; i < m && bad < 0; i++) {
            uint64_t a = val(0, i) | 1, b = val(0, i + 1);
            for (int r = 1; r < np; r++) {
                uint64_t a2 = val(r, i) | 1, b2 = val(r, i + 1);
                b = a * b2 + b;
                a = a * a2;
            }
            if (y[2 * i] != a || y[2 * i + 1] != b)
                bad = i;
        }
        CHECK(bad < 0, "composition of %ld: element %ld differs", m, bad);
        free(x);
        free(y);
    }
    MPI_Op_free(&op);
    MPI_Type_free(&map);
    DONE("bigreduce");
    MPI_Finalize();
    return 0;
}
