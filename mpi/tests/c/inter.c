/* Intercommunicators: the even and the odd ranks of the world as two groups;
 * create, sizes and groups, point-to-point across (statuses give remote ranks),
 * every collective with MPI_ROOT / MPI_PROC_NULL roots, dup, compare, merge with
 * both orders of `high`, and the errors of bad leaders and intracommunicator-only
 * calls. */
#include "check.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    int color = me % 2, lr = me / 2, flag, s, r, res;
    MPI_Comm local, ic;
    MPI_Comm_split(MPI_COMM_WORLD, color, me, &local);
    /* The remote leader is world rank 1 for the even group, 0 for the odd one. */
    MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, 1 - color, 7, &ic);

    MPI_Comm_test_inter(ic, &flag);
    CHECK(flag == 1, "test_inter %d", flag);
    MPI_Comm_test_inter(local, &flag);
    CHECK(flag == 0, "test_inter on intra %d", flag);
    MPI_Comm_size(ic, &s);
    MPI_Comm_rank(ic, &r);
    int rs = 0;
    MPI_Comm_remote_size(ic, &rs);
    CHECK(s == 2 && r == lr && rs == 2, "size %d rank %d remote size %d", s, r, rs);
    printf("rank %d: inter size %d rank %d remote size %d\n", me, s, r, rs);
    MPI_Group g;
    MPI_Comm_remote_group(ic, &g);
    MPI_Group_size(g, &s);
    MPI_Group_rank(g, &r);
    CHECK(s == 2 && r == MPI_UNDEFINED, "remote group %d %d", s, r);
    MPI_Group_free(&g);
    MPI_Comm_group(ic, &g);
    MPI_Group_rank(g, &r);
    CHECK(r == lr, "local group rank %d", r);
    MPI_Group_free(&g);

    /* The world rank of remote rank i. */
