/* Initial PSNs: 24 bits, and different in processes that start alike (the
 * unseeded lrand48 it replaces gave every process the same sequence). */
#include "transports/mlx5dv/mlx5_psn.h"

#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/check.h"

#define CHILDREN 4

int main(void)
{
    uint32_t seen[CHILDREN];
    for (int i = 0; i < CHILDREN; i++) {
        int fds[2];
        CHECK(pipe(fds) == 0);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            uint32_t psn = 0;
            _exit(engram_mlx5_initial_psn(&psn) == ENGRAM_OK && write(fds[1], &psn, sizeof(psn)) == sizeof(psn)
                      ? 0 : 1);
        }
        close(fds[1]);
        CHECK(read(fds[0], &seen[i], sizeof(seen[i])) == (ssize_t)sizeof(seen[i]));
        close(fds[0]);
        int status = 0;
        CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
        CHECK(seen[i] <= 0xffffff);
    }
    /* Four equal draws of 24 random bits: 2^-72. */
    int distinct = 0;
    for (int i = 1; i < CHILDREN; i++)
        distinct += seen[i] != seen[0];
    CHECK(distinct > 0);
    uint32_t a = 0, b = 0;
    CHECK(engram_mlx5_initial_psn(&a) == ENGRAM_OK && engram_mlx5_initial_psn(&b) == ENGRAM_OK);
    CHECK(a <= 0xffffff && b <= 0xffffff);
    printf("mlx5_psn_test: PSNs 0x%06x 0x%06x 0x%06x 0x%06x in four processes\n", seen[0], seen[1], seen[2], seen[3]);
    return 0;
}
