/*
 * mpi.h: the subset of MPI 3.1 that libqcgmpi implements, over qcg's grid links.
 *
 * Build with `qcg-mpicc` (or `qcg-mpicxx`), run with `qcg run -n N -- ./a.out`.
 * A call outside this subset fails to build with an error naming the function and
 * saying qcg does not provide it (see mpi_functions.h), never at run time.
 * Every MPI_X also exists as PMPI_X, for profiling libraries (MPI 3.1 ch. 14).
 *
 * Handles (MPI_Comm, MPI_Datatype, MPI_Op, MPI_Group, MPI_Request, MPI_Errhandler,
 * MPI_Info) are C ints, as in MPICH: predefined handles are compile-time constants,
 * 0 is the null handle of each kind, and handles made by the program are positive
 * ints above the predefined ones.
 *
 * Threads: MPI_Init_thread grants the level asked, up to MPI_THREAD_MULTIPLE: any
 * thread may call MPI at any time. Why that holds: the library's handle tables sit
 * behind one lock that no call keeps while it waits (blocking receives, waits and
 * collectives wait outside it, and so do the program's callbacks: reductions,
 * attribute copy/delete functions, error handlers, which may call MPI), and
 * libqcg's engine lets several threads wait at once (they take turns driving its
 * one event loop, beside its own background thread). What MPI forbids still
 * applies: two threads must not run collectives on one communicator at the same
 * time, nor complete the same request. Correct, not yet fast: threads waiting at
 * once take turns in one event loop (4 threads per rank each doing 2,000 ring
 * exchanges took 20 s on 4 ranks over 2 cores, where one thread doing all 8,000
 * took 2 s). MPI_Comm_idup completes at once (it blocks
 * like MPI_Comm_dup until every rank has called it).
 *
 * Extension (QCG-OMPI's topology): QCG_Comm_split_level(comm, level, &newcomm) gives
 * the communicator of the ranks of `comm` that share this rank's site
 * (QCG_LEVEL_SITE = 0) or node (QCG_LEVEL_NODE = 1), ordered by their rank in
 * `comm`. Collective over `comm`.
 */
#ifndef QCG_MPI_H
#define QCG_MPI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MPI_VERSION 3
#define MPI_SUBVERSION 1

typedef int MPI_Comm;
typedef int MPI_Datatype;
typedef int MPI_Op;
typedef int MPI_Group;
typedef int MPI_Request;
typedef int MPI_Errhandler;
typedef int MPI_Info;
typedef ptrdiff_t MPI_Aint;
typedef long long MPI_Count;
typedef long long MPI_Offset;
typedef int MPI_Message;
/* A Fortran INTEGER (handles are the same ints in C and Fortran). */
typedef int MPI_Fint;

/* The first three fields are the standard's; the rest is the library's. Six ints,
 * so that Fortran's status(MPI_STATUS_SIZE) has the same layout. */
typedef struct MPI_Status {
    int MPI_SOURCE;
    int MPI_TAG;
    int MPI_ERROR;
    int qcg_cancelled;
    int qcg_bytes_lo;
    int qcg_bytes_hi;
} MPI_Status;

#define MPI_STATUS_IGNORE ((MPI_Status *)1)
#define MPI_STATUSES_IGNORE ((MPI_Status *)1)
#define MPI_IN_PLACE ((void *)-1)
#define MPI_BOTTOM ((void *)0)

#define MPI_ANY_SOURCE (-2)
#define MPI_PROC_NULL (-1)
#define MPI_ROOT (-3)
#define MPI_ANY_TAG (-1)
#define MPI_UNDEFINED (-32766)
#define MPI_MAX_PROCESSOR_NAME 256
#define MPI_MAX_ERROR_STRING 512

/* Thread levels */
#define MPI_THREAD_SINGLE 0
#define MPI_THREAD_FUNNELED 1
#define MPI_THREAD_SERIALIZED 2
#define MPI_THREAD_MULTIPLE 3

