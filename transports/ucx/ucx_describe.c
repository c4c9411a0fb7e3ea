/* Which UCX transports the endpoints use, parsed from ucp_ep_print_info:
 * each "lane[i]: <rsc>:<tl>/<dev> md[..] -> md[..]/<tl>/sysdev[..] <roles>"
 * line becomes "<tl>/<dev>(<roles>)", listed once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transports/ucx/ucx_internal.h"

/* Appends "tl/dev(roles)" for one lane line unless `out` already has it;
 * returns whether the lane carries RMA done by the transport itself. */
static bool lane_add(const char *line, char *out, size_t len)
{
    const char *p = strstr(line, "lane[");
    p = p ? strchr(p, ':') : NULL;
    if (p == NULL)
        return false;
    p += strspn(p + 1, " ") + 1;
    p += strcspn(p, ":") + 1; /* drop the resource index */
    size_t rsc_len = strcspn(p, " ");
    const char *roles = strstr(p, "sysdev[");
    roles = roles ? strchr(roles, ']') : NULL;
    roles = roles ? roles + 1 + strspn(roles + 1, " ") : "";
    size_t roles_len = strcspn(roles, "\n");
    char entry[160];
    snprintf(entry, sizeof(entry), "%.*s(%.*s)", (int)rsc_len, p, (int)roles_len, roles);
    if (strstr(out, entry) == NULL) {
        size_t used = strlen(out);
        snprintf(out + used, len - used, "%s%s", used ? ", " : "", entry);
    }
    /* "rma#i" marks a lane that reads remote memory in hardware/kernel;
     * "rma_bw#i" alone serves rendezvous, and with no rma lane gets are
     * active messages (ucx_am_get.c). */
    for (const char *r = strstr(roles, "rma"); r != NULL && r < roles + roles_len; r = strstr(r + 3, "rma")) {
        if (r[3] != '_')
            return true;
    }
    return false;
}

bool engram_ucx_lanes(const engram_transport_t *t, char *buf, size_t len)
{
    buf[0] = '\0';
    if (t->nqueues == 0 || t->queues[0].conns == NULL)
        return false;
    bool hw_rma = false;
    char *text = NULL;
    size_t text_len = 0;
    for (int r = 0; r < t->shape.size; r++) {
        FILE *f = open_memstream(&text, &text_len);
        if (f == NULL)
            break;
        if (t->queues[0].conns[r].ep != NULL)
            ucp_ep_print_info(t->queues[0].conns[r].ep, f);
        fclose(f);
        for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
            if (strstr(line, "lane[") != NULL)
                hw_rma |= lane_add(line, buf, len);
        }
        free(text);
        text = NULL;
    }
    return hw_rma;
}

void engram_ucx_describe(const engram_transport_t *t, char *buf, size_t len)
{
    if (buf == NULL || len == 0)
        return;
    char lanes[384];
    engram_ucx_lanes(t, lanes, sizeof(lanes));
    unsigned major, minor, release;
    ucp_get_version(&major, &minor, &release);
    snprintf(buf, len, "UCX %u.%u.%u, %d queues x %d endpoints, lanes: %s%s", major, minor, release, t->nqueues,
             t->shape.size, lanes[0] ? lanes : "none",
             t->target_progress ? "; gets as active messages (owners must progress)" : "");
}
