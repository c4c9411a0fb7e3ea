#include "memory/host_segment.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hal/config_keys.h"
#include "tests/check.h"


static const engram_segment_ops_t *ops = &engram_host_segment_ops;

static engram_segment_params_t params_of(size_t bytes, int huge)
{
    return (engram_segment_params_t){
        .size = sizeof(engram_segment_params_t), .bytes = bytes, .numa_node = -1, .huge = huge, .device = -1};
}

static unsigned char pattern(size_t off, unsigned salt)
{
    return (unsigned char)(off * 131u + (off >> 12) + salt);
}

static void fill(unsigned char *p, size_t n, unsigned salt)
{
    for (size_t i = 0; i < n; i++)
        p[i] = pattern(i, salt);
}

static int matches(const unsigned char *p, size_t n, unsigned salt)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != pattern(i, salt))
            return 0;
    return 1;
}

static long meminfo_value(const char *key)
{
    FILE *f = fopen("/proc/meminfo", "r");
    CHECK(f != NULL);
    char line[256];
    long value = -1;
    size_t klen = strlen(key);
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, key, klen) == 0 && line[klen] == ':')
            value = strtol(line + klen + 1, NULL, 10);
    fclose(f);
    CHECK(value >= 0);
    return value;
}

/* The permission string ("r--s", "---p", ...) of the mapping holding addr. */
static void maps_perms(const void *addr, char perms[5])
{
    FILE *f = fopen("/proc/self/maps", "r");
    CHECK(f != NULL);
    char line[512];
    perms[0] = '\0';
    while (fgets(line, sizeof(line), f)) {
        unsigned long lo, hi;
        char p[5];
        if (sscanf(line, "%lx-%lx %4s", &lo, &hi, p) == 3 && (uintptr_t)addr >= lo && (uintptr_t)addr < hi) {
            memcpy(perms, p, 5);
            break;
        }
    }
    fclose(f);
    CHECK(perms[0] != '\0');
}

static void test_alloc_sizes(void)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    engram_segment_t *seg = NULL;
    engram_segment_params_t p = params_of(0, ENGRAM_HUGE_OFF);
    CHECK_STATUS(ops->alloc(&p, &seg), ENGRAM_ERR_INVALID);
    CHECK(seg == NULL);
    CHECK_STATUS(ops->alloc(NULL, &seg), ENGRAM_ERR_INVALID);
    p = params_of(1, ENGRAM_HUGE_OFF);
    p.size = sizeof(p) - 1;
    CHECK_STATUS(ops->alloc(&p, &seg), ENGRAM_ERR_VERSION);
    p = params_of(1, 7);
    CHECK_STATUS(ops->alloc(&p, &seg), ENGRAM_ERR_INVALID);
    CHECK(seg == NULL);

    const size_t sizes[] = {1, 12345, page, page + 1, (size_t)1 << 30};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        p = params_of(sizes[i], ENGRAM_HUGE_OFF);
        CHECK_OK(ops->alloc(&p, &seg));
        CHECK(seg->ops == ops && seg->kind == ENGRAM_MEM_HOST && seg->device == -1);
        CHECK(!seg->huge_pages && !seg->imported && !seg->read_only);
        CHECK(seg->size >= sizes[i] && seg->size % page == 0 && seg->size - sizes[i] < page);
        unsigned char *b = seg->addr;
        CHECK(b[0] == 0 && b[seg->size - 1] == 0); /* memfd pages start zeroed */
        b[0] = 0xab;
        b[seg->size - 1] = 0xcd;
        CHECK(b[0] == 0xab && b[seg->size - 1] == 0xcd);
        ops->free(seg);
        seg = NULL;
    }
    ops->free(NULL);
}

