/* The callbacks provider, driven by a fake in-process "framework"; its
 * barrier serves the group's progress hook while it "waits"
 * (engram_group_progress), as Python's Group.from_torch does. */
#include <string.h>
#include <time.h>

#include "hal/group.h"
#include "hal/log.h"
#include "hal/testdata/check_error.h"

typedef struct fake {
    int nranks;
    int allgathers, barriers, destroyed;
    int fail; /* what the callbacks return */
    const char *say; /* when failing, the allgather reports this as an engram error first */
    engram_group_t *serve; /* the barrier serves its progress hook, when set */
    int served;            /* engram_group_progress calls that ran the hook */
} fake_t;

/* Every rank of the fake framework contributes what this one does. */
static int fake_allgather(void *ctx, const void *send, void *recv, size_t bytes)
{
    fake_t *f = ctx;
    f->allgathers++;
    for (int r = 0; r < f->nranks && f->fail == 0; r++)
        memcpy((char *)recv + (size_t)r * bytes, send, bytes);
    if (f->fail != 0 && f->say != NULL)
        ENGRAM_ERROR(ENGRAM_ERR_TIMEOUT, "%s", f->say);
    return f->fail;
}

static int fake_barrier(void *ctx)
{
    fake_t *f = ctx;
    f->barriers++;
    for (int polls = 0; f->serve != NULL && polls < 3; polls++) /* "the others have not arrived yet" */
        f->served += engram_group_progress(f->serve);
    return f->fail;
}

static void fake_destroy(void *ctx)
{
    ((fake_t *)ctx)->destroyed++;
}

static void count_calls(void *arg)
{
    ++*(int *)arg;
}

static engram_group_callbacks_t callbacks(fake_t *f, int rank, int local_size)
{
    return (engram_group_callbacks_t){
        .size = sizeof(engram_group_callbacks_t),
        .rank = rank,
        .nranks = f->nranks,
        .local_size = local_size,
        .ctx = f,
        .allgather = fake_allgather,
        .barrier = fake_barrier,
        .destroy = fake_destroy,
    };
}

