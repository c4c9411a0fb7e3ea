/* Drives the plugin the way NCCL's GIN proxy does, with 2 processes on one
 * host (forked; rank i on GPU i when there are two GPUs, both on GPU 0
 * otherwise): init, listen, connect, regMrSym of cuMem device memory (a
 * window inside two physical allocations), HOST_NUMA memory, device memory
 * without a shareable handle (like NCCL's signal buffers) and malloc'd host
 * memory; iget and iput in both directions at offsets that cross the
 * allocations' boundary, iputSignal (ADD, INC, signal only, to each kind of
 * signal memory, to itself), iflush, on contexts 0 and 17 of 18 (more than
 * the plugin's 16 copy streams: 17 shares one), rejected bad arguments; then every
 * buffer is compared bit for bit with what it must hold, and everything is
 * released. Needs a GPU (tagged gpu).
 * Usage: rma_plugin_test [path/to/libnccl-rma-engram.so]
 * (default: the plugin next to this executable). */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "transports/nccl_gin/rma_plugin/rma_abi.h"

#define CHECK(cond)                                                                            \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "rank %d: %s:%d: CHECK failed: %s\n", me, __FILE__, __LINE__, #cond); \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)
#define CUDA_OK(expr) CHECK((expr) == cudaSuccess)
#define CU_OK(expr) CHECK((expr) == CUDA_SUCCESS)
#define RMA_OK(expr) CHECK((expr) == RMA_SUCCESS)

static int me = -1; /* this process's rank */
static int link_fd = -1; /* socketpair to the other rank */
static const rma_plugin_v14_t *P;

/* ---- driver entry points for the test's own cuMem allocations ---- */
static struct {
    __typeof__(&cuMemCreate) create;
    __typeof__(&cuMemAddressReserve) reserve;
    __typeof__(&cuMemMap) map;
    __typeof__(&cuMemSetAccess) access;
    __typeof__(&cuMemGetAllocationGranularity) granularity;
    __typeof__(&cuDeviceGetAttribute) attribute;
} cu;

static void *entry(const char *name)
{
    void *f = NULL;
    enum cudaDriverEntryPointQueryResult q;
    CHECK(cudaGetDriverEntryPointByVersion(name, &f, 12000, cudaEnableDefault, &q) == cudaSuccess &&
          q == cudaDriverEntryPointSuccess);
    return f;
}

static void driver_load(void)
{
    cu.create = entry("cuMemCreate");
    cu.reserve = entry("cuMemAddressReserve");
    cu.map = entry("cuMemMap");
    cu.access = entry("cuMemSetAccess");
    cu.granularity = entry("cuMemGetAllocationGranularity");
    cu.attribute = entry("cuDeviceGetAttribute");
}

/* `nalloc` physical allocations of `each` bytes, mapped back to back in one
 * range readable and writable by `dev`. Released at exit. */
static char *cumem(CUmemLocationType where, int dev, CUmemAllocationHandleType shareable, int nalloc, size_t each)
{
    CUmemAllocationProp p = {.type = CU_MEM_ALLOCATION_TYPE_PINNED, .requestedHandleTypes = shareable};
    p.location.type = where;
    p.location.id = dev;
    if (where == CU_MEM_LOCATION_TYPE_HOST_NUMA) {
        int numa = -1;
        CU_OK(cu.attribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev));
        p.location.id = numa < 0 ? 0 : numa;
    }
    CUdeviceptr va;
    CU_OK(cu.reserve(&va, each * (size_t)nalloc, 0, 0, 0));
    for (int i = 0; i < nalloc; i++) {
        CUmemGenericAllocationHandle h;
        CU_OK(cu.create(&h, each, &p, 0));
        CU_OK(cu.map(va + each * (size_t)i, each, 0, h, 0));
    }
    CUmemAccessDesc a = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev},
                         .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CU_OK(cu.access(va, each * (size_t)nalloc, &a, 1));
    if (where == CU_MEM_LOCATION_TYPE_HOST_NUMA) {
        /* the CPU too, where the driver grants it (as engram's segments) */
        a.location = p.location;
        (void)cu.access(va, each * (size_t)nalloc, &a, 1);
    }
    return (char *)(uintptr_t)va;
}

static size_t granularity(CUmemLocationType where, int dev)
{
    CUmemAllocationProp p = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                             .requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR};
    p.location.type = where;
    p.location.id = where == CU_MEM_LOCATION_TYPE_DEVICE ? dev : 0;
    size_t g = 0;
    CU_OK(cu.granularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    return g;
}

