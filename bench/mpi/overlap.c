/* `qcg-bench mpi --lab`'s overlap test (OSU's osu_iallreduce method), built with
 * qcg-mpicc and with mpicc: how much of an MPI_Iallreduce a computation of the same
 * length hides.
 *
 * Usage: overlap BYTES ITERS
 * 1. pure: barrier, MPI_Iallreduce of BYTES (uint64 sums), MPI_Wait; each rank's
 *    mean over ITERS, the slowest rank's kept: t_pure.
 * 2. overlapped: barrier, MPI_Iallreduce, a computation of t_pure that makes no MPI
 *    call (a spin on the clock), MPI_Wait: t_total (slowest rank), t_compute.
 * overlap = 100 * (1 - (t_total - t_compute) / t_pure), between 0 and 100: the share
 * of the communication that went on while the program computed.
 * Also the processor time the pure phase took, all ranks' together (getrusage, every
 * thread of the process): on a machine whose ranks outnumber its cores, a
 * communication that alone keeps the cores busy cannot be hidden behind a computation
 * that wants them too, and this says how close to that the run was.
 * Rank 0 prints `bytes,pure_us,compute_us,total_us,overlap_pct,pure_cpu_us` and checks
 * the sums. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

static void spin(double us) {
    double end = MPI_Wtime() + us * 1e-6;
    volatile double x = 0;
    while (MPI_Wtime() < end)
        for (int i = 0; i < 100; i++)
            x += i;
}

/* Processor time of the whole process (all its threads), µs. */
static double cpu_us(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e6 +
           (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

static double slowest(double mine) {
    double max;
    MPI_Allreduce(&mine, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return max;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 3) {
        if (rank == 0)
            fprintf(stderr, "usage: overlap BYTES ITERS\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    size_t n = (size_t)atol(argv[1]) / 8;
    int iters = atoi(argv[2]);
    if (n == 0)
        n = 1;
    uint64_t *in = malloc(n * 8), *out = malloc(n * 8);
    for (size_t i = 0; i < n; i++)
        in[i] = (uint64_t)rank + i;
    MPI_Request r;
    /* Warm-up: links made, schedules built. */
    MPI_Iallreduce(in, out, (int)n, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    double pure = 0, cpu0 = cpu_us();
    for (int k = 0; k < iters; k++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Iallreduce(in, out, (int)n, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        pure += MPI_Wtime() - t0;
    }
    double cpu = (cpu_us() - cpu0) / iters, cpu_all;
    MPI_Allreduce(&cpu, &cpu_all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double t_pure = slowest(pure / iters * 1e6);
    double total = 0, compute = 0;
    for (int k = 0; k < iters; k++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Iallreduce(in, out, (int)n, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD, &r);
        double c0 = MPI_Wtime();
        spin(t_pure);
        compute += MPI_Wtime() - c0;
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        total += MPI_Wtime() - t0;
    }
    double t_total = slowest(total / iters * 1e6);
    double t_compute = slowest(compute / iters * 1e6);
    int ok = 1;
    for (size_t i = 0; i < n; i++)
        if (out[i] != (uint64_t)size * (size - 1) / 2 + (uint64_t)size * i)
            ok = 0;
    int all_ok;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (rank == 0) {
        double ov = 100.0 * (1.0 - (t_total - t_compute) / t_pure);
        if (ov < 0)
            ov = 0;
        if (ov > 100)
            ov = 100;
        printf("%zu,%.1f,%.1f,%.1f,%.1f,%.1f\n", n * 8, t_pure, t_compute, t_total, ov,
               cpu_all);
        if (!all_ok)
            fprintf(stderr, "overlap: wrong sums\n");
    }
    free(in);
    free(out);
    MPI_Finalize();
    return all_ok ? 0 : 1;
}