/* Null and predefined handles */
#define MPI_COMM_NULL ((MPI_Comm)0)
#define MPI_COMM_WORLD ((MPI_Comm)1)
#define MPI_COMM_SELF ((MPI_Comm)2)
#define MPI_GROUP_NULL ((MPI_Group)0)
#define MPI_GROUP_EMPTY ((MPI_Group)1)
#define MPI_REQUEST_NULL ((MPI_Request)0)
#define MPI_ERRHANDLER_NULL ((MPI_Errhandler)0)
#define MPI_ERRORS_ARE_FATAL ((MPI_Errhandler)1)
#define MPI_ERRORS_RETURN ((MPI_Errhandler)2)
#define MPI_INFO_NULL ((MPI_Info)0)
#define MPI_MESSAGE_NULL ((MPI_Message)0)
#define MPI_MESSAGE_NO_PROC ((MPI_Message)1)

/* What each buffered send costs in the attached buffer beyond its bytes. */
#define MPI_BSEND_OVERHEAD 64

/* MPI_Comm_compare results */
#define MPI_IDENT 0
#define MPI_CONGRUENT 1
#define MPI_SIMILAR 2
#define MPI_UNEQUAL 3

/* Process topologies: MPI_Topo_test results, weights of distributed graphs */
#define MPI_GRAPH 1
#define MPI_CART 2
#define MPI_DIST_GRAPH 3
/* Sentinels with addresses of their own (a constant pointer such as (int *)2
 * makes gcc's -Wstringop-overread reject every call that passes it). */
extern int qcg_mpi_unweighted[];
extern int qcg_mpi_weights_empty[];
#define MPI_UNWEIGHTED (qcg_mpi_unweighted)
#define MPI_WEIGHTS_EMPTY (qcg_mpi_weights_empty)

/* MPI_Comm_split_type */
#define MPI_COMM_TYPE_SHARED 1

/* qcg extension: levels of QCG_Comm_split_level */
#define QCG_LEVEL_SITE 0
#define QCG_LEVEL_NODE 1

/* Datatypes */
#define MPI_DATATYPE_NULL ((MPI_Datatype)0)
#define MPI_CHAR ((MPI_Datatype)1)
#define MPI_SIGNED_CHAR ((MPI_Datatype)2)
#define MPI_UNSIGNED_CHAR ((MPI_Datatype)3)
#define MPI_BYTE ((MPI_Datatype)4)
#define MPI_SHORT ((MPI_Datatype)5)
#define MPI_UNSIGNED_SHORT ((MPI_Datatype)6)
#define MPI_INT ((MPI_Datatype)7)
#define MPI_UNSIGNED ((MPI_Datatype)8)
#define MPI_LONG ((MPI_Datatype)9)
#define MPI_UNSIGNED_LONG ((MPI_Datatype)10)
#define MPI_LONG_LONG_INT ((MPI_Datatype)11)
#define MPI_LONG_LONG MPI_LONG_LONG_INT
#define MPI_UNSIGNED_LONG_LONG ((MPI_Datatype)12)
#define MPI_FLOAT ((MPI_Datatype)13)
#define MPI_DOUBLE ((MPI_Datatype)14)
#define MPI_LONG_DOUBLE ((MPI_Datatype)15)
#define MPI_INT8_T ((MPI_Datatype)16)
#define MPI_INT16_T ((MPI_Datatype)17)
#define MPI_INT32_T ((MPI_Datatype)18)
#define MPI_INT64_T ((MPI_Datatype)19)
#define MPI_UINT8_T ((MPI_Datatype)20)
#define MPI_UINT16_T ((MPI_Datatype)21)
#define MPI_UINT32_T ((MPI_Datatype)22)
#define MPI_UINT64_T ((MPI_Datatype)23)
#define MPI_C_BOOL ((MPI_Datatype)24)
#define MPI_WCHAR ((MPI_Datatype)25)
#define MPI_FLOAT_INT ((MPI_Datatype)26)
#define MPI_DOUBLE_INT ((MPI_Datatype)27)
#define MPI_LONG_INT ((MPI_Datatype)28)
#define MPI_2INT ((MPI_Datatype)29)
#define MPI_SHORT_INT ((MPI_Datatype)30)
#define MPI_LONG_DOUBLE_INT ((MPI_Datatype)31)
#define MPI_AINT ((MPI_Datatype)32)
#define MPI_COUNT ((MPI_Datatype)33)
#define MPI_OFFSET ((MPI_Datatype)34)
#define MPI_PACKED ((MPI_Datatype)35)
#define MPI_C_FLOAT_COMPLEX ((MPI_Datatype)36)
#define MPI_C_COMPLEX MPI_C_FLOAT_COMPLEX
#define MPI_C_DOUBLE_COMPLEX ((MPI_Datatype)37)
#define MPI_C_LONG_DOUBLE_COMPLEX ((MPI_Datatype)38)
#define MPI_CXX_BOOL ((MPI_Datatype)39)
#define MPI_CXX_FLOAT_COMPLEX ((MPI_Datatype)40)
#define MPI_CXX_DOUBLE_COMPLEX ((MPI_Datatype)41)
#define MPI_CXX_LONG_DOUBLE_COMPLEX ((MPI_Datatype)42)

