/* Collectives on MPI_COMM_WORLD: every operation checked against the value each
 * rank computes locally, MPI_IN_PLACE, every predefined operation, MAXLOC/MINLOC,
 * long double reductions to the last bit (values a double cannot tell apart),
 * user operations (commutative, and a non-commutative 2x2 matrix product). */
#include "check.h"

static void absmax(void *in, void *inout, int *len, MPI_Datatype *t) {
    int *a = in, *b = inout;
    (void)t;
    for (int i = 0; i < *len; i++) {
        int x = abs(a[i]), y = abs(b[i]);
        b[i] = x > y ? x : y;
    }
}

/* inout = in x inout, for 2x2 matrices of long long (row-major). */
static void matmul(void *in, void *inout, int *len, MPI_Datatype *t) {
    long long *a = in, *b = inout;
    (void)t;
    for (int k = 0; k < *len; k++, a += 4, b += 4) {
        long long c[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3],
                          a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3]};
        memcpy(b, c, sizeof c);
    }
}

static void mat_of(int r, long long *m) {
    m[0] = r + 1; m[1] = 1; m[2] = r % 3; m[3] = 2;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    MPI_Comm W = MPI_COMM_WORLD;
    MPI_Barrier(W);

    /* Bcast from rank 2 (mod size). */
    int root = 2 % np, b[4] = {0, 0, 0, 0};
    if (me == root) for (int i = 0; i < 4; i++) b[i] = 40 + i;
    MPI_Bcast(b, 4, MPI_INT, root, W);
    CHECK(b[0] == 40 && b[3] == 43, "bcast %d", b[0]);

    /* Reduce and Allreduce with every predefined operation on ints. */
    int x = me + 1, y = -1;
    MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN, MPI_LAND, MPI_LOR, MPI_LXOR, MPI_BAND, MPI_BOR, MPI_BXOR};
    const char *names[] = {"SUM", "PROD", "MAX", "MIN", "LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR"};
    for (int o = 0; o < 10; o++) {
        int want = (o == 0) ? 0 : (o == 1) ? 1 : (o == 2) ? -1000 : (o == 3) ? 1000 : (o == 4) ? 1 : (o == 5) ? 0 : (o == 6) ? 0 : (o == 7) ? -1 : 0;
        for (int r = 0; r < np; r++) {
            int v = r + 1;
            switch (o) {
            case 0: want += v; break;
            case 1: want *= v; break;
            case 2: want = v > want ? v : want; break;
            case 3: want = v < want ? v : want; break;
            case 4: want = want && v; break;
            case 5: want = want || v; break;
            case 6: want = (want != 0) != (v != 0); break;
            case 7: want &= v; break;
            case 8: want |= v; break;
            case 9: want ^= v; break;
            }
        }
        y = -1;
        MPI_Reduce(&x, &y, 1, MPI_INT, ops[o], 1 % np, W);
        if (me == 1 % np) CHECK(y == want, "reduce %s: %d, not %d", names[o], y, want);
        y = -1;
        MPI_Allreduce(&x, &y, 1, MPI_INT, ops[o], W);
        CHECK(y == want, "allreduce %s: %d, not %d", names[o], y, want);
        if (me == 0) printf("rank 0: allreduce %s of 1..%d = %d\n", names[o], np, y);
    }

    /* Doubles, unsigned long long, C bool, in place. */
    double dv[2] = {me * 0.25, -me * 1.5};
    MPI_Allreduce(MPI_IN_PLACE, dv, 2, MPI_DOUBLE, MPI_SUM, W);
    CHECK(dv[0] == 0.25 * np * (np - 1) / 2 && dv[1] == -1.5 * np * (np - 1) / 2, "double sum in place %g %g", dv[0], dv[1]);
    unsigned long long u = 1ULL << (40 + me), uo = 0;
    MPI_Allreduce(&u, &uo, 1, MPI_UNSIGNED_LONG_LONG, MPI_BOR, W);
    CHECK(uo == (((1ULL << np) - 1) << 40), "ull bor %llx", uo);
    _Bool bl = me == np - 1, blo = 0;
    MPI_Allreduce(&bl, &blo, 1, MPI_C_BOOL, MPI_LOR, W);
    CHECK(blo == 1, "bool lor");
    float fm = (float)(me % 2 ? me : -me), fo = 0;
    MPI_Allreduce(&fm, &fo, 1, MPI_FLOAT, MPI_MIN, W);
    CHECK(fo == -(float)((np - 1) / 2 * 2), "float min %g", fo);
    int acc = me + 10;
    MPI_Reduce(me == 0 ? MPI_IN_PLACE : &acc, &acc, 1, MPI_INT, MPI_SUM, 0, W);
    if (me == 0) CHECK(acc == 10 * np + np * (np - 1) / 2, "reduce in place %d", acc);

    /* MAXLOC / MINLOC. */
    struct { double v; int i; } dp = {(me * 7) % np, me}, dpo;
    MPI_Allreduce(&dp, &dpo, 1, MPI_DOUBLE_INT, MPI_MAXLOC, W);
    double best = -1; int at = -1;
    for (int r = 0; r < np; r++) if ((r * 7) % np > best) { best = (r * 7) % np; at = r; }
    CHECK(dpo.v == best && dpo.i == at, "maxloc %g@%d", dpo.v, dpo.i);
    struct { int v; int i; } ip[2] = {{me % 2, me}, {5, np - me}}, ipo[2];
    MPI_Allreduce(ip, ipo, 2, MPI_2INT, MPI_MINLOC, W);
    CHECK(ipo[0].v == 0 && ipo[0].i == 0 && ipo[1].v == 5 && ipo[1].i == 1, "minloc %d@%d %d@%d", ipo[0].v, ipo[0].i, ipo[1].v, ipo[1].i);

    /* long double: 64 bits of mantissa. Every value below differs from its
     * neighbours in bits a double does not have; each sum and product is exact. */
    long double e60 = 0x1p-60L, e62 = 0x1p-62L, e30 = 0x1p-30L;
    long double lx = 1.0L + (me + 1) * e62, ls = 0, lref = 0;
    for (int r = 0; r < np; r++) lref += 1.0L + (r + 1) * e62;
    MPI_Allreduce(&lx, &ls, 1, MPI_LONG_DOUBLE, MPI_SUM, W);
    CHECK(ls == lref && ls != (long double)(double)lref, "long double sum off by %Lg", ls - lref);
    long double lp = me < 2 ? 1.0L + e30 : 1.0L, lpo = 0;
    MPI_Reduce(&lp, &lpo, 1, MPI_LONG_DOUBLE, MPI_PROD, np - 1, W);
    if (me == np - 1)
        CHECK(np < 2 || lpo == 1.0L + 2 * e30 + e60, "long double prod off by %Lg", lpo - (1.0L + 2 * e30 + e60));
    long double lm[2] = {1.0L + me * e60, 1.0L - me * e60}, lmax[2], lmin[2];
    MPI_Allreduce(lm, lmax, 2, MPI_LONG_DOUBLE, MPI_MAX, W);
    MPI_Allreduce(lm, lmin, 2, MPI_LONG_DOUBLE, MPI_MIN, W);
    CHECK(lmax[0] == 1.0L + (np - 1) * e60 && lmax[1] == 1.0L, "long double max");
    CHECK(lmin[0] == 1.0L && lmin[1] == 1.0L - (np - 1) * e60, "long double min");
    struct { long double v; int i; } lpair = {1.0L + (me % 2) * e60, me}, lmaxl, lminl;
    MPI_Allreduce(&lpair, &lmaxl, 1, MPI_LONG_DOUBLE_INT, MPI_MAXLOC, W);
    MPI_Allreduce(&lpair, &lminl, 1, MPI_LONG_DOUBLE_INT, MPI_MINLOC, W);
    CHECK(np < 2 || (lmaxl.v == 1.0L + e60 && lmaxl.i == 1), "long double maxloc @%d", lmaxl.i);
    CHECK(lminl.v == 1.0L && lminl.i == 0, "long double minloc @%d", lminl.i);
    if (me == 0)
        printf("rank 0: long double sum - %d = %.0Lf * 2^-62, maxloc at %d\n", np, (ls - np) / e62, lmaxl.i);

    /* User operations. */
    MPI_Op op_abs, op_mat;
    MPI_Op_create(absmax, 1, &op_abs);
    int sv = (me % 2 ? -1 : 1) * (me * 3), so = 0;
    MPI_Allreduce(&sv, &so, 1, MPI_INT, op_abs, W);
    CHECK(so == (np - 1) * 3, "user absmax %d", so);
    MPI_Op_free(&op_abs);
    CHECK(op_abs == MPI_OP_NULL, "op freed");
    MPI_Datatype mat;
    MPI_Type_contiguous(4, MPI_LONG_LONG, &mat);
    MPI_Type_commit(&mat);
    MPI_Op_create(matmul, 0, &op_mat);
    long long m[4], mo[4], want[4];
    mat_of(me, m);
    mat_of(0, want);
    for (int r = 1; r < np; r++) {
        long long n[4], c[4];
        mat_of(r, n);
        c[0] = want[0] * n[0] + want[1] * n[2]; c[1] = want[0] * n[1] + want[1] * n[3];
        c[2] = want[2] * n[0] + want[3] * n[2]; c[3] = want[2] * n[1] + want[3] * n[3];
        memcpy(want, c, sizeof c);
    }
    MPI_Reduce(m, mo, 1, mat, op_mat, 0, W);
    if (me == 0) {
        CHECK(memcmp(mo, want, sizeof want) == 0, "non-commutative reduce %lld %lld %lld %lld", mo[0], mo[1], mo[2], mo[3]);
        printf("rank 0: product of matrices = [%lld %lld; %lld %lld]\n", mo[0], mo[1], mo[2], mo[3]);
    }
    /* Scan with the same operation: the prefix product on every rank. */
    MPI_Scan(m, mo, 1, mat, op_mat, W);
    long long pre[4];
    mat_of(0, pre);
    for (int r = 1; r <= me; r++) {
        long long n[4], c[4];
        mat_of(r, n);
        c[0] = pre[0] * n[0] + pre[1] * n[2]; c[1] = pre[0] * n[1] + pre[1] * n[3];
        c[2] = pre[2] * n[0] + pre[3] * n[2]; c[3] = pre[2] * n[1] + pre[3] * n[3];
        memcpy(pre, c, sizeof c);
    }
    CHECK(memcmp(mo, pre, sizeof pre) == 0, "non-commutative scan");
    MPI_Op_free(&op_mat);
    MPI_Type_free(&mat);

    /* Scan / Exscan with SUM. */
    int sc = -1, ex = -1;
    MPI_Scan(&x, &sc, 1, MPI_INT, MPI_SUM, W);
    CHECK(sc == (me + 1) * (me + 2) / 2, "scan %d", sc);
    MPI_Exscan(&x, &ex, 1, MPI_INT, MPI_SUM, W);
    if (me > 0) CHECK(ex == me * (me + 1) / 2, "exscan %d", ex);

    /* Gather, Scatter, Allgather, Alltoall, with MPI_IN_PLACE at the root. */
    int *all = malloc(sizeof(int) * 2 * np), mine2[2] = {me, me * me};
    MPI_Gather(mine2, 2, MPI_INT, all, 2, MPI_INT, np - 1, W);
    if (me == np - 1) {
        int ok = 1;
        for (int r = 0; r < np; r++) ok &= all[2 * r] == r && all[2 * r + 1] == r * r;
        CHECK(ok, "gather");
    }
    if (me == 0) {
        for (int r = 0; r < np; r++) { all[2 * r] = r + 100; all[2 * r + 1] = -r; }
        all[0] = 100;
        MPI_Gather(MPI_IN_PLACE, 2, MPI_INT, all, 2, MPI_INT, 0, W);
        CHECK(all[0] == 100 && all[2 * (np - 1)] == np - 1, "gather in place");
    } else {
        MPI_Gather(mine2, 2, MPI_INT, NULL, 0, MPI_INT, 0, W);
    }
    int got2[2] = {-1, -1};
    if (me == 0) for (int i = 0; i < 2 * np; i++) all[i] = i * 3;
    MPI_Scatter(all, 2, MPI_INT, got2, 2, MPI_INT, 0, W);
    CHECK(got2[0] == me * 6 && got2[1] == me * 6 + 3, "scatter %d", got2[0]);
    MPI_Allgather(&x, 1, MPI_INT, all, 1, MPI_INT, W);
    int ok = 1;
    for (int r = 0; r < np; r++) ok &= all[r] == r + 1;
    CHECK(ok, "allgather");
    for (int r = 0; r < np; r++) all[r] = r == me ? -7 : 0;
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, 1, MPI_INT, W);
    ok = 1;
    for (int r = 0; r < np; r++) ok &= all[r] == -7;
    CHECK(ok, "allgather in place");
    int *to = malloc(sizeof(int) * np), *from = malloc(sizeof(int) * np);
    for (int r = 0; r < np; r++) to[r] = me * 100 + r;
    MPI_Alltoall(to, 1, MPI_INT, from, 1, MPI_INT, W);
    ok = 1;
    for (int r = 0; r < np; r++) ok &= from[r] == r * 100 + me;
    CHECK(ok, "alltoall");

    /* The v-variants: rank r contributes r+1 ints. */
    int *counts = malloc(sizeof(int) * np), *displs = malloc(sizeof(int) * np), total = 0;
    for (int r = 0; r < np; r++) { counts[r] = r + 1; displs[r] = total + r; total += r + 1 + r; }
    int *vbuf = malloc(sizeof(int) * (total + 1)), *mv = malloc(sizeof(int) * (me + 1));
    for (int i = 0; i <= me; i++) mv[i] = me * 10 + i;
    for (int i = 0; i < total; i++) vbuf[i] = -1;
    MPI_Gatherv(mv, me + 1, MPI_INT, vbuf, counts, displs, MPI_INT, 0, W);
    if (me == 0) {
        ok = 1;
        for (int r = 0; r < np; r++) for (int i = 0; i <= r; i++) ok &= vbuf[displs[r] + i] == r * 10 + i;
        CHECK(ok, "gatherv");
    }
    for (int i = 0; i < total; i++) vbuf[i] = -1;
    MPI_Allgatherv(mv, me + 1, MPI_INT, vbuf, counts, displs, MPI_INT, W);
    ok = 1;
    for (int r = 0; r < np; r++) for (int i = 0; i <= r; i++) ok &= vbuf[displs[r] + i] == r * 10 + i;
    CHECK(ok, "allgatherv");
    if (me == 1 % np) for (int r = 0; r < np; r++) for (int i = 0; i <= r; i++) vbuf[displs[r] + i] = r * 1000 + i;
    for (int i = 0; i <= me; i++) mv[i] = -1;
    MPI_Scatterv(vbuf, counts, displs, MPI_INT, mv, me + 1, MPI_INT, 1 % np, W);
    CHECK(mv[0] == me * 1000 && mv[me] == me * 1000 + me, "scatterv %d", mv[0]);
    /* Alltoallv: rank i sends j+1 ints of value i*100+j to rank j. */
    int *sc_ = malloc(sizeof(int) * np), *sd = malloc(sizeof(int) * np), *rc = malloc(sizeof(int) * np), *rd = malloc(sizeof(int) * np);
    int st_ = 0, rt_ = 0;
    for (int r = 0; r < np; r++) { sc_[r] = r + 1; sd[r] = st_; st_ += r + 1; rc[r] = me + 1; rd[r] = rt_; rt_ += me + 1; }
    int *sb = malloc(sizeof(int) * st_), *rb = malloc(sizeof(int) * rt_);
    for (int r = 0; r < np; r++) for (int i = 0; i <= r; i++) sb[sd[r] + i] = me * 100 + r;
    MPI_Alltoallv(sb, sc_, sd, MPI_INT, rb, rc, rd, MPI_INT, W);
    ok = 1;
    for (int r = 0; r < np; r++) for (int i = 0; i <= me; i++) ok &= rb[rd[r] + i] == r * 100 + me;
    CHECK(ok, "alltoallv");

    /* Reduce_scatter_block and Reduce_scatter. */
    int *rsb = malloc(sizeof(int) * 2 * np), rso[2];
    for (int i = 0; i < 2 * np; i++) rsb[i] = i + me;
    MPI_Reduce_scatter_block(rsb, rso, 2, MPI_INT, MPI_SUM, W);
    CHECK(rso[0] == np * (2 * me) + np * (np - 1) / 2 && rso[1] == rso[0] + np, "reduce_scatter_block %d", rso[0]);
    int rtotal = np * (np + 1) / 2, *rs = malloc(sizeof(int) * rtotal), *ro = malloc(sizeof(int) * (me + 1));
    for (int i = 0; i < rtotal; i++) rs[i] = i * (me + 1);
    MPI_Reduce_scatter(rs, ro, counts, MPI_INT, MPI_MAX, W);
    int first = me * (me + 1) / 2;
    CHECK(ro[0] == first * np && ro[me] == (first + me) * np, "reduce_scatter %d", ro[0]);

    DONE("collectives");
    MPI_Finalize();
    return failures != 0;
}
