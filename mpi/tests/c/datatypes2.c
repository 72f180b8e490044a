/* Datatypes, the rest of MPI 3.1 chapter 4: every constructor's bounds, envelopes
 * and contents, MPI_Pack and external32 round trips, a subarray halo exchange and
 * a darray assembled at the root, resized types in a gather and a scatter,
 * MPI_BOTTOM with absolute addresses, MPI_Get_elements. */
#include "check.h"
#include <stddef.h>

struct rec { int id; double w; char tag[3]; };

static const char *combiner_name(int c) {
    switch (c) {
    case MPI_COMBINER_NAMED: return "NAMED";
    case MPI_COMBINER_DUP: return "DUP";
    case MPI_COMBINER_CONTIGUOUS: return "CONTIGUOUS";
    case MPI_COMBINER_VECTOR: return "VECTOR";
    case MPI_COMBINER_HVECTOR: return "HVECTOR";
    case MPI_COMBINER_INDEXED: return "INDEXED";
    case MPI_COMBINER_HINDEXED: return "HINDEXED";
    case MPI_COMBINER_INDEXED_BLOCK: return "INDEXED_BLOCK";
    case MPI_COMBINER_HINDEXED_BLOCK: return "HINDEXED_BLOCK";
    case MPI_COMBINER_STRUCT: return "STRUCT";
    case MPI_COMBINER_SUBARRAY: return "SUBARRAY";
    case MPI_COMBINER_DARRAY: return "DARRAY";
    case MPI_COMBINER_RESIZED: return "RESIZED";
    default: return "OTHER";
    }
}

/* One rank (each in turn) prints a type's size and bounds, and its envelope and
 * contents: mpirun forwards output in 4 KiB pieces, and a piece that ends inside
 * a line gets another rank's line in the middle, so no rank prints that much. */
