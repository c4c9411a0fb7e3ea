/* Fetches ended in stream order: report entries, per-slot chains and the
 * completions not yet polled (released.h). */
#include "engram/gpu/released.h"

#include <stdlib.h>
#include "hal/log.h"

engram_status_t engram_released_init(engram_released_t *r, int num_slots, uint32_t max_records)
{
    *r = (engram_released_t){.num_slots = num_slots, .max_records = max_records, .free_recs = -1,
                             .done_head = -1, .done_tail = -1};
    r->num_reports = (uint32_t)num_slots + max_records;
    r->free_reports = malloc((size_t)r->num_reports * sizeof(*r->free_reports));
    r->recs = malloc((size_t)max_records * sizeof(*r->recs));
    r->head = malloc((size_t)num_slots * sizeof(*r->head));
    r->tail = malloc((size_t)num_slots * sizeof(*r->tail));
    r->stream = calloc((size_t)num_slots, sizeof(*r->stream));
    if (r->free_reports == NULL || r->recs == NULL || r->head == NULL || r->tail == NULL || r->stream == NULL) {
        engram_released_fini(r);
        return ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "GPU table: out of memory for %u released-fetch records",
                            max_records);
    }
    for (uint32_t i = 0; i < r->num_reports; i++)
        r->free_reports[i] = r->num_reports - 1 - i; /* entry 0 on top */
    r->num_free_reports = r->num_reports;
    for (uint32_t i = max_records; i-- > 0;) {
        r->recs[i].next = r->free_recs;
        r->free_recs = (int)i;
    }
    for (int s = 0; s < num_slots; s++)
        r->head[s] = r->tail[s] = -1;
    return ENGRAM_OK;
}

void engram_released_fini(engram_released_t *r)
{
    free(r->free_reports);
    free(r->recs);
    free(r->head);
    free(r->tail);
    free(r->stream);
    *r = (engram_released_t){0};
}

uint32_t engram_released_take_report(engram_released_t *r)
{
    /* never empty: see the sizing in released.h */
    return r->free_reports[--r->num_free_reports];
}

void engram_released_put_report(engram_released_t *r, uint32_t report)
{
    if (report != ENGRAM_RELEASED_NO_REPORT)
        r->free_reports[r->num_free_reports++] = report;
}

engram_status_t engram_released_add(engram_released_t *r, int slot, void *stream, uint64_t cookie, uint64_t seq,
                                    uint32_t report, uint32_t num_tokens)
{
    if (r->free_recs < 0)
        return ENGRAM_ERROR(ENGRAM_ERR_BUSY,
                            "engram_fetch_release_ordered: %u fetches released in stream order are still running "
                            "(%u) or not yet polled (%u); engram_table_poll_released takes their completions",
                            r->max_records, r->pending, r->done);
    int i = r->free_recs;
    engram_released_rec_t *rec = &r->recs[i];
    r->free_recs = rec->next;
    *rec = (engram_released_rec_t){.out = {.cookie = cookie}, .seq = seq, .report = report,
                                   .num_tokens = num_tokens, .slot = slot, .next = -1};
    if (r->tail[slot] >= 0)
        r->recs[r->tail[slot]].next = i;
    else
        r->head[slot] = i;
    r->tail[slot] = i;
    r->stream[slot] = stream;
    r->pending++;
    return ENGRAM_OK;
}

engram_released_rec_t *engram_released_last(engram_released_t *r, int slot)
{
    return &r->recs[r->tail[slot]];
}

bool engram_released_reap_slot(engram_released_t *r, int slot, bool all_complete, engram_released_test_fn test,
                               void *ctx)
{
    while (r->head[slot] >= 0) {
        int i = r->head[slot];
        engram_released_rec_t *rec = &r->recs[i];
        if (!test(ctx, rec, all_complete))
            break;
        r->head[slot] = rec->next;
        if (r->head[slot] < 0)
            r->tail[slot] = -1;
        engram_released_put_report(r, rec->report);
        rec->next = -1;
        if (r->done_tail >= 0)
            r->recs[r->done_tail].next = i;
        else
            r->done_head = i;
        r->done_tail = i;
        r->pending--;
        r->done++;
    }
    return r->head[slot] < 0;
}

bool engram_released_chain_empty(const engram_released_t *r, int slot)
{
    return r->head[slot] < 0;
}

void *engram_released_chain_stream(const engram_released_t *r, int slot)
{
    return r->stream[slot];
}

uint32_t engram_released_poll(engram_released_t *r, engram_fetch_completion_t *out, uint32_t max)
{
    uint32_t n = 0;
    while (n < max && r->done_head >= 0) {
        int i = r->done_head;
        engram_released_rec_t *rec = &r->recs[i];
        out[n++] = rec->out;
        r->done_head = rec->next;
        if (r->done_head < 0)
            r->done_tail = -1;
        rec->next = r->free_recs;
        r->free_recs = i;
        r->done--;
    }
    return n;
}
