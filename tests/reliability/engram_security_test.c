/* Security properties, asserted:
 *   - segments are shared only by fd passing: while 4 ranks (loopback) hold
 *     a table, every shared mapping of every rank is a memfd ("/memfd:...")
 *     and no fd of any rank refers to a file under /dev/shm (other tests
 *     running beside this one may use /dev/shm, so its listing is not
 *     compared);
 *   - with argument "ucx" (UCX_TLS=posix or sysv set by the target), where
 *     UCX provides the shards' memory (alloc_symmetric): a shared mapping
 *     is a memfd, a POSIX shm file UCX unlinked at creation (peers open it
 *     through /proc/<owner>/fd, which needs ptrace access to the owner) or
 *     a SysV segment with key IPC_PRIVATE already marked for destruction
 *     and no access for others; every fd under /dev/shm is unlinked (no
 *     name is left to open) and not accessible to others; the peers'
 *     shards are mapped read-only (at least ranks - 1 read-only UCX
 *     mappings per rank);
 *   - plugins load only from absolute plugin_path entries: a valid plugin
 *     (argv[1] without "ucx") copied into the working directory is not
 *     found through a relative entry ("." and "plugins") nor with an empty
 *     path, and the same file is accepted through the absolute directory.
 * Remote offsets are bounds-checked by each transport's get
 * (transports/loopback/loopback_test.c, transports/ucx/ucx_test.c,
 * transports/mlx5dv tests); routing never forms one outside the owner's
 * table (tests/fuzz/routing_fuzz.c). */
#include <dirent.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hal/registry.h"
#include "tests/check.h"
#include "tests/engram_harness.h"

static const engram_table_params_t params = {.size = sizeof(engram_table_params_t), .entries_per_rank = 1024,
                                             .row_bytes = 64, .entries_per_token = 2, .max_tokens = 8,
                                             .scale_packs = 1, .recv = ENGRAM_RECV_HOST};

#define DELETED " (deleted)"

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Fails if an open fd of this process refers to a file under /dev/shm,
 * unless ucx allows UCX's own unlinked shm files, private to the owner. */
static void check_dev_shm_fds(bool ucx)
{
    DIR *d = opendir("/proc/self/fd");
    CHECK(d != NULL);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char link[PATH_MAX], target[PATH_MAX];
        snprintf(link, sizeof(link), "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(link, target, sizeof(target) - 1);
        if (n <= 0)
            continue;
        target[n] = '\0';
        if (strncmp(target, "/dev/shm/", 9) != 0)
            continue;
        struct stat st;
        bool allowed = ucx && ends_with(target, DELETED) && stat(link, &st) == 0 && (st.st_mode & 0007) == 0;
        if (!allowed) {
            fprintf(stderr, "fd %s refers to %s\n", e->d_name, target);
            CHECK(!"no fd refers to a named or world-accessible file under /dev/shm");
        }
    }
    closedir(d);
}

/* A SysV segment that no other process can find or open: key
 * IPC_PRIVATE, marked for destruction (SHM_DEST), no access for others. */
static bool sysv_private(unsigned long shmid)
{
    FILE *f = fopen("/proc/sysvipc/shm", "r");
    CHECK(f != NULL);
    char line[512];
    bool found = false, ok = false;
    while (!found && fgets(line, sizeof(line), f)) {
        long key;
        unsigned long id;
        unsigned mode;
        if (sscanf(line, "%ld %lu %o", &key, &id, &mode) != 3 || id != shmid)
            continue;
        found = true;
        ok = key == 0 && (mode & 01000) && (mode & 0007) == 0;
        if (!ok)
            fprintf(stderr, "SysV segment %lu: key %ld mode %o\n", id, key, mode);
    }
    fclose(f);
    return ok;
}

typedef struct mapping_counts {
    int memfds;
    int ucx_read_only; /* UCX's shared memory mapped without write access */
} mapping_counts_t;

/* Counts this process's shared mappings; fails on one that is not a
 * memfd (ucx: nor UCX's unlinked POSIX shm nor a private SysV segment). */
static mapping_counts_t shared_mappings(bool ucx)
{
    FILE *f = fopen("/proc/self/maps", "r");
    CHECK(f != NULL);
    char line[4096];
    mapping_counts_t n = {0, 0};
    while (fgets(line, sizeof(line), f)) {
        char perms[8] = "", path[4096] = "";
        unsigned long inode = 0;
        if (sscanf(line, "%*s %7s %*s %*s %lu %4095[^\n]", perms, &inode, path) < 2)
            continue;
        if (perms[3] != 's')
            continue;
        if (strncmp(path, "/memfd:", 7) == 0) {
            n.memfds++;
            continue;
        }
        bool posix_shm = strncmp(path, "/dev/shm/ucx_shm_posix_", 23) == 0 && ends_with(path, DELETED);
        bool sysv = strcmp(path, "/SYSV00000000" DELETED) == 0 && sysv_private(inode);
        if (!ucx || !(posix_shm || sysv)) {
            fprintf(stderr, "shared mapping that is not allowed: %s", line);
            CHECK(!"every shared mapping is a memfd (ucx: or UCX's private shared memory)");
        }
        n.ucx_read_only += perms[1] != 'w';
    }
    fclose(f);
    return n;
}