static void test_numa_node(void)
{
    engram_segment_t *seg = NULL;
    engram_segment_params_t p = params_of(4096, ENGRAM_HUGE_OFF);
    p.numa_node = -2;
    CHECK_STATUS(ops->alloc(&p, &seg), ENGRAM_ERR_INVALID);
    /* Node 0 exists on every Linux machine; a huge id never does, unless
     * NUMA is unavailable, where placement is skipped and reported as -1. */
    p.numa_node = 0;
    CHECK_OK(ops->alloc(&p, &seg));
    CHECK(seg->numa_node == 0 || seg->numa_node == -1);
    ops->free(seg);
    p.numa_node = 1000;
    seg = NULL;
    engram_status_t st = ops->alloc(&p, &seg);
    CHECK(st == ENGRAM_ERR_INVALID || (st == ENGRAM_OK && seg->numa_node == -1));
    if (st == ENGRAM_OK)
        ops->free(seg);
}

static void test_huge_pages(void)
{
    size_t huge = (size_t)2 << 20;
    long free_huge = meminfo_value("HugePages_Free");
    engram_segment_t *seg = NULL;
    engram_segment_params_t p = params_of(huge + 1, ENGRAM_HUGE_ON);
    engram_status_t st = ops->alloc(&p, &seg);
    if (free_huge >= 2 && meminfo_value("Hugepagesize") == 2048) {
        CHECK_OK(st);
        CHECK(seg->huge_pages && seg->size == 2 * huge);
        ops->free(seg);
    } else {
        CHECK(st == ENGRAM_ERR_UNSUPPORTED);
        CHECK(seg == NULL);
        CHECK(strstr(engram_last_error(), "huge_pages=on") != NULL);
    }
    /* auto either gets huge pages or falls back; both give a usable segment. */
    p.huge = ENGRAM_HUGE_AUTO;
    CHECK_OK(ops->alloc(&p, &seg));
    CHECK(seg->size >= huge + 1);
    CHECK(seg->huge_pages || free_huge < 2);
    ((unsigned char *)seg->addr)[huge] = 1;
    ops->free(seg);
}

static void test_import_same_process(void)
{
    engram_segment_t *seg, *rw, *ro;
    engram_segment_params_t p = params_of(3 * 4096 + 17, ENGRAM_HUGE_AUTO);
    CHECK_OK(ops->alloc(&p, &seg));
    fill(seg->addr, seg->size, 1);
    int fd = -1;
    CHECK_OK(ops->export_fd(seg, &fd));
    CHECK(fd >= 0);

    CHECK_OK(ops->import_fd(fd, seg->size, false, NULL, &rw));
    CHECK(rw->imported && !rw->read_only && rw->size == seg->size && rw->addr != seg->addr);
    CHECK(matches(rw->addr, rw->size, 1));
    ((unsigned char *)rw->addr)[5] = 0x5a; /* the same pages, seen both ways */
    CHECK(((unsigned char *)seg->addr)[5] == 0x5a);
    ((unsigned char *)seg->addr)[5] = pattern(5, 1);
    int refd;
    CHECK_STATUS(ops->export_fd(rw, &refd), ENGRAM_ERR_INVALID);

    CHECK_OK(ops->import_fd(fd, 1, true, NULL, &ro));
    CHECK(ro->imported && ro->read_only && ro->size == (seg->huge_pages ? seg->size : 4096));
    CHECK(matches(ro->addr, ro->size, 1));
    char perms[5];
    maps_perms(ro->addr, perms);
    CHECK(strcmp(perms, "r--s") == 0);
    maps_perms(rw->addr, perms);
    CHECK(strcmp(perms, "rw-s") == 0);

    engram_segment_t *bad = NULL;
    CHECK_STATUS(ops->import_fd(fd, 0, true, NULL, &bad), ENGRAM_ERR_INVALID);
    CHECK_STATUS(ops->import_fd(fd, seg->size + 1, true, NULL, &bad), ENGRAM_ERR_INVALID);
    CHECK_STATUS(ops->import_fd(-1, 4096, true, NULL, &bad), ENGRAM_ERR_INVALID);
    CHECK_STATUS(ops->import_fd(fd, 4096, true, (char *)ro->addr + 1, &bad), ENGRAM_ERR_INVALID);
    CHECK(bad == NULL);

    ops->free(ro);
    ops->free(rw);
    ops->free(seg);
    CHECK(fcntl(fd, F_GETFD) == -1 && errno == EBADF); /* free closed the memfd */
}

