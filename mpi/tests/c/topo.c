/* Process topologies and neighborhood collectives (4 ranks): MPI_Dims_create's
 * splits, a 2D periodic grid with a halo exchange (Cart_shift + Sendrecv), row and
 * column sub-grids with reductions, a non-periodic line whose edges are
 * MPI_PROC_NULL, a 3D grid with periodic dimensions of 1 and 2 (both neighbours
 * one process), a graph and distributed graphs with the neighborhood collectives,
 * and the error classes of bad input. Lines tagged "qcg-only" (printed with qcg's
 * mpi.h only) are where Open MPI 4.1 does not check the input or returns a rank
 * outside the grid from MPI_Cart_map / MPI_Graph_map. */
#include "check.h"

/* MPI_UNWEIGHTED through a variable: GCC's -Wstringop-overread takes the
 * constant (int *)2 of both mpi.h's for an array of size 0. */
static int *volatile unweighted;

static int topo_of(MPI_Comm c) {
    int t = -5;
    MPI_Topo_test(c, &t);
    return t;
}

/* MPI_PROC_NULL is -1 here and -2 in Open MPI: printed as -1. */
static int nul(int r) { return r == MPI_PROC_NULL ? -1 : r; }

static int class_of(int rc) {
    int c = -1;
    MPI_Error_class(rc, &c);
    return c;
}

static void dims_table(void) {
    /* Open MPI's split of n processes in k dimensions. */
    for (int n = 1; n <= 72; n++) {
        char line[256];
        int at = snprintf(line, sizeof line, "dims %d:", n);
        for (int k = 1; k <= 4; k++) {
            int d[4] = {0, 0, 0, 0}, prod = 1;
            MPI_Dims_create(n, k, d);
            at += snprintf(line + at, sizeof line - at, " [");
            for (int i = 0; i < k; i++) {
                prod *= d[i];
                at += snprintf(line + at, sizeof line - at, i ? " %d" : "%d", d[i]);
                if (i) CHECK(d[i] <= d[i - 1], "dims %d %d not sorted", n, k);
            }
            at += snprintf(line + at, sizeof line - at, "]");
            CHECK(prod == n, "dims %d %d product %d", n, k, prod);
        }
        if (me == 0) printf("rank %d: %s\n", me, line);
    }
    int d3[3] = {0, 3, 0};
    MPI_Dims_create(12, 3, d3);
    CHECK(d3[0] == 2 && d3[1] == 3 && d3[2] == 2, "dims 12 [0 3 0] -> %d %d %d", d3[0], d3[1], d3[2]);
}

