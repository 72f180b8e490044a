/* Groups (range incl/excl, set operations, translation, comparison), names,
 * attributes and keyvals with their callbacks (communicators, datatypes, MPI-1's
 * names, predefined attributes, MPI_COMM_SELF's at finalize), MPI_Info, user error
 * handlers, classes, codes and strings, Comm_idup/dup_with_info, the environment
 * (library version, Alloc_mem, Is_thread_main, Comm_get_parent, Pcontrol) and
 * MPI_THREAD_MULTIPLE with two threads per rank talking at once. QCG_CHECK checks
 * what libqcgmpi does where Open MPI differs (it counts, but passes, under Open MPI,
 * so that the tallies agree). */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include "check.h"
#include <pthread.h>

#ifdef QCG_LEVEL_SITE
#define QCG_CHECK(cond, ...) CHECK(cond, __VA_ARGS__)
#else
#define QCG_CHECK(cond, ...) CHECK(1, __VA_ARGS__)
#endif

/* ---- attribute callbacks: they count their calls and check their arguments */
static int copies = 0, deletes = 0, type_deletes = 0, extra_seen = 0;
static int extra_state = 77;

static int copy_plus_one(MPI_Comm old, int keyval, void *extra, void *in, void *out, int *flag) {
    (void)old;
    (void)keyval;
    copies++;
    if (extra == &extra_state) extra_seen++;
    *(void **)out = (void *)((char *)in + 1);
    *flag = 1;
    return MPI_SUCCESS;
}

static int count_delete(MPI_Comm comm, int keyval, void *value, void *extra) {
    (void)comm;
    (void)keyval;
    (void)value;
    (void)extra;
    deletes++;
    return MPI_SUCCESS;
}

static int count_type_delete(MPI_Datatype t, int keyval, void *value, void *extra) {
    (void)t;
    (void)keyval;
    (void)value;
    (void)extra;
    type_deletes++;
    return MPI_SUCCESS;
}

static int copy_fails(MPI_Comm old, int keyval, void *extra, void *in, void *out, int *flag) {
    (void)old;
    (void)keyval;
    (void)extra;
    (void)in;
    (void)out;
    *flag = 0;
    return MPI_ERR_OTHER;
}

/* Called at MPI_Finalize, when MPI_COMM_SELF is freed: MPI still works then. */
static int self_delete(MPI_Comm comm, int keyval, void *value, void *extra) {
    (void)keyval;
    (void)extra;
    int r = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    printf("rank %d: self attribute %ld deleted at finalize on MPI_COMM_SELF: %d\n", r,
           (long)value, comm == MPI_COMM_SELF);
    fflush(stdout);
    return MPI_SUCCESS;
}

/* ---- a user error handler: records what it was called with */
static int handled = 0, handled_code = 0;
static MPI_Comm handled_comm = MPI_COMM_NULL;

static void record_error(MPI_Comm *comm, int *code, ...) {
    handled++;
    handled_code = *code;
    handled_comm = *comm;
}

/* ---- threads: each sends to the right and receives from the left, its own tag */
struct ring {
    int tag, rounds, ok;
};

