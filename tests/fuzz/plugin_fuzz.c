/* libFuzzer target: the plugin loader (engram_registry_load_plugin) on
 * malformed shared objects. Input byte 0 picks what is written as
 * <dir>/libengram_transport_x.so:
 *   0: the remaining bytes themselves (not an ELF object, or a broken one);
 *   1: the template plugin, its export filled from a plugin_fuzz_ctl_t taken
 *      from the remaining bytes (ABI version, ops NULL, ops size, name,
 *      missing functions);
 *   2: the template built without the plugin symbol;
 *   3: the template with its ELF identification and type/machine/version
 *      fields XORed with the remaining bytes and the file cut inside its
 *      header and program header table (dlopen must refuse it cleanly).
 * The loader must return an error for every malformed case and accept
 * exactly the well-formed export; it must never crash. */
#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hal/registry.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/plugin_fuzz_ctl.h"

typedef struct blob {
    uint8_t *bytes;
    size_t size;
} blob_t;

static blob_t template_so, template_nosym_so;
static char work_dir[4096], ctl_path[4200];
static unsigned generation; /* an accepted plugin stays loaded: next one goes to a fresh directory */

static blob_t read_all(const char *path)
{
    blob_t b = {0};
    FILE *f = path ? fopen(path, "rb") : NULL;
    if (f == NULL) {
        fprintf(stderr, "plugin_fuzz: cannot read template '%s'\n", path ? path : "(unset)");
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    b.size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    b.bytes = malloc(b.size);
    if (fread(b.bytes, 1, b.size, f) != b.size)
        exit(2);
    fclose(f);
    return b;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    template_so = read_all(getenv("FUZZ_PLUGIN_TEMPLATE"));
    template_nosym_so = read_all(getenv("FUZZ_PLUGIN_TEMPLATE_NOSYM"));
    const char *tmp = getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp";
    snprintf(work_dir, sizeof(work_dir), "%s/plugin_fuzz.XXXXXX", tmp);
    if (mkdtemp(work_dir) == NULL)
        exit(2);
    snprintf(ctl_path, sizeof(ctl_path), "%s/ctl", work_dir);
    setenv("FUZZ_PLUGIN_CTL", ctl_path, 1);
    return 0;
}

static void write_file(const char *path, const void *bytes, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL || (size && fwrite(bytes, 1, size, f) != size) || fclose(f) != 0)
        exit(2);
}

/* Cut point inside the ELF header + program headers, or right after them:
 * dlopen refuses the first, and the loader refuses the second as truncated
 * (its segments lie past the end of the file). */
static size_t header_end(const blob_t *b)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)b->bytes;
    return eh->e_phoff + (size_t)eh->e_phnum * eh->e_phentsize;
}

static bool ctl_well_formed(const plugin_fuzz_ctl_t *c)
{
    size_t min = offsetof(engram_transport_ops_v3_t, close) + sizeof(void (*)(void));
    return c->abi_version == ENGRAM_TRANSPORT_ABI_VERSION_V3 && !c->ops_null && plugin_fuzz_ops_size(c) >= min &&
           (c->fn_mask & PLUGIN_FUZZ_ALL_FNS) == PLUGIN_FUZZ_ALL_FNS && !(c->fn_mask & PLUGIN_FUZZ_NAME_NULL) &&
           strncmp(c->name, "x", sizeof(c->name)) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input_t in = {data, size};
    unsigned mode = (unsigned)(fuzz_take(&in, 1) % 4);
    char dir[4200], file[4300];
    snprintf(dir, sizeof(dir), "%s/%u", work_dir, generation);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        exit(2);
    snprintf(file, sizeof(file), "%s/libengram_transport_x.so", dir);
    plugin_fuzz_ctl_t ctl;
    memset(&ctl, 0, sizeof(ctl));
    bool expect_ok = false;
    if (mode == 0) {
        write_file(file, in.data, in.size);
    } else if (mode == 3) {
        blob_t b = {malloc(template_so.size), template_so.size};
        memcpy(b.bytes, template_so.bytes, b.size);
        size_t cut = (size_t)fuzz_take(&in, 2) % (header_end(&template_so) + 1);
        for (size_t i = 0; i < offsetof(Elf64_Ehdr, e_entry) && in.size > 0; i++)
            b.bytes[i] ^= (uint8_t)fuzz_take(&in, 1);
        write_file(file, b.bytes, cut);
        free(b.bytes);
    } else {
        memcpy(&ctl, in.data, in.size < sizeof(ctl) ? in.size : sizeof(ctl));
        write_file(ctl_path, &ctl, sizeof(ctl));
        const blob_t *t = mode == 1 ? &template_so : &template_nosym_so;
        write_file(file, t->bytes, t->size);
        expect_ok = mode == 1 && ctl_well_formed(&ctl);
    }
    const engram_transport_ops_t *ops = NULL;
    engram_status_t st = engram_registry_load_plugin("x", dir, &ops);
    if (st == ENGRAM_OK) {
        if (!expect_ok || ops == NULL || strcmp(ops->name, "x") != 0)
            abort(); /* a malformed plugin was accepted */
        generation++;
    } else if (expect_ok || st > 0 || ops != NULL) {
        abort(); /* a well-formed plugin was refused, or an error left *out set */
    }
    unlink(file);
    return 0;
}
