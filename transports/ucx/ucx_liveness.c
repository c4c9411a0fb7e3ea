/* Peer liveness beyond what UCX reports. Shared-memory transports cannot
 * report a peer's failure (UCX refuses UCP_ERR_HANDLING_MODE_PEER for
 * them), and even where UCX can, keepalive takes seconds; a peer on this
 * host (same kernel, same pid namespace) is checked by its pid while a wait
 * is slow. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hal/host_id.h"
#include "hal/log.h"
#include "transports/ucx/ucx_internal.h"

typedef struct identity {
    char boot_id[ENGRAM_BOOT_ID_LEN];
    uint64_t pid_ns;
    int32_t pid;
} identity_t;

engram_status_t engram_ucx_liveness_init(engram_transport_t *t)
{
    identity_t mine = {.pid = (int32_t)getpid()};
    struct stat ns;
    /* Without a boot id or a pid namespace the peers are left unchecked:
     * UCX's own failure reports and the timeouts still bound every wait. */
    bool known = engram_host_boot_id(mine.boot_id) == ENGRAM_OK && stat("/proc/self/ns/pid", &ns) == 0;
    mine.pid_ns = known ? (uint64_t)ns.st_ino : 0;
    identity_t *all = calloc((size_t)t->size, sizeof(*all));
    t->peer_pid = calloc((size_t)t->size, sizeof(*t->peer_pid));
    if (all == NULL || t->peer_pid == NULL) {
        free(all);
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "ucx: out of memory for %d peer identities", t->size);
    }
    engram_status_t st = engram_group_allgather(t->group, &mine, all, sizeof(mine));
    for (int r = 0; st == ENGRAM_OK && r < t->size; r++) {
        if (known && all[r].pid_ns == mine.pid_ns && strcmp(all[r].boot_id, mine.boot_id) == 0)
            t->peer_pid[r] = all[r].pid;
    }
    free(all);
    return st;
}

/* Gone, or a zombie its parent has not reaped yet. */
static bool process_gone(int pid)
{
    char path[64], stat_line[256];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return errno == ENOENT;
    size_t n = fread(stat_line, 1, sizeof(stat_line) - 1, f);
    fclose(f);
    stat_line[n] = '\0';
    /* "pid (comm) S ...": the state follows the last ')'. */
    const char *paren = strrchr(stat_line, ')');
    return paren != NULL && (paren[2] == 'Z' || paren[2] == 'X');
}

bool engram_ucx_check_peer(engram_transport_t *t, int rank)
{
    if (engram_ucx_peer_is_dead(t, rank))
        return true;
    if (t->peer_pid[rank] == 0 || !process_gone(t->peer_pid[rank]))
        return false;
    if (__atomic_exchange_n(&t->peer_dead[rank], 1, __ATOMIC_RELAXED) == 0)
        ENGRAM_WARN("ucx: peer rank %d (pid %d) has exited; its gets and flushes now fail", rank,
                    t->peer_pid[rank]);
    return true;
}

int engram_ucx_failed_peer(engram_transport_t *t)
{
    for (int r = 0; r < t->size; r++) {
        if (engram_ucx_check_peer(t, r))
            return r;
    }
    return -1;
}
