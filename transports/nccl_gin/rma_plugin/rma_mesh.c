/* The mesh: every rank listens on an abstract Unix socket (no file on any
 * filesystem) under a random name carried in its handle; connect makes two
 * SOCK_SEQPACKET connections between each pair of ranks: `ctl` for the
 * collective registration steps (called by NCCL's main thread) and `sig`
 * for signal updates (sent and drained by NCCL's progress threads), so the
 * two never read each other's packets. A connection is accepted only from
 * the pid named in that rank's handle (SO_PEERCRED). */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "engram/plugin/deadline.h"
#include "memory/fd_pass.h"
#include "transports/nccl_gin/rma_plugin/rma_internal.h"

#define MESH_MAGIC 0x656e4d41u /* "enMA" */
#define MESH_BACKLOG 1024
#define MESH_TIMEOUT_MS 120000

typedef struct mesh_handle {
    uint32_t magic;
    int32_t pid;
    char name[ENGRAM_FD_PASS_NAME_LEN];
} mesh_handle_t;
_Static_assert(sizeof(mesh_handle_t) <= RMA_HANDLE_BYTES, "handle too large");

typedef struct mesh_listen {
    int fd;
} mesh_listen_t;

typedef struct mesh_hello {
    uint32_t magic;
    int32_t rank;
    int32_t channel; /* 0: ctl, 1: sig */
} mesh_hello_t;

rma_result_t rma_mesh_listen(void *handle, void **listen_comm)
{
    mesh_handle_t *h = handle;
    memset(h, 0, sizeof(*h));
    h->magic = MESH_MAGIC;
    h->pid = (int32_t)getpid();
    mesh_listen_t *l = malloc(sizeof(*l));
    if (l == NULL) {
        RMA_WARN("out of memory for a listener");
        return RMA_ERR_SYSTEM;
    }
    int err = engram_fd_pass_listen(SOCK_SEQPACKET, "engram-rma-", MESH_BACKLOG, &l->fd, h->name);
    if (err != 0) {
        RMA_WARN("cannot listen on an abstract Unix socket: %s", strerror(err));
        free(l);
        return RMA_ERR_SYSTEM;
    }
    *listen_comm = l;
    return RMA_SUCCESS;
}

rma_result_t rma_mesh_close_listen(void *listen_comm)
{
    mesh_listen_t *l = listen_comm;
    if (l != NULL) {
        close(l->fd);
        free(l);
    }
    return RMA_SUCCESS;
}

/* Waits for `events` on fd, up to the mesh timeout; false on timeout. */
static bool wait_fd(int fd, short events)
{
    struct pollfd p = {.fd = fd, .events = events};
    engram_deadline_t deadline = engram_deadline_start(MESH_TIMEOUT_MS);
    for (;;) {
        int left = engram_deadline_remaining_ms(&deadline);
        if (left == 0)
            return false;
        int n = poll(&p, 1, left);
        if (n > 0)
            return true;
        if (n < 0 && errno != EINTR)
            return false;
    }
}

static rma_result_t dial(const mesh_handle_t *h, int me, int channel, int *out)
{
    int fd = -1;
    mesh_hello_t hello = {.magic = MESH_MAGIC, .rank = me, .channel = channel};
    int err = engram_fd_pass_connect(SOCK_SEQPACKET, h->name, &fd);
    if (err != 0) {
        RMA_WARN("rank %d cannot reach pid %d (%s): this plugin only connects the ranks of one host", me,
                 (int)h->pid, strerror(err));
        return RMA_ERR_SYSTEM;
    }
    err = engram_fd_pass_send(fd, &hello, sizeof(hello), NULL, 0, 0);
    if (err != 0) {
        RMA_WARN("hello to pid %d: %s", (int)h->pid, strerror(err));
        close(fd);
        return RMA_ERR_SYSTEM;
    }
    *out = fd;
    return RMA_SUCCESS;
}

