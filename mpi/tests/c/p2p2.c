/* Point-to-point, the rest of MPI 3.1 chapter 3: buffered, ready and synchronous
 * modes and their I forms, persistent requests, matched probes, Testsome,
 * Request_get_status, the status setters, cancel, and bad input. Run with 4 ranks.
 * With an argument (qcg only), one rank makes a fatal mistake (see the end). */
#include "check.h"
#include <unistd.h>

#define BIG 100000 /* ints: 400 kB, above the 64 KiB eager limit */

static const char *class_name(int err) {
    int c = -1;
    MPI_Error_class(err, &c);
    switch (c) {
    case MPI_SUCCESS: return "MPI_SUCCESS";
    case MPI_ERR_BUFFER: return "MPI_ERR_BUFFER";
    case MPI_ERR_REQUEST: return "MPI_ERR_REQUEST";
    case MPI_ERR_TRUNCATE: return "MPI_ERR_TRUNCATE";
    case MPI_ERR_ARG: return "MPI_ERR_ARG";
    case MPI_ERR_COUNT: return "MPI_ERR_COUNT";
    default: { static char b[32]; snprintf(b, sizeof b, "class %d", c); return b; }
    }
}

/* Every rank has called it before any returns. (Not MPI_Barrier: qcg's barrier,
 * whose schedule moves no bytes, lets a rank leave once its tree neighbours have
 * entered; an allreduce of one int waits for everyone.) */
