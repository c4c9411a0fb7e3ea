/* Security properties, asserted:
 *   - segments are shared only by fd passing: while 4 ranks (loopback) hold
 *     a table, every shared mapping of every rank is a memfd ("/memfd:...")
 *     and no fd of any rank refers to a file under /dev/shm (other tests
 *     running beside this one may use /dev/shm, so its listing is not
 *     compared);
 *   - plugins load only from absolute plugin_path entries: a valid plugin
 *     (argv[1]) copied into the working directory is not found through a
 *     relative entry ("." and "plugins") nor with an empty path, and the
 *     same file is accepted through the absolute directory.
 * Remote offsets are bounds-checked by each transport's get
 * (transports/loopback/loopback_test.c, transports/ucx/ucx_test.c,
 * transports/mlx5dv tests); routing never forms one outside the owner's
 * table (tests/fuzz/routing_fuzz.c). */
#include <dirent.h>
#include <limits.h>
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

/* Fails if any open fd of this process refers to a file under /dev/shm. */
static void no_dev_shm_fds(void)
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
        if (strncmp(target, "/dev/shm/", 9) == 0) {
            fprintf(stderr, "fd %s refers to %s\n", e->d_name, target);
            CHECK(!"no fd refers to /dev/shm");
        }
    }
    closedir(d);
}

/* Counts this process's shared mappings; fails on one that is not a memfd. */
static int memfd_mappings(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    CHECK(f != NULL);
    char line[4096];
    int memfds = 0;
    while (fgets(line, sizeof(line), f)) {
        char perms[8] = "", path[4096] = "";
        if (sscanf(line, "%*s %7s %*s %*s %*s %4095[^\n]", perms, path) < 1)
            continue;
        if (perms[3] != 's')
            continue;
        if (strncmp(path, "/memfd:", 7) != 0) {
            fprintf(stderr, "shared mapping that is not a memfd: %s", line);
            CHECK(!"every shared mapping is a memfd");
        }
        memfds++;
    }
    fclose(f);
    return memfds;
}

static int rank_main(engram_group_t *g, void *arg)
{
    (void)arg;
    harness_t h;
    CHECK_OK(harness_open(&h, g, "loopback", false, &params));
    CHECK_OK(harness_write(&h));
    int64_t idx[16];
    for (int i = 0; i < 16; i++)
        idx[i] = (i * 263) % 4096;
    bool match = false;
    CHECK_OK(harness_fetch_check(&h, idx, 8, false, &match));
    CHECK(match);
    int memfds = memfd_mappings();
    printf("rank %d: %d shared mappings, all memfd\n", engram_group_rank(g), memfds);
    CHECK(memfds >= engram_group_size(g)); /* own shard + the peers' (+ receive slots) */
    no_dev_shm_fds();
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
    plugin = realpath(argv[1], NULL);
    CHECK(plugin != NULL);
    CHECK_OK(engram_group_fork_run(4, 0, rank_main, NULL, NULL));
    check_plugin_paths(plugin);
    free(plugin);
    puts("engram_security_test: ok");
    return 0;
}
