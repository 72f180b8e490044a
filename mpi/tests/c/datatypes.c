/* Datatypes: sizes and extents of the predefined types, contiguous, vector and
 * struct types sent, received, broadcast and reduced. */
#include "check.h"

struct rec { int id; double w; char tag[3]; };

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    int right = (me + 1) % np, left = (me + np - 1) % np;

    MPI_Datatype all[] = {MPI_CHAR, MPI_SIGNED_CHAR, MPI_UNSIGNED_CHAR, MPI_BYTE, MPI_SHORT,
        MPI_UNSIGNED_SHORT, MPI_INT, MPI_UNSIGNED, MPI_LONG, MPI_UNSIGNED_LONG, MPI_LONG_LONG,
        MPI_UNSIGNED_LONG_LONG, MPI_FLOAT, MPI_DOUBLE, MPI_LONG_DOUBLE, MPI_INT8_T, MPI_INT16_T,
        MPI_INT32_T, MPI_INT64_T, MPI_UINT8_T, MPI_UINT16_T, MPI_UINT32_T, MPI_UINT64_T,
        MPI_C_BOOL, MPI_WCHAR, MPI_FLOAT_INT, MPI_DOUBLE_INT, MPI_LONG_INT, MPI_2INT,
        MPI_SHORT_INT, MPI_LONG_DOUBLE_INT};
    const char *names[] = {"CHAR", "SIGNED_CHAR", "UNSIGNED_CHAR", "BYTE", "SHORT",
        "UNSIGNED_SHORT", "INT", "UNSIGNED", "LONG", "UNSIGNED_LONG", "LONG_LONG",
        "UNSIGNED_LONG_LONG", "FLOAT", "DOUBLE", "LONG_DOUBLE", "INT8_T", "INT16_T",
        "INT32_T", "INT64_T", "UINT8_T", "UINT16_T", "UINT32_T", "UINT64_T", "C_BOOL",
        "WCHAR", "FLOAT_INT", "DOUBLE_INT", "LONG_INT", "2INT", "SHORT_INT",
        "LONG_DOUBLE_INT"};
    for (unsigned i = 0; i < sizeof all / sizeof all[0]; i++) {
        int sz;
        MPI_Aint lb, ext;
        MPI_Type_size(all[i], &sz);
        MPI_Type_get_extent(all[i], &lb, &ext);
        if (me == 0) printf("rank 0: MPI_%s size %d extent %ld\n", names[i], sz, (long)ext);
    }

    /* Every predefined type through a ring. */
    long double ld = 1.0L / (me + 3), ldr = 0;
    MPI_Sendrecv(&ld, 1, MPI_LONG_DOUBLE, right, 1, &ldr, 1, MPI_LONG_DOUBLE, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(ldr == 1.0L / (left + 3), "long double");
    struct { short v; int i; } si = {(short)-me, me}, sir;
    MPI_Sendrecv(&si, 1, MPI_SHORT_INT, right, 2, &sir, 1, MPI_SHORT_INT, left, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(sir.v == -left && sir.i == left, "short_int %d %d", sir.v, sir.i);

    /* Contiguous. */
    MPI_Datatype three;
    MPI_Type_contiguous(3, MPI_INT, &three);
    MPI_Type_commit(&three);
    int t[6] = {me, me + 1, me + 2, me + 3, me + 4, me + 5}, tr[6];
    MPI_Status st;
    MPI_Sendrecv(t, 2, three, right, 3, tr, 2, three, left, 3, MPI_COMM_WORLD, &st);
    int c;
    MPI_Get_count(&st, three, &c);
    CHECK(c == 2 && tr[5] == left + 5, "contiguous %d %d", c, tr[5]);
    MPI_Get_count(&st, MPI_INT, &c);
    CHECK(c == 6, "as ints %d", c);

    /* Vector: a column of a 4x5 row-major matrix. */
    MPI_Datatype col;
    MPI_Type_vector(4, 1, 5, MPI_DOUBLE, &col);
    MPI_Type_commit(&col);
    int sz;
    MPI_Aint lb, ext;
    MPI_Type_size(col, &sz);
    MPI_Type_get_extent(col, &lb, &ext);
    if (me == 0) printf("rank 0: column size %d extent %ld\n", sz, (long)ext);
    double mtx[20], mr[20];
    for (int i = 0; i < 20; i++) { mtx[i] = me * 100 + i; mr[i] = -1; }
    MPI_Sendrecv(&mtx[2], 1, col, right, 4, &mr[1], 1, col, left, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    int ok = 1;
    for (int i = 0; i < 4; i++) ok &= mr[i * 5 + 1] == left * 100 + i * 5 + 2 && mr[i * 5] == -1;
    CHECK(ok, "vector column");
    double colv[4];
    MPI_Sendrecv(&mtx[3], 1, col, right, 5, colv, 4, MPI_DOUBLE, left, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(colv[3] == left * 100 + 18, "column into doubles %g", colv[3]);
    for (int i = 0; i < 20; i++) mtx[i] = me == 1 % np ? i : -1;
    MPI_Bcast(&mtx[4], 1, col, 1 % np, MPI_COMM_WORLD);
    CHECK(mtx[19] == 19 && (me == 1 % np || mtx[18] == -1), "bcast of a column");

    /* Struct. */
    struct rec recs[2], rr[2];
    int bl[3] = {1, 1, 3};
    MPI_Aint disp[3] = {offsetof(struct rec, id), offsetof(struct rec, w), offsetof(struct rec, tag)};
    MPI_Datatype tys[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR}, rect;
    MPI_Type_create_struct(3, bl, disp, tys, &rect);
    MPI_Type_commit(&rect);
    MPI_Type_size(rect, &sz);
    MPI_Type_get_extent(rect, &lb, &ext);
    if (me == 0) printf("rank 0: struct size %d extent %ld (sizeof %zu)\n", sz, (long)ext, sizeof(struct rec));
    for (int i = 0; i < 2; i++) {
        recs[i].id = me * 10 + i;
        recs[i].w = me + 0.5 * i;
        memcpy(recs[i].tag, i ? "xyz" : "abc", 3);
        memset(&rr[i], 0, sizeof rr[i]);
    }
    MPI_Request q[2];
    MPI_Irecv(rr, 2, rect, left, 6, MPI_COMM_WORLD, &q[0]);
    MPI_Isend(recs, 2, rect, right, 6, MPI_COMM_WORLD, &q[1]);
    MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
    CHECK(rr[1].id == left * 10 + 1 && rr[1].w == left + 0.5 && memcmp(rr[1].tag, "xyz", 3) == 0 && rr[0].tag[2] == 'c', "struct %d %g", rr[1].id, rr[1].w);
    struct rec g[64];
    MPI_Allgather(&recs[0], 1, rect, g, 1, rect, MPI_COMM_WORLD);
    ok = 1;
    for (int i = 0; i < np; i++) ok &= g[i].id == i * 10 && g[i].w == i;
    CHECK(ok, "allgather of structs");

    MPI_Type_free(&three);
    MPI_Type_free(&col);
    MPI_Type_free(&rect);
    CHECK(rect == MPI_DATATYPE_NULL, "type freed");
    DONE("datatypes");
    MPI_Finalize();
    return failures != 0;
}
