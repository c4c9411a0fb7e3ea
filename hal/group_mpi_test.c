/* The MPI provider under mpirun (see group_mpi_test.sh): allgather and
 * barrier results, the node size from MPI, argument checks, a timeout. */
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hal/group_mpi.h"
#include "hal/testdata/check_error.h"

static uint8_t pattern(int rank, int round, size_t i)
{
    return (uint8_t)(rank * 101 + round * 3 + i * 11);
}

static void check_allgather(engram_group_t *g, int round, size_t bytes, int in_place)
{
    int n = engram_group_size(g), me = engram_group_rank(g);
    uint8_t *recv = malloc(bytes * (size_t)n + 1), *send = in_place ? recv + (size_t)me * bytes : malloc(bytes + 1);
    CHECK(send != NULL && recv != NULL);
    for (size_t i = 0; i < bytes; i++)
        send[i] = pattern(me, round, i);
    CHECK_OK(engram_group_allgather(g, send, recv, bytes));
    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < bytes; i++)
            CHECK(recv[(size_t)r * bytes + i] == pattern(r, round, i));
    if (!in_place)
        free(send);
    free(recv);
}

int main(int argc, char **argv)
{
    CHECK(MPI_Init(&argc, &argv) == MPI_SUCCESS);
    int wrank, wsize;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    CHECK(wsize == 4);

    engram_group_t *g = NULL;
    CHECK_ERROR(engram_group_mpi_create(0, NULL), ENGRAM_ERR_INVALID, "out is NULL");
    CHECK_ERROR(engram_group_mpi_create(3, &g), ENGRAM_ERR_INVALID, "not a multiple of local_size 3");
    CHECK(g == NULL);

    CHECK_OK(engram_group_mpi_create(0, &g));
    CHECK(engram_group_rank(g) == wrank && engram_group_size(g) == 4);
    CHECK(engram_group_local_size(g) == 4 && engram_group_local_rank(g) == wrank);
    CHECK(engram_group_single_host(g) == 1);
    static const size_t sizes[] = {0, 1, 5, 64, 4096, 100003};
    for (int round = 0; round < 60; round++) {
        check_allgather(g, round, sizes[round % 6], round % 2);
        CHECK_OK(engram_group_barrier(g));
    }
    engram_group_destroy(g);

    CHECK_OK(engram_group_mpi_create(2, &g));
    CHECK(engram_group_local_size(g) == 2 && engram_group_local_rank(g) == wrank % 2);
    check_allgather(g, 0, 8, 0);

    /* Rank 3 is late: the others' barrier times out and the group refuses
     * further use; rank 3's late barrier lets the pending one complete, so
     * destroy and MPI_Finalize finish. */
    engram_group_set_timeout(g, 200);
    if (wrank == 3) {
        usleep(1500 * 1000);
        engram_group_set_timeout(g, 10000);
        CHECK_OK(engram_group_barrier(g));
    } else {
        CHECK_ERROR(engram_group_barrier(g), ENGRAM_ERR_TIMEOUT, "timed out after 200 ms");
        CHECK_ERROR(engram_group_barrier(g), ENGRAM_ERR_TIMEOUT, "the group failed earlier");
        engram_group_set_timeout(g, 10000);
    }
    engram_group_destroy(g);

    printf("group_mpi_test: rank %d ok\n", wrank);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
