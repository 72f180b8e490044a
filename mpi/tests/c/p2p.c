/* Point-to-point: blocking, nonblocking, probes, completion calls, PROC_NULL,
 * wildcards, cancel, large messages, synchronous sends. Run with 4 ranks. */
#include "check.h"
#include <unistd.h>

/* Rank 1's side of a synchronous send from rank 0 (tag `tag`), which rank 0
 * follows with a standard send of tag `tag + 1` once MPI_Ssend has returned.
 * Rank 1 waits a while before receiving, probing for that second message: it must
 * never be there before rank 1 has received the first (MPI_Ssend returns only once
 * its receive has matched). After a probe of the first: a probe is no match. */
static void late_receiver(int tag, int count, int probe_first) {
    int buf[4] = {0, 0, 0, 0}, after = 0, early = 0, flag = 0;
    if (probe_first) {
        MPI_Status ps;
        MPI_Probe(0, tag, MPI_COMM_WORLD, &ps);
    }
    for (int i = 0; i < 200 && !early; i++) {
        MPI_Iprobe(0, tag + 1, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        early = flag;
        if (!early) usleep(2000);
    }
    CHECK(!early, "MPI_Ssend (tag %d, %d ints) returned before its receive was posted", tag, count);
    MPI_Status st;
    int got = -1;
    MPI_Recv(buf, 4, MPI_INT, 0, tag, MPI_COMM_WORLD, &st);
    MPI_Get_count(&st, MPI_INT, &got);
    CHECK(got == count && (count == 0 || buf[count - 1] == 40 + count), "ssend data %d %d", got, buf[0]);
    MPI_Recv(&after, 1, MPI_INT, 0, tag + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(after == tag, "the message after the ssend %d", after);
    printf("rank 1: ssend of %d ints (probe first: %d) done before the receive: %d\n", count, probe_first, early);
}

int main(int argc, char **argv) {
    int provided = -1, flag = 0, v, sv;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    CHECK(provided == MPI_THREAD_FUNNELED, "provided %d", provided);
    MPI_Initialized(&flag);
    CHECK(flag == 1, "initialized %d", flag);
    MPI_Get_version(&v, &sv);
    CHECK(v == 3 && sv >= 1, "version %d.%d", v, sv);
    char name[MPI_MAX_PROCESSOR_NAME];
    int len = 0;
    MPI_Get_processor_name(name, &len);
    CHECK(len > 0 && (int)strlen(name) == len, "processor name length %d", len);
    double t0 = MPI_Wtime(), t1 = MPI_Wtime();
    CHECK(t1 >= t0 && MPI_Wtick() > 0.0, "wtime");

    int right = (me + 1) % np, left = (me + np - 1) % np;
    MPI_Status st;
    int cnt;

    /* Ring with blocking calls: even ranks send first. */
    int out[5], in[5];
    for (int i = 0; i < 5; i++) out[i] = me * 100 + i;
    if (me % 2 == 0) {
        MPI_Send(out, 5, MPI_INT, right, 7, MPI_COMM_WORLD);
        MPI_Recv(in, 5, MPI_INT, left, 7, MPI_COMM_WORLD, &st);
    } else {
        MPI_Recv(in, 5, MPI_INT, left, 7, MPI_COMM_WORLD, &st);
        MPI_Send(out, 5, MPI_INT, right, 7, MPI_COMM_WORLD);
    }
    MPI_Get_count(&st, MPI_INT, &cnt);
    CHECK(st.MPI_SOURCE == left && st.MPI_TAG == 7 && cnt == 5, "ring status %d %d %d", st.MPI_SOURCE, st.MPI_TAG, cnt);
    CHECK(in[0] == left * 100 && in[4] == left * 100 + 4, "ring data %d", in[0]);
    MPI_Get_count(&st, MPI_DOUBLE, &cnt);
    CHECK(cnt == MPI_UNDEFINED, "20 bytes are not whole doubles: %d", cnt);

    /* Everyone to everyone with Isend/Irecv from MPI_ANY_SOURCE, then Waitall. */
    int vals[64], srcs[64];
    MPI_Request reqs[128];
    int n = 0;
    for (int p = 0; p < np; p++) {
        if (p == me) continue;
        MPI_Irecv(&vals[n], 1, MPI_INT, MPI_ANY_SOURCE, 11, MPI_COMM_WORLD, &reqs[n]);
        n++;
    }
    int mine = 1000 + me;
    for (int p = 0, k = n; p < np; p++) {
        if (p == me) continue;
        MPI_Isend(&mine, 1, MPI_INT, p, 11, MPI_COMM_WORLD, &reqs[k++]);
    }
    MPI_Status sts[128];
    MPI_Waitall(2 * n, reqs, sts);
    int sum = 0, srcsum = 0;
    for (int i = 0; i < n; i++) {
        sum += vals[i];
        srcsum += sts[i].MPI_SOURCE;
        srcs[i] = sts[i].MPI_SOURCE;
        CHECK(vals[i] == 1000 + srcs[i], "value %d from %d", vals[i], srcs[i]);
    }
    CHECK(sum == 1000 * (np - 1) + np * (np - 1) / 2 - me, "any-source sum %d", sum);
    CHECK(srcsum == np * (np - 1) / 2 - me, "any-source sources %d", srcsum);
    CHECK(reqs[0] == MPI_REQUEST_NULL, "waited requests become MPI_REQUEST_NULL");

    /* Sendrecv and Sendrecv_replace around the ring. */
    double d = me + 0.5, e = -1;
    MPI_Sendrecv(&d, 1, MPI_DOUBLE, right, 3, &e, 1, MPI_DOUBLE, left, 3, MPI_COMM_WORLD, &st);
    CHECK(e == left + 0.5 && st.MPI_SOURCE == left, "sendrecv %g", e);
    long r[3] = {me, me * 2, me * 3};
    MPI_Sendrecv_replace(r, 3, MPI_LONG, right, 4, left, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(r[0] == left && r[2] == left * 3, "sendrecv_replace %ld", r[0]);

    /* MPI_PROC_NULL. */
    MPI_Send(out, 5, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD);
    MPI_Recv(in, 5, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &st);
    MPI_Get_count(&st, MPI_INT, &cnt);
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG && cnt == 0, "proc null status");

    /* Probe for a message whose size the receiver does not know. */
    int k = me + 1;
    double *big = malloc(sizeof(double) * 8);
    for (int i = 0; i < k; i++) big[i] = me * 10 + i;
    MPI_Request sr;
    MPI_Isend(big, k, MPI_DOUBLE, right, 21, MPI_COMM_WORLD, &sr);
    MPI_Probe(left, 21, MPI_COMM_WORLD, &st);
    MPI_Get_count(&st, MPI_DOUBLE, &cnt);
    CHECK(cnt == left + 1, "probe count %d", cnt);
    double *got = malloc(sizeof(double) * cnt);
    MPI_Recv(got, cnt, MPI_DOUBLE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(got[cnt - 1] == left * 10 + cnt - 1, "probed message %g", got[cnt - 1]);
    MPI_Wait(&sr, MPI_STATUS_IGNORE);
    free(got);

    /* Iprobe until the message is there; ANY_TAG. */
    MPI_Isend(&mine, 1, MPI_INT, right, 22 + me, MPI_COMM_WORLD, &sr);
    flag = 0;
    while (!flag) MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
    CHECK(st.MPI_SOURCE == left && st.MPI_TAG == 22 + left, "iprobe %d %d", st.MPI_SOURCE, st.MPI_TAG);
    MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
    CHECK(v == 1000 + left && st.MPI_TAG == 22 + left, "any tag %d", v);
    MPI_Wait(&sr, MPI_STATUS_IGNORE);

    /* Order: messages with one tag arrive in the order sent. */
    int seq[10];
    for (int i = 0; i < 10; i++) {
        seq[i] = i;
        MPI_Send(&seq[i], 1, MPI_INT, right, 30, MPI_COMM_WORLD);
    }
    int ordered = 1;
    for (int i = 0; i < 10; i++) {
        MPI_Recv(&v, 1, MPI_INT, left, 30, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        ordered &= v == i;
    }
    CHECK(ordered, "messages overtook each other");

    /* Waitany, Waitsome, Testany, Testall. */
    int a[3] = {-1, -1, -1};
    MPI_Request rr[3];
    for (int i = 0; i < 3; i++) MPI_Irecv(&a[i], 1, MPI_INT, left, 40 + i, MPI_COMM_WORLD, &rr[i]);
    for (int i = 2; i >= 0; i--) {
        int x = me * 3 + i;
        MPI_Send(&x, 1, MPI_INT, right, 40 + i, MPI_COMM_WORLD);
    }
    int idx = -1, seen = 0;
    MPI_Waitany(3, rr, &idx, &st);
    CHECK(idx >= 0 && idx < 3 && st.MPI_TAG == 40 + idx && a[idx] == left * 3 + idx, "waitany %d", idx);
    seen++;
    /* How many Waitsome calls it takes depends on timing: check once, after. */
    int some_ok = 1, outc = 0;
    while (seen < 3) {
        int ind[3];
        outc = 0;
        MPI_Waitsome(3, rr, &outc, ind, MPI_STATUSES_IGNORE);
        some_ok &= outc >= 1;
        seen += outc;
    }
    CHECK(some_ok && seen == 3, "waitsome %d", outc);
    MPI_Waitany(3, rr, &idx, MPI_STATUS_IGNORE);
    CHECK(idx == MPI_UNDEFINED, "waitany of null requests %d", idx);
    CHECK(a[0] + a[1] + a[2] == left * 9 + 3, "waitsome data");
    for (int i = 0; i < 3; i++) MPI_Irecv(&a[i], 1, MPI_INT, left, 50 + i, MPI_COMM_WORLD, &rr[i]);
    for (int i = 0; i < 3; i++) MPI_Send(&i, 1, MPI_INT, right, 50 + i, MPI_COMM_WORLD);
    flag = 0;
    while (!flag) MPI_Testall(3, rr, &flag, MPI_STATUSES_IGNORE);
    CHECK(a[0] == 0 && a[2] == 2, "testall");
    MPI_Irecv(&a[0], 1, MPI_INT, left, 60, MPI_COMM_WORLD, &rr[0]);
    rr[1] = rr[2] = MPI_REQUEST_NULL;
    MPI_Send(&mine, 1, MPI_INT, right, 60, MPI_COMM_WORLD);
    flag = 0;
    while (!flag) MPI_Testany(3, rr, &idx, &flag, &st);
    CHECK(idx == 0 && a[0] == 1000 + left, "testany %d", idx);
    flag = 0;
    MPI_Test(&rr[0], &flag, MPI_STATUS_IGNORE);
    CHECK(flag == 1, "test of a null request");

    /* Cancel a receive nobody matches. */
    MPI_Irecv(&v, 1, MPI_INT, left, 999, MPI_COMM_WORLD, &rr[0]);
    MPI_Cancel(&rr[0]);
    MPI_Wait(&rr[0], &st);
    MPI_Test_cancelled(&st, &flag);
    CHECK(flag == 1, "cancelled");

    /* Request_free on a send; Ssend; a large message. */
    MPI_Isend(&mine, 1, MPI_INT, right, 70, MPI_COMM_WORLD, &sr);
    MPI_Request_free(&sr);
    CHECK(sr == MPI_REQUEST_NULL, "freed");
    MPI_Recv(&v, 1, MPI_INT, left, 70, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(v == 1000 + left, "freed send arrived");
    if (me % 2 == 0) {
        MPI_Ssend(&mine, 1, MPI_INT, right, 71, MPI_COMM_WORLD);
        MPI_Recv(&v, 1, MPI_INT, left, 71, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(&v, 1, MPI_INT, left, 71, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Ssend(&mine, 1, MPI_INT, right, 71, MPI_COMM_WORLD);
    }
    CHECK(v == 1000 + left, "ssend");
    int nbig = 1 << 20;
    int *b1 = malloc(sizeof(int) * nbig), *b2 = malloc(sizeof(int) * nbig);
    for (int i = 0; i < nbig; i++) b1[i] = i ^ me;
    MPI_Request q[2];
    MPI_Irecv(b2, nbig, MPI_INT, left, 80, MPI_COMM_WORLD, &q[0]);
    MPI_Isend(b1, nbig, MPI_INT, right, 80, MPI_COMM_WORLD, &q[1]);
    MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
    int okbig = 1;
    for (int i = 0; i < nbig; i++) okbig &= b2[i] == (i ^ left);
    CHECK(okbig, "4 MiB message");
    free(b1);
    free(b2);

    /* To oneself. */
    MPI_Isend(&mine, 1, MPI_INT, me, 90, MPI_COMM_WORLD, &sr);
    MPI_Recv(&v, 1, MPI_INT, me, 90, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Wait(&sr, MPI_STATUS_IGNORE);
    CHECK(v == mine, "self message");

    /* Synchronous sends complete only once matched, whatever their size. */
    if (me == 0) {
        int data[4] = {41, 42, 43, 44};
        for (int k = 0; k < 3; k++) {
            int tag = 90 + 2 * k, count = k == 0 ? 1 : k == 1 ? 0 : 4;
            MPI_Ssend(data, count, MPI_INT, 1, tag, MPI_COMM_WORLD);
            MPI_Send(&tag, 1, MPI_INT, 1, tag + 1, MPI_COMM_WORLD);
        }
    } else if (me == 1) {
        late_receiver(90, 1, 0);
        late_receiver(92, 0, 0);
        late_receiver(94, 4, 1);
    }
    /* To oneself, with the receive posted first. */
    MPI_Request self;
    int sv2 = -1, mine2 = 500 + me;
    MPI_Irecv(&sv2, 1, MPI_INT, me, 97, MPI_COMM_WORLD, &self);
    MPI_Ssend(&mine2, 1, MPI_INT, me, 97, MPI_COMM_WORLD);
    MPI_Wait(&self, MPI_STATUS_IGNORE);
    CHECK(sv2 == 500 + me, "ssend to self %d", sv2);

    DONE("p2p");
    MPI_Finalize();
    MPI_Finalized(&flag);
    CHECK(flag == 1, "finalized");
    return failures != 0;
}