/* Fortran's datatypes, also named in C (MPI 3.1 section 17.2.5). Not provided:
   MPI_2REAL and MPI_2DOUBLE_PRECISION (pairs of two reals), MPI_REAL16,
   MPI_COMPLEX32 and MPI_INTEGER16 (no such C types here). */
#define MPI_INTEGER ((MPI_Datatype)43)
#define MPI_REAL ((MPI_Datatype)44)
#define MPI_DOUBLE_PRECISION ((MPI_Datatype)45)
#define MPI_LOGICAL ((MPI_Datatype)46)
#define MPI_CHARACTER ((MPI_Datatype)47)
#define MPI_COMPLEX ((MPI_Datatype)48)
#define MPI_DOUBLE_COMPLEX ((MPI_Datatype)49)
#define MPI_2INTEGER ((MPI_Datatype)50)
#define MPI_INTEGER1 ((MPI_Datatype)51)
#define MPI_INTEGER2 ((MPI_Datatype)52)
#define MPI_INTEGER4 ((MPI_Datatype)53)
#define MPI_INTEGER8 ((MPI_Datatype)54)
#define MPI_REAL4 ((MPI_Datatype)55)
#define MPI_REAL8 ((MPI_Datatype)56)
#define MPI_COMPLEX8 ((MPI_Datatype)57)
#define MPI_COMPLEX16 ((MPI_Datatype)58)

/* Datatype combiners (MPI_Type_get_envelope) */
#define MPI_COMBINER_NAMED 1
#define MPI_COMBINER_DUP 2
#define MPI_COMBINER_CONTIGUOUS 3
#define MPI_COMBINER_VECTOR 4
#define MPI_COMBINER_HVECTOR_INTEGER 5
#define MPI_COMBINER_HVECTOR 6
#define MPI_COMBINER_INDEXED 7
#define MPI_COMBINER_HINDEXED_INTEGER 8
#define MPI_COMBINER_HINDEXED 9
#define MPI_COMBINER_INDEXED_BLOCK 10
#define MPI_COMBINER_STRUCT_INTEGER 11
#define MPI_COMBINER_STRUCT 12
#define MPI_COMBINER_SUBARRAY 13
#define MPI_COMBINER_DARRAY 14
#define MPI_COMBINER_F90_REAL 15
#define MPI_COMBINER_F90_COMPLEX 16
#define MPI_COMBINER_F90_INTEGER 17
#define MPI_COMBINER_RESIZED 18
#define MPI_COMBINER_HINDEXED_BLOCK 19

/* Subarray and darray layouts */
#define MPI_ORDER_C 0
#define MPI_ORDER_FORTRAN 1
#define MPI_DISTRIBUTE_BLOCK 0
#define MPI_DISTRIBUTE_CYCLIC 1
#define MPI_DISTRIBUTE_NONE 2
#define MPI_DISTRIBUTE_DFLT_DARG (-1)

/* MPI_Type_match_size */
#define MPI_TYPECLASS_REAL 1
#define MPI_TYPECLASS_INTEGER 2
#define MPI_TYPECLASS_COMPLEX 3

