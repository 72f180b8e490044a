/* Handle conversions (MPI_X_c2f / f2c, statuses) and MPI 1's names that MPI 3.0
 * removed but old codes still call: MPI_Address, MPI_Type_extent / lb / ub,
 * MPI_Type_struct (qcg only: Open MPI 4.1 as Debian builds it refuses them at
 * compile time). */
#include "check.h"

struct rec {
    int id;
    double value;
    char tag[3];
};

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    int rank = me, size = np;

    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Fint f = MPI_Comm_c2f(dup);
    CHECK(MPI_Comm_f2c(f) == dup, "MPI_Comm_f2c(f) == dup");
    CHECK(MPI_Type_f2c(MPI_Type_c2f(MPI_DOUBLE)) == MPI_DOUBLE, "MPI_Type_f2c(MPI_Type_c2f(MPI_DOUBLE)) == MPI_DOUBLE");
    CHECK(MPI_Op_f2c(MPI_Op_c2f(MPI_SUM)) == MPI_SUM, "MPI_Op_f2c(MPI_Op_c2f(MPI_SUM)) == MPI_SUM");
    MPI_Group g;
    MPI_Comm_group(dup, &g);
    CHECK(MPI_Group_f2c(MPI_Group_c2f(g)) == g, "MPI_Group_f2c(MPI_Group_c2f(g)) == g");
    CHECK(MPI_Request_f2c(MPI_Request_c2f(MPI_REQUEST_NULL)) == MPI_REQUEST_NULL, "MPI_Request_f2c(MPI_Request_c2f(MPI_REQUEST_NULL)) == MPI_RE");
    CHECK(MPI_Info_f2c(MPI_Info_c2f(MPI_INFO_NULL)) == MPI_INFO_NULL, "MPI_Info_f2c(MPI_Info_c2f(MPI_INFO_NULL)) == MPI_INFO_NULL");
    CHECK(MPI_Errhandler_f2c(MPI_Errhandler_c2f(MPI_ERRORS_RETURN)) == MPI_ERRORS_RETURN, "MPI_Errhandler_f2c(MPI_Errhandler_c2f(MPI_ERRORS_RETURN)) ==");
    MPI_Group_free(&g);

    /* A status through its Fortran form and back. */
    int next = (rank + 1) % size, prev = (rank + size - 1) % size, got = -1;
    MPI_Status st, back;
    MPI_Sendrecv(&rank, 1, MPI_INT, next, 11, &got, 1, MPI_INT, prev, 11, dup, &st);
    MPI_Fint fst[16];
    CHECK(MPI_Status_c2f(&st, fst) == MPI_SUCCESS, "MPI_Status_c2f(&st, fst) == MPI_SUCCESS");
    CHECK(MPI_Status_f2c(fst, &back) == MPI_SUCCESS, "MPI_Status_f2c(fst, &back) == MPI_SUCCESS");
    int n = -1;
    MPI_Get_count(&back, MPI_INT, &n);
    CHECK(back.MPI_SOURCE == prev && back.MPI_TAG == 11 && n == 1 && got == prev, "back.MPI_SOURCE == prev && back.MPI_TAG == 11 && n == 1 && g");

    /* MPI 1's struct type, built with MPI_Address. */
    struct rec r[2];
    MPI_Aint base, disp[3];
    MPI_Get_address(&r[0], &base);
    MPI_Get_address(&r[0].id, &disp[0]);
    MPI_Get_address(&r[0].value, &disp[1]);
    MPI_Get_address(&r[0].tag, &disp[2]);
    for (int i = 0; i < 3; i++)
        disp[i] -= base;
    int lens[3] = {1, 1, 3};
    MPI_Datatype types[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR}, t;
    MPI_Type_create_struct(3, lens, disp, types, &t);
    MPI_Type_commit(&t);
    MPI_Aint ext, lb;
    MPI_Type_get_extent(t, &lb, &ext);
    printf("rank %d: struct extent %ld lb %ld\n", rank, (long)ext, (long)lb);
    CHECK(ext == (MPI_Aint)sizeof(struct rec) && lb == 0, "extent");
#ifdef QCG_LEVEL_SITE
    {
        MPI_Aint a0, e1, l1, u1;
        MPI_Datatype t1;
        MPI_Address(&r[0], &a0);
        MPI_Type_struct(3, lens, disp, types, &t1);
        MPI_Type_extent(t1, &e1);
        MPI_Type_lb(t1, &l1);
        MPI_Type_ub(t1, &u1);
        int ok = a0 == base && e1 == ext && l1 == lb && u1 == lb + ext;
        printf("rank %d: qcg-only: MPI 1 names agree: %d\n", rank, ok);
        if (!ok)
            failures++;
        MPI_Type_free(&t1);
    }
#endif
    for (int i = 0; i < 2; i++) {
        r[i].id = rank * 10 + i;
        r[i].value = rank + 0.5 * i;
        r[i].tag[0] = 'a' + rank;
        r[i].tag[1] = 'b';
        r[i].tag[2] = 0;
    }
    struct rec in[2];
    MPI_Sendrecv(r, 2, t, next, 12, in, 2, t, prev, 12, dup, MPI_STATUS_IGNORE);
    CHECK(in[1].id == prev * 10 + 1 && in[1].value == prev + 0.5 && in[0].tag[0] == 'a' + prev, "in[1].id == prev * 10 + 1 && in[1].value == prev + 0.5 && in");
    printf("rank %d: got %d %.1f %s from %d\n", rank, in[1].id, in[1].value, in[0].tag, prev);
    MPI_Type_free(&t);
    MPI_Aint a = MPI_Aint_add(base, 16);
    CHECK(MPI_Aint_diff(a, base) == 16, "MPI_Aint_diff(a, base) == 16");
    MPI_Comm_free(&dup);
    DONE("compat");
    MPI_Finalize();
    return 0;
}