static void grid_2d(void) {
    int dims[2] = {0, 0}, periods[2] = {1, 1};
    MPI_Dims_create(np, 2, dims);
    MPI_Comm grid;
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &grid);
    CHECK(topo_of(grid) == MPI_CART, "topo_test %d", topo_of(grid));
    int nd = -1, gd[2], gp[2], gc[2], r;
    MPI_Cartdim_get(grid, &nd);
    MPI_Cart_get(grid, 2, gd, gp, gc);
    MPI_Comm_rank(grid, &r);
    CHECK(nd == 2 && gd[0] == dims[0] && gd[1] == dims[1] && gp[0] == 1 && gp[1] == 1, "cart_get");
    CHECK(gc[0] == r / dims[1] && gc[1] == r % dims[1], "coords (%d, %d) of %d", gc[0], gc[1], r);
    for (int q = 0; q < np; q++) {
        int c[2], back = -1;
        MPI_Cart_coords(grid, q, 2, c);
        MPI_Cart_rank(grid, c, &back);
        CHECK(back == q, "round trip %d -> %d", q, back);
    }
    int wrapped[2] = {gc[0] - dims[0], gc[1] + 3 * dims[1]}, w = -1;
    MPI_Cart_rank(grid, wrapped, &w);
    CHECK(w == r, "periodic coordinates wrap: %d", w);

    /* Halo exchange: each rank's value from the four neighbours. */
    int val = 100 + r, halo[4] = {-1, -1, -1, -1}, nb[4];
    for (int d = 0; d < 2; d++) {
        int src, dst;
        MPI_Cart_shift(grid, d, 1, &src, &dst);
        nb[2 * d] = src;
        nb[2 * d + 1] = dst;
        /* Send up, receive from below; then the other way. */
        MPI_Sendrecv(&val, 1, MPI_INT, dst, d, &halo[2 * d], 1, MPI_INT, src, d, grid,
                     MPI_STATUS_IGNORE);
        MPI_Sendrecv(&val, 1, MPI_INT, src, 10 + d, &halo[2 * d + 1], 1, MPI_INT, dst, 10 + d,
                     grid, MPI_STATUS_IGNORE);
    }
    for (int i = 0; i < 4; i++) CHECK(halo[i] == 100 + nb[i], "halo %d = %d", i, halo[i]);
    printf("rank %d: grid %dx%d coords (%d,%d) neighbours %d %d %d %d halo %d %d %d %d\n", me,
           dims[0], dims[1], gc[0], gc[1], nul(nb[0]), nul(nb[1]), nul(nb[2]), nul(nb[3]), halo[0], halo[1],
           halo[2], halo[3]);

    /* The same with a neighbour allgather: slots in Cart_shift order. */
    int got[4] = {-1, -1, -1, -1};
    MPI_Neighbor_allgather(&val, 1, MPI_INT, got, 1, MPI_INT, grid);
    for (int i = 0; i < 4; i++) CHECK(got[i] == 100 + nb[i], "neighbor allgather %d = %d", i, got[i]);

    /* Row and column sub-grids. */
    int keep_row[2] = {0, 1}, keep_col[2] = {1, 0};
    MPI_Comm row, col;
    MPI_Cart_sub(grid, keep_row, &row);
    MPI_Cart_sub(grid, keep_col, &col);
    int rs, rr, cs, cr, rsum = 0, csum = 0, rnd = -1;
    MPI_Comm_size(row, &rs);
    MPI_Comm_rank(row, &rr);
    MPI_Comm_size(col, &cs);
    MPI_Comm_rank(col, &cr);
    MPI_Cartdim_get(row, &rnd);
    MPI_Allreduce(&r, &rsum, 1, MPI_INT, MPI_SUM, row);
    MPI_Allreduce(&r, &csum, 1, MPI_INT, MPI_SUM, col);
    CHECK(rs == dims[1] && rr == gc[1] && cs == dims[0] && cr == gc[0], "sub sizes");
    CHECK(rnd == 1 && topo_of(row) == MPI_CART, "sub is a 1D grid");
    printf("rank %d: row size %d rank %d sum %d, column size %d rank %d sum %d\n", me, rs, rr,
           rsum, cs, cr, csum);

    /* A duplicate keeps the topology. */
    MPI_Comm dup;
    MPI_Comm_dup(grid, &dup);
    int dc[2] = {-1, -1};
    CHECK(topo_of(dup) == MPI_CART, "dup topology %d", topo_of(dup));
    MPI_Cart_coords(dup, r, 2, dc);
    CHECK(dc[0] == gc[0] && dc[1] == gc[1], "dup coords");
    MPI_Comm_free(&dup);
    MPI_Comm_free(&row);
    MPI_Comm_free(&col);
    MPI_Comm_free(&grid);
}