int main(void)
{
    fake_t f = {.nranks = 4};
    engram_group_t *g = NULL;
    engram_group_callbacks_t cb = callbacks(&f, 3, 2);
    CHECK_OK(engram_group_callbacks_create(&cb, &g));
    CHECK(engram_group_rank(g) == 3 && engram_group_size(g) == 4);
    CHECK(engram_group_local_rank(g) == 1 && engram_group_local_size(g) == 2);

    int mine = 42, all[4] = {0};
    /* a collective that succeeds leaves the caller's last error as it was */
    ENGRAM_ERROR(ENGRAM_ERR_INVALID, "an earlier failure of the caller's");
    CHECK_OK(engram_group_allgather(g, &mine, all, sizeof(mine)));
    CHECK(strcmp(engram_last_error(), "an earlier failure of the caller's") == 0);
    CHECK(all[0] == 42 && all[3] == 42 && f.allgathers == 1);
    CHECK_OK(engram_group_barrier(g));
    CHECK(f.barriers == 1);
    CHECK(engram_group_single_host(g) == 1);
    CHECK(engram_group_single_host(g) == 1);
    CHECK(f.allgathers == 2); /* cached after the first call */

    /* a callback serving progress: the hook runs once per call, none: 0 */
    int hook_calls = 0;
    f.serve = g;
    CHECK_OK(engram_group_barrier(g));
    CHECK(f.served == 0); /* no hook yet */
    engram_group_set_progress(g, count_calls, &hook_calls);
    CHECK_OK(engram_group_barrier(g));
    CHECK(f.served == 3 && hook_calls == 3);
    engram_group_set_progress(g, NULL, NULL);
    CHECK(engram_group_progress(g) == 0 && hook_calls == 3);
    CHECK(engram_group_progress(NULL) == 0);
    f.serve = NULL;

    /* A failed callback fails the group: later collectives are refused
     * without calling the callbacks, naming the first failure. */
    f.fail = -5;
    CHECK_ERROR(engram_group_barrier(g), ENGRAM_ERR_PEER, "barrier callback returned -5");
    int calls = f.allgathers + f.barriers;
    f.fail = 0;
    CHECK_ERROR(engram_group_allgather(g, &mine, all, sizeof(mine)), ENGRAM_ERR_PEER,
                "rank 3 allgather: the group failed earlier: rank 3: the caller's barrier callback returned -5");
    CHECK_ERROR(engram_group_barrier(g), ENGRAM_ERR_PEER, "rank 3 barrier: the group failed earlier");
    CHECK(f.allgathers + f.barriers == calls);
    engram_group_destroy(g);
    CHECK(f.destroyed == 1);

    /* The allgather's failure alike; a refused argument fails nothing. */
    cb = callbacks(&f, 0, 0);
    CHECK_OK(engram_group_callbacks_create(&cb, &g));
    CHECK_ERROR(engram_group_allgather(g, NULL, all, sizeof(mine)), ENGRAM_ERR_INVALID, "NULL send buffer");
    CHECK_OK(engram_group_barrier(g));
    /* what the callback reported through the library (a group below) is kept */
    f.fail = -6;
    f.say = "no answer from rank 2";
    CHECK_ERROR(engram_group_allgather(g, &mine, all, sizeof(mine)), ENGRAM_ERR_PEER,
                "rank 0: the caller's allgather callback (4 bytes) returned -6: no answer from rank 2");
    f.fail = 0;
    f.say = NULL;
    CHECK_ERROR(engram_group_barrier(g), ENGRAM_ERR_PEER,
                "allgather callback (4 bytes) returned -6: no answer from rank 2");
    engram_group_destroy(g);
    CHECK(f.destroyed == 2);

    /* A bound over several collectives: each sees what is left of one
     * timeout_ms (engram_group_timeout, which callbacks read), a nested
     * bound keeps the earlier end, and a spent one refuses the collective
     * without calling back and fails the group. */
    cb = callbacks(&f, 0, 0);
    CHECK_OK(engram_group_callbacks_create(&cb, &g));
    engram_group_set_timeout(g, 400);
    CHECK(engram_group_timeout(g) == 400);
    int64_t outer = engram_group_bound_begin(g);
    CHECK(outer == 0);
    const struct timespec pause = {.tv_nsec = 150 * 1000000};
    nanosleep(&pause, NULL);
    int left = engram_group_timeout(g);
    CHECK(left > 0 && left <= 250);
    engram_group_set_timeout(g, 10000); /* a longer timeout inside: the bound stays */
    int64_t inner = engram_group_bound_begin(g);
    CHECK(inner != 0 && engram_group_timeout(g) <= 250);
    engram_group_bound_end(g, inner);
    CHECK_OK(engram_group_barrier(g));
    nanosleep(&pause, NULL);
    nanosleep(&pause, NULL);
    CHECK(engram_group_timeout(g) == 1); /* spent: never 0, which a callback would take for "no bound" */
    calls = f.allgathers + f.barriers;
    CHECK_ERROR(engram_group_allgather(g, &mine, all, sizeof(mine)), ENGRAM_ERR_TIMEOUT,
                "rank 0: allgather not started: the bound of timeout_ms=10000 on this teardown's collectives is spent");
    CHECK(f.allgathers + f.barriers == calls);
    engram_group_bound_end(g, outer);
    CHECK(engram_group_timeout(g) == 10000);
    CHECK_ERROR(engram_group_barrier(g), ENGRAM_ERR_TIMEOUT, "rank 0 barrier: the group failed earlier");
    CHECK(f.allgathers + f.barriers == calls);
    engram_group_destroy(g);
    CHECK(f.destroyed == 3);

    /* Callbacks without destroy are fine. */
    cb = callbacks(&f, 0, 0);
    cb.destroy = NULL;
    CHECK_OK(engram_group_callbacks_create(&cb, &g));
    CHECK(engram_group_local_size(g) == 4);
    engram_group_destroy(g);
    CHECK(f.destroyed == 3);

    /* Refusals leave *out alone and never call destroy (the caller keeps ctx). */
    g = NULL;
    CHECK_ERROR(engram_group_callbacks_create(NULL, &g), ENGRAM_ERR_INVALID, "NULL callbacks");
    cb = callbacks(&f, 0, 0);
    CHECK_ERROR(engram_group_callbacks_create(&cb, NULL), ENGRAM_ERR_INVALID, "NULL out");
    cb.size = sizeof(cb) - 1;
    CHECK_ERROR(engram_group_callbacks_create(&cb, &g), ENGRAM_ERR_VERSION,
                "group callbacks: size 55 is not a multiple of the struct's alignment 8");
    cb.size = ENGRAM_GROUP_CALLBACKS_MIN_SIZE - 8;
    CHECK_ERROR(engram_group_callbacks_create(&cb, &g), ENGRAM_ERR_VERSION,
                "group callbacks: size is 40 bytes, less than the 48 every version has");
    cb = callbacks(&f, 0, 0);
    cb.allgather = NULL;
    CHECK_ERROR(engram_group_callbacks_create(&cb, &g), ENGRAM_ERR_INVALID, "allgather callback is NULL");
    cb = callbacks(&f, 0, 0);
    cb.barrier = NULL;
    CHECK_ERROR(engram_group_callbacks_create(&cb, &g), ENGRAM_ERR_INVALID, "barrier callback is NULL");
    cb = callbacks(&f, 4, 0);
    CHECK_ERROR(engram_group_callbacks_create(&cb, &g), ENGRAM_ERR_INVALID, "rank 4 / size 4");
    cb = callbacks(&f, 0, 3);
    CHECK_ERROR(engram_group_callbacks_create(&cb, &g), ENGRAM_ERR_INVALID, "not a multiple of local_size 3");
    cb = callbacks(&f, 0, -1);
    CHECK_ERROR(engram_group_callbacks_create(&cb, &g), ENGRAM_ERR_INVALID, "local_size -1");
    f.nranks = 0;
    cb = callbacks(&f, 0, 0);
    CHECK_ERROR(engram_group_callbacks_create(&cb, &g), ENGRAM_ERR_INVALID, "size 0");
    CHECK(g == NULL && f.destroyed == 3);

    /* A caller built before destroy existed: accepted, no destroy called. */
    f.nranks = 4;
    int destroyed = f.destroyed;
    cb = callbacks(&f, 0, 0);
    cb.size = ENGRAM_GROUP_CALLBACKS_MIN_SIZE;
    CHECK_OK(engram_group_callbacks_create(&cb, &g));
    CHECK(engram_group_size(g) == 4);
    engram_group_destroy(g);
    CHECK(f.destroyed == destroyed);
    printf("group_callbacks_test: ok\n");
    return 0;
}
