/* The MPI provider: a duplicate of MPI_COMM_WORLD, so engram's collectives
 * never match the application's. Collectives are nonblocking ones polled
 * against the group's timeout; MPI cannot cancel a collective, so one that
 * times out stays pending (the group, failed, refuses further use:
 * hal/group.c), and destroy gives it one more timeout to complete. MPI's own setup calls (dup, split) are
 * blocking and only as bounded as the MPI library makes them. */
#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "engram/plugin/deadline.h"
#include "hal/group_mpi.h"
#include "hal/group_provider.h"
#include "hal/log.h"

/* Sleep between polls of a pending collective: ranks are often
 * oversubscribed, and spinning would starve the ranks being waited for. */
#define MPI_POLL_NS 20000

typedef struct mpi_group {
    MPI_Comm comm;
    MPI_Request pending; /* a timed-out collective, or MPI_REQUEST_NULL */
} mpi_group_t;

static engram_status_t mpi_failed(int rank, const char *what, int rc)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
        len = 0;
    text[len] = '\0';
    return ENGRAM_ERROR(ENGRAM_ERR_PEER, "rank %d: MPI %s failed: %s", rank, what, len ? text : "unknown error");
}

/* Polls `req` until it completes or the group timeout passes; 1 when done.
 * MPI shows nothing of a collective's progress until it completes, so
 * here alone the deadline bounds the whole collective (engram/plugin/deadline.h). */
static int poll_request(engram_group_t *g, MPI_Request *req, int *rc)
{
    engram_deadline_t deadline = engram_deadline_start(engram_group_wait_ms(g));
    const struct timespec pause = {.tv_nsec = MPI_POLL_NS};
    for (;;) {
        int done = 0;
        *rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (*rc != MPI_SUCCESS || done)
            return 1;
        if (engram_deadline_expired(&deadline))
            return 0;
        (void)engram_group_waiting(g, 0); /* serves the transport's peers, if asked */
        nanosleep(&pause, NULL);
    }
}

static engram_status_t mpi_wait(engram_group_t *g, MPI_Request *req, const char *what)
{
    mpi_group_t *self = g->provider;
    int rc, ms = engram_group_wait_ms(g);
    if (!poll_request(g, req, &rc)) {
        self->pending = *req;
        return ENGRAM_ERROR(ENGRAM_ERR_TIMEOUT,
                            "rank %d: MPI %s timed out after %d ms; this group can no longer be used", g->rank, what,
                            ms);
    }
    return rc == MPI_SUCCESS ? ENGRAM_OK : mpi_failed(g->rank, what, rc);
}

static engram_status_t mpi_allgather(engram_group_t *g, const void *send, void *recv, size_t bytes)
{
    mpi_group_t *self = g->provider;
    if (bytes > INT_MAX)
        return ENGRAM_ERROR(ENGRAM_ERR_OVERFLOW, "rank %d: MPI allgather of %zu bytes exceeds MPI's int count",
                            g->rank, bytes);
    /* MPI forbids aliased buffers; a contribution already in place is
     * expressed the MPI way. */
    if (bytes > 0 && send == (const char *)recv + (size_t)g->rank * bytes)
        send = MPI_IN_PLACE;
    MPI_Request req;
    int rc = MPI_Iallgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, self->comm, &req);
    if (rc != MPI_SUCCESS)
        return mpi_failed(g->rank, "allgather", rc);
    return mpi_wait(g, &req, "allgather");
}

static engram_status_t mpi_barrier(engram_group_t *g)
{
    mpi_group_t *self = g->provider;
    MPI_Request req;
    int rc = MPI_Ibarrier(self->comm, &req);
    if (rc != MPI_SUCCESS)
        return mpi_failed(g->rank, "barrier", rc);
    return mpi_wait(g, &req, "barrier");
}

static void mpi_destroy(engram_group_t *g)
{
    mpi_group_t *self = g->provider;
    int rc;
    if (self->pending != MPI_REQUEST_NULL && !poll_request(g, &self->pending, &rc))
        ENGRAM_WARN("rank %d: a timed-out MPI collective is still pending at destroy; leaving it", g->rank);
    MPI_Comm_free(&self->comm);
    free(self);
}

static const engram_group_ops_t mpi_ops = {
    .size = sizeof(engram_group_ops_t),
    .name = "mpi",
    .allgather = mpi_allgather,
    .barrier = mpi_barrier,
    .destroy = mpi_destroy,
};

/* The node size from MPI's shared-memory split, checked (collectively, so
 * every rank agrees) to describe blocks of consecutive ranks of one size. */
static engram_status_t shared_local_size(MPI_Comm comm, int rank, int *out)
{
    MPI_Comm node;
    int rc = MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    if (rc != MPI_SUCCESS)
        return mpi_failed(rank, "Comm_split_type(SHARED)", rc);
    int local_size = 0, local_rank = 0;
    MPI_Comm_size(node, &local_size);
    MPI_Comm_rank(node, &local_rank);
    MPI_Comm_free(&node);
    int v[3] = {local_rank == rank % local_size, local_size, -local_size}, all[3];
    rc = MPI_Allreduce(v, all, 3, MPI_INT, MPI_MIN, comm);
    if (rc != MPI_SUCCESS)
        return mpi_failed(rank, "Allreduce", rc);
    if (!all[0] || all[1] != -all[2])
        return ENGRAM_ERROR(ENGRAM_ERR_UNSUPPORTED,
                            "MPI ranks are not placed in equal blocks of consecutive ranks per host (host sizes %d..%d); "
                            "map ranks by node in order or pass local_size explicitly",
                            all[1], -all[2]);
    *out = local_size;
    return ENGRAM_OK;
}

engram_status_t engram_group_mpi_create(int local_size, engram_group_t **out)
{
    int inited = 0;
    if (out == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "MPI group: out is NULL");
    if (MPI_Initialized(&inited) != MPI_SUCCESS || !inited)
        return ENGRAM_ERROR(ENGRAM_ERR_STATE, "MPI group: MPI is not initialised (call MPI_Init first)");
    mpi_group_t *self = calloc(1, sizeof(*self));
    engram_group_t *g = calloc(1, sizeof(*g));
    engram_status_t st = ENGRAM_OK;
    if (self == NULL || g == NULL) {
        st = ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "MPI group: no memory");
        goto free_state;
    }
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &self->comm);
    if (rc != MPI_SUCCESS) {
        st = mpi_failed(-1, "Comm_dup(MPI_COMM_WORLD)", rc);
        goto free_state;
    }
    MPI_Comm_set_errhandler(self->comm, MPI_ERRORS_RETURN);
    self->pending = MPI_REQUEST_NULL;
    int rank = 0, size = 0;
    MPI_Comm_rank(self->comm, &rank);
    MPI_Comm_size(self->comm, &size);
    if (local_size == 0)
        st = shared_local_size(self->comm, rank, &local_size);
    if (st == ENGRAM_OK)
        st = engram_group_init(g, &mpi_ops, self, rank, size, local_size);
    if (st != ENGRAM_OK)
        goto free_comm;
    *out = g;
    return ENGRAM_OK;
free_comm:
    MPI_Comm_free(&self->comm);
free_state:
    free(g);
    free(self);
    return st;
}