static void *ring_thread(void *arg) {
    struct ring *t = arg;
    int right = (me + 1) % np, left = (me + np - 1) % np;
    t->ok = 1;
    for (int i = 0; i < t->rounds; i++) {
        int out = me * 1000 + t->tag * 100 + i, in = -1;
        MPI_Sendrecv(&out, 1, MPI_INT, right, t->tag, &in, 1, MPI_INT, left, t->tag,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (in != left * 1000 + t->tag * 100 + i) t->ok = 0;
    }
    return NULL;
}

static void groups(void) {
    MPI_Group world, evens, odds, u, in, diff, g;
    int n, r, res;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int even_range[1][3] = {{0, np - 1, 2}};
    MPI_Group_range_incl(world, 1, even_range, &evens);
    MPI_Group_range_excl(world, 1, even_range, &odds);
    MPI_Group_size(evens, &n);
    CHECK(n == (np + 1) / 2, "evens %d", n);
    MPI_Group_rank(evens, &r);
    CHECK(r == (me % 2 == 0 ? me / 2 : MPI_UNDEFINED), "rank in evens %d", r);
    MPI_Group_size(odds, &n);
    CHECK(n == np / 2, "odds %d", n);

    /* Backwards with a stride, and two ranges. */
    int back[2][3] = {{np - 1, 0, -2}, {0, 0, 1}};
    MPI_Group_range_incl(world, np % 2 == 0 ? 2 : 1, back, &g);
    int size;
    MPI_Group_size(g, &size);
    int all[64], tr[64];
    for (int i = 0; i < size; i++) all[i] = i;
    MPI_Group_translate_ranks(g, size, all, world, tr);
    printf("rank %d: range_incl (%d, 0, -2)(0, 0, 1) gives", me, np - 1);
    for (int i = 0; i < size; i++) printf(" %d", tr[i]);
    printf("\n");

    MPI_Group_union(odds, evens, &u);
    MPI_Group_size(u, &n);
    CHECK(n == np, "union %d", n);
    MPI_Group_compare(u, world, &res);
    CHECK(res == (np > 1 ? MPI_SIMILAR : MPI_IDENT), "union vs world %d", res);
    MPI_Group_compare(world, world, &res);
    CHECK(res == MPI_IDENT, "world vs world %d", res);
    MPI_Group_compare(evens, world, &res);
    CHECK(res == MPI_UNEQUAL, "evens vs world %d", res);
    MPI_Group_intersection(world, evens, &in);
    MPI_Group_compare(in, evens, &res);
    CHECK(res == MPI_IDENT, "intersection %d", res);
    MPI_Group_difference(world, odds, &diff);
    MPI_Group_compare(diff, evens, &res);
    CHECK(res == MPI_IDENT, "difference %d", res);
    MPI_Group empty;
    MPI_Group_intersection(evens, odds, &empty);
    MPI_Group_size(empty, &n);
    CHECK(n == 0, "empty intersection %d", n);
    MPI_Group_compare(empty, MPI_GROUP_EMPTY, &res);
    CHECK(res == MPI_IDENT, "empty is MPI_GROUP_EMPTY-like %d", res);

    /* Translate: world ranks into the odd group; MPI_PROC_NULL stays. */
    int from[5] = {0, 1, 2, 3, MPI_PROC_NULL}, to[5];
    int k = np < 4 ? np : 4;
    from[k] = MPI_PROC_NULL;
    MPI_Group_translate_ranks(world, k + 1, from, odds, to);
    printf("rank %d: world ranks in the odd group:", me);
    for (int i = 0; i <= k; i++) {
        if (to[i] == MPI_UNDEFINED)
            printf(" undefined");
        else if (to[i] == MPI_PROC_NULL)
            printf(" proc_null");
        else
            printf(" %d", to[i]);
    }
    printf("\n");

    /* Bad ranges give MPI_ERR_RANK / MPI_ERR_ARG under MPI_ERRORS_RETURN. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int bad[1][3] = {{0, np, 1}};
    int rc = MPI_Group_range_incl(world, 1, bad, &g);
    int cls = -1;
    MPI_Error_class(rc, &cls);
    CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_RANK, "range past the end: %d", cls);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);

    MPI_Group_free(&evens);
    MPI_Group_free(&odds);
    MPI_Group_free(&u);
    MPI_Group_free(&in);
    MPI_Group_free(&diff);
    MPI_Group_free(&world);
    CHECK(world == MPI_GROUP_NULL, "group freed");
}

static void names(void) {
    char name[MPI_MAX_OBJECT_NAME];
    int len;
    MPI_Comm_get_name(MPI_COMM_WORLD, name, &len);
    printf("rank %d: world is named %s (%d)\n", me, name, len);
    MPI_Comm_get_name(MPI_COMM_SELF, name, &len);
    printf("rank %d: self is named %s (%d)\n", me, name, len);
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_set_name(dup, "my duplicate");
    MPI_Comm_get_name(dup, name, &len);
    CHECK(strcmp(name, "my duplicate") == 0 && len == 12, "dup name %s %d", name, len);
    MPI_Comm_free(&dup);
    MPI_Type_get_name(MPI_INT, name, &len);
    printf("rank %d: MPI_INT is named %s\n", me, name);
    MPI_Type_get_name(MPI_DOUBLE, name, &len);
    printf("rank %d: MPI_DOUBLE is named %s\n", me, name);
    MPI_Datatype pair;
    MPI_Type_contiguous(2, MPI_INT, &pair);
    MPI_Type_set_name(pair, "pair of ints");
    MPI_Type_get_name(pair, name, &len);
    CHECK(strcmp(name, "pair of ints") == 0 && len == 12, "type name %s", name);
    MPI_Type_free(&pair);
}

static void attributes(void) {
    int kv, kv_null, kv_dup, flag;
    void *v;
    MPI_Comm_create_keyval(copy_plus_one, count_delete, &kv, &extra_state);
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &kv_null, NULL);
    MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &kv_dup, NULL);
    CHECK(kv != MPI_KEYVAL_INVALID, "keyval");

    MPI_Comm a, b;
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    MPI_Comm_get_attr(a, kv, &v, &flag);
    CHECK(flag == 0, "unset attribute found");
    MPI_Comm_set_attr(a, kv, (void *)100);
    MPI_Comm_set_attr(a, kv_null, (void *)200);
    MPI_Comm_set_attr(a, kv_dup, (void *)300);
    MPI_Comm_get_attr(a, kv, &v, &flag);
    CHECK(flag == 1 && v == (void *)100, "get %d %p", flag, v);

    /* Dup: copied through the callbacks (the NULL copy drops it). */
    MPI_Comm_dup(a, &b);
    CHECK(copies == 1 && extra_seen == 1, "copies %d extra %d", copies, extra_seen);
    MPI_Comm_get_attr(b, kv, &v, &flag);
    CHECK(flag == 1 && v == (void *)101, "copied %d %p", flag, v);
    MPI_Comm_get_attr(b, kv_null, &v, &flag);
    CHECK(flag == 0, "null copy copied");
    MPI_Comm_get_attr(b, kv_dup, &v, &flag);
    CHECK(flag == 1 && v == (void *)300, "dup fn %d %p", flag, v);

    /* Overwrite and delete call the delete callback; so does freeing. */
    MPI_Comm_set_attr(a, kv, (void *)110);
    CHECK(deletes == 1, "overwrite deletes %d", deletes);
    MPI_Comm_delete_attr(a, kv);
    CHECK(deletes == 2, "delete %d", deletes);
    MPI_Comm_get_attr(a, kv, &v, &flag);
    CHECK(flag == 0, "deleted attribute found");
    MPI_Comm_free(&b);
    CHECK(deletes == 3, "free deletes %d", deletes);
    MPI_Comm_free(&a);
    CHECK(deletes == 3, "nothing left to delete %d", deletes);

    /* A freed keyval is set to MPI_KEYVAL_INVALID; attributes set with it live on. */
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Comm_set_attr(c, kv, (void *)5);
    MPI_Comm_free_keyval(&kv);
    CHECK(kv == MPI_KEYVAL_INVALID, "freed keyval %d", kv);
    MPI_Comm_free(&c);
    CHECK(deletes == 4, "delete after keyval freed %d", deletes);
    MPI_Comm_free_keyval(&kv_null);
    MPI_Comm_free_keyval(&kv_dup);

    /* MPI-1's names. */
    int old;
    MPI_Keyval_create(MPI_NULL_COPY_FN, MPI_NULL_DELETE_FN, &old, NULL);
    MPI_Attr_put(MPI_COMM_WORLD, old, (void *)42);
    MPI_Attr_get(MPI_COMM_WORLD, old, &v, &flag);
    CHECK(flag == 1 && v == (void *)42, "Attr_get %d %p", flag, v);
    MPI_Attr_delete(MPI_COMM_WORLD, old);
    MPI_Attr_get(MPI_COMM_WORLD, old, &v, &flag);
    CHECK(flag == 0, "Attr_delete");
    MPI_Keyval_free(&old);
    int dupfn;
    MPI_Keyval_create(MPI_DUP_FN, MPI_NULL_DELETE_FN, &dupfn, NULL);
    MPI_Keyval_free(&dupfn);

    /* Errors: a wrong keyval is MPI_ERR_KEYVAL, a predefined one cannot be set. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int t;
    MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN, &t, NULL);
    int rc = MPI_Comm_set_attr(MPI_COMM_WORLD, t, (void *)1), cls = -1;
    MPI_Error_class(rc, &cls);
    /* MPI_ERR_KEYVAL here and in MPICH; Open MPI 4.1 says MPI_ERR_OTHER. */
    CHECK(rc != MPI_SUCCESS, "type keyval on a comm");
    QCG_CHECK(cls == MPI_ERR_KEYVAL, "a type keyval on a communicator: class %d", cls);
    rc = MPI_Comm_set_attr(MPI_COMM_WORLD, MPI_TAG_UB, (void *)1);
    CHECK(rc != MPI_SUCCESS, "set MPI_TAG_UB");
    /* A copy callback that fails makes MPI_Comm_dup fail. */
    int kf;
    MPI_Comm_create_keyval(copy_fails, MPI_COMM_NULL_DELETE_FN, &kf, NULL);
    MPI_Comm_set_attr(MPI_COMM_WORLD, kf, (void *)1);
    MPI_Comm failed = MPI_COMM_NULL;
    rc = MPI_Comm_dup(MPI_COMM_WORLD, &failed);
    CHECK(rc != MPI_SUCCESS, "dup with a failing copy callback");
    MPI_Comm_delete_attr(MPI_COMM_WORLD, kf);
    MPI_Comm_free_keyval(&kf);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Type_free_keyval(&t);

    /* Predefined attributes of MPI_COMM_WORLD. */
    int *p;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &p, &flag);
    CHECK(flag && *p >= 32767, "MPI_TAG_UB");
    QCG_CHECK(*p == (1 << 30) - 1, "MPI_TAG_UB = %d", *p);
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_HOST, &p, &flag);
    printf("rank %d: MPI_HOST: flag %d, proc_null %d\n", me, flag, flag && *p == MPI_PROC_NULL);
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_IO, &p, &flag);
    printf("rank %d: MPI_IO: flag %d\n", me, flag);
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_WTIME_IS_GLOBAL, &p, &flag);
    printf("rank %d: MPI_WTIME_IS_GLOBAL: flag %d, value %d\n", me, flag, flag ? *p : -1);
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_UNIVERSE_SIZE, &p, &flag);
    /* Open MPI 4.1 under --oversubscribe gives none. */
    QCG_CHECK(flag && *p == np, "MPI_UNIVERSE_SIZE: flag %d", flag);
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &p, &flag);
    printf("rank %d: MPI_APPNUM: flag %d, value %d\n", me, flag, flag ? *p : -1);
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &p, &flag);
    CHECK(flag, "MPI_LASTUSEDCODE");

    /* Datatypes' attributes. */
    int tk;
    MPI_Datatype pair;
    MPI_Type_create_keyval(MPI_TYPE_DUP_FN, count_type_delete, &tk, NULL);
    MPI_Type_contiguous(2, MPI_INT, &pair);
    MPI_Type_set_attr(pair, tk, (void *)9);
    MPI_Type_get_attr(pair, tk, &v, &flag);
    CHECK(flag == 1 && v == (void *)9, "type attr %d %p", flag, v);
    MPI_Type_set_attr(pair, tk, (void *)10);
    CHECK(type_deletes == 1, "type overwrite %d", type_deletes);
    MPI_Type_delete_attr(pair, tk);
    CHECK(type_deletes == 2, "type delete %d", type_deletes);
    MPI_Type_free(&pair);
    MPI_Type_set_attr(MPI_INT, tk, (void *)11);
    MPI_Type_get_attr(MPI_INT, tk, &v, &flag);
    CHECK(flag == 1 && v == (void *)11, "attr on MPI_INT %d %p", flag, v);
    MPI_Type_delete_attr(MPI_INT, tk);
    MPI_Type_free_keyval(&tk);

    /* MPI_COMM_SELF's attributes are deleted first thing in MPI_Finalize. */
    int sk;
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_delete, &sk, NULL);
    MPI_Comm_set_attr(MPI_COMM_SELF, sk, (void *)(long)(me + 1));
}

