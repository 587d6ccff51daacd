/* An MPI allreduce for a lab: every rank sums a vector of doubles with the others, a few
 * times, checks every element of the result, and rank 0 prints how long the collectives
 * took as `figure:` lines, which intlab reads into a run's summary and `intlab compare`. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    int n = argc > 1 ? atoi(argv[1]) : 1 << 17;
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    double *mine = malloc(n * sizeof *mine), *sum = malloc(n * sizeof *sum);
    if (mine == NULL || sum == NULL || n <= 0 || rounds <= 0) {
        fprintf(stderr, "usage: allreduce [DOUBLES [ROUNDS]]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int i = 0; i < n; i++) mine[i] = rank + i;
    long wrong = 0;
    double slowest = 0, total = 0;
    for (int r = 0; r < rounds; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double start = MPI_Wtime();
        MPI_Allreduce(mine, sum, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        double took = MPI_Wtime() - start;
        /* Every rank's took; the collective is as slow as its slowest rank. */
        double worst;
        MPI_Reduce(&took, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        total += worst;
        if (worst > slowest) slowest = worst;
        for (int i = 0; i < n; i++)
            if (sum[i] != (double)ranks * i + ranks * (ranks - 1) / 2.0) wrong++;
    }
    long wrong_all;
    MPI_Reduce(&wrong, &wrong_all, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("allreduce of %d doubles on %d ranks, %d rounds: %ld wrong elements\n", n, ranks, rounds, wrong_all);
        printf("figure: allreduce mean[s] %.6f\n", total / rounds);
        printf("figure: allreduce max[s] %.6f\n", slowest);
    }
    free(mine);
    free(sum);
    MPI_Finalize();
    return rank == 0 && wrong_all != 0;
}
