/* pid_watch: a watched child is alive until it exits, exited as a zombie
 * and once reaped, and still exited when its pid names a new process (made
 * to reuse it through /proc/sys/kernel/ns_last_pid; where that cannot be
 * written, e.g. without CAP_SYS_ADMIN, the reuse step says so and is
 * skipped). Reading /proc/<pid>/stat, as the UCX transport's liveness
 * check once did, then finds a live process. */
#include <errno.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/check.h"
#include "transports/ucx/pid_watch.h"

static pid_t spawn_sleeper(void)
{
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        pause();
        _exit(0);
    }
    return pid;
}

/* The /proc view of `pid`: its state letter, or 0 when there is none. */
static char proc_state(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    size_t n = fread(line, 1, sizeof(line) - 1, f);
    fclose(f);
    line[n] = '\0';
    const char *paren = strrchr(line, ')');
    return paren != NULL ? paren[2] : 0;
}

/* A new sleeper with `pid`, or -1 when the kernel cannot be made to. */
static pid_t spawn_with_pid(pid_t pid)
{
    FILE *f = fopen("/proc/sys/kernel/ns_last_pid", "w");
    if (f == NULL || fprintf(f, "%d", (int)pid - 1) < 0 || fclose(f) != 0) {
        printf("pid_watch_test: cannot set ns_last_pid (%s): pid reuse not exercised\n", strerror(errno));
        return -1;
    }
    pid_t again = spawn_sleeper();
    if (again == pid)
        return again;
    kill(again, SIGKILL);
    waitpid(again, NULL, 0);
    printf("pid_watch_test: pid %d was taken by another process: pid reuse not exercised\n", (int)pid);
    return -1;
}

/* A watched child through its life; returns whether its pid was reused
 * while the watch was held (and the watch still said exited). */
static bool watch_one_life(void)
{
    pid_t child = spawn_sleeper();
    int watch = engram_pid_watch_open(child);
    CHECK(watch >= 0);
    CHECK(!engram_pid_watch_exited(watch));
    CHECK(kill(child, SIGKILL) == 0);
    siginfo_t info;
    CHECK(waitid(P_PID, (id_t)child, &info, WEXITED | WNOWAIT) == 0); /* a zombie, not reaped */
    CHECK(engram_pid_watch_exited(watch));
    CHECK(waitpid(child, NULL, 0) == child);
    CHECK(engram_pid_watch_exited(watch));
    CHECK(engram_pid_watch_open(child) == -ESRCH);

    pid_t reused = spawn_with_pid(child);
    if (reused > 0) {
        char state = proc_state(child);
        CHECK(state != 0 && state != 'Z' && state != 'X'); /* what /proc/<pid>/stat says: alive */
        CHECK(engram_pid_watch_exited(watch));              /* the watched process is still gone */
        int fresh = engram_pid_watch_open(reused);
        CHECK(fresh >= 0 && !engram_pid_watch_exited(fresh));
        kill(reused, SIGKILL);
        waitpid(reused, NULL, 0);
        CHECK(engram_pid_watch_exited(fresh));
        engram_pid_watch_close(fresh);
        printf("pid_watch_test: pid %d reused by a new process, the watch still says exited\n", (int)child);
    }
    engram_pid_watch_close(watch);
    return reused > 0;
}

int main(void)
{
    CHECK(engram_pid_watch_open(0) == -EINVAL);
    CHECK(engram_pid_watch_open(-5) == -EINVAL);
    /* Other processes on a busy machine may take the pid first: a few tries. */
    for (int attempt = 0; attempt < 5 && !watch_one_life(); attempt++)
        ;
    engram_pid_watch_close(-1);
    puts("pid_watch_test: ok");
    return 0;
}