/* ---- the link to the other rank ---- */
static void link_exchange(const void *mine, void *theirs, size_t len)
{
    CHECK(write(link_fd, mine, len) == (ssize_t)len);
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(link_fd, (char *)theirs + got, len - got);
        CHECK(n > 0);
        got += (size_t)n;
    }
}

static void barrier(void)
{
    char a = 'b', b = 0;
    link_exchange(&a, &b, 1);
    CHECK(b == 'b');
}

static void test_log(int level, unsigned long flags, const char *file, int line, const char *fmt, ...)
{
    (void)flags;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "rank %d [%s %s:%d] ", me, level == RMA_LOG_WARN ? "WARN" : "INFO", file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---- the data: what each byte of each buffer must hold ---- */
static uint8_t pat(int rank, char tag, size_t i)
{
    return (uint8_t)(i * 131u + (size_t)rank * 71u + (size_t)tag * 29u + (i >> 9));
}

static void fill(uint8_t *h, size_t n, int rank, char tag)
{
    for (size_t i = 0; i < n; i++)
        h[i] = pat(rank, tag, i);
}

static void expect_zone(uint8_t *want, size_t at, size_t len, int rank, char tag, size_t from)
{
    for (size_t k = 0; k < len; k++)
        want[at + k] = pat(rank, tag, from + k);
}

static void compare(const char *what, const uint8_t *got, const uint8_t *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i]) {
            fprintf(stderr, "rank %d: %s differs first at byte %zu: got 0x%02x, want 0x%02x\n", me, what, i, got[i],
                    want[i]);
            exit(1);
        }
}

static void wait_all(void *comm, void **reqs, int n)
{
    time_t deadline = time(NULL) + 30;
    for (int i = 0; i < n; i++) {
        int done = 0;
        while (!done) {
            RMA_OK(P->test(comm, reqs[i], &done));
            CHECK(time(NULL) < deadline);
        }
    }
}

/* ---- one rank ---- */
typedef struct layout {
    size_t d_size, h_size, s_size, m_size;
    size_t gs_off, gs_len; /* in D, read by the peer: crosses the allocations' boundary */
    size_t pd_off, pd_len; /* in D, written by the peer's iput from its M */
    size_t ld_off, ld_len; /* in D, this rank's iget of the peer's H lands here */
    size_t ps_off, ps_len; /* in D, source of this rank's iputSignal */
    size_t gd_off;         /* in H, this rank's iget of the peer's D lands here (gs_len) */
    size_t hs_off, hs_len; /* in H, read by the peer */
    size_t hp_off;         /* in H, written by the peer's iputSignal (ps_len) */
    size_t m_sig;          /* in M, a signal word */
    size_t m_self, m_self_len; /* in M, this rank's iget of its own H lands here */
} layout_t;

static layout_t plan(size_t g_dev, size_t g_host)
{
    layout_t L;
    L.d_size = 2 * g_dev - 8192; /* registered from 4096 into two allocations of g_dev */
    L.h_size = g_host;
    L.s_size = 4096;
    L.m_size = 65536;
    L.gs_off = g_dev - 4096 - 50000;
    L.gs_len = 150000;
    L.pd_off = 100;
    L.pd_len = 60000;
    L.ld_off = g_dev + g_dev / 2;
    L.ld_len = 100000;
    L.ps_off = L.d_size - 80000;
    L.ps_len = 77777;
    L.gd_off = 1234;
    L.hs_off = 500000;
    L.hs_len = 100000;
    L.hp_off = 800003;
    L.m_sig = 60000;
    L.m_self = 61000;
    L.m_self_len = 1000;
    return L;
}