static void info(void) {
    MPI_Info i, d;
    char val[MPI_MAX_INFO_VAL + 1], key[MPI_MAX_INFO_KEY + 1];
    int flag, n, len;
    MPI_Info_create(&i);
    MPI_Info_set(i, "file", "data.txt");
    MPI_Info_set(i, "access_style", "read_once");
    MPI_Info_set(i, "file", "other.txt");
    MPI_Info_get_nkeys(i, &n);
    CHECK(n == 2, "nkeys %d", n);
    MPI_Info_get(i, "file", MPI_MAX_INFO_VAL, val, &flag);
    CHECK(flag && strcmp(val, "other.txt") == 0, "get %d %s", flag, val);
    MPI_Info_get(i, "file", 5, val, &flag);
    CHECK(flag && strcmp(val, "other") == 0, "get cut to 5: %s", val);
    MPI_Info_get_valuelen(i, "access_style", &len, &flag);
    CHECK(flag && len == 9, "valuelen %d", len);
    MPI_Info_get(i, "nope", MPI_MAX_INFO_VAL, val, &flag);
    CHECK(!flag, "missing key found");
    MPI_Info_get_valuelen(i, "nope", &len, &flag);
    CHECK(!flag, "missing key has a length");
    for (int k = 0; k < n; k++) {
        MPI_Info_get_nthkey(i, k, key);
        printf("rank %d: info key %d is %s\n", me, k, key);
    }
    MPI_Info_dup(i, &d);
    MPI_Info_delete(i, "file");
    MPI_Info_get_nkeys(i, &n);
    CHECK(n == 1, "after delete %d", n);
    MPI_Info_get_nkeys(d, &n);
    CHECK(n == 2, "dup keeps %d", n);

    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rc = MPI_Info_delete(i, "file"), cls = -1;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_INFO_NOKEY, "delete missing: %d", cls);
    rc = MPI_Info_get_nthkey(i, 5, key);
    CHECK(rc != MPI_SUCCESS, "nthkey out of range");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);

    MPI_Info_free(&i);
    CHECK(i == MPI_INFO_NULL, "freed info");

    /* Hints on communicators. */
    MPI_Comm c, c2;
    MPI_Comm_dup_with_info(MPI_COMM_WORLD, d, &c);
    MPI_Comm_compare(MPI_COMM_WORLD, c, &n);
    CHECK(n == MPI_CONGRUENT, "dup_with_info %d", n);
    MPI_Comm_set_info(c, d);
    MPI_Info used;
    MPI_Comm_get_info(c, &used);
    CHECK(used != MPI_INFO_NULL, "get_info");
    MPI_Info_get_nkeys(used, &n);
    QCG_CHECK(n == 2, "communicator hints: %d", n);
    MPI_Info_free(&used);
    MPI_Request q;
    MPI_Comm_idup(c, &c2, &q);
    MPI_Wait(&q, MPI_STATUS_IGNORE);
    CHECK(q == MPI_REQUEST_NULL, "idup request done");
    MPI_Comm_compare(c, c2, &n);
    CHECK(n == MPI_CONGRUENT, "idup %d", n);
    int s = 0;
    MPI_Allreduce(&me, &s, 1, MPI_INT, MPI_SUM, c2);
    CHECK(s == np * (np - 1) / 2, "allreduce on idup %d", s);
    MPI_Comm_free(&c2);
    MPI_Comm_free(&c);
    MPI_Info_free(&d);

    MPI_Info_get_nkeys(MPI_INFO_ENV, &n);
    CHECK(n >= 0, "MPI_INFO_ENV");
}