/* Accepts one connection from a lower rank and files it by its hello. */
static rma_result_t accept_one(rma_comm_t *c, int lfd, mesh_handle_t *const *hs)
{
    if (!wait_fd(lfd, POLLIN)) {
        RMA_WARN("rank %d: timed out waiting for the other ranks to connect", c->rank);
        return RMA_ERR_SYSTEM;
    }
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) {
        RMA_WARN("accept: %s", strerror(errno));
        return RMA_ERR_SYSTEM;
    }
    mesh_hello_t hello;
    if (!wait_fd(fd, POLLIN) || recv(fd, &hello, sizeof(hello), 0) != (ssize_t)sizeof(hello) ||
        hello.magic != MESH_MAGIC || hello.rank < 0 || hello.rank >= c->rank || hello.channel < 0 ||
        hello.channel > 1 || engram_fd_pass_peer_pid(fd) != hs[hello.rank]->pid) {
        RMA_WARN("rank %d: refused a connection that is not from a rank of this communicator", c->rank);
        close(fd);
        return RMA_ERR_SYSTEM;
    }
    int *slot = hello.channel == 0 ? &c->ctl[hello.rank] : &c->sig[hello.rank];
    if (*slot >= 0) {
        RMA_WARN("rank %d: rank %d connected twice", c->rank, hello.rank);
        close(fd);
        return RMA_ERR_SYSTEM;
    }
    *slot = fd;
    return RMA_SUCCESS;
}

rma_result_t rma_mesh_connect(void *handles[], int nranks, int rank, void *listen_comm, rma_comm_t **out)
{
    mesh_listen_t *l = listen_comm;
    if (handles == NULL || l == NULL || nranks < 1 || rank < 0 || rank >= nranks) {
        RMA_WARN("connect: bad arguments (nranks %d, rank %d)", nranks, rank);
        return RMA_ERR_ARGUMENT;
    }
    mesh_handle_t *const *hs = (mesh_handle_t *const *)handles;
    for (int r = 0; r < nranks; r++)
        if (hs[r] == NULL || hs[r]->magic != MESH_MAGIC) {
            RMA_WARN("connect: rank %d's handle is not one of this plugin's", r);
            return RMA_ERR_ARGUMENT;
        }
    rma_comm_t *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return RMA_ERR_SYSTEM;
    c->nranks = nranks;
    c->rank = rank;
    c->ctl = malloc(sizeof(int) * (size_t)nranks);
    c->sig = malloc(sizeof(int) * (size_t)nranks);
    if (c->ctl == NULL || c->sig == NULL) {
        rma_mesh_close(c);
        return RMA_ERR_SYSTEM;
    }
    for (int r = 0; r < nranks; r++)
        c->ctl[r] = c->sig[r] = -1;
    pthread_mutex_init(&c->sig_lock, NULL);
    pthread_mutex_init(&c->lock, NULL);
    /* Dial the higher ranks first: their backlogs hold us until they
     * accept, so no rank waits on another's accept loop. */
    rma_result_t res = RMA_SUCCESS;
    for (int r = rank + 1; r < nranks && res == RMA_SUCCESS; r++) {
        res = dial(hs[r], rank, 0, &c->ctl[r]);
        if (res == RMA_SUCCESS)
            res = dial(hs[r], rank, 1, &c->sig[r]);
    }
    for (int i = 0; i < 2 * rank && res == RMA_SUCCESS; i++)
        res = accept_one(c, l->fd, hs);
    if (res != RMA_SUCCESS) {
        rma_mesh_close(c);
        return res;
    }
    *out = c;
    return RMA_SUCCESS;
}

void rma_mesh_close(rma_comm_t *c)
{
    if (c->ctl != NULL && c->sig != NULL) {
        for (int r = 0; r < c->nranks; r++) {
            if (c->ctl[r] >= 0)
                close(c->ctl[r]);
            if (c->sig[r] >= 0)
                close(c->sig[r]);
        }
    }
    free(c->ctl);
    free(c->sig);
    free(c);
}

static rma_result_t send_packet(int fd, const void *buf, size_t len, const int *fds, int nfds, int flags)
{
    if (nfds > ENGRAM_FD_PASS_MAX_FDS)
        return RMA_ERR_INTERNAL;
    int err = engram_fd_pass_send(fd, buf, len, fds, nfds, flags);
    if (err == 0)
        return RMA_SUCCESS;
    if (err == EAGAIN || err == EWOULDBLOCK)
        return RMA_ERR_INTERNAL; /* the caller's cue to drain and retry */
    RMA_WARN("send to a peer: %s", strerror(err));
    return RMA_ERR_REMOTE;
}

rma_result_t rma_mesh_send_all(rma_comm_t *c, const void *buf, size_t len, const int *fds, int nfds)
{
    for (int r = 0; r < c->nranks; r++) {
        if (r == c->rank)
            continue;
        rma_result_t res = send_packet(c->ctl[r], buf, len, fds, nfds, 0);
        if (res != RMA_SUCCESS) {
            RMA_WARN("rank %d: sending a collective step to rank %d failed", c->rank, r);
            return RMA_ERR_REMOTE;
        }
    }
    return RMA_SUCCESS;
}