static void run_rank(const char *plugin, int ndev)
{
    int dev = ndev >= 2 ? me : 0, peer = 1 - me;
    CUDA_OK(cudaSetDevice(dev));
    CUDA_OK(cudaFree(NULL));
    driver_load();
    void *lib = dlopen(plugin, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "rank %d: dlopen %s: %s\n", me, plugin, dlerror());
        exit(1);
    }
    P = dlsym(lib, "ncclRmaPlugin_v14");
    CHECK(P != NULL && P->name != NULL);

    void *ctx = NULL;
    RMA_OK(P->init(&ctx, 0x1234, test_log));
    int n = 0;
    RMA_OK(P->devices(&n));
    CHECK(n == 1);
    rma_net_props_t props;
    RMA_OK(P->get_properties(0, &props));
    CHECK(props.net_device_type == RMA_NET_DEVICE_GIN_PROXY && (props.ptr_support & RMA_PTR_CUDA) &&
          (props.ptr_support & RMA_PTR_HOST) && props.max_recvs >= 1 && props.name != NULL);
    CHECK(P->get_properties(1, &props) == RMA_ERR_ARGUMENT);

    /* listen, exchange the handles as NCCL's bootstrap would, connect */
    char handles[2][RMA_HANDLE_BYTES];
    void *listen_comm = NULL, *bogus = NULL;
    CHECK(P->listen(ctx, 1, handles[me], &bogus) == RMA_ERR_ARGUMENT);
    memset(handles, 0, sizeof(handles));
    RMA_OK(P->listen(ctx, 0, handles[me], &listen_comm));
    link_exchange(handles[me], handles[peer], RMA_HANDLE_BYTES);
    void *hp[2] = {handles[0], handles[1]};
    char junk[RMA_HANDLE_BYTES] = {0};
    void *bad_hp[2] = {junk, junk};
    void *comm = NULL;
    CHECK(P->connect(ctx, bad_hp, 2, me, listen_comm, &comm) == RMA_ERR_ARGUMENT);
    RMA_OK(P->connect(ctx, hp, 2, me, listen_comm, &comm));
    RMA_OK(P->close_listen(listen_comm));
    /* more contexts than the plugin's copy streams (16): context CTX_B
     * shares stream 1 with context 1 */
    enum { CONTEXTS = 18, CTX_B = 17 };
    rma_config_t cfg = {.n_contexts = CONTEXTS, .traffic_class = -1, .rank_stride = 1};
    void *rctx = NULL;
    RMA_OK(P->create_context(comm, &cfg, &rctx));

    size_t g_dev = granularity(CU_MEM_LOCATION_TYPE_DEVICE, dev);
    size_t g_host = granularity(CU_MEM_LOCATION_TYPE_HOST_NUMA, dev);
    if (g_host < 1048576)
        g_host = 1048576 + g_host - 1048576 % g_host; /* room for the H zones */
    layout_t L = plan(g_dev, g_host);
    char *d_base = cumem(CU_MEM_LOCATION_TYPE_DEVICE, dev, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 2, g_dev);
    char *D = d_base + 4096;
    char *H = cumem(CU_MEM_LOCATION_TYPE_HOST_NUMA, dev, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 1, L.h_size);
    char *S = cumem(CU_MEM_LOCATION_TYPE_DEVICE, dev, CU_MEM_HANDLE_TYPE_NONE, 1, g_dev);
    uint8_t *M = calloc(1, L.m_size);
    CHECK(M != NULL);

    uint8_t *init_d = malloc(L.d_size), *init_h = malloc(L.h_size);
    CHECK(init_d != NULL && init_h != NULL);
    fill(init_d, L.d_size, me, 'D');
    fill(init_h, L.h_size, me, 'H');
    fill(M, L.pd_len, me, 'M');
    CUDA_OK(cudaMemcpy(D, init_d, L.d_size, cudaMemcpyDefault));
    CUDA_OK(cudaMemcpy(H, init_h, L.h_size, cudaMemcpyDefault));
    CUDA_OK(cudaMemset(S, 0, L.s_size));

    void *mD, *mH, *mS, *mM;
    RMA_OK(P->reg_mr_sym(comm, D, L.d_size, RMA_PTR_CUDA, 0, &mD));
    RMA_OK(P->reg_mr_sym_dmabuf(comm, H, L.h_size, RMA_PTR_HOST, 0, -1, 0, &mH));
    RMA_OK(P->reg_mr_sym(comm, S, L.s_size, RMA_PTR_CUDA, 1, &mS));
    RMA_OK(P->reg_mr_sym(comm, M, L.m_size, RMA_PTR_HOST, 0, &mM));
    barrier();

    /* gets and a plain put, on two contexts */
    void *r[8];
    RMA_OK(P->iget(rctx, 0, L.gs_off, mD, L.gs_len, L.gd_off, mH, (uint32_t)peer, &r[0]));
    RMA_OK(P->iget(rctx, CTX_B, L.hs_off, mH, L.ld_len, L.ld_off, mD, (uint32_t)peer, &r[1]));
    RMA_OK(P->iput(rctx, CTX_B, 0, mM, L.pd_len, L.pd_off, mD, (uint32_t)peer, &r[2]));
    wait_all(comm, r, 3);
    /* puts with signals: ADD 5 after data, INC, signal only ADD 7 (to the
     * peer's unshareable device memory), ADD 3 to the peer's malloc'd
     * memory, ADD 9 to itself; a get from itself; then a flush */
    RMA_OK(P->iput_signal(rctx, 0, L.ps_off, mD, L.ps_len, L.hp_off, mH, (uint32_t)peer, 8u * (uint32_t)me, mS, 5,
                          RMA_SIGNAL_OP_ADD, true, &r[0]));
    RMA_OK(P->iput_signal(rctx, 0, 0, NULL, 0, 0, NULL, (uint32_t)peer, 8u * (uint32_t)me, mS, 1000,
                          RMA_SIGNAL_OP_INC, false, &r[1]));
    RMA_OK(P->iput_signal(rctx, CTX_B, 0, NULL, 0, 0, NULL, (uint32_t)peer, 8u * (uint32_t)me, mS, 7,
                          RMA_SIGNAL_OP_ADD, true, &r[2]));
    RMA_OK(P->iput_signal(rctx, CTX_B, 0, NULL, 0, 0, NULL, (uint32_t)peer, L.m_sig, mM, 3, RMA_SIGNAL_OP_ADD, true,
                          &r[3]));
    RMA_OK(P->iput_signal(rctx, 0, 0, NULL, 0, 0, NULL, (uint32_t)me, 16, mS, 9, RMA_SIGNAL_OP_ADD, true, &r[4]));
    RMA_OK(P->iget(rctx, 0, L.hs_off, mH, L.m_self_len, L.m_self, mM, (uint32_t)me, &r[5]));
    RMA_OK(P->iflush(rctx, 0, mS, (uint32_t)peer, &r[6]));
    wait_all(comm, r, 7);

    /* wait for the peer's signals: they follow all of its data */
    time_t deadline = time(NULL) + 30;
    uint64_t sig[3] = {0, 0, 0};
    for (;;) {
        RMA_OK(P->progress(rctx));
        CUDA_OK(cudaMemcpy(sig, S, sizeof(sig), cudaMemcpyDefault));
        uint64_t m_word = __atomic_load_n((uint64_t *)(void *)(M + L.m_sig), __ATOMIC_SEQ_CST);
        if (sig[peer] == 13 && sig[2] == 9 && m_word == 3)
            break;
        CHECK(sig[peer] <= 13 && sig[2] <= 9 && m_word <= 3);
        if (time(NULL) > deadline) {
            fprintf(stderr, "rank %d: signals %llu %llu, M word %llu\n", me, (unsigned long long)sig[peer],
                    (unsigned long long)sig[2], (unsigned long long)m_word);
            CHECK(!"signals did not arrive");
        }
    }
    CHECK(sig[me] == 0);

    /* every byte, against what it must hold */
    uint8_t *want_d = malloc(L.d_size), *want_h = malloc(L.h_size), *got = malloc(L.d_size > L.h_size ? L.d_size : L.h_size);
    CHECK(want_d != NULL && want_h != NULL && got != NULL);
    memcpy(want_d, init_d, L.d_size);
    memcpy(want_h, init_h, L.h_size);
    expect_zone(want_d, L.pd_off, L.pd_len, peer, 'M', 0);
    expect_zone(want_d, L.ld_off, L.ld_len, peer, 'H', L.hs_off);
    expect_zone(want_h, L.gd_off, L.gs_len, peer, 'D', L.gs_off);
    expect_zone(want_h, L.hp_off, L.ps_len, peer, 'D', L.ps_off);
    CUDA_OK(cudaMemcpy(got, D, L.d_size, cudaMemcpyDefault));
    compare("device window D", got, want_d, L.d_size);
    CUDA_OK(cudaMemcpy(got, H, L.h_size, cudaMemcpyDefault));
    compare("HOST_NUMA window H", got, want_h, L.h_size);
    for (size_t k = 0; k < L.m_self_len; k++)
        CHECK(M[L.m_self + k] == pat(me, 'H', L.hs_off + k));
    barrier();

    /* bad arguments: rejected, nothing issued */
    void *q = NULL;
    CHECK(P->iget(rctx, 0, L.d_size - 10, mD, 11, 0, mH, (uint32_t)peer, &q) == RMA_ERR_ARGUMENT);
    CHECK(P->iget(rctx, 0, 0, mD, 11, L.h_size - 10, mH, (uint32_t)peer, &q) == RMA_ERR_ARGUMENT);
    CHECK(P->iget(rctx, 0, UINT64_MAX - 4, mD, 11, 0, mH, (uint32_t)peer, &q) == RMA_ERR_ARGUMENT);
    CHECK(P->iput(rctx, 0, 0, mD, 8, 0, mM, (uint32_t)peer, &q) == RMA_ERR_USAGE);  /* peer's M is not shared */
    CHECK(P->iget(rctx, 0, 0, mS, 8, 0, mD, (uint32_t)peer, &q) == RMA_ERR_USAGE);  /* nor is its S */
    CHECK(P->iput_signal(rctx, 0, 0, NULL, 0, 0, NULL, (uint32_t)peer, L.s_size, mS, 1, RMA_SIGNAL_OP_ADD, true,
                         &q) == RMA_ERR_ARGUMENT);
    CHECK(P->iput_signal(rctx, 0, 0, NULL, 0, 0, NULL, (uint32_t)peer, 4, mS, 1, RMA_SIGNAL_OP_ADD, true, &q) ==
          RMA_ERR_ARGUMENT);
    CHECK(P->iput_signal(rctx, 0, 0, NULL, 0, 0, NULL, (uint32_t)peer, 0, mS, 1, 7, true, &q) == RMA_ERR_ARGUMENT);
    CHECK(P->iget(rctx, CONTEXTS, 0, mD, 8, 0, mH, (uint32_t)peer, &q) == RMA_ERR_ARGUMENT);
    CHECK(P->iget(rctx, -1, 0, mD, 8, 0, mH, (uint32_t)peer, &q) == RMA_ERR_ARGUMENT);
    CHECK(P->iget(rctx, 0, 0, mD, 8, 0, mH, 2, &q) == RMA_ERR_ARGUMENT);
    CHECK(P->iflush(rctx, CONTEXTS + 1, mD, (uint32_t)peer, &q) == RMA_ERR_ARGUMENT);
    int done = 0, not_a_region = 0;
    CHECK(P->test(comm, NULL, &done) == RMA_ERR_ARGUMENT);
    CHECK(P->dereg_mr_sym(comm, &not_a_region) == RMA_ERR_ARGUMENT);
    CHECK(P->reg_mr_sym(comm, D, 64, 9, 0, &q) == RMA_ERR_ARGUMENT); /* collective: both ranks pass a bad type */
    bool has_error = true;
    RMA_OK(P->query_last_error(rctx, &has_error));
    CHECK(!has_error);
    barrier();

    RMA_OK(P->dereg_mr_sym(comm, mD));
    RMA_OK(P->dereg_mr_sym(comm, mH));
    RMA_OK(P->dereg_mr_sym(comm, mS));
    RMA_OK(P->dereg_mr_sym(comm, mM));
    RMA_OK(P->destroy_context(rctx));
    barrier();
    RMA_OK(P->close_coll(comm));
    RMA_OK(P->finalize(ctx));
    free(want_d);
    free(want_h);
    free(got);
    free(init_d);
    free(init_h);
    free(M);
    printf("rank %d on GPU %d of %d: plugin %s passed\n", me, dev, ndev, P->name);
}