static void send_fd(int sock, int fd)
{
    char byte = 0;
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    union {
        struct cmsghdr hdr;
        char buf[CMSG_SPACE(sizeof(int))];
    } ctl;
    memset(&ctl, 0, sizeof(ctl));
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf)};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
    CHECK(sendmsg(sock, &msg, 0) == 1);
}

static int recv_fd(int sock)
{
    char byte;
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    union {
        struct cmsghdr hdr;
        char buf[CMSG_SPACE(sizeof(int))];
    } ctl;
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf)};
    CHECK(recvmsg(sock, &msg, 0) == 1);
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    CHECK(c != NULL && c->cmsg_type == SCM_RIGHTS);
    int fd;
    memcpy(&fd, CMSG_DATA(c), sizeof(int));
    return fd;
}

/* The child maps the parent's segment from a passed fd: reads the parent's
 * pattern read-only, and writes its own pattern into the second half rw. */
static int child_main(int sock, size_t size)
{
    alarm(60); /* a stuck child fails the test instead of hanging it */
    int fd = recv_fd(sock);
    engram_segment_t *ro, *rw;
    CHECK_OK(ops->import_fd(fd, size, true, NULL, &ro));
    CHECK(matches(ro->addr, size / 2, 7));
    CHECK_OK(ops->import_fd(fd, size, false, NULL, &rw));
    fill((unsigned char *)rw->addr + size / 2, size / 2, 9);
    ops->free(rw);
    ops->free(ro);
    close(fd);
    return 0;
}

static void test_import_across_processes(void)
{
    engram_segment_t *seg;
    engram_segment_params_t p = params_of(1 << 20, ENGRAM_HUGE_AUTO);
    CHECK_OK(ops->alloc(&p, &seg));
    fill(seg->addr, seg->size / 2, 7);
    int fd, socks[2];
    CHECK_OK(ops->export_fd(seg, &fd));
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, socks) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(socks[0]);
        _exit(child_main(socks[1], seg->size));
    }
    close(socks[1]);
    send_fd(socks[0], fd);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(socks[0]);
    CHECK(matches(seg->addr, seg->size / 2, 7));
    CHECK(matches((unsigned char *)seg->addr + seg->size / 2, seg->size / 2, 9));
    ops->free(seg);
}

/* Two segments imported back to back into one reservation read as one
 * contiguous range; freeing them keeps the range reserved until released. */
static void test_fixed_back_to_back(void)
{
    engram_segment_t *a, *b, *ia, *ib;
    engram_segment_params_t p = params_of(64 << 10, ENGRAM_HUGE_OFF);
    CHECK_OK(ops->alloc(&p, &a));
    CHECK_OK(ops->alloc(&p, &b));
    size_t s = a->size;
    fill(a->addr, s, 3);
    fill(b->addr, s, 4);
    int fa, fb;
    CHECK_OK(ops->export_fd(a, &fa));
    CHECK_OK(ops->export_fd(b, &fb));
    unsigned char *range = mmap(NULL, 2 * s, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    CHECK(range != MAP_FAILED);
    CHECK_OK(ops->import_fd(fa, s, true, range, &ia));
    CHECK_OK(ops->import_fd(fb, s, true, range + s, &ib));
    CHECK(ia->addr == range && ib->addr == range + s);
    CHECK(matches(range, s, 3) && matches(range + s, s, 4));
    unsigned char across[64];
    memcpy(across, range + s - 32, sizeof(across)); /* one copy over the seam */
    for (size_t i = 0; i < 32; i++)
        CHECK(across[i] == pattern(s - 32 + i, 3) && across[32 + i] == pattern(i, 4));
    ops->free(ib);
    char perms[5];
    maps_perms(range + s, perms);
    CHECK(strcmp(perms, "---p") == 0);
    ops->free(ia);
    maps_perms(range, perms);
    CHECK(strcmp(perms, "---p") == 0);
    CHECK(munmap(range, 2 * s) == 0);
    ops->free(a);
    ops->free(b);
}

int main(void)
{
    test_alloc_sizes();
    test_numa_node();
    test_huge_pages();
    test_import_same_process();
    test_import_across_processes();
    test_fixed_back_to_back();
    printf("host_segment_test: ok\n");
    return 0;
}