static int rank_main(engram_group_t *g, void *arg)
{
    bool ucx = arg != NULL;
    harness_t h;
    CHECK_OK(harness_open(&h, g, ucx ? "ucx" : "loopback", false, &params));
    CHECK_OK(harness_write(&h));
    int64_t idx[16];
    for (int i = 0; i < 16; i++)
        idx[i] = (i * 263) % 4096;
    bool match = false;
    CHECK_OK(harness_fetch_check(&h, idx, 8, false, &match));
    CHECK(match);
    mapping_counts_t n = shared_mappings(ucx);
    int ranks = engram_group_size(g);
    printf("rank %d: %d memfd mappings, %d read-only UCX mappings; no other shared memory\n", engram_group_rank(g),
           n.memfds, n.ucx_read_only);
    if (ucx)
        CHECK(n.ucx_read_only >= ranks - 1); /* the peers' shards */
    else
        CHECK(n.memfds >= ranks); /* own shard + the peers' (+ receive slots) */
    check_dev_shm_fds(ucx);
    CHECK_OK(engram_group_barrier(g)); /* every rank checked while all tables exist */
    harness_close(&h);
    fflush(stdout);
    return 0;
}

static void copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    CHECK(in != NULL && out != NULL);
    char buf[65536];
    for (size_t n; (n = fread(buf, 1, sizeof(buf), in)) > 0;)
        CHECK(fwrite(buf, 1, n, out) == n);
    fclose(in);
    CHECK(fclose(out) == 0);
}

static void check_plugin_paths(const char *plugin)
{
    char dir[PATH_MAX], file[PATH_MAX + 64], sub[PATH_MAX + 16];
    const char *tmp = getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp";
    snprintf(dir, sizeof(dir), "%s/plugin_cwd.XXXXXX", tmp);
    CHECK(mkdtemp(dir) != NULL);
    snprintf(file, sizeof(file), "%s/libengram_transport_testplug.so", dir);
    copy_file(plugin, file);
    snprintf(sub, sizeof(sub), "%s/plugins", dir);
    CHECK(mkdir(sub, 0700) == 0);
    snprintf(file, sizeof(file), "%s/libengram_transport_testplug.so", sub);
    copy_file(plugin, file);
    char cwd[PATH_MAX];
    CHECK(getcwd(cwd, sizeof(cwd)) != NULL);
    CHECK(chdir(dir) == 0);
    const engram_transport_ops_t *ops = NULL;
    CHECK_STATUS(engram_registry_load_plugin("testplug", ".", &ops), ENGRAM_ERR_INVALID);
    CHECK(strstr(engram_last_error(), "relative") != NULL);
    CHECK_STATUS(engram_registry_load_plugin("testplug", "plugins", &ops), ENGRAM_ERR_INVALID);
    CHECK_STATUS(engram_registry_load_plugin("testplug", "/nonexistent:plugins", &ops), ENGRAM_ERR_INVALID);
    CHECK_STATUS(engram_registry_load_plugin("testplug", "", &ops), ENGRAM_ERR_NOT_FOUND);
    CHECK_STATUS(engram_registry_load_plugin("testplug", "/nonexistent:", &ops), ENGRAM_ERR_INVALID);
    CHECK(ops == NULL);
    /* the same file through the absolute directory is a valid plugin */
    CHECK_OK(engram_registry_load_plugin("testplug", dir, &ops));
    CHECK(ops != NULL && strcmp(ops->name, "testplug") == 0);
    CHECK(chdir(cwd) == 0);
    puts("plugins: relative and empty plugin_path entries never reach the working directory");
}

/* Global: the forked ranks exit without returning here, and valgrind must
 * still see it reachable. */
static char *plugin;

int main(int argc, char **argv)
{
    CHECK(argc == 2);
    if (strcmp(argv[1], "ucx") == 0) {
        CHECK(getenv("UCX_TLS") != NULL);
        CHECK_OK(engram_group_fork_run(4, 0, rank_main, (void *)"ucx", NULL));
        puts("engram_security_test (ucx): ok");
        return 0;
    }
    plugin = realpath(argv[1], NULL);
    CHECK(plugin != NULL);
    CHECK_OK(engram_group_fork_run(4, 0, rank_main, NULL, NULL));
    check_plugin_paths(plugin);
    free(plugin);
    puts("engram_security_test: ok");
    return 0;
}
