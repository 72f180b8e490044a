/* The predefined reductions on C's `long double`, which Rust has no type for
 * (x86-64: 80-bit extended precision in 16 bytes). Built by build.rs with the
 * system's C compiler, so the arithmetic is the compiler's own, exactly as a C
 * program's or Open MPI's. Elements are packed (no alignment): copied in and out. */
#include <stddef.h>
#include <string.h>

/* sizeof(long double), for the Rust side to check its layout against. */
size_t qcg_ld_size(void) { return sizeof(long double); }

/* a[i] = a[i] op b[i] for `n` packed long doubles; op: 1 max, 2 min, 3 sum, 4 prod
 * (the handles of mpi.h). */
void qcg_ld_op(int op, unsigned char *a, const unsigned char *b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        long double x, y, r;
        memcpy(&x, a + i * sizeof x, sizeof x);
        memcpy(&y, b + i * sizeof y, sizeof y);
        switch (op) {
        case 1: r = x > y ? x : y; break;
        case 2: r = x < y ? x : y; break;
        case 3: r = x + y; break;
        case 4: r = x * y; break;
        default: r = x; break;
        }
        memcpy(a + i * sizeof r, &r, sizeof r);
    }
}

/* Compares two packed long doubles: -1 (a < b), 0 (equal), 1 (a > b), 2 (unordered). */
int qcg_ld_cmp(const unsigned char *a, const unsigned char *b) {
    long double x, y;
    memcpy(&x, a, sizeof x);
    memcpy(&y, b, sizeof y);
    if (x < y) return -1;
    if (x > y) return 1;
    if (x == y) return 0;
    return 2;
}
