/* Communicators and groups: dup, split (with reversed keys), split_type, create,
 * create_group (called by the group's members only), compare, groups,
 * MPI_COMM_SELF, traffic kept apart per communicator. Lines tagged "qcg-only"
 * check the QCG_Comm_split_level extension (absent elsewhere). */
#include "check.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    int r, s, res;

    MPI_Comm_size(MPI_COMM_SELF, &s);
    MPI_Comm_rank(MPI_COMM_SELF, &r);
    CHECK(s == 1 && r == 0, "self %d %d", s, r);
    int one = 5, got = 0;
    MPI_Allreduce(&one, &got, 1, MPI_INT, MPI_SUM, MPI_COMM_SELF);
    CHECK(got == 5, "allreduce on self");

    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_compare(MPI_COMM_WORLD, dup, &res);
    CHECK(res == MPI_CONGRUENT, "dup compare %d", res);
    MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_WORLD, &res);
    CHECK(res == MPI_IDENT, "ident %d", res);
    MPI_Comm_rank(dup, &r);
    CHECK(r == me, "dup rank");

    /* The same tag on two communicators: messages do not cross. */
    int right = (me + 1) % np, left = (me + np - 1) % np, a = me, b = me + 100, x = -1, y = -1;
    MPI_Request q[2];
    MPI_Isend(&a, 1, MPI_INT, right, 0, MPI_COMM_WORLD, &q[0]);
    MPI_Isend(&b, 1, MPI_INT, right, 0, dup, &q[1]);
    MPI_Recv(&y, 1, MPI_INT, left, 0, dup, MPI_STATUS_IGNORE);
    MPI_Recv(&x, 1, MPI_INT, left, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
    CHECK(x == left && y == left + 100, "contexts %d %d", x, y);

    /* Split by parity, ranked in reverse. */
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, me % 2, -me, &half);
    MPI_Comm_size(half, &s);
    MPI_Comm_rank(half, &r);
    int hs = (np + 1 - me % 2) / 2;
    CHECK(s == hs && r == hs - 1 - me / 2, "split size %d rank %d", s, r);
    int sum = 0;
    MPI_Allreduce(&me, &sum, 1, MPI_INT, MPI_SUM, half);
    int want = 0;
    for (int i = me % 2; i < np; i += 2) want += i;
    CHECK(sum == want, "allreduce on split %d", sum);
    printf("rank %d: parity comm of size %d, rank %d, sum %d\n", me, s, r, sum);
    MPI_Comm_compare(MPI_COMM_WORLD, half, &res);
    CHECK(res == MPI_UNEQUAL, "unequal %d", res);
    MPI_Comm none;
    MPI_Comm_split(MPI_COMM_WORLD, me == 0 ? 0 : MPI_UNDEFINED, 0, &none);
    CHECK((me == 0) == (none != MPI_COMM_NULL), "undefined color");
    if (none != MPI_COMM_NULL) MPI_Comm_free(&none);

    /* Split by node: every member shares the node. */
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &s);
    int ns = 0;
    MPI_Allreduce(&one, &ns, 1, MPI_INT, MPI_SUM, node);
    CHECK(s >= 1 && ns == 5 * s, "shared comm %d %d", s, ns);
    MPI_Comm_free(&node);
    CHECK(node == MPI_COMM_NULL, "freed");

#ifdef QCG_LEVEL_SITE
    MPI_Comm site;
    QCG_Comm_split_level(MPI_COMM_WORLD, QCG_LEVEL_SITE, &site);
    int ss, sr, members = 0;
    MPI_Comm_size(site, &ss);
    MPI_Comm_rank(site, &sr);
    MPI_Allreduce(&one, &members, 1, MPI_INT, MPI_SUM, site);
    printf("rank %d: qcg-only: site comm of size %d, rank %d, members %d\n", me, ss, sr, members / 5);
    MPI_Comm_free(&site);