static void line_1d(void) {
    /* A non-periodic line: the ends have MPI_PROC_NULL neighbours, whose slots
     * are left alone by the neighborhood collectives. */
    int dims[1] = {np}, periods[1] = {0}, r, src, dst;
    MPI_Comm line;
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &line);
    MPI_Comm_rank(line, &r);
    MPI_Cart_shift(line, 0, 1, &src, &dst);
    CHECK(src == (r == 0 ? MPI_PROC_NULL : r - 1), "line src %d", src);
    CHECK(dst == (r == np - 1 ? MPI_PROC_NULL : r + 1), "line dst %d", dst);
    int s2, d2;
    MPI_Cart_shift(line, 0, 2, &s2, &d2);
    printf("rank %d: line shift 1: %d %d, shift 2: %d %d\n", me, nul(src), nul(dst), nul(s2),
           nul(d2));
    int out[2] = {10 * r + 0, 10 * r + 1}, in[2] = {-7, -7};
    MPI_Neighbor_alltoall(out, 1, MPI_INT, in, 1, MPI_INT, line);
    /* Slot 0 is from the -1 neighbour, which sent its +1 block (slot 1). */
    CHECK(in[0] == (src == MPI_PROC_NULL ? -7 : 10 * src + 1), "line in[0] %d", in[0]);
    CHECK(in[1] == (dst == MPI_PROC_NULL ? -7 : 10 * dst + 0), "line in[1] %d", in[1]);
    printf("rank %d: line alltoall got %d %d\n", me, in[0], in[1]);
    MPI_Comm_free(&line);

    /* Only three of the four in a grid of three. */
    int three[1] = {3}, nr = -9;
    MPI_Comm small;
    MPI_Cart_create(MPI_COMM_WORLD, 1, three, periods, 1, &small);
    CHECK((me < 3) == (small != MPI_COMM_NULL), "grid of three");
    if (small != MPI_COMM_NULL) MPI_Comm_free(&small);
    MPI_Cart_map(MPI_COMM_WORLD, 1, three, periods, &nr);
    /* MPI_UNDEFINED outside the grid (MPI 3.1 §7.5.8): Open MPI 4.1 returns the
     * rank, so the check is printed for qcg only. */
#ifdef QCG_LEVEL_SITE /* qcg's mpi.h */
    printf("rank %d: qcg-only: Cart_map onto a grid of 3: %s\n", me,
           nr == (me < 3 ? me : MPI_UNDEFINED) ? "ok" : "wrong");
#endif
}

static void grid_3d(void) {
    /* 2 x 1 x 2, periodic in the first two dimensions: along dimension 0 both
     * neighbours are the other process, along dimension 1 both are this one. */
    int dims[3] = {2, 1, 2}, periods[3] = {1, 1, 0}, r;
    MPI_Comm g;
    MPI_Cart_create(MPI_COMM_WORLD, 3, dims, periods, 0, &g);
    MPI_Comm_rank(g, &r);
    int out[6], in[6];
    for (int j = 0; j < 6; j++) {
        out[j] = 100 * r + j;
        in[j] = -1;
    }
    MPI_Neighbor_alltoall(out, 1, MPI_INT, in, 1, MPI_INT, g);
    int nb[6];
    for (int d = 0; d < 3; d++) MPI_Cart_shift(g, d, 1, &nb[2 * d], &nb[2 * d + 1]);
    for (int i = 0; i < 6; i++) {
        /* Slot 2d comes from the -1 neighbour's +1 block and the other way. */
        int want = nb[i] == MPI_PROC_NULL ? -1 : 100 * nb[i] + (i % 2 == 0 ? i + 1 : i - 1);
        CHECK(in[i] == want, "3d slot %d = %d, want %d", i, in[i], want);
    }
    printf("rank %d: 3d alltoall %d %d %d %d %d %d\n", me, in[0], in[1], in[2], in[3], in[4],
           in[5]);
    MPI_Comm_free(&g);
}

