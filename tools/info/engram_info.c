/* engram_info: version, every backend (available or why not, and what it
 * can do), and the effective configuration with each key's source. */
#include <stdio.h>
#include <string.h>

#include "engram/engram.h"
#include "hal/config_keys.h"
#include "hal/registry.h"

static void print_caps(const engram_transport_caps_t *caps)
{
    static const char *const kinds[] = {"host", "cuda_device", "cuda_host_numa"};
    printf("      caps:");
    if (caps->flags & ENGRAM_CAP_HOST_INITIATED)
        printf(" host-initiated");
    if (caps->flags & ENGRAM_CAP_GPU_INITIATED)
        printf(" gpu-initiated");
    if (caps->flags & ENGRAM_CAP_HYBRID)
        printf(" hybrid");
    if (caps->flags & ENGRAM_CAP_CROSS_HOST)
        printf(" cross-host");
    printf("; queues %d, outstanding/queue %d; reads", caps->max_queues, caps->max_outstanding);
    for (int k = 0; k < 3; k++)
        if (caps->read_kinds & ENGRAM_MEM_KIND_BIT(k))
            printf(" %s", kinds[k]);
    printf("; writes");
    for (int k = 0; k < 3; k++)
        if (caps->write_kinds & ENGRAM_MEM_KIND_BIT(k))
            printf(" %s", kinds[k]);
    printf("\n");
}

static void print_backend(const engram_builtin_t *b, engram_group_t *g, const engram_config_t *cfg)
{
    const char *why = "";
    const engram_transport_ops_t *ops = engram_registry_builtin_ops(b, &why);
    if (ops == NULL) {
        printf("  %-10s available: no  (%s)\n", b->name, why);
        return;
    }
    if (!ops->available(g, &why)) {
        printf("  %-10s available: no  (%s)\n", b->name, why);
        return;
    }
    engram_transport_t *t;
    engram_status_t st = ops->open(g, cfg, &t);
    if (st != ENGRAM_OK) {
        printf("  %-10s available: no  (open failed: %s)\n", b->name, engram_last_error());
        return;
    }
    printf("  %-10s available: yes\n", b->name);
    engram_transport_caps_t caps;
    ops->caps(t, &caps);
    print_caps(&caps);
    if (ops->describe) {
        char desc[1024] = "";
        ops->describe(t, desc, sizeof(desc));
        if (desc[0])
            printf("      selected: %s\n", desc);
    }
    ops->close(t);
}

int main(void)
{
    printf("engram %s\n", engram_version(NULL, NULL, NULL));
    engram_config_t *cfg;
    if (engram_config_create(&cfg) != ENGRAM_OK) {
        fprintf(stderr, "engram_info: configuration error: %s\n", engram_last_error());
        return 1;
    }
    /* availability checks and opens may be collective: a group of one */
    engram_group_t *g;
    if (engram_group_solo_create(&g) != ENGRAM_OK) {
        fprintf(stderr, "engram_info: %s\n", engram_last_error());
        engram_config_destroy(cfg);
        return 1;
    }
    const char *modules = engram_registry_module_dir();
    printf("\nbackends (built in or modules from %s; plugins load from plugin_path):\n",
           modules[0] ? modules : "(module directory unknown)");
    for (int i = 0; i < engram_registry_builtin_count(); i++)
        print_backend(engram_registry_builtin(i), g, cfg);
    printf("\nconfiguration (ENGRAM_<KEY> env > ENGRAM_CONFIG_FILE > default; API calls override all):\n");
    engram_config_print(cfg, stdout);
    engram_group_destroy(g);
    engram_config_destroy(cfg);
    return 0;
}
