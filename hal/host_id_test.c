/* The one "same host" (hal/host_id.h): one kernel, one network namespace,
 * one pid namespace; which of them differs is named; engram_host_identity
 * prints it, the same in another process of this host and different in a
 * new pid namespace (root: skipped with the reason where unshare is
 * refused). The group's host map over them: tests/reliability/
 * engram_two_hosts_test. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hal/group.h"
#include "hal/host_id.h"
#include "hal/testdata/check_error.h"

static void check_differences(void)
{
    engram_host_id_t me, other;
    const char *why = NULL;
    CHECK_OK(engram_host_id_self(&me, &why));
    CHECK(me.boot_id[0] != '\0' && me.netns != 0 && me.pidns != 0);
    CHECK(engram_host_id_same(&me, &me) && engram_host_id_difference(&me, &me) == NULL);
    other = me;
    other.boot_id[0] = me.boot_id[0] == '0' ? '1' : '0';
    CHECK(!engram_host_id_same(&me, &other));
    CHECK(strcmp(engram_host_id_difference(&me, &other), "another kernel") == 0);
    CHECK(!engram_host_id_pids_shared(&me, &other));
    other = me;
    other.netns++;
    CHECK(strcmp(engram_host_id_difference(&me, &other), "another network namespace of the same kernel") == 0);
    CHECK(engram_host_id_pids_shared(&me, &other)); /* a pid still names the process: weaker than one host */
    other = me;
    other.pidns++;
    CHECK(strcmp(engram_host_id_difference(&me, &other), "another pid namespace of the same kernel") == 0);
    CHECK(!engram_host_id_pids_shared(&me, &other));
}

/* engram_host_identity of a child (in_new_pidns: forked after
 * unshare(CLONE_NEWPID), so the child is pid 1 of a new namespace) into
 * out; false with the errno where that unshare is refused. */
static bool child_identity(bool in_new_pidns, char out[ENGRAM_HOST_IDENTITY_MAX], int *err)
{
    int p[2];
    CHECK(pipe(p) == 0);
    pid_t outer = fork();
    CHECK(outer >= 0);
    if (outer == 0) {
        close(p[0]);
        if (in_new_pidns && unshare(CLONE_NEWPID) != 0) {
            int e = -errno;
            CHECK(write(p[1], &e, sizeof(e)) == (ssize_t)sizeof(e));
            _exit(0);
        }
        pid_t inner = fork(); /* the first child of a new pid namespace lives in it */
        if (inner == 0) {
            char id[ENGRAM_HOST_IDENTITY_MAX];
            int ok = engram_host_identity(id, sizeof(id)) == ENGRAM_OK;
            CHECK(write(p[1], &ok, sizeof(ok)) == (ssize_t)sizeof(ok));
            CHECK(write(p[1], id, sizeof(id)) == (ssize_t)sizeof(id));
            _exit(0);
        }
        int st;
        _exit(inner > 0 && waitpid(inner, &st, 0) == inner && WIFEXITED(st) ? WEXITSTATUS(st) : 1);
    }
    close(p[1]);
    int head = 0;
    CHECK(read(p[0], &head, sizeof(head)) == (ssize_t)sizeof(head));
    bool got = head > 0;
    if (got)
        CHECK(read(p[0], out, ENGRAM_HOST_IDENTITY_MAX) == ENGRAM_HOST_IDENTITY_MAX);
    close(p[0]);
    int st;
    CHECK(waitpid(outer, &st, 0) == outer && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    *err = head < 0 ? -head : 0;
    CHECK(got || head < 0);
    return got;
}

static void check_identity_text(void)
{
    char mine[ENGRAM_HOST_IDENTITY_MAX], theirs[ENGRAM_HOST_IDENTITY_MAX], small[8] = "zzzzzzz";
    CHECK_OK(engram_host_identity(mine, sizeof(mine)));
    CHECK_ERROR(engram_host_identity(small, sizeof(small)), ENGRAM_ERR_OVERFLOW, "engram_host_identity: needs");
    CHECK(strcmp(small, "zzzzzzz") == 0); /* set only on success */
    int err = 0;
    CHECK(child_identity(false, theirs, &err));
    CHECK(strcmp(mine, theirs) == 0);
    if (!child_identity(true, theirs, &err)) {
        printf("host_id_test: pid namespace case SKIPPED: unshare(CLONE_NEWPID): %s (needs root)\n", strerror(err));
        return;
    }
    CHECK(strcmp(mine, theirs) != 0);
}

int main(void)
{
    check_differences();
    check_identity_text();
    puts("host_id_test: all passed");
    return 0;
}
