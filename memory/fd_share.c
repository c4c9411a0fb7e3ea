/* Segment fds passed among the ranks of one host (see fd_share.h).
 *
 * Three steps, each agreed on by every rank so none is left waiting:
 * 1. every rank listens and the records (name, pid, host, status) are
 *    allgathered; a rank that could not take part says so in its record;
 * 2. every rank connects to each same-host rank and receives its fd while
 *    serving its own fd to the members that connect to it, until done or
 *    the group's timeout passes without progress (a connection made, an
 *    fd received or served: a thousand ranks of one host take far longer
 *    than the timeout in all, and keep moving);
 * 3. the per-rank outcomes are allgathered; any failure anywhere closes
 *    every fd received. */
#include "engram/plugin/segment.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "engram/plugin/deadline.h"
#include "hal/host_id.h"
#include "hal/group.h"
#include "hal/log.h"
#include "memory/fd_pass.h"

/* Pause before retrying a connect that found the listener's backlog full. */
#define FD_RETRY_MS 5

typedef struct fd_record {
    char name[ENGRAM_FD_PASS_NAME_LEN]; /* abstract socket name, without the leading NUL */
    int32_t pid;
    int32_t status; /* OK, or why this rank cannot take part */
    /* Abstract names resolve, and SO_PEERCRED pids compare, only on one
     * host in hal/host_id.h's sense (one kernel, network and pid namespace). */
    engram_host_id_t host;
} fd_record_t;

typedef struct fd_exchange {
    engram_group_t *group;
    int n, me, my_fd;
    int listen_fd;
    const fd_record_t *all;
    int *got;    /* received fds, -1 where none (yet) */
    int *conn;   /* our connection to each rank we receive from, -1 if none */
    char *peer;  /* 1 for the other ranks of this host */
    char *served;
    int to_receive, to_serve;
    unsigned moved; /* connections made, fds received and served: progress */
} fd_exchange_t;

static engram_status_t listen_random(int backlog, int *out_fd, char name[ENGRAM_FD_PASS_NAME_LEN])
{
    int err = engram_fd_pass_listen(SOCK_STREAM | SOCK_NONBLOCK, "engram-fd-", backlog, out_fd, name);
    return err == 0 ? ENGRAM_OK
                    : ENGRAM_ERROR(ENGRAM_ERR_IO, "fd share: cannot listen on an abstract socket: %s", strerror(err));
}

/* Step 1 for this rank: its record, with the reason it cannot take part. */
static void record_fill(fd_record_t *rec, engram_group_t *group, int my_fd, const int *fds, int *listen_fd)
{
    memset(rec, 0, sizeof(*rec));
    rec->pid = (int32_t)getpid();
    const char *why = NULL;
    if (fds == NULL)
        rec->status = ENGRAM_ERROR(ENGRAM_ERR_INVALID, "fd share on rank %d: fds is NULL", engram_group_rank(group));
    else if (my_fd < 0 || fcntl(my_fd, F_GETFD) < 0)
        rec->status = ENGRAM_ERROR(ENGRAM_ERR_INVALID, "fd share on rank %d: my_fd %d is not an open fd",
                                   engram_group_rank(group), my_fd);
    else if (engram_host_id_self(&rec->host, &why) != ENGRAM_OK)
        rec->status = ENGRAM_ERROR(ENGRAM_ERR_IO, "fd share on rank %d: %s", engram_group_rank(group), why);
    else
        rec->status = listen_random(2 * engram_group_size(group) + 8, listen_fd, rec->name);
}

/* Accept one connection; send our fd if it comes from a member of this host
 * we have not served yet, refuse it otherwise. */
static engram_status_t serve_one(fd_exchange_t *x)
{
    int c = accept4(x->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c < 0)
        return errno == EAGAIN || errno == EINTR || errno == ECONNABORTED
                   ? ENGRAM_OK
                   : ENGRAM_ERROR(ENGRAM_ERR_IO, "fd share on rank %d: accept: %s", x->me, strerror(errno));
    pid_t pid = engram_fd_pass_peer_pid(c);
    int r = 0;
    while (r < x->n && !(x->peer[r] && x->all[r].pid == pid))
        r++;
    if (r == x->n || x->served[r]) {
        ENGRAM_WARN("fd share on rank %d: refused a connection from pid %d, %s", x->me, (int)pid,
                    r == x->n ? "which is not a rank of this group on this host" : "already served");
        close(c);
        return ENGRAM_OK;
    }
    int32_t from = x->me;
    /* A fresh socket's buffer always takes this small message at once. */
    int err = engram_fd_pass_send(c, &from, sizeof(from), &x->my_fd, 1, MSG_DONTWAIT);
    close(c);
    if (err != 0)
        return ENGRAM_ERROR(ENGRAM_ERR_IO, "fd share on rank %d: sending the fd to rank %d: %s", x->me, r,
                            strerror(err));
    x->served[r] = 1;
    x->to_serve--;
    x->moved++;
    return ENGRAM_OK;
}

