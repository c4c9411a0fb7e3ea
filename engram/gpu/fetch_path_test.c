/* The capability check of the GPU fetch paths (fetch_path.h): each path's
 * word as the header's table says, the refusal's one pattern, which path
 * and which capability it names, and the reasons a table takes uva. */
#include <string.h>

#include "engram/gpu/fetch_path.h"
#include "hal/log.h"
#include "tests/check.h"

static const engram_gpu_path_ops_t uva = {.name = "uva", .how = "uva's rows", .caps = ENGRAM_GPU_UVA_CAPS};
static const engram_gpu_path_ops_t host_gather = {
    .name = "host_gather", .how = "host threads; gpu_path=uva can", .caps = ENGRAM_GPU_HOST_GATHER_CAPS};
static const engram_gpu_path_ops_t launcher = {.name = "launcher", .how = "its kernels",
                                               .caps = ENGRAM_GPU_LAUNCHER_CAPS};
static const engram_gpu_path_ops_t remote = {.name = "remote", .how = "the host transport",
                                             .caps = ENGRAM_GPU_REMOTE_CAPS};

static void check_message(const char *want)
{
    if (strcmp(engram_last_error(), want) != 0) {
        fprintf(stderr, "got  \"%s\"\nwant \"%s\"\n", engram_last_error(), want);
        exit(1);
    }
}

static void test_what_each_path_can(void)
{
    const unsigned table_needs =
        ENGRAM_GPU_CAP_DEVICE_SHARDS | ENGRAM_GPU_CAP_BESIDE_LAUNCHER | ENGRAM_GPU_CAP_NODES;
    CHECK(engram_gpu_path_lacks(&uva, table_needs | ENGRAM_GPU_CAP_CAPTURE | ENGRAM_GPU_CAP_STREAM_ORDER) == 0);
    /* host_gather: in the order of the table's settings, then a call's */
    CHECK(engram_gpu_path_lacks(&host_gather, table_needs) == ENGRAM_GPU_CAP_DEVICE_SHARDS);
    CHECK(engram_gpu_path_lacks(&host_gather, ENGRAM_GPU_CAP_NODES | ENGRAM_GPU_CAP_BESIDE_LAUNCHER) ==
          ENGRAM_GPU_CAP_BESIDE_LAUNCHER);
    CHECK(engram_gpu_path_lacks(&host_gather, ENGRAM_GPU_CAP_NODES) == 0);
    CHECK(engram_gpu_path_lacks(&host_gather, ENGRAM_GPU_CAP_CAPTURE | ENGRAM_GPU_CAP_STREAM_ORDER) ==
          ENGRAM_GPU_CAP_STREAM_ORDER);
    CHECK(engram_gpu_path_lacks(&host_gather, ENGRAM_GPU_CAP_CAPTURE) == 0);
    CHECK(engram_gpu_path_lacks(&host_gather, ENGRAM_GPU_CAP_ORDER_AT_CALL) == 0);
    CHECK(engram_gpu_path_lacks(&launcher, ENGRAM_GPU_CAP_CAPTURE | ENGRAM_GPU_CAP_STREAM_ORDER) == 0);
    CHECK(engram_gpu_path_lacks(&launcher, ENGRAM_GPU_CAP_ORDER_AT_CALL) == ENGRAM_GPU_CAP_ORDER_AT_CALL);
    CHECK(engram_gpu_path_lacks(&remote, ENGRAM_GPU_CAP_STREAM_ORDER) == ENGRAM_GPU_CAP_STREAM_ORDER);
    CHECK(engram_gpu_path_lacks(&remote, 0) == 0);
}

/* A table whose other nodes' rows come through the host transport. */
static const engram_gpu_path_t *two_paths_remote_hg(void)
{
    static engram_gpu_path_t two[ENGRAM_GPU_NUM_PATHS] = {[ENGRAM_GPU_PATH_OTHER] = {.ops = &remote},
                                                          [ENGRAM_GPU_PATH_LOCAL] = {.ops = &host_gather}};
    return two;
}