static void errors(void) {
    MPI_Errhandler eh, got;
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Comm_create_errhandler(record_error, &eh);
    MPI_Comm_set_errhandler(c, eh);
    MPI_Comm_get_errhandler(c, &got);
    CHECK(got == eh, "get_errhandler");
    MPI_Errhandler_free(&got);

    /* An error on c goes to the handler with its class. */
    int x = 0;
    int rc = MPI_Send(&x, 1, MPI_INT, np + 5, 0, c), cls = -1;
    MPI_Error_class(rc, &cls);
    CHECK(handled == 1 && handled_comm == c, "handler called %d", handled);
    printf("rank %d: send to a bad rank: handler got class %s, call returned %s\n", me,
           handled_code == MPI_ERR_RANK ? "MPI_ERR_RANK" : "other",
           cls == MPI_ERR_RANK ? "MPI_ERR_RANK" : "other");

    /* The program's own classes, codes and strings. */
    int myclass, mycode, mycode2, r;
    MPI_Add_error_class(&myclass);
    MPI_Add_error_code(myclass, &mycode);
    MPI_Add_error_code(MPI_ERR_ARG, &mycode2);
    MPI_Add_error_string(mycode, "the flux capacitor is off");
    MPI_Error_class(mycode, &r);
    CHECK(r == myclass, "class of my code %d", r);
    MPI_Error_class(mycode2, &r);
    CHECK(r == MPI_ERR_ARG, "class of code 2 %d", r);
    /* A class is a code of itself (MPI 3.1 §8.5); Open MPI 4.1 says MPI_ERR_UNKNOWN. */
    MPI_Error_class(myclass, &r);
    QCG_CHECK(r == myclass, "class of my class %d", r);
    CHECK(myclass > MPI_ERR_LASTCODE && mycode != myclass && mycode2 != mycode, "numbers");
    char s[MPI_MAX_ERROR_STRING];
    int len;
    MPI_Error_string(mycode, s, &len);
    printf("rank %d: my code says: %s\n", me, s);
    int *last, flag;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &last, &flag);
    CHECK(flag && *last >= mycode2, "MPI_LASTUSEDCODE %d", flag ? *last : -1);

    MPI_Comm_call_errhandler(c, mycode);
    CHECK(handled == 2 && handled_code == mycode && handled_comm == c, "call_errhandler %d %d",
          handled, handled_code);
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    rc = MPI_Comm_call_errhandler(c, mycode);
    CHECK(handled == 2, "ERRORS_RETURN calls nothing");
    MPI_Errhandler_free(&eh);
    CHECK(eh == MPI_ERRHANDLER_NULL, "errhandler freed");