/* Reduction operations */
#define MPI_OP_NULL ((MPI_Op)0)
#define MPI_MAX ((MPI_Op)1)
#define MPI_MIN ((MPI_Op)2)
#define MPI_SUM ((MPI_Op)3)
#define MPI_PROD ((MPI_Op)4)
#define MPI_LAND ((MPI_Op)5)
#define MPI_BAND ((MPI_Op)6)
#define MPI_LOR ((MPI_Op)7)
#define MPI_BOR ((MPI_Op)8)
#define MPI_LXOR ((MPI_Op)9)
#define MPI_BXOR ((MPI_Op)10)
#define MPI_MINLOC ((MPI_Op)11)
#define MPI_MAXLOC ((MPI_Op)12)
/* One-sided communication's operations (qcg has no one-sided calls: in a reduction
 * they are MPI_ERR_OP), named so that programs and bindings can tell them apart. */
#define MPI_REPLACE ((MPI_Op)13)
#define MPI_NO_OP ((MPI_Op)14)

/* Error classes */
#define MPI_SUCCESS 0
#define MPI_ERR_BUFFER 1
#define MPI_ERR_COUNT 2
#define MPI_ERR_TYPE 3
#define MPI_ERR_TAG 4
#define MPI_ERR_COMM 5
#define MPI_ERR_RANK 6
#define MPI_ERR_REQUEST 7
#define MPI_ERR_ROOT 8
#define MPI_ERR_GROUP 9
#define MPI_ERR_OP 10
#define MPI_ERR_TOPOLOGY 11
#define MPI_ERR_DIMS 12
#define MPI_ERR_ARG 13
#define MPI_ERR_UNKNOWN 14
#define MPI_ERR_TRUNCATE 15
#define MPI_ERR_OTHER 16
#define MPI_ERR_INTERN 17
#define MPI_ERR_IN_STATUS 18
#define MPI_ERR_PENDING 19
#define MPI_ERR_ACCESS 20
#define MPI_ERR_AMODE 21
#define MPI_ERR_ASSERT 22
#define MPI_ERR_BAD_FILE 23
#define MPI_ERR_BASE 24
#define MPI_ERR_CONVERSION 25
#define MPI_ERR_DISP 26
#define MPI_ERR_DUP_DATAREP 27
#define MPI_ERR_FILE_EXISTS 28
#define MPI_ERR_FILE_IN_USE 29
#define MPI_ERR_FILE 30
#define MPI_ERR_INFO_KEY 31
#define MPI_ERR_INFO_NOKEY 32
#define MPI_ERR_INFO_VALUE 33
#define MPI_ERR_INFO 34
#define MPI_ERR_IO 35
#define MPI_ERR_KEYVAL 36
#define MPI_ERR_LOCKTYPE 37
#define MPI_ERR_NAME 38
#define MPI_ERR_NO_MEM 39
#define MPI_ERR_NOT_SAME 40
#define MPI_ERR_NO_SPACE 41
#define MPI_ERR_NO_SUCH_FILE 42
#define MPI_ERR_PORT 43
#define MPI_ERR_QUOTA 44
#define MPI_ERR_READ_ONLY 45
#define MPI_ERR_RMA_CONFLICT 46
#define MPI_ERR_RMA_SYNC 47
#define MPI_ERR_SERVICE 48
#define MPI_ERR_SIZE 49
#define MPI_ERR_SPAWN 50
#define MPI_ERR_UNSUPPORTED_DATAREP 51
#define MPI_ERR_UNSUPPORTED_OPERATION 52
#define MPI_ERR_WIN 53
#define MPI_ERR_RMA_RANGE 54
#define MPI_ERR_RMA_ATTACH 55
#define MPI_ERR_RMA_SHARED 56
#define MPI_ERR_RMA_FLAVOR 57
#define MPI_ERR_LASTCODE 64

typedef void MPI_User_function(void *invec, void *inoutvec, int *len, MPI_Datatype *datatype);

/* Generalized requests (MPI 3.1 section 12.2) */
typedef int MPI_Grequest_query_function(void *extra_state, MPI_Status *status);
typedef int MPI_Grequest_free_function(void *extra_state);
typedef int MPI_Grequest_cancel_function(void *extra_state, int complete);

/* Groups, names, attributes, info, error handlers and the environment (MPI 3.1
 * ch. 6 but intercommunicators and topologies, ch. 8, ch. 9) */
