/* The launcher's relay: each child sends its contribution, and once every
 * child has, each gets the rank-ordered concatenation back, sent straight
 * from the received contributions (never assembled into one copy). Relaying
 * through the parent keeps one place that sees every rank, so a rank that
 * dies, or calls the wrong collective, is named to all the others at once. */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engram/plugin/deadline.h"
#include "hal/group_fork_wire.h"
#include "hal/log.h"

/* How often a child's exit is looked for when no socket is active: a child
 * may leave its socket open in a grandchild, so EOF alone is not enough. */
#define RELAY_REAP_INTERVAL_MS 10
/* How long survivors of a failed group get to exit before being killed. */
#define RELAY_KILL_GRACE_MS 30000
/* Contributions from this size on get their own huge-page mapping. */
#define RELAY_HUGE_BODY ((size_t)2 << 20)

/* A waiting child has its request in; it may be sent progress notes.
 * A replying one is sent its reply (after any note already on its way). */
typedef enum { KID_REQUEST, KID_WAITING, KID_REPLYING, KID_GONE } kid_phase_t;

typedef struct kid {
    fork_child_t *c;
    kid_phase_t phase;
    fork_request_t req;
    void *body; /* its contribution to the round being gathered */
    size_t in_done;
    const struct iovec *out; /* what is being sent to the child, NULL if nothing */
    int out_cnt;
    size_t out_len, out_done;
    int64_t told_ms; /* when it started waiting or was last sent a note */
} kid_t;

typedef struct relay {
    kid_t *kids;
    int n;
    /* The last completed round: the contributions it is sent from (freed
     * once every child has its reply), and the reply as header + one piece
     * per rank (n + 1 pieces). */
    void **bodies;
    size_t round_bytes; /* of each of them */
    int replying;       /* children still being sent it */
    fork_reply_t reply_head;
    struct iovec *reply;
    int64_t intake_ms; /* when payload bytes last reached the launcher */
    fork_reply_t note;
    struct iovec note_iov;
    int failed;
    char failure[sizeof(fork_reply_t) + FORK_REASON_MAX];
    struct iovec failure_iov;
    int64_t kill_deadline;
    int killed;
} relay_t;

/* A buffer for a contribution of `bytes` (> 0). A large one is mapped on
 * its own, asking for huge pages and filled in up front: in a VM a fault
 * per 4 KiB page costs far more than copying into it. Both hints are best
 * effort; without them the socket copy just faults the pages in. */
static void *body_alloc(size_t bytes)
{
    if (bytes < RELAY_HUGE_BODY)
        return malloc(bytes);
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    madvise(p, bytes, MADV_HUGEPAGE);
    madvise(p, bytes, MADV_POPULATE_WRITE);
    return p;
}

static void body_free(void *p, size_t bytes)
{
    if (bytes < RELAY_HUGE_BODY)
        free(p);
    else if (p != NULL)
        munmap(p, bytes);
}

static void kid_close(kid_t *k)
{
    if (k->c->fd >= 0)
        close(k->c->fd);
    k->c->fd = -1;
    k->phase = KID_GONE;
    k->out = NULL;
    body_free(k->body, (size_t)k->req.bytes);
    k->body = NULL;
}

static void describe_exit(const kid_t *k, char *buf, size_t len)
{
    int code = k->c->exit_code;
    if (code < 0)
        snprintf(buf, len, "closed its connection: it exited, timed out or destroyed its group");
    else if (code >= 128)
        snprintf(buf, len, "was killed by signal %d", code - 128);
    else
        snprintf(buf, len, "exited with code %d", code);
}

static void kid_send(kid_t *k, const struct iovec *out, int cnt)
{
    k->out = out;
    k->out_cnt = cnt;
    k->out_len = 0;
    for (int i = 0; i < cnt; i++)
        k->out_len += out[i].iov_len;
    k->out_done = 0;
}