static int shown = 0;
static void show(const char *name, MPI_Datatype t) {
    int printer = shown++ % np;
    int sz, ni, na, nd, comb;
    MPI_Aint lb, ext, tlb, text;
    MPI_Count xsz, xlb, xext, xtlb, xtext;
    MPI_Type_size(t, &sz);
    MPI_Type_get_extent(t, &lb, &ext);
    MPI_Type_get_true_extent(t, &tlb, &text);
    MPI_Type_size_x(t, &xsz);
    MPI_Type_get_extent_x(t, &xlb, &xext);
    MPI_Type_get_true_extent_x(t, &xtlb, &xtext);
    CHECK(xsz == sz && xlb == lb && xext == ext && xtlb == tlb && xtext == text, "%s _x", name);
    MPI_Type_get_envelope(t, &ni, &na, &nd, &comb);
    if (me != printer) return;
    printf("rank %d: %s size %d lb %ld extent %ld true lb %ld true extent %ld; %s %d %d %d\n",
           me, name, sz, (long)lb, (long)ext, (long)tlb, (long)text, combiner_name(comb), ni, na, nd);
    if (comb == MPI_COMBINER_NAMED) return;
    int ints[64];
    MPI_Aint aints[16];
    MPI_Datatype tys[16];
    /* The envelope's exact sizes: Open MPI 4.1 crashes on larger maxima. */
    MPI_Type_get_contents(t, ni, na, nd, ints, aints, tys);
    printf("rank %d: %s contents:", me, name);
    for (int i = 0; i < ni; i++) printf(" %d", ints[i]);
    printf(" |");
    for (int i = 0; i < na; i++) printf(" %ld", (long)aints[i]);
    printf(" |");
    for (int i = 0; i < nd; i++) {
        int a, b, c, k;
        MPI_Type_get_envelope(tys[i], &a, &b, &c, &k);
        int s;
        MPI_Type_size(tys[i], &s);
        printf(" %s(%d)", combiner_name(k), s);
        if (k != MPI_COMBINER_NAMED) MPI_Type_free(&tys[i]);
    }
    printf("\n");
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* whole lines, see show() */
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    int right = (me + 1) % np, left = (me + np - 1) % np;

    /* ---- bounds, envelopes and contents ---- */
    MPI_Datatype t, r3, v;
    int bl2[2] = {1, 1}, bl3[3] = {2, 1, 3};
    MPI_Aint d2[2] = {0, 8};
    MPI_Datatype dc[2] = {MPI_DOUBLE, MPI_CHAR};
    show("int", MPI_INT);
    show("double_int", MPI_DOUBLE_INT);
    show("short_int", MPI_SHORT_INT);
    show("packed", MPI_PACKED);
    show("c_double_complex", MPI_C_DOUBLE_COMPLEX);
    MPI_Type_create_struct(2, bl2, d2, dc, &t);
    show("struct{double,char@8}", t);
    MPI_Type_free(&t);
    MPI_Aint d02[2] = {0, 2};
    MPI_Type_create_hindexed(2, bl2, d02, MPI_INT, &t);
    show("hindexed{0,2}", t);
    MPI_Type_free(&t);
    MPI_Type_create_resized(MPI_INT, 0, 3, &r3);
    show("resized(int,0,3)", r3);
    MPI_Type_contiguous(2, r3, &t);
    show("contiguous(2,r3)", t);
    MPI_Type_free(&t);
    MPI_Datatype rd[2] = {r3, MPI_DOUBLE};
    MPI_Type_create_struct(2, bl2, d2, rd, &t);
    show("struct{r3,double@8}", t);
    MPI_Type_free(&t);
    MPI_Aint d09[2] = {0, 9};
    MPI_Datatype cc[2] = {MPI_CHAR, MPI_CHAR};
    MPI_Type_create_struct(2, bl2, d09, cc, &t);
    show("struct{char,char@9}", t);
    MPI_Type_free(&t);
    MPI_Type_vector(2, 1, 2, MPI_INT, &v);
    MPI_Aint d012[2] = {0, 12};
    MPI_Datatype vc[2] = {v, MPI_CHAR};
    MPI_Type_create_struct(2, bl2, d012, vc, &t);
    show("struct{vector,char@12}", t);
    MPI_Type_free(&t);
    MPI_Type_create_resized(MPI_INT, -4, 16, &t);
    show("resized(int,-4,16)", t);
    MPI_Type_free(&t);
    MPI_Type_vector(3, 1, -2, MPI_INT, &t);
    show("vector(3,1,-2)", t);
    MPI_Type_free(&t);
    MPI_Type_create_hvector(2, 1, -10, MPI_DOUBLE, &t);
    show("hvector(2,1,-10)", t);
    MPI_Type_free(&t);
    int idisp[3] = {5, 0, 9};
    MPI_Type_indexed(3, bl3, idisp, MPI_SHORT, &t);
    show("indexed", t);
    MPI_Type_free(&t);
    MPI_Aint hdisp[3] = {40, 0, 17};
    MPI_Type_create_hindexed(3, bl3, hdisp, MPI_INT, &t);
    show("hindexed", t);
    MPI_Type_free(&t);
    MPI_Type_create_indexed_block(3, 2, idisp, MPI_DOUBLE, &t);
    show("indexed_block", t);
    MPI_Type_free(&t);
    MPI_Type_create_hindexed_block(3, 2, hdisp, v, &t);
    show("hindexed_block", t);
    MPI_Type_free(&t);
    MPI_Datatype three[3] = {MPI_INT, v, MPI_DOUBLE_INT};
    MPI_Aint sdisp[3] = {0, 16, 48};
    MPI_Type_create_struct(3, bl3, sdisp, three, &t);
    show("struct", t);
    MPI_Datatype dup;
    MPI_Type_dup(t, &dup);
    show("dup(struct)", dup);
    MPI_Type_free(&dup);
    MPI_Type_free(&t);
    int sizes[2] = {4, 5}, subs[2] = {2, 3}, starts[2] = {1, 1};
    MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_C, MPI_INT, &t);
    show("subarray C", t);
    MPI_Type_free(&t);
    MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_FORTRAN, MPI_DOUBLE, &t);
    show("subarray Fortran", t);
    MPI_Type_free(&t);
    int gs[2] = {5, 7}, dist[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC};
    int dargs[2] = {MPI_DISTRIBUTE_DFLT_DARG, 2}, ps[2] = {2, 2};
    for (int r = 0; r < 4; r++) {
        char name[32];
        snprintf(name, sizeof name, "darray rank %d", r);
        MPI_Type_create_darray(4, r, 2, gs, dist, dargs, ps, MPI_ORDER_C, MPI_INT, &t);
        show(name, t);
        MPI_Type_free(&t);
    }
    /* Sticky bounds with positive and negative extents (MPICH's lbub cases). */
    {
        MPI_Datatype b4, ev, nev;
        MPI_Type_contiguous(4, MPI_BYTE, &b4);
        MPI_Type_create_resized(b4, -3, 9, &ev);
        MPI_Type_create_resized(b4, 6, -9, &nev);
        const char *names[2] = {"ev", "nev"};
        MPI_Datatype evs[2] = {ev, nev};
        for (int k = 0; k < 2; k++) {
            char name[48];
            snprintf(name, sizeof name, "contiguous(3,%s)", names[k]);
            MPI_Type_contiguous(3, evs[k], &t);
            show(name, t);
            MPI_Type_free(&t);
            int shapes[4][3] = {{3, 1, 1}, {3, 2, 2}, {3, 2, -2}, {2, 3, -1}};
            for (int j = 0; j < 4; j++) {
                snprintf(name, sizeof name, "vector(%d,%d,%d,%s)", shapes[j][0], shapes[j][1], shapes[j][2], names[k]);
                MPI_Type_vector(shapes[j][0], shapes[j][1], shapes[j][2], evs[k], &t);
                show(name, t);
                MPI_Type_free(&t);
            }
        }
        int one[2] = {1, 2};
        MPI_Aint at[2] = {0, 20};
        MPI_Datatype two[2] = {nev, ev};
        MPI_Type_create_struct(1, one, at, two, &t);
        show("struct{nev}", t);
        MPI_Type_free(&t);
        MPI_Type_create_struct(2, one, at, two, &t);
        show("struct{nev,2 ev@20}", t);
        MPI_Type_free(&t);
        MPI_Type_create_hindexed(2, one, at, nev, &t);
        show("hindexed(nev)", t);
        MPI_Type_free(&t);
        MPI_Type_dup(nev, &t);
        show("dup(nev)", t);
        MPI_Type_free(&t);
        MPI_Type_free(&b4);
        MPI_Type_free(&ev);
        MPI_Type_free(&nev);
    }
    /* Zero counts and zero-length blocks. */
    MPI_Type_contiguous(0, MPI_INT, &t);
    show("contiguous(0,int)", t);
    MPI_Type_free(&t);
    {
        int zl[3] = {0, 1, 0};
        MPI_Aint zd[3] = {-8, 8, 40};
        MPI_Datatype zt[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR};
        MPI_Type_create_struct(3, zl, zd, zt, &t);
        show("struct with empty blocks", t);
        MPI_Type_free(&t);
        MPI_Type_create_hindexed(3, zl, zd, MPI_INT, &t);
        show("hindexed with empty blocks", t);
        MPI_Type_free(&t);
        MPI_Type_vector(3, 0, 2, MPI_INT, &t);
        show("vector(3,0,2,int)", t);
        MPI_Type_free(&t);
    }
    /* Fortran order, explicit block and cyclic arguments, a dimension not distributed. */
    {
        int g3[3] = {4, 6, 5}, d3[3] = {MPI_DISTRIBUTE_NONE, MPI_DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_BLOCK};
        int a3[3] = {MPI_DISTRIBUTE_DFLT_DARG, 2, 3}, p3[3] = {1, 2, 2};
        for (int r = 0; r < 4; r++) {
            char name[48];
            snprintf(name, sizeof name, "darray 3d Fortran rank %d", r);
            MPI_Type_create_darray(4, r, 3, g3, d3, a3, p3, MPI_ORDER_FORTRAN, MPI_DOUBLE, &t);
            show(name, t);
            if (r == me) {
                /* The order of the elements: pack an array holding each index. */
                double all[120], part[120];
                int pos = 0, sz;
                for (int i = 0; i < 120; i++) all[i] = i;
                MPI_Type_commit(&t);
                MPI_Type_size(t, &sz);
                MPI_Pack(all, 1, t, part, sizeof part, &pos, MPI_COMM_WORLD);
                printf("rank %d: darray 3d Fortran elements:", me);
                for (int i = 0; i < sz / 8; i++) printf(" %g", part[i]);
                printf("\n");
            }
            MPI_Type_free(&t);
            snprintf(name, sizeof name, "darray 3d C rank %d", r);
            MPI_Type_create_darray(4, r, 3, g3, d3, a3, p3, MPI_ORDER_C, MPI_SHORT, &t);
            show(name, t);
            MPI_Type_free(&t);
        }
    }
    MPI_Datatype m;
    MPI_Type_match_size(MPI_TYPECLASS_REAL, 8, &m);
    int msz;
    MPI_Type_size(m, &msz);
    CHECK(msz == 8, "match_size real 8 -> %d", msz);
    MPI_Type_match_size(MPI_TYPECLASS_INTEGER, 2, &m);
    MPI_Type_size(m, &msz);
    CHECK(msz == 2, "match_size integer 2 -> %d", msz);

    /* ---- records laid out with MPI_Get_address ---- */
    struct rec recs[3], rr[3];
    MPI_Aint base, addr[3];
    MPI_Get_address(&recs[0], &base);
    MPI_Get_address(&recs[0].id, &addr[0]);
    MPI_Get_address(&recs[0].w, &addr[1]);
    MPI_Get_address(&recs[0].tag, &addr[2]);
    for (int i = 0; i < 3; i++) addr[i] = MPI_Aint_diff(addr[i], base);
    CHECK(MPI_Aint_add(base, addr[1]) == base + (MPI_Aint)offsetof(struct rec, w), "aint_add");
    int rbl[3] = {1, 1, 3};
    MPI_Datatype rty[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR}, rect0, rect;
    MPI_Type_create_struct(3, rbl, addr, rty, &rect0);
    MPI_Type_create_resized(rect0, 0, sizeof(struct rec), &rect);
    MPI_Type_commit(&rect);
    show("record", rect);
    for (int i = 0; i < 3; i++) {
        recs[i].id = me * 10 + i;
        recs[i].w = me + 0.25 * i;
        memcpy(recs[i].tag, "abc", 3);
        recs[i].tag[0] += i;
    }
    memset(rr, 0, sizeof rr);
    MPI_Sendrecv(recs, 3, rect, right, 1, rr, 3, rect, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(rr[2].id == left * 10 + 2 && rr[2].w == left + 0.5 && rr[2].tag[0] == 'c', "records");

    /* ---- MPI_Pack / MPI_Unpack, sent as MPI_PACKED ---- */
    {
        char buf[256];
        int pos = 0, psz;
        int n = me + 100;
        double col[12];
        for (int i = 0; i < 12; i++) col[i] = me * 100 + i;
        MPI_Datatype colt;
        MPI_Type_vector(4, 1, 3, MPI_DOUBLE, &colt);
        MPI_Type_commit(&colt);
        MPI_Pack_size(1, colt, MPI_COMM_WORLD, &psz);
        if (me == 0) printf("rank 0: pack_size of a column %d, of 3 records ", psz);
        MPI_Pack_size(3, rect, MPI_COMM_WORLD, &psz);
        if (me == 0) printf("%d\n", psz);
        MPI_Pack(&n, 1, MPI_INT, buf, sizeof buf, &pos, MPI_COMM_WORLD);
        MPI_Pack(&col[1], 1, colt, buf, sizeof buf, &pos, MPI_COMM_WORLD);
        MPI_Pack(recs, 2, rect, buf, sizeof buf, &pos, MPI_COMM_WORLD);
        if (me == 0) printf("rank 0: packed %d bytes\n", pos);
        char got[256];
        MPI_Status st;
        MPI_Sendrecv(buf, pos, MPI_PACKED, right, 2, got, sizeof got, MPI_PACKED, left, 2, MPI_COMM_WORLD, &st);
        int cnt;
        MPI_Get_count(&st, MPI_PACKED, &cnt);
        CHECK(cnt == pos, "packed count %d", cnt);
        int n2 = 0, upos = 0;
        double c2[12] = {0};
        struct rec r2[2];
        memset(r2, 0, sizeof r2);
        MPI_Unpack(got, cnt, &upos, &n2, 1, MPI_INT, MPI_COMM_WORLD);
        MPI_Unpack(got, cnt, &upos, &c2[2], 1, colt, MPI_COMM_WORLD);
        MPI_Unpack(got, cnt, &upos, r2, 2, rect, MPI_COMM_WORLD);
        CHECK(upos == cnt, "unpacked all %d %d", upos, cnt);
        CHECK(n2 == left + 100, "unpacked int %d", n2);
        CHECK(c2[2] == left * 100 + 1 && c2[11] == left * 100 + 10 && c2[3] == 0, "unpacked column");
        CHECK(r2[1].id == left * 10 + 1 && r2[1].tag[0] == 'b', "unpacked records");
        /* Too small an output buffer. */
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        int p2 = 0, e = MPI_Pack(col, 12, MPI_DOUBLE, buf, 8, &p2, MPI_COMM_WORLD), cls;
        MPI_Error_class(e, &cls);
        CHECK(e != MPI_SUCCESS && p2 == 0, "pack overflow returned %d", e);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
        MPI_Type_free(&colt);
    }

    /* ---- external32: big-endian, the same on every machine ---- */
    {
        int x[2] = {0x01020304, -2};
        short s = 0x0506;
        unsigned char out[64];
        MPI_Aint pos = 0, esz;
        MPI_Pack_external_size("external32", 2, MPI_INT, &esz);
        MPI_Pack_external("external32", x, 2, MPI_INT, out, sizeof out, &pos);
        MPI_Pack_external("external32", &s, 1, MPI_SHORT, out, sizeof out, &pos);
        if (me == 0) {
            printf("rank 0: external32 size %ld, %ld bytes:", (long)esz, (long)pos);
            for (int i = 0; i < pos; i++) printf(" %02x", out[i]);
            printf("\n");
        }
        int y[2] = {0};
        short s2 = 0;
        MPI_Aint up = 0;
        MPI_Unpack_external("external32", out, pos, &up, y, 2, MPI_INT);
        MPI_Unpack_external("external32", out, pos, &up, &s2, 1, MPI_SHORT);
        CHECK(y[0] == x[0] && y[1] == -2 && s2 == s && up == pos, "external32 round trip");
        double dd = 1.5, de = 0;
        pos = 0;
        up = 0;
        MPI_Pack_external("external32", &dd, 1, MPI_DOUBLE, out, sizeof out, &pos);
        CHECK(out[0] == 0x3f && out[1] == 0xf8, "external32 double %02x %02x", out[0], out[1]);
        MPI_Unpack_external("external32", out, pos, &up, &de, 1, MPI_DOUBLE);
        CHECK(de == 1.5, "external32 double back %g", de);
    }

    /* ---- halo exchange with subarray types: 4 x 6 local block, ghost columns 0, 5 ---- */
    {
        int a[4][6];
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 6; j++) a[i][j] = (j == 0 || j == 5) ? -1 : me * 1000 + i * 10 + j;
        int sz2[2] = {4, 6}, sub2[2] = {4, 1};
        int first[2] = {0, 1}, last[2] = {0, 4}, gl[2] = {0, 0}, gr[2] = {0, 5};
        MPI_Datatype sfirst, slast, gleft, gright;
        MPI_Type_create_subarray(2, sz2, sub2, first, MPI_ORDER_C, MPI_INT, &sfirst);
        MPI_Type_create_subarray(2, sz2, sub2, last, MPI_ORDER_C, MPI_INT, &slast);
        MPI_Type_create_subarray(2, sz2, sub2, gl, MPI_ORDER_C, MPI_INT, &gleft);
        MPI_Type_create_subarray(2, sz2, sub2, gr, MPI_ORDER_C, MPI_INT, &gright);
        MPI_Type_commit(&sfirst);
        MPI_Type_commit(&slast);
        MPI_Type_commit(&gleft);
        MPI_Type_commit(&gright);
        /* My first interior column goes to my left neighbour's right ghost column. */
        MPI_Sendrecv(a, 1, sfirst, left, 3, a, 1, gright, right, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Sendrecv(a, 1, slast, right, 4, a, 1, gleft, left, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        int ok = 1;
        for (int i = 0; i < 4; i++) {
            ok &= a[i][5] == right * 1000 + i * 10 + 1;
            ok &= a[i][0] == left * 1000 + i * 10 + 4;
            ok &= a[i][2] == me * 1000 + i * 10 + 2;
        }
        CHECK(ok, "halo exchange");
        MPI_Type_free(&sfirst);
        MPI_Type_free(&slast);
        MPI_Type_free(&gleft);
        MPI_Type_free(&gright);
    }

    /* ---- a darray: each rank sends its part, the root assembles the array ---- */
    if (np == 4) {
        int g[5][7], whole[5][7];
        MPI_Datatype mine;
        MPI_Type_create_darray(4, me, 2, gs, dist, dargs, ps, MPI_ORDER_C, MPI_INT, &mine);
        MPI_Type_commit(&mine);
        for (int i = 0; i < 5; i++)
            for (int j = 0; j < 7; j++) g[i][j] = me * 100 + i * 7 + j;
        int dsz;
        MPI_Type_size(mine, &dsz);
        MPI_Request q;
        MPI_Isend(g, 1, mine, 0, 5, MPI_COMM_WORLD, &q);
        if (me == 0) {
            memset(whole, 0xff, sizeof whole);
            for (int r = 0; r < 4; r++) {
                MPI_Datatype theirs;
                MPI_Type_create_darray(4, r, 2, gs, dist, dargs, ps, MPI_ORDER_C, MPI_INT, &theirs);
                MPI_Type_commit(&theirs);
                MPI_Status st;
                MPI_Recv(whole, 1, theirs, r, 5, MPI_COMM_WORLD, &st);
                int el;
                MPI_Get_elements(&st, theirs, &el);
                printf("rank 0: darray part of rank %d: %d elements\n", r, el);
                MPI_Type_free(&theirs);
            }
            int ok = 1;
            for (int i = 0; i < 5; i++)
                for (int j = 0; j < 7; j++) {
                    int owner = (i / 3) * 2 + (j / 2) % 2;
                    ok &= whole[i][j] == owner * 100 + i * 7 + j;
                }
            CHECK(ok, "darray assembled");
        }
        MPI_Wait(&q, MPI_STATUS_IGNORE);
        MPI_Type_free(&mine);
    }

    /* ---- resized types in a gather and a scatter ---- */
    {
        int every3[3 * 64], x = me + 7;
        for (int i = 0; i < 3 * 64; i++) every3[i] = -1;
        MPI_Datatype stride3;
        MPI_Type_create_resized(MPI_INT, 0, 3 * sizeof(int), &stride3);
        MPI_Type_commit(&stride3);
        MPI_Gather(&x, 1, MPI_INT, every3, 1, stride3, 0, MPI_COMM_WORLD);
        if (me == 0) {
            int ok = 1;
            for (int r = 0; r < np; r++) ok &= every3[3 * r] == r + 7 && every3[3 * r + 1] == -1;
            CHECK(ok, "gather into every third int");
        }
        /* Columns of an np x np matrix, one to each rank. */
        int mat[64 * 64], colr[64];
        for (int i = 0; i < np * np; i++) mat[i] = i;
        MPI_Datatype col0, col;
        MPI_Type_vector(np, 1, np, MPI_INT, &col0);
        MPI_Type_create_resized(col0, 0, sizeof(int), &col);
        MPI_Type_commit(&col);
        MPI_Scatter(mat, 1, col, colr, np, MPI_INT, 0, MPI_COMM_WORLD);
        int ok = 1;
        for (int i = 0; i < np; i++) ok &= colr[i] == i * np + me;
        CHECK(ok, "scatter of columns");
        /* And back: the root gathers rows into columns. */
        int back[64 * 64];
        memset(back, 0, sizeof back);
        MPI_Gather(colr, np, MPI_INT, back, 1, col, 0, MPI_COMM_WORLD);
        if (me == 0) CHECK(memcmp(back, mat, np * np * sizeof(int)) == 0, "gather of columns");
        MPI_Type_free(&stride3);
        MPI_Type_free(&col0);
        MPI_Type_free(&col);
    }

    /* ---- MPI_BOTTOM: a struct of absolute addresses ---- */
    {
        static int si;
        double sd[2];
        int ri = 0;
        double rd[2] = {0, 0};
        si = me + 1;
        sd[0] = me * 0.5;
        sd[1] = -me;
        int b2[2] = {1, 2};
        MPI_Aint sa[2], ra[2];
        MPI_Get_address(&si, &sa[0]);
        MPI_Get_address(sd, &sa[1]);
        MPI_Get_address(&ri, &ra[0]);
        MPI_Get_address(rd, &ra[1]);
        MPI_Datatype ty2[2] = {MPI_INT, MPI_DOUBLE}, sab, rab;
        MPI_Type_create_struct(2, b2, sa, ty2, &sab);
        MPI_Type_create_struct(2, b2, ra, ty2, &rab);
        MPI_Type_commit(&sab);
        MPI_Type_commit(&rab);
        MPI_Request q[2];
        MPI_Irecv(MPI_BOTTOM, 1, rab, left, 6, MPI_COMM_WORLD, &q[0]);
        MPI_Isend(MPI_BOTTOM, 1, sab, right, 6, MPI_COMM_WORLD, &q[1]);
        MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
        CHECK(ri == left + 1 && rd[0] == left * 0.5 && rd[1] == -left, "MPI_BOTTOM isend/irecv %d", ri);
        ri = 0;
        MPI_Sendrecv(MPI_BOTTOM, 1, sab, right, 7, MPI_BOTTOM, 1, rab, left, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(ri == left + 1, "MPI_BOTTOM sendrecv %d", ri);
        ri = 0;
        MPI_Bcast(MPI_BOTTOM, 1, me == 0 ? sab : rab, 0, MPI_COMM_WORLD);
        CHECK(me == 0 || (ri == 1 && rd[1] == 0), "MPI_BOTTOM bcast %d", ri);
        MPI_Type_free(&sab);
        MPI_Type_free(&rab);
    }

    /* ---- MPI_Get_elements: basic elements, whole or not ---- */
    {
        int b2[2] = {1, 1};
        MPI_Aint od[2] = {0, 8};
        MPI_Datatype ty2[2] = {MPI_INT, MPI_DOUBLE}, id;
        MPI_Type_create_struct(2, b2, od, ty2, &id);
        MPI_Type_commit(&id);
        int four[4] = {1, 2, 3, 4};
        char rb[64];
        MPI_Status st;
        MPI_Sendrecv(four, 4, MPI_INT, right, 8, rb, 3, id, left, 8, MPI_COMM_WORLD, &st);
        int el, cnt;
        MPI_Count elx;
        MPI_Get_elements(&st, id, &el);
        MPI_Get_elements_x(&st, id, &elx);
        MPI_Get_count(&st, id, &cnt);
        if (me == 0) printf("rank 0: 16 bytes as int+double: %d elements, count %s\n", el, cnt == MPI_UNDEFINED ? "undefined" : "defined");
        CHECK(el == elx, "get_elements_x");
        MPI_Sendrecv(four, 3, MPI_SHORT, right, 9, rb, 3, id, left, 9, MPI_COMM_WORLD, &st);
        MPI_Get_elements(&st, id, &el);
        if (me == 0) printf("rank 0: 6 bytes as int+double: %s\n", el == MPI_UNDEFINED ? "undefined" : "defined");
        /* MPI_Status_set_elements counts basic elements, not whole ones. */
        int set[4];
        for (int k = 0; k < 4; k++) {
            MPI_Status_set_elements(&st, id, k + 2);
            MPI_Get_elements(&st, id, &set[k]);
        }
        MPI_Get_count(&st, id, &cnt);
        if (me == 0) printf("rank 0: set 2..5 int+double elements: %d %d %d %d, count %d\n", set[0], set[1], set[2], set[3], cnt);
        MPI_Type_free(&id);
    }

    /* ---- Fortran's types named in C; empty blocks anywhere take no room ---- */
    {
        int csz, dcsz, isz, lsz, msz;
        MPI_Datatype m;
        MPI_Type_size(MPI_COMPLEX, &csz);
        MPI_Type_size(MPI_DOUBLE_COMPLEX, &dcsz);
        MPI_Type_size(MPI_INTEGER, &isz);
        MPI_Type_size(MPI_LOGICAL, &lsz);
        MPI_Type_match_size(MPI_TYPECLASS_COMPLEX, 16, &m);
        MPI_Type_size(m, &msz);
        double z[2] = {1.0 + me, 0.5}, zs[2];
        MPI_Allreduce(z, zs, 1, MPI_DOUBLE_COMPLEX, MPI_SUM, MPI_COMM_WORLD);
        if (me == 0) printf("rank 0: complex %d, double complex %d, integer %d, logical %d, match complex 16: %d; sum (%g, %g)\n", csz, dcsz, isz, lsz, msz, zs[0], zs[1]);
        int zl[3] = {0, 4, 0};
        MPI_Aint far[3] = {(MPI_Aint)(~(size_t)0 >> 1), 8, (MPI_Aint)(~(size_t)0 >> 1)};
        MPI_Datatype h;
        int herr = MPI_Type_create_hindexed(3, zl, far, MPI_INT, &h);
        MPI_Aint hl, he;
        MPI_Type_get_extent(h, &hl, &he);
        if (me == 0) printf("rank 0: hindexed with empty blocks at the far end: error %d, lb %ld, extent %ld\n", herr, (long)hl, (long)he);
        MPI_Type_free(&h);
    }

#ifndef OPEN_MPI
    /* ---- bad input: a receive type that overlaps itself; a count that overflows ---- */
    {
        MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
        MPI_Datatype ov, huge;
        MPI_Aint od[2] = {0, 2};
        MPI_Type_create_hindexed(2, bl2, od, MPI_INT, &ov);
        MPI_Type_commit(&ov);
        /* Open MPI accepts both: the lines say what qcg does, and count no checks. */
        int buf[4], cls, cls2;
        int e = MPI_Recv(buf, 1, ov, 0, 0, MPI_COMM_SELF, MPI_STATUS_IGNORE);
        MPI_Error_class(e, &cls);
        /* 2^60 bytes a piece: eight of them overflow an MPI_Aint. */
        MPI_Datatype g1;
        MPI_Type_contiguous(1 << 30, MPI_INT, &g1);
        MPI_Type_contiguous(1 << 28, g1, &huge);
        MPI_Type_commit(&huge);
        e = MPI_Send(buf, 8, huge, 0, 0, MPI_COMM_SELF);
        MPI_Error_class(e, &cls2);
        /* MPI 1's names (Open MPI 4.1 refuses them at compile time). */
        MPI_Datatype h1, h2;
        MPI_Aint l1, e1, l2, e2;
        MPI_Type_hvector(2, 1, -10, MPI_DOUBLE, &h1);
        MPI_Type_get_extent(h1, &l1, &e1);
        MPI_Type_hindexed(2, bl2, od, MPI_INT, &h2);
        MPI_Type_get_extent(h2, &l2, &e2);
        printf("rank %d: qcg-only: receive into an overlapping type: class %d; "
               "overflowing count: class %d; MPI 1 names: %ld %ld %ld %ld\n", me, cls, cls2,
               (long)l1, (long)e1, (long)l2, (long)e2);
        MPI_Type_free(&h1);
        MPI_Type_free(&h2);
        MPI_Type_free(&ov);
        MPI_Type_free(&g1);
        MPI_Type_free(&huge);
    }
#endif

    MPI_Type_free(&rect);
    MPI_Type_free(&rect0);
    MPI_Type_free(&v);
    MPI_Type_free(&r3);
    DONE("datatypes2");
    MPI_Finalize();
    return failures != 0;
}