#define REMOTE(i) (2 * (i) + 1 - color)

    /* Point-to-point: ranks name the remote group. */
    int x = -1;
    MPI_Status st;
    MPI_Sendrecv(&me, 1, MPI_INT, lr, 5, &x, 1, MPI_INT, MPI_ANY_SOURCE, 5, ic, &st);
    CHECK(x == REMOTE(lr) && st.MPI_SOURCE == lr && st.MPI_TAG == 5, "sendrecv %d from %d",
          x, st.MPI_SOURCE);
    int y[2] = {-1, -1}, mine[2] = {me, me + 100};
    MPI_Request q[4];
    MPI_Irecv(&y[0], 1, MPI_INT, 0, 6, ic, &q[0]);
    MPI_Irecv(&y[1], 1, MPI_INT, 1, 6, ic, &q[1]);
    MPI_Isend(&mine[0], 1, MPI_INT, 0, 6, ic, &q[2]);
    MPI_Isend(&mine[1], 1, MPI_INT, 1, 6, ic, &q[3]);
    MPI_Waitall(4, q, MPI_STATUSES_IGNORE);
    CHECK(y[0] == REMOTE(0) + 100 * lr && y[1] == REMOTE(1) + 100 * lr, "isend %d %d", y[0],
          y[1]);
    /* A message on the intercommunicator does not meet one on the world. */
    if (color == 0) {
        MPI_Send(&me, 1, MPI_INT, lr, 9, ic);
    } else {
        MPI_Probe(MPI_ANY_SOURCE, 9, ic, &st);
        CHECK(st.MPI_SOURCE == lr, "probe source %d", st.MPI_SOURCE);
        MPI_Recv(&x, 1, MPI_INT, st.MPI_SOURCE, 9, ic, MPI_STATUS_IGNORE);
        CHECK(x == REMOTE(lr), "probed %d", x);
        MPI_Iprobe(MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        CHECK(flag == 0, "no crossing %d", flag);
    }

    MPI_Barrier(ic);

    /* Bcast from even rank 0 to the odd group. */
    int v = color == 0 ? 42 : -1, root;
    root = color == 0 ? (lr == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
    MPI_Bcast(&v, 1, MPI_INT, root, ic);
    CHECK(v == (color == 0 ? 42 : 42), "bcast %d", v);

    /* Reduce to odd local rank 1 (world 3) of the even ranks. */
    int sum = -1;
    root = color == 1 ? (lr == 1 ? MPI_ROOT : MPI_PROC_NULL) : 1;
    MPI_Reduce(&me, &sum, 1, MPI_INT, MPI_SUM, root, ic);
    if (me == 3) CHECK(sum == 0 + 2, "reduce %d", sum);
    else CHECK(sum == -1, "reduce elsewhere %d", sum);

    /* Allreduce: each group gets the other's sum. */
    MPI_Allreduce(&me, &sum, 1, MPI_INT, MPI_SUM, ic);
    CHECK(sum == (color == 0 ? 4 : 2), "allreduce %d", sum);
    int mx[2] = {me, -me}, got2[2];
    MPI_Allreduce(mx, got2, 2, MPI_INT, MPI_MAX, ic);
    CHECK(got2[0] == REMOTE(1) && got2[1] == -REMOTE(0), "allreduce max %d %d", got2[0],
          got2[1]);

    /* Gather to even rank 0, scatter from odd rank 0. */
    int all[4] = {-1, -1, -1, -1};
    root = color == 0 ? (lr == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
    MPI_Gather(&me, 1, MPI_INT, all, 1, MPI_INT, root, ic);
    if (me == 0) CHECK(all[0] == 1 && all[1] == 3, "gather %d %d", all[0], all[1]);
    int counts[2] = {1, 2}, displs[2] = {3, 0}, three[3] = {me, me, me};
    for (int i = 0; i < 4; i++) all[i] = -1;
    MPI_Gatherv(three, color == 1 ? lr + 1 : 0, MPI_INT, all, counts, displs, MPI_INT, root,
                ic);
    if (me == 0)
        CHECK(all[3] == 1 && all[0] == 3 && all[1] == 3 && all[2] == -1, "gatherv %d %d %d %d",
              all[0], all[1], all[2], all[3]);
    int src[4] = {10, 11, 12, 13};
    root = color == 1 ? (lr == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
    x = -1;
    MPI_Scatter(src, 1, MPI_INT, &x, 1, MPI_INT, root, ic);
    CHECK(color == 1 ? x == -1 : x == 10 + lr, "scatter %d", x);
    int got3[3] = {-1, -1, -1};
    MPI_Scatterv(src, counts, displs, MPI_INT, got3, color == 0 ? lr + 1 : 0, MPI_INT, root, ic);
    if (color == 0)
        CHECK(lr == 0 ? got3[0] == 13 : (got3[0] == 10 && got3[1] == 11), "scatterv %d %d",
              got3[0], got3[1]);

    /* Allgather(v): the remote group's values. */
    MPI_Allgather(&me, 1, MPI_INT, got2, 1, MPI_INT, ic);
    CHECK(got2[0] == REMOTE(0) && got2[1] == REMOTE(1), "allgather %d %d", got2[0], got2[1]);
    for (int i = 0; i < 4; i++) all[i] = -1;
    MPI_Allgatherv(three, lr + 1, MPI_INT, all, counts, displs, MPI_INT, ic);
    CHECK(all[3] == REMOTE(0) && all[0] == REMOTE(1) && all[1] == REMOTE(1) && all[2] == -1,
          "allgatherv %d %d %d %d", all[0], all[1], all[2], all[3]);

    /* Alltoall(v): block j to remote rank j. */
    int out[2] = {me * 10, me * 10 + 1};
    MPI_Alltoall(out, 1, MPI_INT, got2, 1, MPI_INT, ic);
    CHECK(got2[0] == REMOTE(0) * 10 + lr && got2[1] == REMOTE(1) * 10 + lr, "alltoall %d %d",
          got2[0], got2[1]);
    int out3[4] = {me, me + 50, me + 60, me + 70}, sc[2], sd[2] = {0, 1}, rc[2], rd[2] = {0, 1};
    /* Local rank 0 sends 1 element to each remote rank, local rank 1 sends 2. */
    sc[0] = sc[1] = lr + 1;
    sd[1] = lr + 1;
    rc[0] = 1;
    rc[1] = 2;
    for (int i = 0; i < 4; i++) all[i] = -1;
    MPI_Alltoallv(out3, sc, sd, MPI_INT, all, rc, rd, MPI_INT, ic);
    if (lr == 0)
        CHECK(all[0] == REMOTE(0) && all[1] == REMOTE(1) && all[2] == REMOTE(1) + 50,
              "alltoallv %d %d %d", all[0], all[1], all[2]);
    else
        CHECK(all[0] == REMOTE(0) + 50 && all[1] == REMOTE(1) + 60 && all[2] == REMOTE(1) + 70,
              "alltoallv %d %d %d", all[0], all[1], all[2]);
    printf("rank %d: alltoallv %d %d %d\n", me, all[0], all[1], all[2]);

    /* Reduce_scatter(_block): the remote group's sums, one block per local rank. */
    int vec[3] = {me, 100 * me, 1000 * me};
    x = -1;
    MPI_Reduce_scatter_block(vec, &x, 1, MPI_INT, MPI_SUM, ic);
    int rsum = REMOTE(0) + REMOTE(1);
    CHECK(x == (lr == 0 ? rsum : 100 * rsum), "reduce_scatter_block %d", x);
    int rcounts[2] = {1, 2};
    got2[0] = got2[1] = -1;
    MPI_Reduce_scatter(vec, got2, rcounts, MPI_INT, MPI_SUM, ic);
    if (lr == 0) CHECK(got2[0] == rsum, "reduce_scatter %d", got2[0]);
    else CHECK(got2[0] == 100 * rsum && got2[1] == 1000 * rsum, "reduce_scatter %d %d",
               got2[0], got2[1]);

    /* Dup: the same groups, its own traffic. */
    MPI_Comm d;
    MPI_Comm_dup(ic, &d);
    MPI_Comm_compare(ic, d, &res);
    CHECK(res == MPI_CONGRUENT, "compare dup %d", res);
    MPI_Comm_compare(ic, ic, &res);
    CHECK(res == MPI_IDENT, "compare self %d", res);
    MPI_Comm_compare(ic, local, &res);
    CHECK(res == MPI_UNEQUAL, "compare intra %d", res);
    MPI_Comm_test_inter(d, &flag);
    MPI_Comm_remote_size(d, &rs);
    CHECK(flag == 1 && rs == 2, "dup inter %d %d", flag, rs);
    int a = me, b = me + 1000;
    MPI_Isend(&a, 1, MPI_INT, lr, 0, ic, &q[0]);
    MPI_Isend(&b, 1, MPI_INT, lr, 0, d, &q[1]);
    MPI_Recv(&y[1], 1, MPI_INT, lr, 0, d, MPI_STATUS_IGNORE);
    MPI_Recv(&y[0], 1, MPI_INT, lr, 0, ic, MPI_STATUS_IGNORE);
    MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
    CHECK(y[0] == REMOTE(lr) && y[1] == REMOTE(lr) + 1000, "dup traffic %d %d", y[0], y[1]);
    MPI_Allreduce(&me, &sum, 1, MPI_INT, MPI_SUM, d);
    CHECK(sum == (color == 0 ? 4 : 2), "allreduce on dup %d", sum);
    MPI_Comm_free(&d);

    /* Merge: the group passing high = 0 comes first. */
    for (int high = 0; high < 2; high++) {
        MPI_Comm m;
        MPI_Intercomm_merge(ic, color == high, &m);
        MPI_Comm_size(m, &s);
        MPI_Comm_rank(m, &r);
        int want = (color == high ? 2 : 0) + lr;
        CHECK(s == 4 && r == want, "merge %d: size %d rank %d", high, s, r);
        printf("rank %d: merge %d gives rank %d of %d\n", me, high, r, s);
        MPI_Comm_test_inter(m, &flag);
        CHECK(flag == 0, "merged is intra %d", flag);
        int ranks[4];
        MPI_Allgather(&me, 1, MPI_INT, ranks, 1, MPI_INT, m);
        printf("rank %d: merge %d order %d %d %d %d\n", me, high, ranks[0], ranks[1], ranks[2],
               ranks[3]);
        int right = (r + 1) % s, left = (r + s - 1) % s;
        MPI_Sendrecv(&r, 1, MPI_INT, right, 0, &x, 1, MPI_INT, left, 0, m, MPI_STATUS_IGNORE);
        CHECK(x == left, "merged ring %d", x);
        MPI_Comm_free(&m);
    }

    /* Split: one color in both groups gives an intercommunicator, a color one
     * group lacks gives MPI_COMM_NULL. Even: both color 0; odd: color = local
     * rank, ranked in reverse by key. */
    MPI_Comm sp;
    MPI_Comm_split(ic, color == 0 ? 0 : lr, -me, &sp);
    if (me == 3) {
        CHECK(sp == MPI_COMM_NULL, "split without a match");
    } else {
        MPI_Comm_size(sp, &s);
        MPI_Comm_rank(sp, &r);
        MPI_Comm_remote_size(sp, &rs);
        int ws = color == 0 ? 2 : 1, wr = color == 0 ? 1 - lr : 0, wrs = color == 0 ? 1 : 2;
        CHECK(s == ws && r == wr && rs == wrs, "split size %d rank %d remote %d", s, r, rs);
        printf("rank %d: split gives size %d rank %d remote size %d\n", me, s, r, rs);
        /* Odd world 1 sends to each even process; remote ranks follow the keys. */
        if (color == 1) {
            for (int i = 0; i < 2; i++) MPI_Send(&i, 1, MPI_INT, i, 3, sp);
        } else {
            MPI_Recv(&x, 1, MPI_INT, 0, 3, sp, &st);
            CHECK(x == 1 - lr && st.MPI_SOURCE == 0, "split traffic %d", x);
        }
        MPI_Allreduce(&me, &sum, 1, MPI_INT, MPI_SUM, sp);
        CHECK(sum == (color == 0 ? 1 : 2), "allreduce on split %d", sum);
        MPI_Comm_free(&sp);
    }
    MPI_Comm_split(ic, lr == 1 ? MPI_UNDEFINED : 4, 0, &sp);
    if (lr == 1) {
        CHECK(sp == MPI_COMM_NULL, "split undefined");
    } else {
        MPI_Comm_remote_size(sp, &rs);
        MPI_Sendrecv(&me, 1, MPI_INT, 0, 2, &x, 1, MPI_INT, 0, 2, sp, MPI_STATUS_IGNORE);
        CHECK(rs == 1 && x == 1 - me, "split leaders %d %d", rs, x);
        MPI_Comm_free(&sp);
    }

    /* Create: each group's local rank 1 alone. */
    MPI_Group lg, one;
    MPI_Comm_group(ic, &lg);
    int r1 = 1;
    MPI_Group_incl(lg, 1, &r1, &one);
    MPI_Comm cr;
    MPI_Comm_create(ic, one, &cr);
    if (lr == 1) {
        MPI_Comm_size(cr, &s);
        MPI_Comm_remote_size(cr, &rs);
        MPI_Sendrecv(&me, 1, MPI_INT, 0, 2, &x, 1, MPI_INT, 0, 2, cr, MPI_STATUS_IGNORE);
        CHECK(s == 1 && rs == 1 && x == 5 - me, "create %d %d %d", s, rs, x);
        MPI_Comm_free(&cr);
    } else {
        CHECK(cr == MPI_COMM_NULL, "create elsewhere");
    }
    MPI_Group_free(&one);
    MPI_Group_free(&lg);

    /* Large messages across (past the eager limit). */
    {
        int n = 1 << 18;
        int *big = malloc(n * sizeof(int)), *back = malloc(n * sizeof(int));
        for (int i = 0; i < n; i++) big[i] = me * n + i;
        MPI_Sendrecv(big, n, MPI_INT, lr, 1, back, n, MPI_INT, lr, 1, ic, MPI_STATUS_IGNORE);
        int ok = 1;
        for (int i = 0; i < n; i++) ok &= back[i] == REMOTE(lr) * n + i;
        CHECK(ok, "large sendrecv");
        root = color == 0 ? (lr == 1 ? MPI_ROOT : MPI_PROC_NULL) : 1;
        MPI_Bcast(big, n, MPI_INT, root, ic);
        ok = 1;
        for (int i = 0; i < n; i++) ok &= big[i] == (color == 0 ? me * n + i : 2 * n + i);
        CHECK(ok, "large bcast");
        free(big);
        free(back);
    }

    /* Groups of unequal sizes, a leader that is not local rank 0: world 0 alone,
     * and worlds 1..3 led by world 3 (their local rank 2). */
    {
        MPI_Comm l2, ic2, m2;
        int a2 = me == 0 ? 0 : 1;
        MPI_Comm_split(MPI_COMM_WORLD, a2, me, &l2);
        MPI_Intercomm_create(l2, a2 == 0 ? 0 : 2, MPI_COMM_WORLD, a2 == 0 ? 3 : 0, 11, &ic2);
        MPI_Comm_size(ic2, &s);
        MPI_Comm_remote_size(ic2, &rs);
        CHECK(s == (a2 == 0 ? 1 : 3) && rs == (a2 == 0 ? 3 : 1), "unequal %d %d", s, rs);
        v = me == 0 ? 77 : -1;
        MPI_Bcast(&v, 1, MPI_INT, a2 == 0 ? MPI_ROOT : 0, ic2);
        CHECK(v == 77, "unequal bcast %d", v);
        MPI_Allreduce(&me, &sum, 1, MPI_INT, MPI_SUM, ic2);
        CHECK(sum == (a2 == 0 ? 6 : 0), "unequal allreduce %d", sum);
        for (int i = 0; i < 4; i++) all[i] = -1;
        MPI_Gather(&me, 1, MPI_INT, all, 1, MPI_INT, a2 == 0 ? MPI_ROOT : 0, ic2);
        if (me == 0)
            CHECK(all[0] == 1 && all[1] == 2 && all[2] == 3, "unequal gather %d %d %d", all[0],
                  all[1], all[2]);
        /* Reduce_scatter_block: each process sends (local size x recvcount)
         * elements: world 0 alone receives 3, the three others 1 each. */
        int rsb[3] = {me, 10 * me, 100 * me}, rout[3] = {-1, -1, -1};
        MPI_Reduce_scatter_block(rsb, rout, a2 == 0 ? 3 : 1, MPI_INT, MPI_SUM, ic2);
        if (me == 0)
            CHECK(rout[0] == 6 && rout[1] == 60 && rout[2] == 600, "unequal rsb %d %d %d",
                  rout[0], rout[1], rout[2]);
        else
            CHECK(rout[0] == 0 && rout[1] == -1, "unequal rsb %d %d", rout[0], rout[1]);
        MPI_Barrier(ic2);
        MPI_Intercomm_merge(ic2, a2 == 0, &m2);
        MPI_Comm_rank(m2, &r);
        CHECK(r == (me + 3) % 4, "unequal merge rank %d", r);
        MPI_Comm_free(&m2);
        MPI_Comm_free(&ic2);
        MPI_Comm_free(&l2);
    }

    /* Pairs from MPI_COMM_SELF: (0, 1) and (2, 3) at the same time, same tag. */
    {
        MPI_Comm pair;
        MPI_Intercomm_create(MPI_COMM_SELF, 0, MPI_COMM_WORLD, me ^ 1, 3, &pair);
        MPI_Comm_size(pair, &s);
        MPI_Comm_remote_size(pair, &rs);
        MPI_Sendrecv(&me, 1, MPI_INT, 0, 0, &x, 1, MPI_INT, 0, 0, pair, MPI_STATUS_IGNORE);
        CHECK(s == 1 && rs == 1 && x == (me ^ 1), "pair %d %d %d", s, rs, x);
        MPI_Comm pm;
        MPI_Intercomm_merge(pair, me & 1, &pm);
        MPI_Comm_rank(pm, &r);
        CHECK(r == (me & 1), "pair merge %d", r);
        MPI_Comm_free(&pm);
        MPI_Comm_free(&pair);
    }

    /* Errors. */
    MPI_Comm_set_errhandler(ic, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(local, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int e, cls;
    MPI_Comm bad;
    e = MPI_Scan(&me, &x, 1, MPI_INT, MPI_SUM, ic);
    MPI_Error_class(e, &cls);
    CHECK(cls == MPI_ERR_COMM, "scan on inter %d", cls);
#ifdef QCG_LEVEL_SITE
    /* The wrong kind of communicator (Open MPI crashes on some of these). */
    int c1, c2, c3;
    MPI_Error_class(MPI_Exscan(&me, &x, 1, MPI_INT, MPI_SUM, ic), &c1);
    MPI_Error_class(MPI_Intercomm_merge(local, 0, &bad), &c2);
    MPI_Error_class(MPI_Intercomm_create(ic, 0, MPI_COMM_WORLD, 1 - color, 8, &bad), &c3);
    /* A remote leader out of range: the leaders fail, and so does their group. */
    int c4;
    MPI_Error_class(MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, 99, 8, &bad), &c4);
    printf("rank %d: qcg-only: exscan on inter %d, merge of intra %d, create from inter %d, "
           "bad remote leader %d\n",
           me, c1, c2, c3, c4);
    CHECK(c1 == MPI_ERR_COMM && c2 == MPI_ERR_COMM && c3 == MPI_ERR_COMM && c4 == MPI_ERR_RANK,
          "%d %d %d %d", c1, c2, c3, c4);
#else
    CHECK(1, "the count of checks stays the same");
#endif
    /* Erroneous (comm must be an intercommunicator; Open MPI answers 0) and a
     * leader out of range (MPI_ERR_RANK as MPICH; Open MPI says MPI_ERR_ARG). */
    e = MPI_Comm_remote_size(local, &rs);
    MPI_Error_class(e, &cls);
    int e2 = MPI_Intercomm_create(local, 5, MPI_COMM_WORLD, 1 - color, 8, &bad), cls2;
    MPI_Error_class(e2, &cls2);
#ifdef QCG_LEVEL_SITE
    printf("rank %d: qcg-only: remote_size on intra gives class %d, bad leader %d\n", me, cls,
           cls2);
    CHECK(cls == MPI_ERR_COMM && cls2 == MPI_ERR_RANK, "remote_size on intra %d, bad leader %d",
          cls, cls2);
#else
    CHECK(cls2 != MPI_SUCCESS, "bad leader %d", cls2);
#endif

    MPI_Comm_free(&ic);
    MPI_Comm_free(&local);
    DONE("inter");
    MPI_Finalize();
    return 0;
}