/* Connect to rank r's listener and check it is really rank r's. */
static engram_status_t connect_one(fd_exchange_t *x, int r)
{
    int c = -1;
    int err = engram_fd_pass_connect(SOCK_STREAM | SOCK_NONBLOCK, x->all[r].name, &c);
    if (err == EAGAIN || err == EINTR)
        return ENGRAM_OK; /* backlog full: retried on the next pass */
    if (err != 0)
        return ENGRAM_ERROR(ENGRAM_ERR_PEER, "fd share on rank %d: connecting to rank %d's socket: %s", x->me, r,
                            strerror(err));
    pid_t pid = engram_fd_pass_peer_pid(c);
    if (pid != x->all[r].pid) {
        close(c);
        return ENGRAM_ERROR(ENGRAM_ERR_PEER, "fd share on rank %d: rank %d's socket is held by pid %d, not its pid %d",
                            x->me, r, (int)pid, (int)x->all[r].pid);
    }
    x->conn[r] = c;
    x->moved++;
    return ENGRAM_OK;
}

static void close_fds(int *fds, int n)
{
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0) {
            close(fds[i]);
            fds[i] = -1;
        }
}

/* Read rank r's message: exactly one fd, and r's own rank as the payload. */
static engram_status_t receive_one(fd_exchange_t *x, int r)
{
    int32_t from = -1;
    size_t n = 0;
    /* Two slots: a second fd marks the message malformed, not dropped. */
    int fds[2] = {-1, -1}, nfds = 0;
    int err = engram_fd_pass_recv(x->conn[r], &from, sizeof(from), &n, fds, 2, &nfds, MSG_DONTWAIT);
    if (err == EAGAIN)
        return ENGRAM_OK;
    close(x->conn[r]);
    x->conn[r] = -1;
    if (err == 0 && n == sizeof(from) && from == r && nfds == 1) {
        x->got[r] = fds[0];
        x->to_receive--;
        x->moved++;
        return ENGRAM_OK;
    }
    close_fds(fds, nfds);
    if (err == EMSGSIZE)
        return ENGRAM_ERROR(ENGRAM_ERR_PEER, "fd share on rank %d: rank %d sent a malformed message (too large)",
                            x->me, r);
    if (err != 0 || n == 0)
        return ENGRAM_ERROR(ENGRAM_ERR_PEER, "fd share on rank %d: rank %d closed the connection without an fd (%s)",
                            x->me, r, err != 0 ? strerror(err) : "it refused this process or failed");
    return ENGRAM_ERROR(ENGRAM_ERR_PEER, "fd share on rank %d: rank %d sent a malformed message (%zu bytes, %d fds)",
                        x->me, r, n, nfds);
}

/* "N ranks: rank r (what), ...", as many as fit in buf. */
static void describe_pending(const fd_exchange_t *x, char *buf, size_t len)
{
    int pending = 0;
    for (int r = 0; r < x->n; r++)
        pending += x->peer[r] && !(x->got[r] >= 0 && x->served[r]);
    size_t used = (size_t)snprintf(buf, len, "%d rank%s:", pending, pending == 1 ? "" : "s");
    for (int r = 0, listed = 0; r < x->n && used < len; r++) {
        if (!x->peer[r] || (x->got[r] >= 0 && x->served[r]))
            continue;
        const char *what = x->got[r] >= 0 ? "serve" : x->served[r] ? "receive" : "receive, serve";
        used += (size_t)snprintf(buf + used, len - used, "%s rank %d (%s)", listed++ ? "," : "", r, what);
    }
}

/* Step 2: connect, receive and serve until done, or until the group's
 * timeout passes without any of them moving. */