int main(int argc, char **argv)
{
    char path[PATH_MAX];
    if (argc > 1) {
        snprintf(path, sizeof(path), "%s", argv[1]);
    } else {
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        CHECK(n > 0);
        self[n] = 0;
        snprintf(path, sizeof(path), "%s/libnccl-rma-engram.so", dirname(self));
    }
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    /* Counted before the fork: CUDA must not be initialized in the parent. */
    int ndev = 0;
    pid_t pids[2];
    for (int r = 0; r < 2; r++) {
        pids[r] = fork();
        CHECK(pids[r] >= 0);
        if (pids[r] == 0) {
            me = r;
            link_fd = sv[r];
            close(sv[1 - r]);
            alarm(40);
            CUDA_OK(cudaGetDeviceCount(&ndev));
            CHECK(ndev >= 1);
            run_rank(path, ndev);
            exit(0);
        }
    }
    close(sv[0]);
    close(sv[1]);
    int failed = 0;
    for (int r = 0; r < 2; r++) {
        int st = 0;
        CHECK(waitpid(pids[r], &st, 0) == pids[r]);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "rank %d failed (status 0x%x)\n", r, st);
            failed = 1;
        }
    }
    printf(failed ? "rma_plugin_test: FAILED\n" : "rma_plugin_test: passed (2 ranks)\n");
    return failed;
}