#endif

    /* Groups: the even ranks, then a communicator of them. */
    MPI_Group world, evens, odds;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_size(world, &s);
    CHECK(s == np, "group size");
    int ev[64], ne = 0;
    for (int i = 0; i < np; i += 2) ev[ne++] = i;
    MPI_Group_incl(world, ne, ev, &evens);
    MPI_Group_excl(world, ne, ev, &odds);
    MPI_Group_size(evens, &s);
    MPI_Group_rank(evens, &r);
    CHECK(s == ne && r == (me % 2 == 0 ? me / 2 : MPI_UNDEFINED), "incl %d %d", s, r);
    MPI_Group_size(odds, &s);
    MPI_Group_rank(odds, &r);
    CHECK(s == np - ne && r == (me % 2 == 1 ? me / 2 : MPI_UNDEFINED), "excl %d %d", s, r);
    MPI_Comm ec;
    MPI_Comm_create(MPI_COMM_WORLD, evens, &ec);
    if (me % 2 == 0) {
        CHECK(ec != MPI_COMM_NULL, "member gets a comm");
        int bc = me == 0 ? 77 : 0;
        MPI_Bcast(&bc, 1, MPI_INT, 0, ec);
        CHECK(bc == 77, "bcast on created comm");
        MPI_Comm_free(&ec);
    } else {
        CHECK(ec == MPI_COMM_NULL, "non-member gets MPI_COMM_NULL");
    }

    /* MPI_Comm_create_group: only the group's members call it. The odd ranks make
     * a communicator of them in reverse order, the even ranks one of them, at the
     * same time and with the same tag; neither waits for the other half. */
    if (np >= 2) {
        int half_ranks[64], nh = 0;
        for (int i = np - 1; i >= 0; i--)
            if (i % 2 == me % 2) half_ranks[nh++] = i;
        MPI_Group mine;
        MPI_Group_incl(world, nh, half_ranks, &mine);
        MPI_Comm g1, g2;
        MPI_Comm_create_group(MPI_COMM_WORLD, mine, 7, &g1);
        CHECK(g1 != MPI_COMM_NULL, "member gets a comm from create_group");
        MPI_Comm_size(g1, &s);
        MPI_Comm_rank(g1, &r);
        int pos = 0;
        while (half_ranks[pos] != me) pos++;
        CHECK(s == nh && r == pos, "create_group size %d rank %d", s, r);
        int gsum = 0;
        MPI_Allreduce(&me, &gsum, 1, MPI_INT, MPI_SUM, g1);
        int gwant = 0;
        for (int i = 0; i < nh; i++) gwant += half_ranks[i];
        CHECK(gsum == gwant, "allreduce on create_group comm %d", gsum);
        printf("rank %d: create_group comm of size %d, rank %d, sum %d\n", me, s, r, gsum);
        /* The same group and tag again: another communicator, whose messages do
         * not meet the first one's. */
        MPI_Comm_create_group(MPI_COMM_WORLD, mine, 7, &g2);
        MPI_Comm_compare(g1, g2, &res);
        CHECK(res == MPI_CONGRUENT, "second create_group compare %d", res);
        int gr = (r + 1) % s, gl = (r + s - 1) % s, u = 1000 + me, v = 2000 + me, gu = -1, gv = -1;
        MPI_Request gq[2];
        MPI_Isend(&u, 1, MPI_INT, gr, 3, g1, &gq[0]);
        MPI_Isend(&v, 1, MPI_INT, gr, 3, g2, &gq[1]);
        MPI_Recv(&gv, 1, MPI_INT, gl, 3, g2, MPI_STATUS_IGNORE);
        MPI_Recv(&gu, 1, MPI_INT, gl, 3, g1, MPI_STATUS_IGNORE);
        MPI_Waitall(2, gq, MPI_STATUSES_IGNORE);
        CHECK(gu == 1000 + half_ranks[gl] && gv == 2000 + half_ranks[gl], "create_group contexts %d %d", gu, gv);
        MPI_Comm_free(&g2);
        MPI_Comm_free(&g1);
        MPI_Group_free(&mine);
        /* Outside the group: MPI_COMM_NULL, at once. */
        MPI_Comm empty;
        MPI_Comm_create_group(MPI_COMM_WORLD, MPI_GROUP_EMPTY, 7, &empty);
        CHECK(empty == MPI_COMM_NULL, "empty group gives MPI_COMM_NULL");
        /* Every rank still agrees on the world's next communicator. */
        MPI_Comm after;
        MPI_Comm_dup(MPI_COMM_WORLD, &after);
        int all = 0;
        MPI_Allreduce(&one, &all, 1, MPI_INT, MPI_SUM, after);
        CHECK(all == 5 * np, "dup after create_group %d", all);
        MPI_Comm_free(&after);
    }
    MPI_Group_free(&evens);
    MPI_Group_free(&odds);
    MPI_Group_free(&world);
    CHECK(world == MPI_GROUP_NULL, "group freed");

    MPI_Comm_free(&half);
    MPI_Comm_free(&dup);
    DONE("comms");
    MPI_Finalize();
    return failures != 0;
}
