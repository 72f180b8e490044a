/* Non-blocking collectives (MPI 3.1 5.12): every one checked against its blocking
 * twin and against values each rank computes, several in flight at once and
 * completed by Wait, Waitall, Test loops and Waitany; MPI_Alltoallw, MPI_Reduce_local,
 * MPI_Op_commutative. Under qcg also: an Iallreduce moves on while its caller
 * sleeps without calling MPI (lines tagged "qcg-only": Open MPI has no progress
 * thread by default). */
#include "check.h"
#include <time.h>
#include <unistd.h>

/* inout = in x inout, for 2x2 matrices of long long (row-major): not commutative. */
static void matmul(void *in, void *inout, int *len, MPI_Datatype *t) {
    long long *a = in, *b = inout;
    (void)t;
    for (int k = 0; k < *len; k++, a += 4, b += 4) {
        long long c[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3],
                          a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3]};
        memcpy(b, c, sizeof c);
    }
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A sum of the ints printed, so both implementations print the same line. */
static long long sum(const int *v, int n) {
    long long s = 0;
    for (int i = 0; i < n; i++) s += (long long)v[i] * (i + 1);
    return s;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    MPI_Comm W = MPI_COMM_WORLD;
    MPI_Request rq[16];

    /* Ibarrier. */
    MPI_Ibarrier(W, &rq[0]);
    MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
    CHECK(rq[0] == MPI_REQUEST_NULL, "ibarrier left its request");

    /* Ibcast, Ireduce, Iallreduce, Igather, Iallgather, Ialltoall in flight at once. */
    enum { N = 1000 };
    int root = 1 % np;
    int *bc = malloc(N * sizeof(int)), *bc2 = malloc(N * sizeof(int));
    int *mine = malloc(N * sizeof(int)), *red = calloc(N, sizeof(int)), *red2 = calloc(N, sizeof(int));
    int *all = calloc(N, sizeof(int)), *all2 = calloc(N, sizeof(int));
    int *gat = calloc((size_t)N * np, sizeof(int)), *gat2 = calloc((size_t)N * np, sizeof(int));
    int *ag = calloc((size_t)N * np, sizeof(int)), *ag2 = calloc((size_t)N * np, sizeof(int));
    int *a2 = malloc((size_t)N * np * sizeof(int)), *a2o = calloc((size_t)N * np, sizeof(int));
    int *a2o2 = calloc((size_t)N * np, sizeof(int));
    for (int i = 0; i < N; i++) {
        bc[i] = me == root ? i * 3 + 1 : -1;
        bc2[i] = bc[i];
        mine[i] = me * 1000 + i;
    }
    for (int i = 0; i < N * np; i++) a2[i] = me * 100000 + i;
    MPI_Ibcast(bc, N, MPI_INT, root, W, &rq[0]);
    MPI_Ireduce(mine, red, N, MPI_INT, MPI_SUM, root, W, &rq[1]);
    MPI_Iallreduce(mine, all, N, MPI_INT, MPI_MAX, W, &rq[2]);
    MPI_Igather(mine, N, MPI_INT, gat, N, MPI_INT, root, W, &rq[3]);
    MPI_Iallgather(mine, N, MPI_INT, ag, N, MPI_INT, W, &rq[4]);
    MPI_Ialltoall(a2, N, MPI_INT, a2o, N, MPI_INT, W, &rq[5]);
    /* Compute meanwhile. */
    volatile double acc = 0;
    for (int i = 0; i < 200000; i++) acc += i * 0.5;
    MPI_Waitall(6, rq, MPI_STATUSES_IGNORE);
    MPI_Bcast(bc2, N, MPI_INT, root, W);
    MPI_Reduce(mine, red2, N, MPI_INT, MPI_SUM, root, W);
    MPI_Allreduce(mine, all2, N, MPI_INT, MPI_MAX, W);
    MPI_Gather(mine, N, MPI_INT, gat2, N, MPI_INT, root, W);
    MPI_Allgather(mine, N, MPI_INT, ag2, N, MPI_INT, W);
    MPI_Alltoall(a2, N, MPI_INT, a2o2, N, MPI_INT, W);
    CHECK(!memcmp(bc, bc2, N * sizeof(int)) && bc[5] == 16, "ibcast %d", bc[5]);
    if (me == root) CHECK(!memcmp(red, red2, N * sizeof(int)), "ireduce differs");
    CHECK(!memcmp(all, all2, N * sizeof(int)) && all[0] == (np - 1) * 1000, "iallreduce %d", all[0]);
    if (me == root) CHECK(!memcmp(gat, gat2, (size_t)N * np * sizeof(int)), "igather differs");
    CHECK(!memcmp(ag, ag2, (size_t)N * np * sizeof(int)), "iallgather differs");
    CHECK(!memcmp(a2o, a2o2, (size_t)N * np * sizeof(int)), "ialltoall differs");
    CHECK(a2o[N] == 100000 + me * N, "ialltoall block from 1: %d", a2o[N]);
    printf("rank %d: ibcast %lld iallreduce %lld iallgather %lld ialltoall %lld\n", me,
           sum(bc, N), sum(all, N), sum(ag, N * np), sum(a2o, N * np));
    if (me == root) printf("rank %d: ireduce %lld igather %lld\n", me, sum(red, N), sum(gat, N * np));

    /* Iscatter, completed by a Test loop. */
    int sc[8] = {0};
    int *scs = malloc((size_t)8 * np * sizeof(int));
    for (int i = 0; i < 8 * np; i++) scs[i] = i * 7;
    MPI_Iscatter(scs, 8, MPI_INT, sc, 8, MPI_INT, 0, W, &rq[0]);
    int flag = 0, tests = 0;
    while (!flag) {
        MPI_Test(&rq[0], &flag, MPI_STATUS_IGNORE);
        tests++;
    }
    CHECK(sc[0] == me * 56 && sc[7] == (me * 8 + 7) * 7, "iscatter %d %d", sc[0], sc[7]);

    /* In place: Iallreduce and Igather at the root. */
    double dv[3] = {me * 0.5, 1.0, -me};
    MPI_Iallreduce(MPI_IN_PLACE, dv, 3, MPI_DOUBLE, MPI_SUM, W, &rq[0]);
    MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
    CHECK(dv[0] == 0.25 * np * (np - 1) && dv[1] == np, "iallreduce in place %g %g", dv[0], dv[1]);

    /* A non-commutative user operation: Ireduce, Iscan, Iexscan in rank order. */
    MPI_Op mm;
    MPI_Op_create(matmul, 0, &mm);
    int commute = -1;
    MPI_Op_commutative(mm, &commute);
    CHECK(commute == 0, "matmul commutes? %d", commute);
    MPI_Op_commutative(MPI_SUM, &commute);
    CHECK(commute == 1, "sum commutes? %d", commute);
    long long m[4] = {me + 1, 1, me % 3, 2}, scn[4] = {0}, exs[4] = {9, 9, 9, 9};
    /* The products x0 x1 ... x(me-1) and x0 ... x(me), and of all ranks. */
    long long want[4] = {1, 0, 0, 1}, before[4] = {1, 0, 0, 1}, incl[4];
    for (int r = 0; r < np; r++) {
        long long x[4] = {r + 1, 1, r % 3, 2};
        int one = 1;
        if (r == me) memcpy(before, want, sizeof want);
        matmul(want, x, &one, NULL); /* x = want x */
        memcpy(want, x, sizeof want);
        if (r == me) memcpy(incl, want, sizeof want);
    }
    MPI_Iscan(m, scn, 4, MPI_LONG_LONG, MPI_SUM, W, &rq[0]);
    MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
    /* Reduce of 2x2 matrices needs a 4-long-long type. */
    MPI_Datatype mat;
    MPI_Type_contiguous(4, MPI_LONG_LONG, &mat);
    MPI_Type_commit(&mat);
    long long mprod[4] = {0}, mscan[4] = {0};
    MPI_Ireduce(m, mprod, 1, mat, mm, 0, W, &rq[0]);
    MPI_Iscan(m, mscan, 1, mat, mm, W, &rq[1]);
    MPI_Iexscan(m, exs, 1, mat, mm, W, &rq[2]);
    MPI_Waitall(3, rq, MPI_STATUSES_IGNORE);
    if (me == 0) {
        CHECK(!memcmp(mprod, want, sizeof want), "ireduce matmul %lld %lld", mprod[0], mprod[1]);
        printf("rank 0: ireduce matmul = [%lld %lld %lld %lld]\n", mprod[0], mprod[1], mprod[2], mprod[3]);
    }
    CHECK(!memcmp(mscan, incl, sizeof incl), "iscan matmul %lld", mscan[0]);
    if (me > 0) CHECK(!memcmp(exs, before, sizeof before), "iexscan matmul %lld", exs[0]);
    printf("rank %d: iscan matmul = [%lld %lld %lld %lld]\n", me, mscan[0], mscan[1], mscan[2], mscan[3]);
    long long ss[4];
    MPI_Scan(m, ss, 4, MPI_LONG_LONG, MPI_SUM, W);
    CHECK(!memcmp(ss, scn, sizeof ss), "iscan sum %lld vs %lld", scn[0], ss[0]);

    /* Reduce_local: inout = in op inout, in that order. */
    long long lin[4] = {1, 2, 3, 4}, lio[4] = {5, 6, 7, 8};
    MPI_Reduce_local(lin, lio, 1, mat, mm);
    CHECK(lio[0] == 19 && lio[1] == 22 && lio[2] == 43 && lio[3] == 50, "reduce_local %lld %lld", lio[0], lio[1]);
    int li[3] = {1, 2, 3}, lo[3] = {10, 20, 30};
    MPI_Reduce_local(li, lo, 3, MPI_INT, MPI_SUM);
    CHECK(lo[0] == 11 && lo[2] == 33, "reduce_local sum %d", lo[0]);

    /* Ireduce_scatter_block and Ireduce_scatter. */
    int *rsin = malloc((size_t)3 * np * sizeof(int)), rsb[3], rs[8];
    int *rcounts = malloc(np * sizeof(int));
    int tot = 0;
    for (int i = 0; i < 3 * np; i++) rsin[i] = me + i;
    for (int r = 0; r < np; r++) { rcounts[r] = 1 + r % 3; tot += rcounts[r]; }
    int *rsin2 = malloc(tot * sizeof(int));
    for (int i = 0; i < tot; i++) rsin2[i] = me * i;
    MPI_Ireduce_scatter_block(rsin, rsb, 3, MPI_INT, MPI_SUM, W, &rq[0]);
    MPI_Ireduce_scatter(rsin2, rs, rcounts, MPI_INT, MPI_SUM, W, &rq[1]);
    int idx = -1;
    MPI_Waitany(2, rq, &idx, MPI_STATUS_IGNORE);
    CHECK(idx == 0 || idx == 1, "waitany index %d", idx);
    MPI_Waitany(2, rq, &idx, MPI_STATUS_IGNORE);
    int s01 = np * (np - 1) / 2;
    CHECK(rsb[0] == s01 + np * 3 * me && rsb[2] == s01 + np * (3 * me + 2), "ireduce_scatter_block %d", rsb[0]);
    int off = 0;
    for (int r = 0; r < me; r++) off += rcounts[r];
    CHECK(rs[0] == s01 * off, "ireduce_scatter %d, not %d", rs[0], s01 * off);
    printf("rank %d: ireduce_scatter_block %d %d %d\n", me, rsb[0], rsb[1], rsb[2]);

    /* v-collectives: rank r contributes r+1 ints. */
    int *cnt = malloc(np * sizeof(int)), *dsp = malloc(np * sizeof(int)), tv = 0;
    for (int r = 0; r < np; r++) { cnt[r] = r + 1; dsp[r] = tv; tv += r + 2; } /* a gap after each block */
    int vmine[16];
    for (int i = 0; i <= me; i++) vmine[i] = me * 10 + i;
    int *gv = malloc(tv * sizeof(int)), *gv2 = malloc(tv * sizeof(int));
    int *agv = malloc(tv * sizeof(int)), *agv2 = malloc(tv * sizeof(int));
    for (int i = 0; i < tv; i++) gv[i] = gv2[i] = agv[i] = agv2[i] = -7;
    MPI_Igatherv(vmine, me + 1, MPI_INT, gv, cnt, dsp, MPI_INT, root, W, &rq[0]);
    MPI_Iallgatherv(vmine, me + 1, MPI_INT, agv, cnt, dsp, MPI_INT, W, &rq[1]);
    int svr[16] = {0}, svr2[16] = {0};
    int *svs = malloc(tv * sizeof(int));
    for (int i = 0; i < tv; i++) svs[i] = 500 + i;
    MPI_Iscatterv(svs, cnt, dsp, MPI_INT, svr, me + 1, MPI_INT, root, W, &rq[2]);
    MPI_Waitall(3, rq, MPI_STATUSES_IGNORE);
    MPI_Gatherv(vmine, me + 1, MPI_INT, gv2, cnt, dsp, MPI_INT, root, W);
    MPI_Allgatherv(vmine, me + 1, MPI_INT, agv2, cnt, dsp, MPI_INT, W);
    MPI_Scatterv(svs, cnt, dsp, MPI_INT, svr2, me + 1, MPI_INT, root, W);
    if (me == root) CHECK(!memcmp(gv, gv2, tv * sizeof(int)), "igatherv differs");
    CHECK(!memcmp(agv, agv2, tv * sizeof(int)) && agv[tv - 2] == (np - 1) * 10 + np - 1 && agv[tv - 1] == -7,
          "iallgatherv %d %d", agv[tv - 2], agv[tv - 1]);
    CHECK(!memcmp(svr, svr2, sizeof svr) && svr[0] == 500 + dsp[me], "iscatterv %d", svr[0]);
    printf("rank %d: iallgatherv %lld iscatterv %lld\n", me, sum(agv, tv), sum(svr, me + 1));

    /* Ialltoallv and Alltoallw/Ialltoallw: rank i sends j+1 ints to rank j. */
    int *sc_ = malloc(np * sizeof(int)), *sd = malloc(np * sizeof(int));
    int *rc = malloc(np * sizeof(int)), *rd = malloc(np * sizeof(int));
    int *sdb = malloc(np * sizeof(int)), *rdb = malloc(np * sizeof(int));
    MPI_Datatype *tys = malloc(np * sizeof(MPI_Datatype));
    int st = 0, rt = 0;
    for (int j = 0; j < np; j++) {
        sc_[j] = j + 1; sd[j] = st; sdb[j] = st * (int)sizeof(int); st += j + 1;
        rc[j] = me + 1; rd[j] = rt; rdb[j] = rt * (int)sizeof(int); rt += me + 1;
        tys[j] = MPI_INT;
    }
    int *avs = malloc(st * sizeof(int)), *avr = calloc(rt, sizeof(int)), *avr2 = calloc(rt, sizeof(int));
    int *awr = calloc(rt, sizeof(int)), *awr2 = calloc(rt, sizeof(int));
    for (int i = 0; i < st; i++) avs[i] = me * 1000 + i;
    MPI_Ialltoallv(avs, sc_, sd, MPI_INT, avr, rc, rd, MPI_INT, W, &rq[0]);
    MPI_Ialltoallw(avs, sc_, sdb, tys, awr, rc, rdb, tys, W, &rq[1]);
    MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
    MPI_Alltoallv(avs, sc_, sd, MPI_INT, avr2, rc, rd, MPI_INT, W);
    MPI_Alltoallw(avs, sc_, sdb, tys, awr2, rc, rdb, tys, W);
    CHECK(!memcmp(avr, avr2, rt * sizeof(int)), "ialltoallv differs");
    CHECK(!memcmp(awr, avr2, rt * sizeof(int)), "ialltoallw differs");
    CHECK(!memcmp(awr2, avr2, rt * sizeof(int)), "alltoallw differs");
    int from1 = np > 1 ? avr[me + 1] : 0, want1 = np > 1 ? 1000 + me * (me + 1) / 2 : 0;
    CHECK(from1 == want1, "ialltoallv from 1: %d, not %d", from1, want1);
    printf("rank %d: ialltoallv %lld alltoallw %lld\n", me, sum(avr, rt), sum(awr2, rt));

    /* A strided type: Ibcast of every other int. */
    MPI_Datatype every2;
    MPI_Type_vector(4, 1, 2, MPI_INT, &every2);
    MPI_Type_commit(&every2);
    int strided[8];
    for (int i = 0; i < 8; i++) strided[i] = me == 0 ? i + 100 : -1;
    MPI_Ibcast(strided, 1, every2, 0, W, &rq[0]);
    MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
    CHECK(strided[0] == 100 && strided[6] == 106, "strided ibcast %d %d", strided[0], strided[6]);
    if (me != 0) CHECK(strided[1] == -1 && strided[7] == -1, "strided ibcast wrote a gap %d", strided[1]);

    /* Progress: rank 0 starts an Iallreduce and sleeps 300 ms without calling MPI;
     * the others wait for theirs at once, which needs rank 0's part (a blocking
     * collective never matches a non-blocking one, 5.12). */
    int big = 4096, *pin = malloc(big * sizeof(int)), *pout = malloc(big * sizeof(int));
    for (int i = 0; i < big; i++) pin[i] = me + i;
    MPI_Barrier(W);
    if (me == 0) {
        MPI_Iallreduce(pin, pout, big, MPI_INT, MPI_SUM, W, &rq[0]);
        usleep(300000);
        double t = now();
        MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
        double w = now() - t;
#ifdef QCG_MPI_H
        printf("rank %d: qcg-only: iallreduce done during the sleep: %s (wait %.3f s)\n", me, w < 0.05 ? "yes" : "no", w);
#endif
        (void)w;
    } else {
        double t = now();
        MPI_Iallreduce(pin, pout, big, MPI_INT, MPI_SUM, W, &rq[0]);
        MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
        double b = now() - t;
#ifdef QCG_MPI_H
        printf("rank %d: qcg-only: iallreduce done while rank 0 slept: %s (%.3f s)\n", me, b < 0.25 ? "yes" : "no", b);
#endif
        (void)b;
    }
    CHECK(pout[0] == np * (np - 1) / 2 && pout[big - 1] == np * (np - 1) / 2 + np * (big - 1), "progress allreduce %d", pout[0]);

    MPI_Op_free(&mm);
    MPI_Type_free(&mat);
    MPI_Type_free(&every2);
    (void)tests;
    DONE("nbc");
    MPI_Finalize();
    return 0;
}