rma_result_t rma_mesh_recv(rma_comm_t *c, int peer, void *buf, size_t cap, size_t *len, int *fds, int max_fds,
                           int *nfds)
{
    *nfds = 0;
    if (!wait_fd(c->ctl[peer], POLLIN)) {
        RMA_WARN("rank %d: timed out waiting for rank %d in a collective step", c->rank, peer);
        return RMA_ERR_REMOTE;
    }
    size_t n = 0;
    int got = 0;
    int err = engram_fd_pass_recv(c->ctl[peer], buf, cap, &n, fds, max_fds, &got, 0);
    if (err != 0 || n == 0) {
        for (int i = 0; i < got; i++)
            close(fds[i]);
        RMA_WARN("rank %d: %s from rank %d in a collective step", c->rank,
                 err == EMSGSIZE ? "oversized packet" : err != 0 ? strerror(err) : "connection closed", peer);
        return RMA_ERR_REMOTE;
    }
    *len = n;
    *nfds = got;
    return RMA_SUCCESS;
}

bool rma_mesh_agree(rma_comm_t *c, bool ok)
{
    int32_t mine = ok ? 1 : 0;
    bool all = rma_mesh_send_all(c, &mine, sizeof(mine), NULL, 0) == RMA_SUCCESS && ok;
    for (int r = 0; r < c->nranks; r++) {
        if (r == c->rank)
            continue;
        int32_t theirs = 0;
        size_t len = 0;
        int nfds = 0;
        if (rma_mesh_recv(c, r, &theirs, sizeof(theirs), &len, NULL, 0, &nfds) != RMA_SUCCESS ||
            len != sizeof(theirs) || theirs != 1)
            all = false;
    }
    return all;
}

/* Applies what has arrived on the sig sockets; caller holds sig_lock. */
static rma_result_t drain_locked(rma_comm_t *c)
{
    rma_result_t res = RMA_SUCCESS;
    for (int r = 0; r < c->nranks; r++) {
        while (c->sig[r] >= 0) {
            rma_signal_msg_t m;
            ssize_t n = recv(c->sig[r], &m, sizeof(m), MSG_DONTWAIT);
            if (n == (ssize_t)sizeof(m)) {
                rma_result_t a = rma_region_apply_signal(c, &m);
                if (a != RMA_SUCCESS)
                    res = a;
                continue;
            }
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
                break;
            if (n == 0) {
                /* The peer closed its communicator; nothing more will come. */
                close(c->sig[r]);
                c->sig[r] = -1;
                break;
            }
            RMA_WARN("rank %d: bad signal packet from rank %d (%s)", c->rank, r,
                     n < 0 ? strerror(errno) : "wrong size");
            atomic_store(&c->failed, true);
            return RMA_ERR_REMOTE;
        }
    }
    if (res != RMA_SUCCESS)
        atomic_store(&c->failed, true);
    return res;
}

rma_result_t rma_mesh_drain(rma_comm_t *c)
{
    /* Another thread draining already does the work. */
    if (pthread_mutex_trylock(&c->sig_lock) != 0)
        return RMA_SUCCESS;
    rma_result_t res = drain_locked(c);
    pthread_mutex_unlock(&c->sig_lock);
    return res;
}

rma_result_t rma_mesh_send_signal(rma_comm_t *c, int peer, const rma_signal_msg_t *m)
{
    pthread_mutex_lock(&c->sig_lock);
    rma_result_t res = RMA_ERR_REMOTE;
    engram_deadline_t deadline = engram_deadline_start(MESH_TIMEOUT_MS);
    while (c->sig[peer] >= 0) {
        res = send_packet(c->sig[peer], m, sizeof(*m), NULL, 0, MSG_DONTWAIT);
        if (res != RMA_ERR_INTERNAL)
            break;
        /* The peer's socket is full: it may be waiting on ours, so take in
         * what it sent before trying again. */
        res = drain_locked(c);
        if (res != RMA_SUCCESS)
            break;
        if (engram_deadline_expired(&deadline)) {
            RMA_WARN("rank %d: rank %d has not taken signal updates for %d ms", c->rank, peer, MESH_TIMEOUT_MS);
            res = RMA_ERR_REMOTE;
            break;
        }
        struct pollfd p = {.fd = c->sig[peer], .events = POLLOUT};
        (void)poll(&p, 1, 1);
    }
    if (res != RMA_SUCCESS) {
        if (c->sig[peer] < 0)
            RMA_WARN("rank %d: rank %d has closed its communicator; signal update lost", c->rank, peer);
        atomic_store(&c->failed, true);
    }
    pthread_mutex_unlock(&c->sig_lock);
    return res;
}
