/* The registry of fetch handle records (fetch_handle.h): chunks of records
 * behind a fixed directory, allocated on demand and never moved or freed,
 * so lookups need no lock; binding and unbinding (table create and
 * destroy) take a mutex. */
#include "engram/fetch_handle.h"

#include <pthread.h>
#include <stdlib.h>

#include "hal/log.h"

_Static_assert(sizeof(uintptr_t) == 8, "fetch handles pack 64 bits into a pointer");

enum {
    INDEX_BITS = 24,
    GEN_BITS = 40,
    CHUNK_BITS = 12,
    CHUNK = 1 << CHUNK_BITS,
    MAX_RECORDS = (1 << INDEX_BITS) - 1, /* index + 1 is never 0: no handle is NULL */
    CHUNKS = MAX_RECORDS / CHUNK + 1,
};
#define GEN_MASK ((UINT64_C(1) << GEN_BITS) - 1)

typedef struct record {
    _Atomic uint64_t gen; /* 1 .. 2^40 - 1 */
    _Atomic(engram_fetch_slot_t *) slot; /* NULL while unbound */
    uint32_t next_free;                  /* index + 1 of the next free record, under the mutex */
} record_t;

static _Atomic(record_t *) chunks[CHUNKS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t used;      /* records handed out at least once */
static uint32_t free_head; /* index + 1 of the first free record, 0 = none */

static record_t *record_at(uint32_t index)
{
    record_t *chunk = atomic_load_explicit(&chunks[index >> CHUNK_BITS], memory_order_acquire);
    return chunk ? &chunk[index & (CHUNK - 1)] : NULL;
}

static uint64_t next_gen(uint64_t gen)
{
    return (gen & GEN_MASK) == GEN_MASK ? 1 : gen + 1;
}

engram_status_t engram_handle_bind(engram_fetch_slot_t *slot)
{
    engram_status_t st = ENGRAM_OK;
    pthread_mutex_lock(&lock);
    uint32_t index = 0;
    if (free_head != 0) {
        index = free_head - 1;
        free_head = record_at(index)->next_free;
    } else if (used == MAX_RECORDS) {
        st = ENGRAM_ERROR(ENGRAM_ERR_OVERFLOW, "cannot bind a fetch slot: %d slots exist in this process",
                          MAX_RECORDS);
    } else {
        index = used;
        if (record_at(index) == NULL) {
            record_t *chunk = calloc(CHUNK, sizeof(*chunk));
            if (chunk == NULL)
                st = ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "cannot allocate fetch handle records");
            for (int i = 0; chunk != NULL && i < CHUNK; i++)
                atomic_init(&chunk[i].gen, 1);
            if (chunk != NULL)
                atomic_store_explicit(&chunks[index >> CHUNK_BITS], chunk, memory_order_release);
        }
        if (st == ENGRAM_OK)
            used++;
    }
    if (st == ENGRAM_OK) {
        atomic_store(&record_at(index)->slot, slot);
        slot->handle_record = index + 1;
    }
    pthread_mutex_unlock(&lock);
    return st;
}

void engram_handle_unbind(engram_fetch_slot_t *slot)
{
    if (slot->handle_record == 0)
        return;
    uint32_t index = slot->handle_record - 1;
    record_t *r = record_at(index);
    pthread_mutex_lock(&lock);
    atomic_store(&r->slot, NULL);
    atomic_store(&r->gen, next_gen(atomic_load(&r->gen)));
    r->next_free = free_head;
    free_head = index + 1;
    pthread_mutex_unlock(&lock);
    slot->handle_record = 0;
}

engram_fetch_t *engram_handle_of(const engram_fetch_slot_t *slot)
{
    uint64_t gen = atomic_load(&record_at(slot->handle_record - 1)->gen);
    return (engram_fetch_t *)(uintptr_t)(gen << INDEX_BITS | slot->handle_record);
}

void engram_handle_revoke(engram_fetch_slot_t *slot)
{
    record_t *r = record_at(slot->handle_record - 1);
    atomic_store(&r->gen, next_gen(atomic_load(&r->gen)));
}

engram_fetch_slot_t *engram_handle_lookup(const engram_fetch_t *handle, const char *who)
{
    uint64_t v = (uint64_t)(uintptr_t)handle;
    uint32_t index1 = (uint32_t)(v & MAX_RECORDS);
    record_t *r = index1 != 0 ? record_at(index1 - 1) : NULL;
    engram_fetch_slot_t *slot = NULL;
    if (r != NULL && atomic_load(&r->gen) == v >> INDEX_BITS)
        slot = atomic_load(&r->slot);
    if (slot == NULL || atomic_load(&slot->state) != ENGRAM_SLOT_LIVE) {
        ENGRAM_ERROR(ENGRAM_ERR_INVALID, "%s: %s", who,
                     handle == NULL ? "fetch is NULL" : "not a fetch in flight (released, or never issued)");
        return NULL;
    }
    return slot;
}
