/* Two hosts on one kernel: the ranks of a fork group moved into two sets of
 * network, UTS and mount namespaces (as two containers of one machine),
 * joined by a veth pair. Every layer must see two hosts (hal/host_id.h):
 * - one rank per host, one node over both: engram_group_single_host says
 *   0, the fd share hands no fd across, an explicit transport=loopback is
 *   refused at context create naming the rank and the namespace, and
 *   mode=hybrid is refused naming the node that spans the hosts;
 * - one rank per host and per node: transport=auto passes loopback over
 *   and runs on ucx, rows checked, direct and hybrid;
 * - two ranks per host and per node: the same, hybrid's node spans mapped
 *   within each host.
 * The ucx runs go once with UCX's own choice of transports and once over the
 * veth alone (UCX_TLS=tcp,self), as between containers sharing no /dev/shm.
 * Needs root (CAP_SYS_ADMIN for unshare, CAP_NET_ADMIN for the veth); where
 * unshare is refused the test says why and passes without running, and
 * where `ip` or the veth cannot be had only the ucx runs are skipped.
 * Usage: engram_two_hosts_test ucx|no-ucx (whether this build has ucx). */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <unistd.h>

#include "engram/engram.h"
#include "engram/plugin/segment.h"
#include "tests/check.h"
#include "tests/engram_harness.h"

enum { MAX_RANKS = 4, EPR = 256, ROW = 64, EPT = 4, TOKENS = 32 };

static bool have_ucx;

static const engram_table_params_t params = {.size = sizeof(engram_table_params_t), .entries_per_rank = EPR,
                                             .row_bytes = ROW, .entries_per_token = EPT, .max_tokens = TOKENS,
                                             .recv = ENGRAM_RECV_HOST};

/* Every rank's int, rank-ordered. */
static void gather_int(engram_group_t *g, int mine, int *all)
{
    int32_t v = mine, got[MAX_RANKS];
    CHECK(engram_group_size(g) <= MAX_RANKS);
    CHECK_OK(engram_group_allgather(g, &v, got, sizeof(v)));
    for (int r = 0; r < engram_group_size(g); r++)
        all[r] = got[r];
}

/* 0 when every rank's step worked, else the first failed rank's error. */
static int first_error(engram_group_t *g, int mine)
{
    int all[MAX_RANKS];
    gather_int(g, mine, all);
    for (int r = 0; r < engram_group_size(g); r++)
        if (all[r] != 0)
            return all[r];
    return 0;
}

static void check_error_has(const char *what)
{
    if (strstr(engram_last_error(), what) == NULL) {
        fprintf(stderr, "error '%s' lacks '%s'\n", engram_last_error(), what);
        CHECK(0);
    }
}

/* Into the namespaces of rank `leader` (pid), one by one; 0 or errno. */
static int join(int pid)
{
    static const char *const kinds[] = {"net", "uts", "mnt"};
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/ns/%s", pid, kinds[i]);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        int err = fd < 0 || setns(fd, 0) != 0 ? errno : 0;
        if (fd >= 0)
            close(fd);
        if (err != 0)
            return err;
    }
    return 0;
}

/* Host h = ranks [h * per_host, (h + 1) * per_host): its first rank makes
 * new network, UTS and mount namespaces (the mount namespace with its own
 * sysfs, so /sys/class/net lists this network namespace's interfaces, where
 * UCX finds its tcp devices), named engram-host-<h>; the others join them.
 * Fork groups talk over socket pairs made before the move, which keep
 * working across namespaces. 0, or the errno of the first rank that
 * could not. */
static int move_out(engram_group_t *g, int per_host)
{
    int rank = engram_group_rank(g), err = 0, pids[MAX_RANKS];
    gather_int(g, (int)getpid(), pids);
    if (rank % per_host == 0) {
        char name[32];
        snprintf(name, sizeof(name), "engram-host-%d", rank / per_host);
        if (unshare(CLONE_NEWNET | CLONE_NEWUTS | CLONE_NEWNS) != 0 ||
            mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
            mount("sysfs", "/sys", "sysfs", 0, NULL) != 0 || sethostname(name, strlen(name)) != 0)
            err = errno;
    }
    if ((err = first_error(g, err)) != 0)
        return err;
    return first_error(g, rank % per_host == 0 ? 0 : join(pids[rank - rank % per_host]));
}

/* A shell command, formatted; whether it exited 0 (its output shows in the
 * test log). */