static void graph(void) {
    /* 0: 1 3 2, 1: 0 2, 2: 1 3 0, 3: 2 0 (symmetric). */
    int index[4] = {3, 5, 8, 10}, edges[10] = {1, 3, 2, 0, 2, 1, 3, 0, 2, 0};
    MPI_Comm g;
    MPI_Graph_create(MPI_COMM_WORLD, 4, index, edges, 0, &g);
    CHECK(topo_of(g) == MPI_GRAPH, "graph topo %d", topo_of(g));
    int nn, ne, ix[4], ed[10], cnt, nb[3], r;
    MPI_Comm_rank(g, &r);
    MPI_Graphdims_get(g, &nn, &ne);
    MPI_Graph_get(g, 4, 10, ix, ed);
    CHECK(nn == 4 && ne == 10 && ix[3] == 10 && ed[9] == 0, "graph get");
    MPI_Graph_neighbors_count(g, r, &cnt);
    MPI_Graph_neighbors(g, r, 3, nb);
    int out[3], in[3] = {-1, -1, -1}, ag[3] = {-1, -1, -1};
    for (int j = 0; j < cnt; j++) out[j] = 100 * r + nb[j];
    MPI_Neighbor_alltoall(out, 1, MPI_INT, in, 1, MPI_INT, g);
    MPI_Neighbor_allgather(&r, 1, MPI_INT, ag, 1, MPI_INT, g);
    for (int i = 0; i < cnt; i++) {
        CHECK(in[i] == 100 * nb[i] + r, "graph alltoall %d = %d", i, in[i]);
        CHECK(ag[i] == nb[i], "graph allgather %d = %d", i, ag[i]);
    }
    printf("rank %d: graph %d neighbours, alltoall %d %d %d\n", me, cnt, in[0], in[1],
           cnt > 2 ? in[2] : -1);
    int nr = -9;
    /* Two nodes whose edges stay inside: 0 -> 1, 1 -> 0. */
    int i2[2] = {1, 2}, e2[2] = {1, 0};
    MPI_Graph_map(MPI_COMM_WORLD, 2, i2, e2, &nr);
#ifdef QCG_LEVEL_SITE /* qcg's mpi.h */
    printf("rank %d: qcg-only: Graph_map onto 2 nodes: %s\n", me,
           nr == (me < 2 ? me : MPI_UNDEFINED) ? "ok" : "wrong");
#endif
    MPI_Comm_free(&g);
}