#ifdef QCG_LEVEL_SITE
    /* MPI-1's names (Open MPI 4.1 leaves them out). */
    MPI_Errhandler old, old_got;
    MPI_Errhandler_create(record_error, &old);
    MPI_Errhandler_set(c, old);
    MPI_Errhandler_get(c, &old_got);
    CHECK(old_got == old, "MPI-1 error handler names");
    MPI_Errhandler_free(&old);
#else
    CHECK(1, "MPI-1 error handler names");
#endif
    MPI_Comm_free(&c);
}

static void environment(void) {
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len, flag;
    MPI_Get_library_version(v, &len);
    CHECK(len > 0 && strlen(v) > 0, "library version");
    QCG_CHECK(strncmp(v, "qcg libqcgmpi", 13) == 0, "library %s", v);
    int *mem = NULL;
    MPI_Alloc_mem(100 * sizeof(int), MPI_INFO_NULL, &mem);
    for (int i = 0; i < 100; i++) mem[i] = i;
    CHECK(mem[99] == 99, "alloc_mem");
    MPI_Free_mem(mem);
    MPI_Is_thread_main(&flag);
    CHECK(flag, "main thread");
    MPI_Comm parent;
    MPI_Comm_get_parent(&parent);
    CHECK(parent == MPI_COMM_NULL, "no parent");
    CHECK(MPI_Pcontrol(1) == MPI_SUCCESS, "pcontrol");
}

int main(int argc, char **argv) {
    int provided = -1;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    printf("rank %d: asked MPI_THREAD_MULTIPLE, got %d\n", me, provided);

    groups();
    names();
    attributes();
    info();
    errors();
    environment();

    if (provided == MPI_THREAD_MULTIPLE) {
        pthread_t th[2];
        struct ring rs[2] = {{1, 50, 0}, {2, 50, 0}};
        for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, ring_thread, &rs[i]);
        int flag = 1;
        for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
        MPI_Is_thread_main(&flag);
        CHECK(rs[0].ok && rs[1].ok && flag, "two threads at once %d %d", rs[0].ok, rs[1].ok);
    }

    MPI_Barrier(MPI_COMM_WORLD);
    DONE("attrs");
    MPI_Finalize();
    return 0;
}