static void sync_all(void) {
    int zero = 0, sum = -1;
    MPI_Allreduce(&zero, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
}

static int fill(int *v, int n, int seed) {
    for (int i = 0; i < n; i++) v[i] = seed * 7919 + i;
    return n;
}

static int same(const int *v, int n, int seed) {
    for (int i = 0; i < n; i++)
        if (v[i] != seed * 7919 + i) return 0;
    return 1;
}

/* Rank 0 receives 2 * PER messages from ranks 1 and 2 (sent at once, competing)
 * with matched probes from MPI_ANY_SOURCE; some are larger than the eager limit. */
#define PER 12
/* A generalized request's functions: the state counts frees and notes cancels. */
struct gstate { int freed; int cancelled_done; int cancels; };
static int gquery(void *extra, MPI_Status *st) {
    (void)extra;
    st->MPI_SOURCE = MPI_UNDEFINED;
    st->MPI_TAG = 42;
    MPI_Status_set_elements(st, MPI_BYTE, 7);
    MPI_Status_set_cancelled(st, 0);
    return MPI_SUCCESS;
}
static int gfree(void *extra) { ((struct gstate *)extra)->freed++; return MPI_SUCCESS; }
static int gcancel(void *extra, int complete) {
    struct gstate *g = extra;
    int r; /* a callback may call MPI (the library must not hold a lock around it) */
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    g->cancels++;
    g->cancelled_done = complete;
    return MPI_SUCCESS;
}

static int size_of(int i) { return i % 4 == 3 ? 20000 : 1 + i; }

static void contention(void) {
    if (me == 1 || me == 2) {
        int *buf = malloc(sizeof(int) * 20000);
        for (int i = 0; i < PER; i++) {
            int n = size_of(i);
            fill(buf, n, me * 100 + i);
            MPI_Send(buf, n, MPI_INT, 0, 400, MPI_COMM_WORLD);
        }
        free(buf);
    } else if (me == 0) {
        int next[3] = {0, 0, 0}, ok = 1, imp = 0;
        for (int k = 0; k < 2 * PER; k++) {
            MPI_Message m = MPI_MESSAGE_NULL;
            MPI_Status st;
            if (k % 3 == 0) {
                int flag = 0;
                while (!flag) MPI_Improbe(MPI_ANY_SOURCE, 400, MPI_COMM_WORLD, &flag, &m, &st);
                imp++;
            } else {
                MPI_Mprobe(MPI_ANY_SOURCE, 400, MPI_COMM_WORLD, &m, &st);
            }
            int n = -1, src = st.MPI_SOURCE;
            MPI_Get_count(&st, MPI_INT, &n);
            ok &= (src == 1 || src == 2) && n == size_of(next[src]);
            int *buf = malloc(sizeof(int) * (n > 0 ? n : 1));
            MPI_Status rs;
            if (k % 2 == 0) {
                MPI_Mrecv(buf, n, MPI_INT, &m, &rs);
            } else {
                MPI_Request r;
                MPI_Imrecv(buf, n, MPI_INT, &m, &r);
                MPI_Wait(&r, &rs);
            }
            ok &= m == MPI_MESSAGE_NULL && rs.MPI_SOURCE == src && rs.MPI_TAG == 400;
            ok &= same(buf, n, src * 100 + next[src]);
            next[src]++;
            free(buf);
        }
        CHECK(ok && next[1] == PER && next[2] == PER, "matched probes under contention: %d %d", next[1], next[2]);
        printf("rank 0: %d messages from ranks 1 and 2 by matched probe (%d by MPI_Improbe)\n", 2 * PER, imp);
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    int right = (me + 1) % np, left = (me + np - 1) % np;
    MPI_Status st;
    int n, flag, err;

    if (argc > 1) {
        /* Fatal mistakes under the default handler: the job must stop naming them. */
        if (me == 1 && strcmp(argv[1], "mrecvnull") == 0) {
            MPI_Message m = MPI_MESSAGE_NULL;
            int v;
            MPI_Mrecv(&v, 1, MPI_INT, &m, MPI_STATUS_IGNORE);
        }
        if (me == 3 && strcmp(argv[1], "bsendfit") == 0) {
            static char pool[1024];
            static int data[BIG];
            MPI_Buffer_attach(pool, sizeof pool);
            MPI_Bsend(data, BIG, MPI_INT, 0, 78, MPI_COMM_WORLD);
        }
        if (me == 2 && strcmp(argv[1], "startactive") == 0) {
            MPI_Request r;
            int v;
            MPI_Recv_init(&v, 1, MPI_INT, left, 77, MPI_COMM_WORLD, &r);
            MPI_Start(&r);
            MPI_Start(&r);
        }
        sync_all();
        MPI_Finalize();
        return 0;
    }

    /* ---- Buffered mode: a ring of large Bsends, then small ones and Ibsend. */
    int *out = malloc(sizeof(int) * BIG), *in = malloc(sizeof(int) * BIG);
    int bsize = 4 * (BIG * (int)sizeof(int) + MPI_BSEND_OVERHEAD) + 4096;
    char *pool = malloc(bsize);
    MPI_Buffer_attach(pool, bsize);
    int ring_ok = 1;
    for (int round = 0; round < 3; round++) {
        fill(out, BIG, me * 10 + round);
        MPI_Bsend(out, BIG, MPI_INT, right, 100 + round, MPI_COMM_WORLD);
        /* The copy is the library's: the program may reuse its buffer at once. */
        memset(out, 0, sizeof(int) * BIG);
        MPI_Recv(in, BIG, MPI_INT, left, 100 + round, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_INT, &n);
        ring_ok &= n == BIG && same(in, BIG, left * 10 + round);
    }
    CHECK(ring_ok, "ring of buffered sends of %d ints", BIG);
    int small = 5000 + me, got = -1;
    MPI_Request req, reqs[8];
    MPI_Ibsend(&small, 1, MPI_INT, right, 110, MPI_COMM_WORLD, &req);
    small = -1; /* buffered: changing it now changes nothing */
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    CHECK(req == MPI_REQUEST_NULL, "ibsend request freed");
    MPI_Recv(&got, 1, MPI_INT, left, 110, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(got == 5000 + left, "ibsend %d", got);
    /* Detach waits for the buffered sends to leave and gives the buffer back. */
    fill(out, BIG, me + 50);
    MPI_Bsend(out, BIG, MPI_INT, right, 111, MPI_COMM_WORLD);
    void *back = NULL;
    int bsz = -1;
    if (me % 2 == 0) {
        MPI_Buffer_detach(&back, &bsz);
        MPI_Recv(in, BIG, MPI_INT, left, 111, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(in, BIG, MPI_INT, left, 111, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Buffer_detach(&back, &bsz);
    }
    CHECK(back == pool && bsz == bsize, "detach gave back the buffer and its size");
    CHECK(same(in, BIG, left + 50), "bsend before detach");
    printf("rank %d: buffered ring of %d ints, ibsend and detach done\n", me, BIG);

    /* Errors come back from here on. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    /* ---- Ready mode: the receive is posted before the barrier, the send after. */
    MPI_Irecv(&got, 1, MPI_INT, left, 120, MPI_COMM_WORLD, &reqs[0]);
    sync_all();
    small = 6000 + me;
    MPI_Rsend(&small, 1, MPI_INT, right, 120, MPI_COMM_WORLD);
    MPI_Wait(&reqs[0], MPI_STATUS_IGNORE);
    CHECK(got == 6000 + left, "rsend %d", got);
    MPI_Irecv(in, BIG, MPI_INT, left, 121, MPI_COMM_WORLD, &reqs[0]);
    sync_all();
    fill(out, BIG, me + 60);
    MPI_Irsend(out, BIG, MPI_INT, right, 121, MPI_COMM_WORLD, &reqs[1]);
    MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
    CHECK(same(in, BIG, left + 60), "irsend of %d ints", BIG);

    /* ---- Synchronous mode: Issend completes only once its receive matched. */
    if (me == 0) {
        small = 7000;
        MPI_Issend(&small, 1, MPI_INT, 1, 130, MPI_COMM_WORLD, &req);
        int early = 0;
        for (int i = 0; i < 50 && !early; i++) {
            MPI_Test(&req, &early, MPI_STATUS_IGNORE);
            usleep(2000);
        }
        CHECK(!early, "MPI_Issend completed before its receive was posted");
        printf("rank 0: issend complete before the receive: %d\n", early);
        sync_all();
        if (!early) MPI_Wait(&req, MPI_STATUS_IGNORE);
    } else {
        sync_all();
        if (me == 1) {
            MPI_Recv(&got, 1, MPI_INT, 0, 130, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            CHECK(got == 7000, "issend data %d", got);
        }
    }
    fill(out, BIG, me + 70);
    MPI_Issend(out, BIG, MPI_INT, right, 131, MPI_COMM_WORLD, &reqs[0]);
    MPI_Recv(in, BIG, MPI_INT, left, 131, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Wait(&reqs[0], MPI_STATUS_IGNORE);
    CHECK(same(in, BIG, left + 70), "issend of %d ints", BIG);

    /* ---- Persistent requests: a ring restarted 10 times. */
    int pout[4], pin[4];
    MPI_Request pr[2];
    MPI_Send_init(pout, 4, MPI_INT, right, 140, MPI_COMM_WORLD, &pr[0]);
    MPI_Recv_init(pin, 4, MPI_INT, left, 140, MPI_COMM_WORLD, &pr[1]);
    int pers_ok = 1;
    for (int it = 0; it < 10; it++) {
        fill(pout, 4, me * 1000 + it);
        MPI_Startall(2, pr);
        MPI_Waitall(2, pr, MPI_STATUSES_IGNORE);
        pers_ok &= same(pin, 4, left * 1000 + it);
        pers_ok &= pr[0] != MPI_REQUEST_NULL && pr[1] != MPI_REQUEST_NULL;
    }
    CHECK(pers_ok, "persistent send and receive restarted 10 times");
    /* Inactive: Wait and Test return at once with an empty status. */
    st.MPI_SOURCE = 99;
    MPI_Wait(&pr[1], &st);
    CHECK(pr[1] != MPI_REQUEST_NULL && st.MPI_SOURCE == MPI_ANY_SOURCE && st.MPI_TAG == MPI_ANY_TAG,
          "wait on an inactive request %d %d", st.MPI_SOURCE, st.MPI_TAG);
    flag = 0;
    MPI_Test(&pr[1], &flag, MPI_STATUS_IGNORE);
    CHECK(flag == 1 && pr[1] != MPI_REQUEST_NULL, "test on an inactive request");
    /* Large messages, one request at a time, with MPI_Start, Test and Wait. */
    MPI_Request big[2];
    MPI_Send_init(out, BIG, MPI_INT, right, 141, MPI_COMM_WORLD, &big[0]);
    MPI_Recv_init(in, BIG, MPI_INT, left, 141, MPI_COMM_WORLD, &big[1]);
    int big_ok = 1;
    for (int it = 0; it < 10; it++) {
        fill(out, BIG, me * 100 + it);
        MPI_Start(&big[1]);
        MPI_Start(&big[0]);
        flag = 0;
        while (!flag) MPI_Test(&big[1], &flag, &st);
        MPI_Get_count(&st, MPI_INT, &n);
        big_ok &= n == BIG && st.MPI_SOURCE == left && same(in, BIG, left * 100 + it);
        MPI_Wait(&big[0], MPI_STATUS_IGNORE);
    }
    CHECK(big_ok, "persistent requests of %d ints restarted 10 times", BIG);
    MPI_Request_free(&big[0]);
    MPI_Request_free(&big[1]);
    CHECK(big[0] == MPI_REQUEST_NULL && big[1] == MPI_REQUEST_NULL, "freed persistent requests");
    /* Synchronous, ready and buffered persistent sends. */
    MPI_Request ms[4];
    int vals[3], recvd[3];
    MPI_Buffer_attach(pool, bsize);
    MPI_Ssend_init(&vals[0], 1, MPI_INT, right, 150, MPI_COMM_WORLD, &ms[0]);
    MPI_Rsend_init(&vals[1], 1, MPI_INT, right, 151, MPI_COMM_WORLD, &ms[1]);
    MPI_Bsend_init(&vals[2], 1, MPI_INT, right, 152, MPI_COMM_WORLD, &ms[2]);
    int modes_ok = 1;
    for (int it = 0; it < 3; it++) {
        MPI_Request rr[3];
        for (int k = 0; k < 3; k++) {
            vals[k] = me * 10 + k + 100 * it;
            MPI_Irecv(&recvd[k], 1, MPI_INT, left, 150 + k, MPI_COMM_WORLD, &rr[k]);
        }
        sync_all(); /* every receive is posted: Rsend may go */
        MPI_Startall(3, ms);
        MPI_Waitall(3, ms, MPI_STATUSES_IGNORE);
        MPI_Waitall(3, rr, MPI_STATUSES_IGNORE);
        for (int k = 0; k < 3; k++) modes_ok &= recvd[k] == left * 10 + k + 100 * it;
    }
    CHECK(modes_ok, "persistent ssend, rsend and bsend");
    for (int k = 0; k < 3; k++) MPI_Request_free(&ms[k]);
    MPI_Buffer_detach(&back, &bsz);
    /* Cancelling a persistent receive leaves it inactive. */
    MPI_Request pa;
    int pv = -1;
    MPI_Recv_init(&pv, 1, MPI_INT, left, 160, MPI_COMM_WORLD, &pa);
    MPI_Start(&pa);
    MPI_Cancel(&pa);
    MPI_Wait(&pa, &st);
    MPI_Test_cancelled(&st, &flag);
    CHECK(flag == 1 && pa != MPI_REQUEST_NULL, "cancelled persistent receive %d", flag);
    sync_all(); /* every rank cancelled before any sends tag 160 */
    MPI_Start(&pa); /* inactive again: it may start */
    small = 8000 + me;
    MPI_Send(&small, 1, MPI_INT, right, 160, MPI_COMM_WORLD);
    MPI_Wait(&pa, MPI_STATUS_IGNORE);
    CHECK(pv == 8000 + left, "restarted after cancel %d", pv);
    MPI_Request_free(&pa);
    MPI_Request_free(&pr[0]);
    MPI_Request_free(&pr[1]);

    /* ---- Matched probes. */
    MPI_Message m;
    int two[2] = {me, me + 1}, first = -1, second = -1;
    MPI_Send(&two[0], 1, MPI_INT, right, 170, MPI_COMM_WORLD);
    MPI_Send(&two[1], 1, MPI_INT, right, 170, MPI_COMM_WORLD);
    MPI_Mprobe(MPI_ANY_SOURCE, 170, MPI_COMM_WORLD, &m, &st);
    CHECK(st.MPI_SOURCE == left && m != MPI_MESSAGE_NULL, "mprobe source %d", st.MPI_SOURCE);
    /* The probed message is out of matching: this receive gets the second one. */
    MPI_Recv(&second, 1, MPI_INT, MPI_ANY_SOURCE, 170, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Mrecv(&first, 1, MPI_INT, &m, &st);
    CHECK(first == left && second == left + 1 && m == MPI_MESSAGE_NULL, "mrecv %d then recv %d", first, second);
    /* A large one, probed with Improbe and received with Imrecv. */
    fill(out, BIG, me + 80);
    MPI_Isend(out, BIG, MPI_INT, right, 171, MPI_COMM_WORLD, &reqs[0]);
    flag = 0;
    while (!flag) MPI_Improbe(left, 171, MPI_COMM_WORLD, &flag, &m, &st);
    MPI_Get_count(&st, MPI_INT, &n);
    CHECK(n == BIG, "improbe count %d", n);
    MPI_Imrecv(in, n, MPI_INT, &m, &reqs[1]);
    MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
    CHECK(same(in, BIG, left + 80) && m == MPI_MESSAGE_NULL, "imrecv of %d ints", BIG);
    /* A message too long for the buffer: MPI_ERR_TRUNCATE, what fits is there. */
    MPI_Send(two, 2, MPI_INT, right, 172, MPI_COMM_WORLD);
    MPI_Mprobe(left, 172, MPI_COMM_WORLD, &m, &st);
    got = -1;
    err = MPI_Mrecv(&got, 1, MPI_INT, &m, MPI_STATUS_IGNORE);
    printf("rank %d: MPI_Mrecv of 2 ints into 1: %s\n", me, class_name(err));
    CHECK(got == left, "truncated mrecv kept the first int %d", got);
    /* The same through MPI_Recv, whose usual path skips the lookups (the pair of
       communicator and datatype is the last one used): the class, what fits, and
       the message consumed, so the next one is what comes next. */
    MPI_Send(two, 2, MPI_INT, right, 173, MPI_COMM_WORLD);
    MPI_Send(&two[1], 1, MPI_INT, right, 174, MPI_COMM_WORLD);
    got = -1;
    err = MPI_Recv(&got, 1, MPI_INT, left, 173, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(err != MPI_SUCCESS && !strcmp(class_name(err), "MPI_ERR_TRUNCATE") && got == left,
          "MPI_Recv of 2 ints into 1: %s, kept %d", class_name(err), got);
    err = MPI_Recv(&got, 1, MPI_INT, left, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
    CHECK(err == MPI_SUCCESS && st.MPI_TAG == 174 && got == left + 1,
          "after the truncated MPI_Recv: tag %d, %d", st.MPI_TAG, got);
    /* And into a strided datatype (every other int): the two that fit land in
       their places, the gap between them is left alone. */
    {
        int three[3] = {me, me + 1, me + 2}, into[3] = {-1, -1, -1};
        MPI_Datatype every_other;
        MPI_Type_vector(2, 1, 2, MPI_INT, &every_other);
        MPI_Type_commit(&every_other);
        MPI_Send(three, 3, MPI_INT, right, 175, MPI_COMM_WORLD);
        MPI_Send(&three[2], 1, MPI_INT, right, 176, MPI_COMM_WORLD);
        err = MPI_Recv(into, 1, every_other, left, 175, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(err != MPI_SUCCESS && !strcmp(class_name(err), "MPI_ERR_TRUNCATE") && into[0] == left &&
                  into[1] == -1 && into[2] == left + 1,
              "MPI_Recv of 3 ints into every other int of 3: %s, kept %d %d %d", class_name(err), into[0],
              into[1], into[2]);
        err = MPI_Recv(&got, 1, MPI_INT, left, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        CHECK(err == MPI_SUCCESS && st.MPI_TAG == 176 && got == left + 2,
              "after the truncated strided MPI_Recv: tag %d, %d", st.MPI_TAG, got);
        MPI_Type_free(&every_other);
    }
    /* MPI_PROC_NULL. */
    MPI_Mprobe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &m, &st);
    CHECK(m == MPI_MESSAGE_NO_PROC && st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG, "mprobe of proc null");
    MPI_Mrecv(&got, 1, MPI_INT, &m, &st);
    MPI_Get_count(&st, MPI_INT, &n);
    CHECK(m == MPI_MESSAGE_NULL && st.MPI_SOURCE == MPI_PROC_NULL && n == 0, "mrecv of no proc");
    flag = 0;
    MPI_Improbe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &flag, &m, &st);
    CHECK(flag == 1 && m == MPI_MESSAGE_NO_PROC, "improbe of proc null");
    MPI_Imrecv(&got, 1, MPI_INT, &m, &req);
    MPI_Wait(&req, &st);
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL, "imrecv of no proc");
    sync_all();
    contention();
    sync_all();

    /* ---- Testsome over mixed requests. */
    int a = -1, b = -1, c = -1, x = 9000 + me;
    MPI_Request inactive;
    MPI_Recv_init(&c, 1, MPI_INT, left, 999, MPI_COMM_WORLD, &inactive);
    MPI_Irecv(&a, 1, MPI_INT, left, 180, MPI_COMM_WORLD, &reqs[0]);
    MPI_Isend(&x, 1, MPI_INT, right, 180, MPI_COMM_WORLD, &reqs[1]);
    MPI_Irecv(&b, 1, MPI_INT, MPI_PROC_NULL, 180, MPI_COMM_WORLD, &reqs[2]);
    reqs[3] = MPI_REQUEST_NULL;
    MPI_Irecv(&c, 1, MPI_INT, left, 181, MPI_COMM_WORLD, &reqs[4]);
    reqs[5] = inactive;
    int seen[6] = {0, 0, 0, 0, 0, 0}, bad = 0, calls = 0;
    while (!(seen[0] && seen[1] && seen[2])) {
        int outc = -1, idx[6];
        MPI_Status sts[6];
        MPI_Testsome(6, reqs, &outc, idx, sts);
        calls++;
        bad |= outc < 0 || outc > 3;
        for (int k = 0; k < outc; k++) {
            bad |= idx[k] > 2 || seen[idx[k]];
            seen[idx[k]] = 1;
            if (idx[k] == 0) bad |= sts[k].MPI_SOURCE != left || sts[k].MPI_TAG != 180;
            if (idx[k] == 2) bad |= sts[k].MPI_SOURCE != MPI_PROC_NULL;
        }
    }
    CHECK(!bad && a == 9000 + left, "testsome of mixed requests: a %d", a);
    CHECK(reqs[4] != MPI_REQUEST_NULL && reqs[5] == inactive, "testsome left the others");
    sync_all(); /* nobody sends tag 181 before all are here */
    MPI_Send(&x, 1, MPI_INT, right, 181, MPI_COMM_WORLD);
    int outc = 0, idx[6];
    while (outc == 0) MPI_Testsome(6, reqs, &outc, idx, MPI_STATUSES_IGNORE);
    CHECK(outc == 1 && idx[0] == 4 && c == 9000 + left, "testsome of the last %d %d", outc, idx[0]);
    MPI_Testsome(6, reqs, &outc, idx, MPI_STATUSES_IGNORE);
    CHECK(outc == MPI_UNDEFINED, "testsome of no active request %d", outc);
    MPI_Request_free(&inactive);

    /* ---- Request_get_status leaves the request to Wait. */
    double dv[6], ds[6] = {1, 2, 3, 4, 5, (double)me};
    MPI_Irecv(dv, 6, MPI_DOUBLE, left, 190, MPI_COMM_WORLD, &req);
    flag = -1;
    err = MPI_Request_get_status(req, &flag, &st);
    CHECK(flag == 0 && err == MPI_SUCCESS, "get_status before the message is there: flag %d, %s, source %d, tag %d",
          flag, class_name(err), st.MPI_SOURCE, st.MPI_TAG);
    sync_all();
    MPI_Send(ds, 6, MPI_DOUBLE, right, 190, MPI_COMM_WORLD);
    flag = 0;
    while (!flag) MPI_Request_get_status(req, &flag, &st);
    CHECK(req != MPI_REQUEST_NULL && st.MPI_SOURCE == left && st.MPI_TAG == 190 && dv[5] == left,
          "get_status %d %g", st.MPI_SOURCE, dv[5]);
    MPI_Request_get_status(req, &flag, &st);
    CHECK(flag == 1, "get_status again");
    MPI_Wait(&req, &st);
    CHECK(req == MPI_REQUEST_NULL && st.MPI_SOURCE == left, "wait after get_status");
    MPI_Status nst;
    MPI_Request_get_status(MPI_REQUEST_NULL, &flag, &nst);
    CHECK(flag == 1 && nst.MPI_SOURCE == MPI_ANY_SOURCE, "get_status of MPI_REQUEST_NULL");

    /* ---- Counts and the status setters. */
    int cd = -1, ci = -1, cc = -1, cdi = -1;
    MPI_Get_count(&st, MPI_DOUBLE, &cd);
    MPI_Get_count(&st, MPI_INT, &ci);
    MPI_Get_count(&st, MPI_CHAR, &cc);
    MPI_Get_count(&st, MPI_2INT, &cdi);
    printf("rank %d: 6 doubles count as %d doubles, %d ints, %d chars, %d 2ints\n", me, cd, ci, cc, cdi);
    MPI_Status_set_elements(&st, MPI_INT, 5);
    MPI_Get_count(&st, MPI_INT, &ci);
    MPI_Get_count(&st, MPI_SHORT, &cc);
    CHECK(ci == 5 && cc == 10, "set_elements %d %d", ci, cc);
    MPI_Status_set_elements_x(&st, MPI_DOUBLE, (MPI_Count)3);
    MPI_Get_count(&st, MPI_DOUBLE, &cd);
    CHECK(cd == 3, "set_elements_x %d", cd);
    MPI_Status_set_cancelled(&st, 1);
    MPI_Test_cancelled(&st, &flag);
    CHECK(flag == 1, "set_cancelled");
    MPI_Status_set_cancelled(&st, 0);
    MPI_Test_cancelled(&st, &flag);
    CHECK(flag == 0, "set_cancelled false");

    /* ---- Cancel of a send: the engine sends it anyway (allowed: cancelled false). */
    small = 9500 + me;
    MPI_Isend(&small, 1, MPI_INT, right, 200, MPI_COMM_WORLD, &req);
    MPI_Cancel(&req);
    MPI_Wait(&req, &st);
    MPI_Test_cancelled(&st, &flag);
    printf("rank %d: cancel of an eager send: cancelled %d\n", me, flag);
    if (!flag) {
        MPI_Recv(&got, 1, MPI_INT, left, 200, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(got == 9500 + left, "the send cancel left %d", got);
    }

#ifdef QCG_MPI_H
    /* Open MPI 4.1 differs here: a Bsend that fails leaves it hanging later, a
     * second attach returns an internal code, and starting an active request
     * succeeds. */
    err = MPI_Bsend(out, BIG, MPI_INT, right, 112, MPI_COMM_WORLD);
    printf("rank %d: qcg-only: MPI_Bsend with no buffer attached: %s\n", me, class_name(err));
    MPI_Request pa2;
    MPI_Recv_init(&pv, 1, MPI_INT, left, 161, MPI_COMM_WORLD, &pa2);
    MPI_Start(&pa2);
    err = MPI_Start(&pa2);
    printf("rank %d: qcg-only: MPI_Start of an active request: %s\n", me, class_name(err));
    MPI_Cancel(&pa2);
    MPI_Wait(&pa2, MPI_STATUS_IGNORE);
    MPI_Request_free(&pa2);
    char tiny[1024];
    MPI_Buffer_attach(tiny, sizeof tiny);
    err = MPI_Buffer_attach(pool, bsize);
    printf("rank %d: qcg-only: MPI_Buffer_attach of a second buffer: %s\n", me, class_name(err));
    err = MPI_Bsend(out, BIG, MPI_INT, right, 113, MPI_COMM_WORLD);
    printf("rank %d: qcg-only: MPI_Bsend of %d bytes into a buffer of %d: %s\n", me, BIG * 4, (int)sizeof tiny, class_name(err));
    MPI_Buffer_detach(&back, &bsz);
    printf("rank %d: qcg-only: detach gave back the small buffer: %d\n", me, back == tiny && bsz == (int)sizeof tiny);
    /* Handles are ints here: wrong ones are reported, not crashes. */
    MPI_Request wrong = 123456;
    err = MPI_Wait(&wrong, MPI_STATUS_IGNORE);
    printf("rank %d: qcg-only: MPI_Wait of request 123456: %s\n", me, class_name(err));
    err = MPI_Start(&wrong);
    printf("rank %d: qcg-only: MPI_Start of request 123456: %s\n", me, class_name(err));
    MPI_Isend(&small, 1, MPI_INT, me, 210, MPI_COMM_WORLD, &req);
    err = MPI_Start(&req);
    printf("rank %d: qcg-only: MPI_Start of a nonpersistent request: %s\n", me, class_name(err));
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_Recv(&got, 1, MPI_INT, me, 210, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    m = MPI_MESSAGE_NULL;
    err = MPI_Mrecv(&got, 1, MPI_INT, &m, MPI_STATUS_IGNORE);
    printf("rank %d: qcg-only: MPI_Mrecv of MPI_MESSAGE_NULL: %s\n", me, class_name(err));
    err = MPI_Request_get_status(wrong, &flag, MPI_STATUS_IGNORE);
    printf("rank %d: qcg-only: MPI_Request_get_status of request 123456: %s\n", me, class_name(err));
    int idx1[1], outc1;
    err = MPI_Testsome(1, &wrong, &outc1, idx1, MPI_STATUSES_IGNORE);
    printf("rank %d: qcg-only: MPI_Testsome of request 123456: %s\n", me, class_name(err));
#endif

    free(out);
    free(in);
    free(pool);
    /* ---- generalized requests (MPI 3.1 section 12.2) ---- */
    {
        struct gstate g = {0, -1, 0};
        MPI_Request gr;
        MPI_Status gst;
        int flag, n;
        MPI_Grequest_start(gquery, gfree, gcancel, &g, &gr);
        MPI_Test(&gr, &flag, &gst);
        int before = flag, freed_before = g.freed;
        MPI_Grequest_complete(gr);
        MPI_Wait(&gr, &gst);
        MPI_Get_count(&gst, MPI_BYTE, &n);
        CHECK(gr == MPI_REQUEST_NULL, "generalized request not freed by MPI_Wait");
        printf("rank %d: generalized request: complete before MPI_Grequest_complete %d, "
               "freed before %d; then tag %d, source undefined %d, %d bytes, freed %d\n",
               me, before, freed_before, gst.MPI_TAG, gst.MPI_SOURCE == MPI_UNDEFINED, n, g.freed);
        MPI_Request two[2];
        MPI_Grequest_start(gquery, gfree, gcancel, &g, &two[0]);
        MPI_Grequest_start(gquery, gfree, gcancel, &g, &two[1]);
        MPI_Cancel(&two[1]);
        MPI_Grequest_complete(two[1]);
        int idx;
        MPI_Waitany(2, two, &idx, MPI_STATUS_IGNORE);
        MPI_Grequest_complete(two[0]);
        MPI_Waitall(2, two, MPI_STATUSES_IGNORE);
        printf("rank %d: two generalized requests: waitany gave %d, cancels %d (done %d), freed %d\n",
               me, idx, g.cancels, g.cancelled_done, g.freed);
#ifndef OPEN_MPI
        /* Freed before it is complete: completing it afterwards is still allowed. */
        MPI_Request late, kept;
        MPI_Grequest_start(gquery, gfree, gcancel, &g, &late);
        kept = late;
        MPI_Request_free(&late);
        int lerr = MPI_Grequest_complete(kept);
        printf("rank %d: qcg-only: MPI_Grequest_complete after MPI_Request_free: %s\n", me, class_name(lerr));
#endif
    }

    DONE("p2p2");
    MPI_Finalize();
    return failures != 0;
}