static bool sh(const char *fmt, ...)
{
    char cmd[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    return system(cmd) == 0;
}

/* Whether engram<h> is operationally up within 5 s: a veth end turns up a
 * moment after both ends are set up, and UCX lists only devices that are
 * up when it starts. */
static bool link_up(int h)
{
    char path[64], state[16];
    snprintf(path, sizeof(path), "/sys/class/net/engram%d/operstate", h);
    for (int ms = 0; ms < 5000; ms += 10) {
        FILE *f = fopen(path, "re");
        bool up = f != NULL && fgets(state, sizeof(state), f) != NULL && strncmp(state, "up", 2) == 0;
        if (f != NULL)
            fclose(f);
        if (up)
            return true;
        usleep(10 * 1000);
    }
    return false;
}

/* A veth pair between the two hosts, 10.231.7.1 (host 0) and .2: rank 0
 * creates it with the peer end in host 1's network namespace (named by its
 * first rank's pid: all ranks share the pid namespace). Both ends go with
 * the namespaces. Whether every step worked on every rank. */
static bool join_by_veth(engram_group_t *g, int per_host)
{
    int rank = engram_group_rank(g), pids[MAX_RANKS], h = rank / per_host;
    bool first = rank % per_host == 0;
    gather_int(g, (int)getpid(), pids);
    if (first_error(g, rank != 0 || sh("ip link add engram0 type veth peer name engram1 netns %d", pids[per_host])
                           ? 0 : 1) != 0)
        return false;
    if (first_error(g, !first || sh("ip link set lo up && ip addr add 10.231.7.%d/24 dev engram%d && "
                                    "ip link set engram%d up", h + 1, h, h) ? 0 : 1) != 0)
        return false;
    return first_error(g, link_up(h) ? 0 : 1) == 0;
}

/* What needs no connectivity: the host map, the fd share and the checks
 * at context create. One rank per host, one node over both. */
static void check_refusals(engram_group_t *g)
{
    CHECK(engram_group_single_host(g) == 0);
    /* an fd of this rank's memory reaches no rank of another host */
    int fd = memfd_create("engram-two-hosts", MFD_CLOEXEC), fds[MAX_RANKS];
    CHECK(fd >= 0);
    CHECK_OK(engram_fd_allgather(g, fd, fds));
    int me = engram_group_rank(g);
    CHECK(fds[me] >= 0 && fds[1 - me] == -1);
    close(fds[me]);
    close(fd);

    harness_t h;
    CHECK_STATUS(harness_open(&h, g, "loopback", false, &params), ENGRAM_ERR_UNSUPPORTED);
    CHECK(h.ctx == NULL);
    check_error_has("transport 'loopback' cannot run here: rank 1 (hostname engram-host-1) is not on rank 0's host "
                    "(hostname engram-host-0): another network namespace of the same kernel");
    /* hybrid maps a node's memory in each of its ranks: refused before any transport is asked */
    CHECK_STATUS(harness_open(&h, g, "auto", true, &params), ENGRAM_ERR_UNSUPPORTED);
    CHECK(h.ctx == NULL);
    check_error_has("mode=hybrid: node 0 (ranks 0..1) spans hosts: rank 1 (hostname engram-host-1) is not on "
                    "rank 0's host (hostname engram-host-0): another network namespace of the same kernel");
}

/* auto passes loopback over (another host) and runs on ucx; rows checked. */
static void check_auto(engram_group_t *g, bool hybrid)
{
    harness_t h;
    CHECK_OK(harness_open(&h, g, "auto", hybrid, &params));
    CHECK(strcmp(engram_context_transport(h.ctx), "ucx") == 0);
    CHECK_OK(harness_write(&h));
    int64_t idx[TOKENS * EPT];
    int n = engram_group_size(g);
    for (int i = 0; i < TOKENS * EPT; i++)
        idx[i] = (int64_t)((i * 37 + engram_group_rank(g) * 11) % (n * EPR));
    bool match = false;
    CHECK_OK(harness_fetch_check(&h, idx, TOKENS, false, &match));
    CHECK(match);
    harness_close(&h);
}

static int refusals_main(engram_group_t *g, void *arg)
{
    (void)arg;
    int err = move_out(g, 1);
    if (err != 0) {
        if (engram_group_rank(g) == 0)
            printf("engram_two_hosts_test: SKIPPED: unshare(CLONE_NEWNET | CLONE_NEWUTS | CLONE_NEWNS) or a sysfs "
                   "mount: %s (needs root)\n", strerror(err));
        return 0;
    }
    check_refusals(g);
    return 0;
}

/* arg: ranks per host (= local_size) */
static int ucx_main(engram_group_t *g, void *arg)
{
    int per_host = *(const int *)arg;
    if (move_out(g, per_host) != 0)
        return 0; /* said by refusals_main */
    CHECK(engram_group_single_host(g) == 0);
    if (!have_ucx) {
        if (engram_group_rank(g) == 0)
            puts("engram_two_hosts_test: ucx runs SKIPPED: this build has no ucx");
        return 0;
    }
    if (!join_by_veth(g, per_host)) {
        if (engram_group_rank(g) == 0)
            puts("engram_two_hosts_test: ucx runs SKIPPED: no veth pair between the namespaces (ip link add ... "
                 "type veth failed; iproute2 or the veth module missing?)");
        return 0;
    }
    for (int tcp = 0; tcp < 2; tcp++) {
        if (tcp)
            CHECK(setenv("UCX_TLS", "tcp,self", 1) == 0);
        check_auto(g, false);
        check_auto(g, true);
    }
    return 0;
}

int main(int argc, char **argv)
{
    CHECK(argc == 2);
    have_ucx = strcmp(argv[1], "ucx") == 0;
    CHECK_OK(engram_group_fork_run(2, 2, refusals_main, NULL, NULL));
    int one = 1, two = 2;
    CHECK_OK(engram_group_fork_run(2, 1, ucx_main, &one, NULL));
    CHECK_OK(engram_group_fork_run(4, 2, ucx_main, &two, NULL));
    puts("engram_two_hosts_test: ok");
    return 0;
}