static void test_one_pattern(void)
{
    /* a uva table with no other-nodes path: nothing refused */
    engram_gpu_path_t one[ENGRAM_GPU_NUM_PATHS] = {[ENGRAM_GPU_PATH_LOCAL] = {.ops = &uva}};
    CHECK_OK(engram_gpu_path_require(one, ENGRAM_GPU_NUM_PATHS, ENGRAM_GPU_CAP_CAPTURE, "call", "asked", NULL));
    engram_gpu_path_t hg[1] = {{.ops = &host_gather}};
    CHECK_OK(engram_gpu_path_require(hg, 1, ENGRAM_GPU_CAP_CAPTURE, "engram_fetch_on_stream",
                                     "a fetch on a stream capturing a CUDA graph", NULL));
    CHECK_STATUS(engram_gpu_path_require(two_paths_remote_hg(), ENGRAM_GPU_NUM_PATHS, ENGRAM_GPU_CAP_CAPTURE,
                                         "engram_fetch_on_stream", "a fetch on a stream capturing a CUDA graph",
                                         NULL),
                 ENGRAM_ERR_UNSUPPORTED);
    check_message("engram_fetch_on_stream: a fetch on a stream capturing a CUDA graph: the table's remote "
                  "path cannot be captured in a CUDA graph (the host transport)");
    CHECK_STATUS(engram_gpu_path_require(hg, 1, ENGRAM_GPU_CAP_NODES | ENGRAM_GPU_CAP_DEVICE_SHARDS, "create",
                                         "gpu_path=host_gather with gpu_table=device", NULL),
                 ENGRAM_ERR_UNSUPPORTED);
    check_message("create: gpu_path=host_gather with gpu_table=device: the table's host_gather path cannot read "
                  "shards in GPU memory (host threads; gpu_path=uva can)");
    /* the first path (in issue order) that lacks it is named; advice last */
    engram_gpu_path_t two[ENGRAM_GPU_NUM_PATHS] = {[ENGRAM_GPU_PATH_OTHER] = {.ops = &remote},
                                                   [ENGRAM_GPU_PATH_LOCAL] = {.ops = &uva}};
    CHECK_STATUS(engram_gpu_path_require(two, ENGRAM_GPU_NUM_PATHS, ENGRAM_GPU_CAP_STREAM_ORDER, "release",
                                         "a fetch ended in stream order", "use engram_fetch_release"),
                 ENGRAM_ERR_UNSUPPORTED);
    check_message("release: a fetch ended in stream order: the table's remote path cannot end a fetch in stream "
                  "order (the host transport); use engram_fetch_release");
    two[ENGRAM_GPU_PATH_OTHER].ops = &launcher;
    CHECK_OK(engram_gpu_path_require(two, ENGRAM_GPU_NUM_PATHS, ENGRAM_GPU_CAP_STREAM_ORDER | ENGRAM_GPU_CAP_CAPTURE,
                                     "release", "asked", "advice"));
    two[ENGRAM_GPU_PATH_LOCAL].ops = &host_gather;
    /* a local path's capability is asked of the local path alone */
    const engram_gpu_path_t *local = &two[ENGRAM_GPU_PATH_LOCAL];
    CHECK_STATUS(engram_gpu_path_require(local, 1, ENGRAM_GPU_CAP_BESIDE_LAUNCHER, "c", "a", NULL),
                 ENGRAM_ERR_UNSUPPORTED);
    check_message("c: a: the table's host_gather path cannot run beside a GPU launcher (host threads; gpu_path=uva "
                  "can)");
}

/* engram_gpu_path_report's reasons for uva, as a table's settings say them. */
static void test_reasons(void)
{
    CHECK(strcmp(engram_gpu_cap_reason(ENGRAM_GPU_CAP_DEVICE_SHARDS),
                 "the table is in GPU memory (gpu_table=device)") == 0);
    CHECK(strcmp(engram_gpu_cap_reason(ENGRAM_GPU_CAP_BESIDE_LAUNCHER),
                 "the transport fetches through the GPU (a fetch launcher), which reads the UVA layout") == 0);
    CHECK(strcmp(engram_gpu_cap_reason(ENGRAM_GPU_CAP_NODES),
                 "the group spans nodes, and rows of other nodes are placed by the UVA layout's scatter") == 0);
    CHECK(strcmp(engram_gpu_cap_reason(0), "no capability is missing") == 0);
}

int main(void)
{
    test_what_each_path_can();
    test_one_pattern();
    test_reasons();
    printf("fetch_path_test: ok\n");
    return 0;
}