static void relay_fail(relay_t *r, engram_status_t status, int culprit, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* From now on every child that is still connected is sent the reason (after
 * finishing a reply it is in the middle of), then end-of-stream; whatever
 * the children send is drained and dropped. */
static void relay_fail(relay_t *r, engram_status_t status, int culprit, const char *fmt, ...)
{
    if (r->failed)
        return;
    r->failed = 1;
    fork_reply_t head = {.status = status, .culprit = culprit};
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(r->failure + sizeof(head), FORK_REASON_MAX, fmt, ap);
    va_end(ap);
    head.bytes = len < 0 ? 0 : len >= FORK_REASON_MAX ? FORK_REASON_MAX - 1 : (uint64_t)len;
    memcpy(r->failure, &head, sizeof(head));
    r->failure_iov = (struct iovec){r->failure, sizeof(head) + (size_t)head.bytes};
    ENGRAM_DEBUG("fork launcher: group failed: %s", r->failure + sizeof(head));
    r->kill_deadline = engram_now_ms() + RELAY_KILL_GRACE_MS;
    for (int i = 0; i < r->n; i++) {
        kid_t *k = &r->kids[i];
        body_free(k->body, (size_t)k->req.bytes);
        k->body = NULL;
        if (k->phase != KID_GONE && k->out == NULL)
            kid_send(k, &r->failure_iov, 1);
    }
}

static void relay_reap(relay_t *r)
{
    for (int i = 0; i < r->n; i++) {
        kid_t *k = &r->kids[i];
        int ws;
        if (k->c->exit_code >= 0 || waitpid(k->c->pid, &ws, WNOHANG) != k->c->pid)
            continue;
        k->c->exit_code = WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : WEXITSTATUS(ws);
        kid_close(k);
    }
}

static int relay_live(const relay_t *r)
{
    int live = 0;
    for (int i = 0; i < r->n; i++)
        live += r->kids[i].c->exit_code < 0;
    return live;
}

static void relay_kill_stragglers(relay_t *r)
{
    if (!r->failed || r->killed || engram_now_ms() < r->kill_deadline)
        return;
    r->killed = 1;
    for (int i = 0; i < r->n; i++) {
        if (r->kids[i].c->exit_code < 0) {
            ENGRAM_WARN("fork launcher: rank %d did not exit within %d ms of the group failing; killing it", i,
                        RELAY_KILL_GRACE_MS);
            kill(r->kids[i].c->pid, SIGKILL);
        }
    }
}

/* A request header arrived: check it and make room for its payload. */
static void kid_request_header(relay_t *r, kid_t *k, int rank)
{
    const fork_request_t *q = &k->req;
    if ((q->op != FORK_OP_ALLGATHER && q->op != FORK_OP_BARRIER) || q->rank != rank ||
        (q->op == FORK_OP_BARRIER && q->bytes != 0) || q->timeout_ms == 0 || q->timeout_ms > INT_MAX) {
        relay_fail(r, ENGRAM_ERR_IO, rank,
                   "rank %d sent a malformed request (op %u, rank %d, %llu bytes, timeout %llu ms)", rank,
                   (unsigned)q->op, (int)q->rank, (unsigned long long)q->bytes,
                   (unsigned long long)q->timeout_ms);
        return;
    }
    if (q->bytes > SIZE_MAX / (size_t)r->n - sizeof(fork_reply_t)) {
        relay_fail(r, ENGRAM_ERR_OVERFLOW, rank, "rank %d's %s of %llu bytes x %d ranks is too large", rank,
                   fork_op_name(q->op), (unsigned long long)q->bytes, r->n);
        return;
    }
    if (q->bytes > 0 && (k->body = body_alloc((size_t)q->bytes)) == NULL)
        relay_fail(r, ENGRAM_ERR_NOMEM, rank, "the launcher has no memory to relay rank %d's %llu bytes", rank,
                   (unsigned long long)q->bytes);
}

static void kid_readable(relay_t *r, int rank)
{
    kid_t *k = &r->kids[rank];
    engram_status_t st;
    if (r->failed || k->phase != KID_REQUEST) {
        char scratch[4096];
        size_t got = 0;
        st = fork_recv_some(k->c->fd, NULL, 0, scratch, sizeof(scratch), &got);
        if (st == ENGRAM_OK && got > 0 && !r->failed)
            relay_fail(r, ENGRAM_ERR_IO, rank, "rank %d sent data while waiting for a reply", rank);
    } else {
        size_t head = sizeof(k->req);
        st = ENGRAM_OK;
        if (k->in_done < head) {
            st = fork_recv_some(k->c->fd, &k->req, head, NULL, 0, &k->in_done);
            if (st == ENGRAM_OK && k->in_done == head) {
                kid_request_header(r, k, rank);
                if (r->failed)
                    return;
            }
        }
        size_t before = k->in_done;
        if (st == ENGRAM_OK && k->in_done >= head)
            st = fork_recv_some(k->c->fd, &k->req, head, k->body, (size_t)k->req.bytes, &k->in_done);
        if (k->in_done > before)
            r->intake_ms = engram_now_ms();
        if (st == ENGRAM_OK && k->in_done == head + k->req.bytes) {
            k->phase = KID_WAITING;
            k->told_ms = engram_now_ms();
        }
    }
    if (st != ENGRAM_OK)
        kid_close(k);
}

static void relay_release_round(relay_t *r)
{
    for (int i = 0; i < r->n; i++) {
        body_free(r->bodies[i], r->round_bytes);
        r->bodies[i] = NULL;
    }
}

static void kid_writable(relay_t *r, kid_t *k)
{
    if (fork_send_iov(k->c->fd, k->out, k->out_cnt, &k->out_done) != ENGRAM_OK) {
        kid_close(k);
        return;
    }
    if (k->out_done < k->out_len)
        return;
    const struct iovec *sent = k->out;
    k->out = NULL;
    if (r->failed) {
        if (sent != &r->failure_iov)
            kid_send(k, &r->failure_iov, 1);
        else
            shutdown(k->c->fd, SHUT_WR);
    } else if (sent == &r->note_iov) {
        if (k->phase == KID_REPLYING) /* the round completed while the note was on its way */
            kid_send(k, r->reply, r->n + 1);
    } else {
        k->phase = KID_REQUEST;
        k->in_done = 0;
        if (--r->replying == 0)
            relay_release_round(r);
    }
}

/* A rank waiting for the others only sees its own socket: tell it, well
 * within its timeout, when their payloads are still arriving, so that a
 * large collective that is moving is not taken for a stalled one. */
static void relay_tell_progress(relay_t *r)
{
    int64_t now = engram_now_ms();
    for (int i = 0; i < r->n; i++) {
        kid_t *k = &r->kids[i];
        if (k->phase != KID_WAITING || k->out != NULL || r->intake_ms <= k->told_ms ||
            now - k->told_ms < (int64_t)k->req.timeout_ms / 4)
            continue;
        k->told_ms = now;
        kid_send(k, &r->note_iov, 1);
    }
}

static void relay_complete_round(relay_t *r)
{
    const fork_request_t *q0 = &r->kids[0].req;
    for (int i = 1; i < r->n; i++) {
        const fork_request_t *q = &r->kids[i].req;
        if (q->op != q0->op || q->bytes != q0->bytes) {
            relay_fail(r, ENGRAM_ERR_INVALID, i, "rank %d called %s with %llu bytes while rank 0 called %s with %llu bytes",
                       i, fork_op_name(q->op), (unsigned long long)q->bytes, fork_op_name(q0->op),
                       (unsigned long long)q0->bytes);
            return;
        }
    }
    size_t bytes = (size_t)q0->bytes;
    r->reply_head = (fork_reply_t){.status = ENGRAM_OK, .culprit = -1, .bytes = (uint64_t)bytes * (uint64_t)r->n};
    r->reply[0] = (struct iovec){&r->reply_head, sizeof(r->reply_head)};
    /* Every child has sent this round's request, so each has received all
     * of the previous reply and its contributions are released. */
    for (int i = 0; i < r->n; i++) {
        kid_t *k = &r->kids[i];
        r->bodies[i] = k->body;
        k->body = NULL;
        r->reply[i + 1] = (struct iovec){r->bodies[i], bytes};
    }
    r->round_bytes = bytes;
    r->replying = r->n;
    for (int i = 0; i < r->n; i++) {
        kid_t *k = &r->kids[i];
        k->phase = KID_REPLYING;
        if (k->out == NULL)
            kid_send(k, r->reply, r->n + 1);
    }
}

/* The launcher fails a stalled round a little before the waiting ranks'
 * own clocks run out (each waits timeout_ms without progress), so they
 * learn which ranks never arrived instead of only that they timed out. */
#define RELAY_STALL_SHARE(timeout_ms) ((int64_t)(timeout_ms) - (int64_t)(timeout_ms) / 8)

/* A waiting child has heard of no progress (its arrival, a note, payload
 * reaching the launcher) for most of its timeout: the round fails by
 * timeout, naming the ranks that have not sent their request. */
static void relay_check_stall(relay_t *r)
{
    int64_t now = engram_now_ms();
    int waiting = -1;
    for (int i = 0; i < r->n && waiting < 0; i++) {
        const kid_t *k = &r->kids[i];
        int64_t heard = k->told_ms > r->intake_ms ? k->told_ms : r->intake_ms;
        if (k->phase == KID_WAITING && now - heard >= RELAY_STALL_SHARE(k->req.timeout_ms))
            waiting = i;
    }
    if (waiting < 0)
        return;
    uint64_t timeout = r->kids[waiting].req.timeout_ms;
    char absent[FORK_REASON_MAX / 2] = "";
    size_t used = 0;
    int first = -1;
    for (int i = 0; i < r->n; i++) {
        if (r->kids[i].phase != KID_REQUEST)
            continue;
        first = first < 0 ? i : first;
        int w = snprintf(absent + used, sizeof(absent) - used, "%s%d", used ? ", " : "", i);
        if (w < 0 || (size_t)w >= sizeof(absent) - used) {
            snprintf(absent + used, sizeof(absent) - used, "...");
            break;
        }
        used += (size_t)w;
    }
    relay_fail(r, ENGRAM_ERR_TIMEOUT, first,
               "no answer from rank %s: %s did not reach rank %d's %s within %llu ms", absent,
               strchr(absent, ',') ? "they" : "it", waiting, fork_op_name(r->kids[waiting].req.op),
               (unsigned long long)timeout);
}

/* Either every child is waiting (the round completes), or one has left
 * while another needs it, or the waiting ones have waited too long (the
 * group fails). */
static void relay_advance(relay_t *r)
{
    int gone = -1, waiting = 0, started = -1;
    for (int i = 0; i < r->n; i++) {
        const kid_t *k = &r->kids[i];
        if (k->phase == KID_GONE && gone < 0)
            gone = i;
        waiting += k->phase == KID_WAITING;
        if (started < 0 && (k->phase == KID_WAITING || (k->phase == KID_REQUEST && k->in_done > 0)))
            started = i;
    }
    if (gone >= 0 && started >= 0) {
        char how[96];
        describe_exit(&r->kids[gone], how, sizeof(how));
        relay_fail(r, ENGRAM_ERR_PEER, gone, "rank %d left the group (%s) before rank %d's %s could complete",
                   gone, how, started, fork_op_name(r->kids[started].req.op));
    } else if (waiting == r->n) {
        relay_complete_round(r);
    } else {
        relay_check_stall(r);
    }
}

static void relay_kill_all(fork_child_t *children, int n, const char *why)
{
    ENGRAM_WARN("fork launcher: %s; killing %d ranks", why, n);
    for (int i = 0; i < n; i++)
        if (children[i].exit_code < 0)
            kill(children[i].pid, SIGKILL);
}

void fork_relay_run(fork_child_t *children, int n)
{
    relay_t r = {.n = n, .note = {.status = ENGRAM_INPROGRESS, .culprit = -1}};
    r.note_iov = (struct iovec){&r.note, sizeof(r.note)};
    r.kids = calloc((size_t)n, sizeof(*r.kids));
    r.bodies = calloc((size_t)n, sizeof(*r.bodies));
    r.reply = calloc((size_t)n + 1, sizeof(*r.reply));
    struct pollfd *pfds = calloc((size_t)n, sizeof(*pfds));
    /* Without relay state the children cannot be served; end them rather
     * than leave them waiting on collectives. */
    int ready = r.kids != NULL && r.bodies != NULL && r.reply != NULL && pfds != NULL;
    if (!ready)
        relay_kill_all(children, n, "no memory for relay state");
    for (int i = 0; ready && i < n; i++)
        r.kids[i].c = &children[i];
    while (ready && relay_live(&r) > 0) {
        relay_reap(&r);
        relay_kill_stragglers(&r);
        for (int i = 0; i < n; i++) {
            pfds[i].fd = children[i].fd; /* closed ones (-1) are skipped by poll */
            pfds[i].events = (short)(POLLIN | (r.kids[i].out != NULL ? POLLOUT : 0));
            pfds[i].revents = 0;
        }
        if (poll(pfds, (nfds_t)n, RELAY_REAP_INTERVAL_MS) < 0 && errno != EINTR) {
            relay_kill_all(children, n, "poll failed");
            break;
        }
        for (int i = 0; i < n; i++) {
            if ((pfds[i].revents & POLLOUT) && children[i].fd >= 0)
                kid_writable(&r, &r.kids[i]);
            if ((pfds[i].revents & (POLLIN | POLLHUP | POLLERR)) && children[i].fd >= 0)
                kid_readable(&r, i);
        }
        if (!r.failed)
            relay_advance(&r);
        if (!r.failed)
            relay_tell_progress(&r);
    }
    for (int i = 0; ready && i < n; i++)
        kid_close(&r.kids[i]);
    if (ready)
        relay_release_round(&r);
    for (int i = 0; i < n; i++) {
        int ws;
        if (children[i].exit_code < 0 && waitpid(children[i].pid, &ws, 0) == children[i].pid)
            children[i].exit_code = WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : WEXITSTATUS(ws);
    }
    free(r.reply);
    free(r.bodies);
    free(pfds);
    free(r.kids);
}