#define MPI_MAX_OBJECT_NAME 128
#define MPI_MAX_INFO_KEY 255
#define MPI_MAX_INFO_VAL 1024
#define MPI_MAX_LIBRARY_VERSION_STRING 256
#define MPI_INFO_ENV ((MPI_Info)1)
#define MPI_KEYVAL_INVALID 0
/* Predefined attributes of MPI_COMM_WORLD (keyvals) */
#define MPI_TAG_UB 1
#define MPI_HOST 2
#define MPI_IO 3
#define MPI_WTIME_IS_GLOBAL 4
#define MPI_UNIVERSE_SIZE 5
#define MPI_LASTUSEDCODE 6
#define MPI_APPNUM 7

typedef int MPI_Comm_copy_attr_function(MPI_Comm oldcomm, int comm_keyval, void *extra_state,
                                        void *attribute_val_in, void *attribute_val_out,
                                        int *flag);
typedef int MPI_Comm_delete_attr_function(MPI_Comm comm, int comm_keyval, void *attribute_val,
                                          void *extra_state);
typedef int MPI_Type_copy_attr_function(MPI_Datatype oldtype, int type_keyval, void *extra_state,
                                        void *attribute_val_in, void *attribute_val_out,
                                        int *flag);
typedef int MPI_Type_delete_attr_function(MPI_Datatype datatype, int type_keyval,
                                          void *attribute_val, void *extra_state);
typedef int MPI_Copy_function(MPI_Comm oldcomm, int keyval, void *extra_state,
                              void *attribute_val_in, void *attribute_val_out, int *flag);
typedef int MPI_Delete_function(MPI_Comm comm, int keyval, void *attribute_val,
                                void *extra_state);
typedef void MPI_Comm_errhandler_function(MPI_Comm *comm, int *error_code, ...);
typedef MPI_Comm_errhandler_function MPI_Handler_function;

/* The predefined callbacks: the NULL ones are null pointers (no copy: the attribute
 * is not copied; no delete), the DUP ones copy the attribute's value. */
int QCG_dup_fn(MPI_Comm oldcomm, int keyval, void *extra_state, void *attribute_val_in,
               void *attribute_val_out, int *flag);
#define MPI_NULL_COPY_FN ((MPI_Copy_function *)0)
#define MPI_NULL_DELETE_FN ((MPI_Delete_function *)0)
#define MPI_DUP_FN QCG_dup_fn
#define MPI_COMM_NULL_COPY_FN ((MPI_Comm_copy_attr_function *)0)
#define MPI_COMM_NULL_DELETE_FN ((MPI_Comm_delete_attr_function *)0)
#define MPI_COMM_DUP_FN ((MPI_Comm_copy_attr_function *)QCG_dup_fn)
#define MPI_TYPE_NULL_COPY_FN ((MPI_Type_copy_attr_function *)0)
#define MPI_TYPE_NULL_DELETE_FN ((MPI_Type_delete_attr_function *)0)
#define MPI_TYPE_DUP_FN ((MPI_Type_copy_attr_function *)QCG_dup_fn)
/* Point-to-point: send modes, persistent requests, matched probes (MPI 3.1 ch. 3) */
/* (MPI_Status * rather than the standard's MPI_Status []: with MPI_STATUSES_IGNORE,
 * a pointer constant here, gcc's -Wstringop-overflow rejects the array form.) */
/* Datatypes */
/* Types of what qcg does not provide (one-sided, I/O), so that a program using
 * them reaches the message of mpi_functions.h that names the missing function. */
typedef int MPI_Win;
typedef int MPI_File;
/* MPI 1 names removed in MPI 3.0, kept for old codes. */
/* Process topologies and neighborhood collectives */
/* Every function, from the table mpi/api/functions.txt: MPI_X and its profiling
 * name PMPI_X. */
#include "mpi_functions.h"
/* Collectives */
/* Collectives: the rest of chapter 5 (non-blocking collectives, 5.12) */
/* Communicators and groups */
/* Intercommunicators (MPI 3.1 6.6) */
/* qcg extension: see the top of this file. */
int QCG_Comm_split_level(MPI_Comm comm, int level, MPI_Comm *newcomm);

#ifdef __cplusplus
}
#endif

#endif /* QCG_MPI_H */
