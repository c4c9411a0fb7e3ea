/* Fetch handles. The engram_fetch_t * that engram_fetch returns is not an
 * address but a (record, generation) pair in the pointer's 64 bits. Every
 * fetch slot of every live table owns a record of one process-wide
 * registry; the record's generation advances when the slot's fetch is
 * released and when its table is destroyed. A handle kept past either
 * names a generation that is gone, so it is refused instead of reaching the
 * slot's next fetch (which reuses the slot) or freed memory. Records are
 * never freed (a destroyed table's return to a free list), so looking up
 * any handle reads only registry memory.
 *
 * Generations are 40 bits: a stale handle could only name a live fetch
 * after 2^40 later fetches on the same record, and then only if that one
 * is in flight. */
#ifndef ENGRAM_ENGRAM_FETCH_HANDLE_H
#define ENGRAM_ENGRAM_FETCH_HANDLE_H

#include "engram/internal.h"

/* Gives the slot a record (slot->handle_record); ENGRAM_ERR_NOMEM or
 * ENGRAM_ERR_OVERFLOW (2^24 - 1 slots in the process) on failure. */
engram_status_t engram_handle_bind(engram_fetch_slot_t *slot);
/* Advances the record's generation and returns it to the free list; no-op
 * for a slot never bound. */
void engram_handle_unbind(engram_fetch_slot_t *slot);
/* The handle of the slot's current generation (the fetch just begun). */
engram_fetch_t *engram_handle_of(const engram_fetch_slot_t *slot);
/* Advances the generation: every handle issued so far is stale. */
void engram_handle_revoke(engram_fetch_slot_t *slot);
/* The slot of a current handle, or NULL (after logging ENGRAM_ERR_INVALID
 * as "<who>: ...") for NULL, a never-issued, a released or a destroyed
 * table's handle. */
engram_fetch_slot_t *engram_handle_lookup(const engram_fetch_t *handle, const char *who);

#endif