static engram_status_t exchange(fd_exchange_t *x)
{
    engram_deadline_t deadline = engram_deadline_start(engram_group_timeout(x->group));
    struct pollfd *pfds = calloc((size_t)x->n + 1, sizeof(*pfds));
    int *who = calloc((size_t)x->n + 1, sizeof(*who)); /* rank behind each pfd, -1 for the listener */
    engram_status_t st = ENGRAM_OK;
    if (pfds == NULL || who == NULL)
        st = ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "fd share on rank %d: no memory for %d poll entries", x->me, x->n);
    unsigned seen = x->moved;
    while (st == ENGRAM_OK && (x->to_receive > 0 || x->to_serve > 0)) {
        int np = 0, connecting = 0;
        if (x->to_serve > 0) {
            who[np] = -1;
            pfds[np++] = (struct pollfd){.fd = x->listen_fd, .events = POLLIN};
        }
        for (int r = 0; r < x->n && st == ENGRAM_OK; r++) {
            if (!x->peer[r] || x->got[r] >= 0)
                continue;
            if (x->conn[r] < 0)
                st = connect_one(x, r);
            if (x->conn[r] < 0) {
                connecting = 1;
                continue;
            }
            who[np] = r;
            pfds[np++] = (struct pollfd){.fd = x->conn[r], .events = POLLIN};
        }
        if (st != ENGRAM_OK)
            break;
        if (x->moved != seen) {
            seen = x->moved;
            engram_deadline_progress(&deadline);
        }
        int wait = engram_deadline_remaining_ms(&deadline);
        if (wait == 0) {
            char pending[256];
            describe_pending(x, pending, sizeof(pending));
            st = ENGRAM_ERROR(ENGRAM_ERR_TIMEOUT,
                              "fd share on rank %d: timed out: %d ms without progress (no connection made, no fd "
                              "received or served); still pending: %s",
                              x->me, engram_group_timeout(x->group), pending);
            break;
        }
        if (connecting && wait > FD_RETRY_MS)
            wait = FD_RETRY_MS;
        if (poll(pfds, (nfds_t)np, wait) < 0 && errno != EINTR) {
            st = ENGRAM_ERROR(ENGRAM_ERR_IO, "fd share on rank %d: poll: %s", x->me, strerror(errno));
            break;
        }
        for (int p = 0; p < np && st == ENGRAM_OK; p++)
            if (pfds[p].revents != 0)
                st = who[p] < 0 ? serve_one(x) : receive_one(x, who[p]);
    }
    free(who);
    free(pfds);
    return st;
}

static engram_status_t check_records(const fd_record_t *all, int n, int me)
{
    for (int r = 0; r < n; r++) {
        if (all[r].status == ENGRAM_OK)
            continue;
        if (r == me)
            return (engram_status_t)all[r].status; /* logged by record_fill */
        return engram_group_peer_failed(r, (engram_status_t)all[r].status, "take part in the fd share");
    }
    return ENGRAM_OK;
}

engram_status_t engram_fd_allgather(engram_group_t *group, int my_fd, int *fds)
{
    if (group == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "fd share: group is NULL");
    int n = engram_group_size(group), me = engram_group_rank(group);
    fd_exchange_t x = {.group = group, .n = n, .me = me, .my_fd = my_fd, .listen_fd = -1};
    fd_record_t mine;
    record_fill(&mine, group, my_fd, fds, &x.listen_fd);

    engram_status_t st;
    fd_record_t *all = calloc((size_t)n, sizeof(*all));
    x.got = malloc((size_t)n * sizeof(int));
    x.conn = malloc((size_t)n * sizeof(int));
    x.peer = calloc((size_t)n, 1);
    x.served = calloc((size_t)n, 1);
    /* Leaving now makes the others' allgather fail by timeout: bounded. */
    if (all == NULL || x.got == NULL || x.conn == NULL || x.peer == NULL || x.served == NULL) {
        st = ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "fd share: no memory for %d ranks", n);
        goto close_listener;
    }
    st = engram_group_allgather(group, &mine, all, sizeof(mine));
    if (st != ENGRAM_OK || (st = check_records(all, n, me)) != ENGRAM_OK)
        goto close_listener;

    x.all = all;
    for (int r = 0; r < n; r++) {
        x.got[r] = x.conn[r] = -1;
        x.peer[r] = r != me && engram_host_id_same(&all[r].host, &mine.host);
        x.to_receive += x.peer[r];
    }
    x.to_serve = x.to_receive;
    x.got[me] = fcntl(my_fd, F_DUPFD_CLOEXEC, 0);
    engram_status_t local = x.got[me] < 0 ? ENGRAM_ERROR(ENGRAM_ERR_IO, "fd share on rank %d: dup of my_fd: %s", me,
                                                         strerror(errno))
                                          : exchange(&x);
    close_fds(x.conn, n);
    close(x.listen_fd);
    x.listen_fd = -1;
    /* Step 3: every rank learns whether every rank succeeded. */
    st = engram_group_agree_step(group, local, "complete its part of the fd share");
    if (st != ENGRAM_OK)
        close_fds(x.got, n);
    else
        memcpy(fds, x.got, (size_t)n * sizeof(int));
close_listener:
    if (x.listen_fd >= 0)
        close(x.listen_fd);
    free(x.served);
    free(x.peer);
    free(x.conn);
    free(x.got);
    free(all);
    return st;
}