static void dist_graphs(void) {
    /* Each rank sends to r+1 and r+2 and hears from r-1 and r-2. */
    int r = me, src[2] = {(me + np - 1) % np, (me + np - 2) % np},
        dst[2] = {(me + 1) % np, (me + 2) % np};
    int sw[2] = {1, 2}, dw[2] = {1, 2};
    MPI_Comm g;
    MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, src, sw, 2, dst, dw, MPI_INFO_NULL, 0, &g);
    CHECK(topo_of(g) == MPI_DIST_GRAPH, "dist topo %d", topo_of(g));
    int indeg, outdeg, weighted, s[2], sws[2], d[2], dws[2];
    MPI_Dist_graph_neighbors_count(g, &indeg, &outdeg, &weighted);
    MPI_Dist_graph_neighbors(g, 2, s, sws, 2, d, dws);
    CHECK(indeg == 2 && outdeg == 2 && weighted, "dist counts");
    CHECK(s[0] == src[0] && s[1] == src[1] && d[0] == dst[0] && d[1] == dst[1], "dist lists");
    CHECK(sws[1] == 2 && dws[1] == 2, "dist weights");

    int out[2] = {100 * r + dst[0], 100 * r + dst[1]}, in[2] = {-1, -1};
    MPI_Neighbor_alltoall(out, 1, MPI_INT, in, 1, MPI_INT, g);
    CHECK(in[0] == 100 * src[0] + r && in[1] == 100 * src[1] + r, "dist alltoall %d %d", in[0],
          in[1]);

    /* allgatherv: rank q sends 1 + q % 2 ints; slots at displacements 0 and 3. */
    int mine[2] = {r, r}, rc[2] = {1 + src[0] % 2, 1 + src[1] % 2}, rd[2] = {0, 3}, gv[5];
    for (int i = 0; i < 5; i++) gv[i] = -1;
    MPI_Neighbor_allgatherv(mine, 1 + r % 2, MPI_INT, gv, rc, rd, MPI_INT, g);
    CHECK(gv[0] == src[0] && gv[3] == src[1] && gv[2] == -1, "dist allgatherv");
    printf("rank %d: dist alltoall %d %d allgatherv %d %d %d %d %d\n", me, in[0], in[1], gv[0],
           gv[1], gv[2], gv[3], gv[4]);

    /* alltoallv: j + 1 ints to destination j, so 1 from r-1 and 2 from r-2. */
    int vs[3] = {r, 10 * r, 10 * r + 1}, sc[2] = {1, 2}, sd[2] = {0, 1};
    int vr[4] = {-1, -1, -1, -1}, vc[2] = {1, 2}, vd[2] = {0, 2};
    MPI_Neighbor_alltoallv(vs, sc, sd, MPI_INT, vr, vc, vd, MPI_INT, g);
    CHECK(vr[0] == src[0] && vr[1] == -1 && vr[2] == 10 * src[1] && vr[3] == 10 * src[1] + 1,
          "dist alltoallv %d %d %d %d", vr[0], vr[1], vr[2], vr[3]);

    /* alltoallw: an int to the first destination, a double to the second. */
    struct {
        int i;
        double x;
    } ws = {r, r + 0.5}, wr = {-1, -1.0};
    int wc[2] = {1, 1};
    MPI_Aint wsd[2] = {0, (char *)&ws.x - (char *)&ws}, wrd[2] = {0, (char *)&wr.x - (char *)&wr};
    MPI_Datatype wt[2] = {MPI_INT, MPI_DOUBLE};
    MPI_Neighbor_alltoallw(&ws, wc, wsd, wt, &wr, wc, wrd, wt, g);
    CHECK(wr.i == src[0] && wr.x == src[1] + 0.5, "dist alltoallw %d %g", wr.i, wr.x);
    printf("rank %d: dist alltoallv %d %d %d alltoallw %d %.1f\n", me, vr[0], vr[2], vr[3], wr.i,
           wr.x);
    MPI_Comm_free(&g);

    /* Built from edges that any process may give: each gives its own edge to
     * r+1, and rank 0 also gives 3 -> 1. */
    int es[2] = {me, 3}, deg[2] = {1, 1}, ed[2] = {(me + 1) % np, 1};
    MPI_Comm h;
    MPI_Dist_graph_create(MPI_COMM_WORLD, me == 0 ? 2 : 1, es, deg, ed, unweighted,
                          MPI_INFO_NULL, 0, &h);
    MPI_Dist_graph_neighbors_count(h, &indeg, &outdeg, &weighted);
    int hs[3] = {-1, -1, -1}, hd[3] = {-1, -1, -1};
    MPI_Dist_graph_neighbors(h, 3, hs, unweighted, 3, hd, unweighted);
    /* The order of in-edges given by several processes is the implementation's:
     * print them sorted. */
    if (indeg == 2 && hs[0] > hs[1]) {
        int t = hs[0];
        hs[0] = hs[1];
        hs[1] = t;
    }
    if (outdeg == 2 && hd[0] > hd[1]) {
        int t = hd[0];
        hd[0] = hd[1];
        hd[1] = t;
    }
    int sum = 0, got[3] = {0, 0, 0};
    MPI_Neighbor_allgather(&r, 1, MPI_INT, got, 1, MPI_INT, h);
    for (int i = 0; i < indeg; i++) sum += got[i];
    CHECK(!weighted, "unweighted");
    printf("rank %d: dist graph in %d (%d %d) out %d (%d %d) weighted %d, allgather sum %d\n", me,
           indeg, hs[0], hs[1], outdeg, hd[0], hd[1], weighted, sum);
    MPI_Comm_free(&h);
}

