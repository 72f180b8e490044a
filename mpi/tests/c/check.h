/* Shared by the C test programs: CHECK counts and reports, DONE prints the tally.
 * Every line a program prints must be the same under libqcgmpi and Open MPI (the
 * test sorts both outputs and compares them). */
#ifndef QCG_TEST_CHECK_H
#define QCG_TEST_CHECK_H
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int checks = 0, failures = 0, me = -1, np = 0;

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        checks++;                                                            \
        if (!(cond)) {                                                       \
            failures++;                                                      \
            printf("rank %d: FAIL line %d: ", me, __LINE__);                 \
            printf(__VA_ARGS__);                                             \
            printf("\n");                                                    \
        }                                                                    \
    } while (0)

#define DONE(name)                                                           \
    do {                                                                     \
        printf("rank %d: %s: %d checks, %d failed\n", me, name, checks,     \
               failures);                                                    \
        fflush(stdout);                                                      \
    } while (0)

#endif
