/* Bad input under MPI_ERRORS_RETURN: each call returns the standard error class
 * and the job goes on. */
#include "check.h"

static const char *class_name(int code) {
    int c;
    MPI_Error_class(code, &c);
    switch (c) {
    case MPI_SUCCESS: return "MPI_SUCCESS";
    case MPI_ERR_BUFFER: return "MPI_ERR_BUFFER";
    case MPI_ERR_COUNT: return "MPI_ERR_COUNT";
    case MPI_ERR_TYPE: return "MPI_ERR_TYPE";
    case MPI_ERR_TAG: return "MPI_ERR_TAG";
    case MPI_ERR_COMM: return "MPI_ERR_COMM";
    case MPI_ERR_RANK: return "MPI_ERR_RANK";
    case MPI_ERR_REQUEST: return "MPI_ERR_REQUEST";
    case MPI_ERR_ROOT: return "MPI_ERR_ROOT";
    case MPI_ERR_GROUP: return "MPI_ERR_GROUP";
    case MPI_ERR_OP: return "MPI_ERR_OP";
    case MPI_ERR_ARG: return "MPI_ERR_ARG";
    case MPI_ERR_TRUNCATE: return "MPI_ERR_TRUNCATE";
    default: return "another class";
    }
}

#define EXPECT(call, cls)                                                        \
    do {                                                                         \
        int rc_ = (call);                                                        \
        CHECK(rc_ == (cls), "%s gave %s", #call, class_name(rc_));               \
        if (me == 0) printf("rank 0: %s -> %s\n", #call, class_name(rc_));      \
    } while (0)

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    MPI_Errhandler eh;
    MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh);
    CHECK(eh == MPI_ERRORS_ARE_FATAL, "the default handler is fatal");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int buf[4] = {0, 0, 0, 0};
    int right = (me + 1) % np, left = (me + np - 1) % np;

    EXPECT(MPI_Send(buf, 1, MPI_INT, np, 0, MPI_COMM_WORLD), MPI_ERR_RANK);
    EXPECT(MPI_Send(buf, 1, MPI_INT, -7, 0, MPI_COMM_WORLD), MPI_ERR_RANK);
    EXPECT(MPI_Send(buf, 1, MPI_INT, right, -5, MPI_COMM_WORLD), MPI_ERR_TAG);
    EXPECT(MPI_Send(buf, -1, MPI_INT, right, 0, MPI_COMM_WORLD), MPI_ERR_COUNT);
    EXPECT(MPI_Send(buf, 1, MPI_DATATYPE_NULL, right, 0, MPI_COMM_WORLD), MPI_ERR_TYPE);
    EXPECT(MPI_Send(NULL, 4, MPI_INT, right, 0, MPI_COMM_WORLD), MPI_ERR_BUFFER);
    EXPECT(MPI_Recv(buf, 1, MPI_INT, np + 3, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE), MPI_ERR_RANK);
    EXPECT(MPI_Bcast(buf, 1, MPI_INT, np, MPI_COMM_WORLD), MPI_ERR_ROOT);
    EXPECT(MPI_Allreduce(buf, buf + 1, 1, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD), MPI_ERR_OP);
    EXPECT(MPI_Allreduce(buf, buf + 1, 1, MPI_DOUBLE_INT, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_OP);
    MPI_Datatype v;
    MPI_Type_contiguous(2, MPI_INT, &v);
    EXPECT(MPI_Send(buf, 1, v, right, 0, MPI_COMM_WORLD), MPI_ERR_TYPE);
    MPI_Type_free(&v);
    MPI_Group g;
    MPI_Comm_group(MPI_COMM_WORLD, &g);
    int bad[1] = {np};
    MPI_Group ng;
    EXPECT(MPI_Group_incl(g, 1, bad, &ng), MPI_ERR_RANK);
    MPI_Group_free(&g);

    /* A message longer than the buffer: MPI_ERR_TRUNCATE, and the job goes on. */
    int three[3] = {1, 2, 3};
    MPI_Request r;
    MPI_Isend(three, 3, MPI_INT, right, 9, MPI_COMM_WORLD, &r);
    EXPECT(MPI_Recv(buf, 2, MPI_INT, left, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE), MPI_ERR_TRUNCATE);
    MPI_Wait(&r, MPI_STATUS_IGNORE);

    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(MPI_ERR_RANK, text, &len);
    CHECK(len > 0 && (int)strlen(text) == len, "error string");

    /* Still working: a correct exchange after all that. */
    int x = me, y = -1;
    EXPECT(MPI_Sendrecv(&x, 1, MPI_INT, right, 10, &y, 1, MPI_INT, left, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE), MPI_SUCCESS);
    CHECK(y == left, "exchange after errors");
    DONE("errors");
    MPI_Finalize();
    return failures != 0;
}