static void bad_input(void) {
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    CHECK(topo_of(MPI_COMM_WORLD) == MPI_UNDEFINED, "world has no topology");
    int c[2], rc;
    rc = MPI_Cart_coords(MPI_COMM_WORLD, 0, 2, c);
    printf("rank %d: Cart_coords on a plain communicator: class %d\n", me, class_of(rc));
    int d2[2] = {3, 0};
    rc = MPI_Dims_create(10, 2, d2);
    printf("rank %d: Dims_create(10, [3 0]): class %d\n", me, class_of(rc));
    int d3[2] = {2, 2};
    rc = MPI_Dims_create(8, 2, d3);
    printf("rank %d: Dims_create(8, [2 2]): class %d\n", me, class_of(rc));

    int dims[2] = {2, 2}, periods[2] = {0, 1};
    MPI_Comm grid;
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &grid);
    rc = MPI_Cart_coords(grid, np + 3, 2, c);
    printf("rank %d: Cart_coords of rank %d: class %d\n", me, np + 3, class_of(rc));
    int far[2] = {2, 0}, x;
    rc = MPI_Cart_rank(grid, far, &x);
    printf("rank %d: Cart_rank outside a non-periodic dimension: class %d\n", me, class_of(rc));
    int s, t;
    rc = MPI_Cart_shift(grid, 2, 1, &s, &t);
    /* Open MPI 4.1 does not check the direction. */
#ifdef QCG_LEVEL_SITE /* qcg's mpi.h */
    printf("rank %d: qcg-only: Cart_shift in direction 2 of 2: class %d\n", me, class_of(rc));
#endif
    MPI_Comm_free(&grid);

    int big[2] = {4, 4};
    MPI_Comm none = MPI_COMM_NULL;
    rc = MPI_Cart_create(MPI_COMM_WORLD, 2, big, periods, 0, &none);
    printf("rank %d: Cart_create of 16 on %d: class %d\n", me, np, class_of(rc));

    int index[2] = {1, 2}, edges[2] = {1, 5};
    MPI_Comm g = MPI_COMM_NULL;
    rc = MPI_Graph_create(MPI_COMM_WORLD, 2, index, edges, 0, &g);
    /* Open MPI 4.1 does not check the edges (and makes the graph). */
#ifdef QCG_LEVEL_SITE /* qcg's mpi.h */
    printf("rank %d: qcg-only: Graph_create with an edge to node 5 of 2: class %d\n", me,
           class_of(rc));
#endif
    if (rc == MPI_SUCCESS && g != MPI_COMM_NULL) MPI_Comm_free(&g);

    int ok_index[2] = {1, 2}, ok_edges[2] = {1, 0}, n;
    MPI_Graph_create(MPI_COMM_WORLD, 2, ok_index, ok_edges, 0, &g);
    if (g != MPI_COMM_NULL) {
        rc = MPI_Graph_neighbors_count(g, 7, &n);
        printf("rank %d: Graph_neighbors_count of rank 7: class %d\n", me, class_of(rc));
        rc = MPI_Cart_shift(g, 0, 1, &s, &t);
        printf("rank %d: Cart_shift on a graph: class %d\n", me, class_of(rc));
        MPI_Comm_free(&g);
    }
    int src[1] = {np + 1}, dst[1] = {0};
    MPI_Comm dg = MPI_COMM_NULL;
    rc = MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, src, unweighted, 1, dst,
                                        unweighted, MPI_INFO_NULL, 0, &dg);
    printf("rank %d: Dist_graph_create_adjacent from rank %d: class %d\n", me, np + 1,
           class_of(rc));
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    unweighted = MPI_UNWEIGHTED;
    if (np != 4) {
        if (me == 0) printf("rank 0: topo needs 4 ranks\n");
        MPI_Finalize();
        return 1;
    }
    dims_table();
    grid_2d();
    line_1d();
    grid_3d();
    graph();
    dist_graphs();
    bad_input();
    DONE("topo");
    MPI_Finalize();
    return 0;
}
