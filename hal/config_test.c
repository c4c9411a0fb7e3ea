/* Config: defaults, file, env and API precedence with per-key sources, and
 * every error naming what was wrong. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hal/config.h"
#include "hal/config_keys.h"
#include "hal/log.h"
#include "hal/status.h"
#include "hal/testdata/check_error.h"
#include "tests/check.h"

static char file_path[4096];

/* Writes `text` to a temp file and points ENGRAM_CONFIG_FILE at it. */
static void use_file(const char *text)
{
    const char *dir = getenv("TEST_TMPDIR");
    snprintf(file_path, sizeof(file_path), "%s/engram.conf", dir ? dir : "/tmp");
    FILE *f = fopen(file_path, "w");
    CHECK(f != NULL);
    CHECK(fputs(text, f) >= 0);
    CHECK(fclose(f) == 0);
    CHECK(setenv("ENGRAM_CONFIG_FILE", file_path, 1) == 0);
}

static void clear_env(void)
{
    unsetenv("ENGRAM_CONFIG_FILE");
    unsetenv("ENGRAM_FLUSH_DEPT");
    unsetenv("ENGRAM_flush_depth");
    unsetenv("ENGRAM_UCX_WINDOW");
    for (int i = 0; engram_config_key(i) != NULL; i++) {
        char var[64] = "ENGRAM_";
        size_t n = strlen(var);
        for (const char *c = engram_config_key(i)->name; *c && n + 1 < sizeof(var); c++)
            var[n++] = (char)(*c >= 'a' && *c <= 'z' ? *c - 'a' + 'A' : *c);
        var[n] = '\0';
        unsetenv(var);
    }
}

static void check_value(const engram_config_t *cfg, const char *key, const char *value, engram_config_source_t src)
{
    char buf[256];
    engram_config_source_t got;
    CHECK_OK(engram_config_get(cfg, key, buf, sizeof(buf)));
    if (strcmp(buf, value) != 0) {
        fprintf(stderr, "%s = '%s', expected '%s'\n", key, buf, value);
        exit(1);
    }
    CHECK_OK(engram_config_source(cfg, key, &got));
    CHECK(got == src);
}

static engram_config_t *create_ok(void)
{
    engram_config_t *cfg = NULL;
    CHECK_OK(engram_config_create(&cfg));
    CHECK(cfg != NULL);
    return cfg;
}

static void test_defaults(void)
{
    clear_env();
    engram_config_t *cfg = create_ok();
    int n = 0;
    for (const engram_config_key_decl_t *k; (k = engram_config_key(n)) != NULL; n++)
        check_value(cfg, k->name, k->def, ENGRAM_CONFIG_SRC_DEFAULT);
    CHECK(n == ENGRAM_CONFIG_NUM_KEYS);
    CHECK(engram_config_key(-1) == NULL);
    CHECK(engram_config_key(0)->type == ENGRAM_CONFIG_STRING);
    CHECK(strcmp(engram_config_type_str(ENGRAM_CONFIG_PATHS), "PATHS") == 0);
    CHECK(cfg->num_extra == 0);
    CHECK(cfg->flush_depth == 768);
    CHECK(cfg->numa_node == -1);
    CHECK(cfg->mode == ENGRAM_MODE_DIRECT);
    CHECK(cfg->huge_pages == ENGRAM_HUGE_AUTO);
    CHECK(strcmp(cfg->transport, "auto") == 0);
    CHECK(cfg->plugin_path[0] == '\0');
    CHECK(cfg->gpu_sms == ENGRAM_CONFIG_INT_AUTO);
    CHECK(cfg->dedup == ENGRAM_DEDUP_AUTO);
    engram_config_destroy(cfg);
}

/* An "auto|min..max" key takes auto, the range, and prints auto back. */
static void test_int_or_auto(void)
{
    clear_env();
    engram_config_t *cfg = create_ok();
    CHECK_OK(engram_config_set(cfg, "gpu_sms", "8"));
    CHECK(cfg->gpu_sms == 8);
    check_value(cfg, "gpu_sms", "8", ENGRAM_CONFIG_SRC_API);
    CHECK_OK(engram_config_set(cfg, "gpu_sms", "0"));
    CHECK(cfg->gpu_sms == 0);
    CHECK_OK(engram_config_set(cfg, "gpu_sms", "auto"));
    CHECK(cfg->gpu_sms == ENGRAM_CONFIG_INT_AUTO);
    check_value(cfg, "gpu_sms", "auto", ENGRAM_CONFIG_SRC_API);
    CHECK_ERROR(engram_config_set(cfg, "gpu_sms", "-1"), ENGRAM_ERR_INVALID,
                "gpu_sms: '-1' is out of range auto|0..4096");
    CHECK_ERROR(engram_config_set(cfg, "gpu_sms", "Auto"), ENGRAM_ERR_INVALID,
                "gpu_sms: 'Auto' is not a decimal integer in auto|0..4096");
    CHECK_ERROR(engram_config_set(cfg, "flush_depth", "auto"), ENGRAM_ERR_INVALID,
                "flush_depth: 'auto' is not a decimal integer in 1..1048576");
    CHECK(cfg->gpu_sms == ENGRAM_CONFIG_INT_AUTO); /* nothing stored on failure */
    CHECK_OK(engram_config_set(cfg, "dedup", "on"));
    CHECK(cfg->dedup == ENGRAM_DEDUP_ON);
    CHECK_ERROR(engram_config_set(cfg, "dedup", "yes"), ENGRAM_ERR_INVALID, "dedup: 'yes' is not one of off|on|auto");
    engram_config_destroy(cfg);
    CHECK(setenv("ENGRAM_GPU_SMS", "16", 1) == 0);
    cfg = create_ok();
    CHECK(cfg->gpu_sms == 16);
    engram_config_destroy(cfg);
    clear_env();
}

static void test_env_over_default(void)
{
    clear_env();
    CHECK(setenv("ENGRAM_FLUSH_DEPTH", "8", 1) == 0);
    CHECK(setenv("ENGRAM_MODE", "hybrid", 1) == 0);
    CHECK(setenv("ENGRAM_NUMA_NODE", "-1", 1) == 0);
    CHECK(setenv("ENGRAM_PLUGIN_PATH", "/opt/engram/plugins", 1) == 0);
    CHECK(setenv("ENGRAM_LOG_LEVEL", "warn", 1) == 0); /* not a key, but accepted */
    engram_config_t *cfg = create_ok();
    check_value(cfg, "flush_depth", "8", ENGRAM_CONFIG_SRC_ENV);
    check_value(cfg, "mode", "hybrid", ENGRAM_CONFIG_SRC_ENV);
    check_value(cfg, "plugin_path", "/opt/engram/plugins", ENGRAM_CONFIG_SRC_ENV);
    check_value(cfg, "fetch_slots", "4", ENGRAM_CONFIG_SRC_DEFAULT);
    CHECK(cfg->flush_depth == 8);
    CHECK(cfg->mode == ENGRAM_MODE_HYBRID);
    engram_config_destroy(cfg);
    unsetenv("ENGRAM_LOG_LEVEL");
}

static void test_file_over_default(void)
{
    clear_env();
    use_file("# engram settings\n"
             "\n"
             "flush_depth = 16\n"
             "   mode=hybrid   \n"
             "\t# indented comment\n"
             "plugin_path = /a/b:/c\n"
             "huge_pages = off");
    engram_config_t *cfg = create_ok();
    check_value(cfg, "flush_depth", "16", ENGRAM_CONFIG_SRC_FILE);
    check_value(cfg, "mode", "hybrid", ENGRAM_CONFIG_SRC_FILE);
    check_value(cfg, "plugin_path", "/a/b:/c", ENGRAM_CONFIG_SRC_FILE);
    check_value(cfg, "huge_pages", "off", ENGRAM_CONFIG_SRC_FILE);
    check_value(cfg, "timeout_ms", "30000", ENGRAM_CONFIG_SRC_DEFAULT);
    CHECK(cfg->huge_pages == ENGRAM_HUGE_OFF);
    engram_config_destroy(cfg);

    /* An empty ENGRAM_CONFIG_FILE means no file. */
    CHECK(setenv("ENGRAM_CONFIG_FILE", "", 1) == 0);
    cfg = create_ok();
    check_value(cfg, "flush_depth", "768", ENGRAM_CONFIG_SRC_DEFAULT);
    engram_config_destroy(cfg);
}

static void test_env_over_file_api_over_env(void)
{
    clear_env();
    use_file("flush_depth = 16\nmode = hybrid\n");
    CHECK(setenv("ENGRAM_FLUSH_DEPTH", "32", 1) == 0);
    engram_config_t *cfg = create_ok();
    check_value(cfg, "flush_depth", "32", ENGRAM_CONFIG_SRC_ENV);
    check_value(cfg, "mode", "hybrid", ENGRAM_CONFIG_SRC_FILE);

    CHECK_OK(engram_config_set(cfg, "flush_depth", "64"));
    CHECK_OK(engram_config_set(cfg, "mode", "direct"));
    CHECK_OK(engram_config_set(cfg, "transport", "testplug"));
    check_value(cfg, "flush_depth", "64", ENGRAM_CONFIG_SRC_API);
    check_value(cfg, "mode", "direct", ENGRAM_CONFIG_SRC_API);
    check_value(cfg, "transport", "testplug", ENGRAM_CONFIG_SRC_API);
    CHECK(cfg->flush_depth == 64);
    CHECK(cfg->mode == ENGRAM_MODE_DIRECT);

    /* A rejected set changes neither the value nor its source. */
    CHECK_ERROR(engram_config_set(cfg, "flush_depth", "0"), ENGRAM_ERR_INVALID,
                "flush_depth: '0' is out of range 1..1048576");
    check_value(cfg, "flush_depth", "64", ENGRAM_CONFIG_SRC_API);
    CHECK_OK(engram_config_set(cfg, "timeout_ms", "5"));
    check_value(cfg, "timeout_ms", "5", ENGRAM_CONFIG_SRC_API);
    engram_config_destroy(cfg);
}

/* A transport lookup that must not happen: the key names no transport. */
static bool find_never(void *ctx, int index, engram_config_keyset_t *set, char *why, size_t len)
{
    (void)ctx, (void)index, (void)set, (void)why, (void)len;
    CHECK(!"a transport was looked up for a key that names none");
    return false;
}

/* engram_config_create succeeds, but a non-core key it holds names no
 * transport: engram_config_check_keys fails with `text`. */
static void check_unknown(const char *text)
{
    engram_config_t *cfg = create_ok();
    const char *names[] = {"other", "someone"};
    CHECK_ERROR(engram_config_check_keys(cfg, names, 2, find_never, NULL), ENGRAM_ERR_INVALID, text);
    CHECK_ERROR(engram_config_check_keys(cfg, names, 2, find_never, NULL), ENGRAM_ERR_INVALID,
                "(a transport's keys are <transport>_<rest>; transports: other, someone)");
    CHECK_ERROR(engram_config_check_keys(cfg, NULL, 0, find_never, NULL), ENGRAM_ERR_INVALID, "; transports: none)");
    engram_config_destroy(cfg);
}

/* engram_config_create must fail with `status` and a message containing `text`. */
static void check_create_fails(engram_status_t status, const char *text)
{
    engram_config_t *cfg = (engram_config_t *)&cfg;
    CHECK_ERROR(engram_config_create(&cfg), status, text);
    CHECK(cfg == (engram_config_t *)&cfg); /* out untouched on failure */
}

static void test_file_errors(void)
{
    char text[8192];
    clear_env();
    /* A key that is not a core key may be a transport's: it is checked
     * once the transports are known (check_unknown). */
    use_file("flush_depth = 16\nflush_dept = 3\n");
    snprintf(text, sizeof(text), "%s:2: unknown key 'flush_dept': not a core key, and no transport's name "
             "followed by '_' begins it", file_path);
    check_unknown(text);
    use_file("Flush-Dept = 3\n");
    snprintf(text, sizeof(text), "%s:1: unknown key 'Flush-Dept' (not a core key, and no transport key", file_path);
    check_create_fails(ENGRAM_ERR_INVALID, text);

    use_file("# header\n\nthis line has no equals sign\n");
    snprintf(text, sizeof(text), "%s:3: expected 'key = value', got 'this line has no equals sign'", file_path);
    check_create_fails(ENGRAM_ERR_INVALID, text);

    use_file("mode = rail\n");
    snprintf(text, sizeof(text), "%s:1: mode: 'rail' is not one of direct|hybrid", file_path);
    check_create_fails(ENGRAM_ERR_INVALID, text);

    use_file("fetch_slots = 8 # trailing comments are not stripped\n");
    snprintf(text, sizeof(text), "%s:1: fetch_slots: '8 # trailing comments are not stripped' is not a decimal",
             file_path);
    check_create_fails(ENGRAM_ERR_INVALID, text);

    const char *dir = getenv("TEST_TMPDIR");
    snprintf(file_path, sizeof(file_path), "%s/does/not/exist.conf", dir ? dir : "/tmp");
    CHECK(setenv("ENGRAM_CONFIG_FILE", file_path, 1) == 0);
    snprintf(text, sizeof(text), "ENGRAM_CONFIG_FILE=%s cannot be read", file_path);
    check_create_fails(ENGRAM_ERR_IO, text);
    clear_env();
}

static void test_env_errors(void)
{
    clear_env();
    CHECK(setenv("ENGRAM_FLUSH_DEPT", "3", 1) == 0);
    check_unknown("ENGRAM_FLUSH_DEPT: unknown key 'flush_dept': not a core key, and no transport's name");
    clear_env();
    CHECK(setenv("ENGRAM_flush_depth", "3", 1) == 0);
    check_create_fails(ENGRAM_ERR_INVALID,
                       "unknown configuration variable ENGRAM_flush_depth (a key's variable is ENGRAM_ and the key "
                       "upper-cased); core keys are: transport, mode, num_qps");
    clear_env();

    const struct {
        const char *var, *value, *message;
    } bad[] = {
        {"ENGRAM_FLUSH_DEPTH", "0", "ENGRAM_FLUSH_DEPTH: flush_depth: '0' is out of range 1..1048576"},
        {"ENGRAM_FLUSH_DEPTH", "1048577", "flush_depth: '1048577' is out of range 1..1048576"},
        {"ENGRAM_NUMA_NODE", "-2", "numa_node: '-2' is out of range -1..1023"},
        {"ENGRAM_FLUSH_DEPTH", "abc", "flush_depth: 'abc' is not a decimal integer in 1..1048576"},
        {"ENGRAM_FLUSH_DEPTH", "12x", "flush_depth: '12x' is not a decimal integer"},
        {"ENGRAM_FLUSH_DEPTH", "0x10", "flush_depth: '0x10' is not a decimal integer"},
        {"ENGRAM_FLUSH_DEPTH", "1 2", "flush_depth: '1 2' is not a decimal integer"},
        {"ENGRAM_FLUSH_DEPTH", " ", "flush_depth: '' is not a decimal integer"},
        {"ENGRAM_FLUSH_DEPTH", "+12", "flush_depth: '+12' is not a decimal integer"},
        {"ENGRAM_FLUSH_DEPTH", "", "flush_depth: '' is not a decimal integer"},
        {"ENGRAM_FLUSH_DEPTH", "-", "flush_depth: '-' is not a decimal integer"},
        {"ENGRAM_TIMEOUT_MS", "99999999999999999999", "timeout_ms: '99999999999999999999' is not a decimal"},
        {"ENGRAM_MODE", "rail", "ENGRAM_MODE: mode: 'rail' is not one of direct|hybrid"},
        {"ENGRAM_MODE", "Direct", "mode: 'Direct' is not one of direct|hybrid"},
        {"ENGRAM_HUGE_PAGES", "au", "huge_pages: 'au' is not one of auto|on|off"},
        /* a plugin_path that cannot be used is an error here, whatever
         * transport is configured */
        {"ENGRAM_PLUGIN_PATH", ".", "ENGRAM_PLUGIN_PATH: plugin_path: entry '.' is relative; entries must be absolute"},
        {"ENGRAM_PLUGIN_PATH", "/a:lib", "plugin_path: entry 'lib' is relative"},
        {"ENGRAM_PLUGIN_PATH", "/a::/b", "plugin_path: '/a::/b' has an empty entry"},
        {"ENGRAM_PLUGIN_PATH", "/a:", "plugin_path: '/a:' has an empty entry"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CHECK(setenv(bad[i].var, bad[i].value, 1) == 0);
        check_create_fails(ENGRAM_ERR_INVALID, bad[i].message);
        unsetenv(bad[i].var);
    }

    char long_value[ENGRAM_CONFIG_STRING_MAX + 72];
    memset(long_value, 'p', sizeof(long_value) - 1);
    long_value[0] = '/';
    long_value[sizeof(long_value) - 1] = '\0';
    CHECK(setenv("ENGRAM_PLUGIN_PATH", long_value, 1) == 0);
    check_create_fails(ENGRAM_ERR_INVALID, "plugin_path: value of 1095 characters is longer than the 1023 allowed");
    clear_env();
}

static void test_api_errors(void)
{
    clear_env();
    engram_config_t *cfg = create_ok();
    CHECK_ERROR(engram_config_set(cfg, "Flush_Dept", "3"), ENGRAM_ERR_INVALID,
                "engram_config_set: unknown key 'Flush_Dept' (not a core key, and no transport key is named so");
    CHECK_ERROR(engram_config_set(cfg, "plugin_path", "relative/dir"), ENGRAM_ERR_INVALID,
                "plugin_path: entry 'relative/dir' is relative");
    check_value(cfg, "plugin_path", "", ENGRAM_CONFIG_SRC_DEFAULT);
    CHECK(cfg->num_extra == 0);
    CHECK_ERROR(engram_config_set(cfg, "mode", "rail"), ENGRAM_ERR_INVALID,
                "mode: 'rail' is not one of direct|hybrid");
    CHECK_ERROR(engram_config_set(cfg, "mode", NULL), ENGRAM_ERR_INVALID, "NULL value for mode");
    check_value(cfg, "mode", "direct", ENGRAM_CONFIG_SRC_DEFAULT);

    char long_value[ENGRAM_CONFIG_STRING_MAX + 1];
    memset(long_value, 'x', sizeof(long_value) - 1);
    long_value[ENGRAM_CONFIG_STRING_MAX] = '\0';
    CHECK_ERROR(engram_config_set(cfg, "transport", long_value), ENGRAM_ERR_INVALID,
                "transport: value of 1024 characters is longer than the 1023 allowed");
    long_value[ENGRAM_CONFIG_STRING_MAX - 1] = '\0'; /* exactly fits */
    CHECK_OK(engram_config_set(cfg, "transport", long_value));
    CHECK(strcmp(cfg->transport, long_value) == 0);
    engram_config_destroy(cfg);
}

static void test_get_source_print(void)
{
    clear_env();
    CHECK(setenv("ENGRAM_FETCH_SLOTS", "16", 1) == 0);
    engram_config_t *cfg = create_ok();
    CHECK_OK(engram_config_set(cfg, "mode", "hybrid"));

    char small[3] = "zz";
    CHECK_ERROR(engram_config_get(cfg, "timeout_ms", small, sizeof(small)), ENGRAM_ERR_OVERFLOW,
                "timeout_ms needs 6 bytes, buffer has 3");
    CHECK(small[2] == '\0');
    CHECK_ERROR(engram_config_get(cfg, "nope", small, sizeof(small)), ENGRAM_ERR_INVALID, "unknown key 'nope'");
    engram_config_source_t src;
    CHECK_ERROR(engram_config_source(cfg, "nope", &src), ENGRAM_ERR_INVALID, "unknown key 'nope'");

    CHECK(strcmp(engram_config_source_str(ENGRAM_CONFIG_SRC_DEFAULT), "default") == 0);
    CHECK(strcmp(engram_config_source_str(ENGRAM_CONFIG_SRC_FILE), "file") == 0);
    CHECK(strcmp(engram_config_source_str(ENGRAM_CONFIG_SRC_ENV), "env") == 0);
    CHECK(strcmp(engram_config_source_str(ENGRAM_CONFIG_SRC_API), "api") == 0);

    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    CHECK(out != NULL);
    engram_config_print(cfg, out);
    CHECK(fclose(out) == 0);
    int lines = 0;
    for (const char *c = text; *c; c++)
        lines += *c == '\n';
    CHECK(lines == ENGRAM_CONFIG_NUM_KEYS);
    CHECK(strstr(text, "fetch_slots  = 16           [env] accepted: 1..64; Receive slots") != NULL);
    CHECK(strstr(text, "mode         = hybrid       [api] accepted: direct|hybrid; direct:") != NULL);
    CHECK(strstr(text, "flush_depth  = 768          [default] accepted: 1..1048576;") != NULL);
    CHECK(strstr(text, "plugin_path  = \"\"           [default]") != NULL);
    free(text);
    engram_config_destroy(cfg);
    clear_env();
}

/* A file that is not a readable regular text file says what it is
 * instead of "read failed after line 0 (I/O error)". */
static void test_file_kinds(void)
{
    clear_env();
    const char *tmp = getenv("TEST_TMPDIR");
    char path[4096], text[8192];
    snprintf(path, sizeof(path), "%s/conf.d", tmp ? tmp : "/tmp");
    mkdir(path, 0700);
    CHECK(setenv("ENGRAM_CONFIG_FILE", path, 1) == 0);
    snprintf(text, sizeof(text), "ENGRAM_CONFIG_FILE=%s is a directory, not a configuration file", path);
    check_create_fails(ENGRAM_ERR_INVALID, text);

    snprintf(path, sizeof(path), "%s/conf.fifo", tmp ? tmp : "/tmp");
    unlink(path);
    CHECK(mkfifo(path, 0600) == 0);
    CHECK(setenv("ENGRAM_CONFIG_FILE", path, 1) == 0);
    snprintf(text, sizeof(text), "ENGRAM_CONFIG_FILE=%s is a FIFO, not a configuration file", path);
    check_create_fails(ENGRAM_ERR_INVALID, text); /* and does not wait for a writer */

    CHECK(setenv("ENGRAM_CONFIG_FILE", "/dev/null", 1) == 0);
    check_create_fails(ENGRAM_ERR_INVALID, "ENGRAM_CONFIG_FILE=/dev/null is a character device");

    snprintf(path, sizeof(path), "%s/huge.conf", tmp ? tmp : "/tmp");
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0 && ftruncate(fd, 2 << 20) == 0 && close(fd) == 0);
    CHECK(setenv("ENGRAM_CONFIG_FILE", path, 1) == 0);
    snprintf(text, sizeof(text), "ENGRAM_CONFIG_FILE=%s is 2097152 bytes, more than the 1048576", path);
    check_create_fails(ENGRAM_ERR_INVALID, text);

    snprintf(path, sizeof(path), "%s/nul.conf", tmp ? tmp : "/tmp");
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL && fwrite("mode = direct\nfetch_slots = 8\0junk\n", 1, 35, f) == 35 && fclose(f) == 0);
    CHECK(setenv("ENGRAM_CONFIG_FILE", path, 1) == 0);
    snprintf(text, sizeof(text), "%s:2: line contains a NUL byte", path);
    check_create_fails(ENGRAM_ERR_INVALID, text);

    /* Unreadable: root reads it anyway, so only checked for other users. */
    use_file("mode = direct\n");
    CHECK(chmod(file_path, 0) == 0);
    if (geteuid() != 0) {
        snprintf(text, sizeof(text), "ENGRAM_CONFIG_FILE=%s cannot be read: Permission denied", file_path);
        check_create_fails(ENGRAM_ERR_IO, text);
    }
    CHECK(chmod(file_path, 0600) == 0);
    /* A last line without a newline, and CRLF endings, still parse. */
    use_file("mode = hybrid\r\nfetch_slots = 8");
    engram_config_t *cfg = create_ok();
    check_value(cfg, "mode", "hybrid", ENGRAM_CONFIG_SRC_FILE);
    check_value(cfg, "fetch_slots", "8", ENGRAM_CONFIG_SRC_FILE);
    engram_config_destroy(cfg);
    clear_env();
}

/* The fake transports engram_config_check_keys looks up: names[i]'s keys
 * are sets[i] (NULL: it cannot be loaded, for `why`); calls counts the
 * lookups of each. */
typedef struct fake_transports {
    const engram_config_keyset_t *sets[4];
    const char *why;
    int calls[4];
} fake_transports_t;

static bool find_fake(void *ctx, int index, engram_config_keyset_t *set, char *why, size_t len)
{
    fake_transports_t *f = ctx;
    CHECK(index >= 0 && index < 4);
    f->calls[index]++;
    if (f->sets[index] == NULL) {
        snprintf(why, len, "%s", f->why);
        return false;
    }
    *set = *f->sets[index];
    return true;
}

/* Keys that are not core keys: kept with their source and where, checked
 * against the declarations of the one transport each names. */
static void test_transport_keys(void)
{
    clear_env();
    use_file("ucx_window = 16\nmlx5dv_device = mlx5_1\n");
    CHECK(setenv("ENGRAM_UCX_WINDOW", "32", 1) == 0);
    engram_config_t *cfg = create_ok();
    check_value(cfg, "ucx_window", "32", ENGRAM_CONFIG_SRC_ENV);
    check_value(cfg, "mlx5dv_device", "mlx5_1", ENGRAM_CONFIG_SRC_FILE);
    CHECK_OK(engram_config_set(cfg, "ucx_window", "64"));
    check_value(cfg, "ucx_window", "64", ENGRAM_CONFIG_SRC_API);
    CHECK(cfg->num_extra == 2);

    /* The transport a key names: the longest name followed by '_'. */
    const char *names[] = {"mlx5", "ucx", "mlx5dv", "plain"};
    CHECK(engram_config_key_transport("mlx5dv_device", names, 4) == 2);
    CHECK(engram_config_key_transport("mlx5_device", names, 4) == 0);
    CHECK(engram_config_key_transport("ucx_", names, 4) == 1);
    CHECK(engram_config_key_transport("ucx", names, 4) == -1);
    CHECK(engram_config_key_transport("ucxx_window", names, 4) == -1);
    CHECK(engram_config_key_transport("mlx5dvx_device", names, 4) == -1);
    CHECK(engram_config_key_transport("ucx_window", names, 0) == -1);

    static const engram_config_key_decl_t ucx[] = {{"ucx_window", ENGRAM_CONFIG_INT, "256", "1..65536", "w"},
                                                   {"ucx_rndv", ENGRAM_CONFIG_INT, "0", "0..1", "r"}};
    static const engram_config_key_decl_t mlx5[] = {{"mlx5dv_device", ENGRAM_CONFIG_STRING, "", "a device", "d"}};
    engram_config_keyset_t sets[] = {{"ucx", ucx, 2, "ucx"}, {"mlx5dv", mlx5, 1, "mlx5dv"}};
    static const engram_config_keyset_t plain = {"plain", NULL, 0, "plain"};
    fake_transports_t fake = {{NULL, &sets[0], &sets[1], &plain}, "mlx5 is not a transport here", {0}};
    CHECK_OK(engram_config_check_keys(cfg, names, 4, find_fake, &fake));
    /* Only the transports named were looked up, each once. */
    CHECK(fake.calls[0] == 0 && fake.calls[1] == 1 && fake.calls[2] == 1 && fake.calls[3] == 0);
    CHECK_OK(engram_config_set(cfg, "ucx_rndv", "1"));
    memset(fake.calls, 0, sizeof(fake.calls));
    CHECK_OK(engram_config_check_keys(cfg, names, 4, find_fake, &fake));
    CHECK(fake.calls[1] == 1);
    /* A transport that does not declare the key: its keys listed. */
    CHECK_OK(engram_config_set(cfg, "ucx_windows", "1"));
    CHECK_ERROR(engram_config_check_keys(cfg, names, 4, find_fake, &fake), ENGRAM_ERR_INVALID,
                "engram_config_set: unknown key 'ucx_windows': not a core key, and transport ucx declares no such "
                "key (its keys: ucx_window, ucx_rndv)");
    engram_config_destroy(cfg);
    cfg = create_ok();
    CHECK_OK(engram_config_set(cfg, "mlx5_device", "1"));
    fake.sets[0] = &plain;
    CHECK_ERROR(engram_config_check_keys(cfg, names, 4, find_fake, &fake), ENGRAM_ERR_INVALID,
                "engram_config_set: unknown key 'mlx5_device': not a core key, and transport mlx5 declares no such "
                "key (its keys: none)");
    fake.sets[0] = NULL;
    engram_config_destroy(cfg);
    cfg = create_ok();
    /* A transport that cannot be loaded: its reason. */
    fake.sets[2] = NULL;
    CHECK_ERROR(engram_config_check_keys(cfg, names, 4, find_fake, &fake), ENGRAM_ERR_INVALID,
                ":2: key 'mlx5dv_device' is transport mlx5dv's, which cannot be loaded: mlx5 is not a transport here");
    fake.why = "";
    CHECK_ERROR(engram_config_check_keys(cfg, names, 4, find_fake, &fake), ENGRAM_ERR_INVALID,
                "which cannot be loaded: no reason given");
    fake.sets[2] = &sets[1];
    /* A transport whose table breaks the rules is refused when looked up. */
    static const engram_config_key_decl_t unnamed[] = {{"window", ENGRAM_CONFIG_INT, "1", "1..2", "w"}};
    const engram_config_keyset_t bad = {"ucx", unnamed, 1, "ucx"};
    fake.sets[1] = &bad;
    CHECK_ERROR(engram_config_check_keys(cfg, names, 4, find_fake, &fake), ENGRAM_ERR_INVALID,
                "ucx: config key 'window' is not named after its transport");
    fake.sets[1] = &sets[0];
    /* A name that begins with no transport's name and '_'. */
    CHECK_OK(engram_config_set(cfg, "plainly_not", "1"));
    CHECK_ERROR(engram_config_check_keys(cfg, names, 4, find_fake, &fake), ENGRAM_ERR_INVALID,
                "engram_config_set: unknown key 'plainly_not': not a core key, and no transport's name followed by "
                "'_' begins it (a transport's keys are <transport>_<rest>; transports: mlx5, ucx, mlx5dv, plain)");
    engram_config_destroy(cfg);
    cfg = create_ok();
    CHECK_OK(engram_config_set(cfg, "plain_x", "1"));
    CHECK_ERROR(engram_config_check_keys(cfg, names, 4, find_fake, &fake), ENGRAM_ERR_INVALID,
                "engram_config_set: unknown key 'plain_x': not a core key, and transport plain declares no such key "
                "(its keys: none)");
    engram_config_destroy(cfg);
    cfg = create_ok();
    CHECK_OK(engram_config_set(cfg, "ucx_window", "0"));
    CHECK_ERROR(engram_config_check_keys(cfg, names, 4, find_fake, &fake), ENGRAM_ERR_INVALID,
                "engram_config_set: ucx's ucx_window: '0' is out of range 1..65536");
    engram_config_destroy(cfg);
    CHECK(setenv("ENGRAM_UCX_WINDOW", "32", 1) == 0);
    cfg = create_ok();

    /* The view: the transport's own key, set or default, and core keys. */
    CHECK_OK(engram_config_set(cfg, "ucx_window", "128"));
    engram_config_view_impl_t impl;
    engram_config_view_t view;
    engram_config_view_init(&view, &impl, cfg, &sets[0]);
    CHECK(view.size == sizeof(view));
    int64_t v = 0;
    CHECK_OK(view.get_int(&view, "ucx_window", &v));
    CHECK(v == 128);
    CHECK_OK(view.get_int(&view, "flush_depth", &v));
    CHECK(v == 768);
    CHECK_ERROR(view.get_int(&view, "mlx5dv_device", &v), ENGRAM_ERR_INVALID,
                "ucx reads config key 'mlx5dv_device', which is neither a core key nor one it declares");
    engram_config_view_init(&view, &impl, cfg, &sets[1]);
    const char *dev = NULL;
    CHECK_OK(view.get_string(&view, "mlx5dv_device", &dev));
    CHECK(strcmp(dev, "mlx5_1") == 0);

    /* Printed with their source and owner. */
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    CHECK(out != NULL);
    engram_config_print_keyset(cfg, &sets[0], out);
    engram_config_print_keyset(cfg, &sets[1], out);
    CHECK(fclose(out) == 0);
    CHECK(strstr(text, "ucx_window   = 128          [api] accepted: 1..65536; ucx: w\n") != NULL);
    CHECK(strstr(text, "mlx5dv_device = mlx5_1       [file] accepted: a device; mlx5dv: d\n") != NULL);
    free(text);
    engram_config_destroy(cfg);

    /* More distinct transport keys than the config holds. */
    clear_env();
    cfg = create_ok();
    for (int i = 0; i < ENGRAM_CONFIG_EXTRA_MAX; i++) {
        char name[32];
        snprintf(name, sizeof(name), "key_%d", i);
        CHECK_OK(engram_config_set(cfg, name, "1"));
    }
    CHECK_ERROR(engram_config_set(cfg, "one_more", "1"), ENGRAM_ERR_INVALID, "more than 16 transport keys set");
    CHECK_OK(engram_config_set(cfg, "key_3", "2")); /* replacing one is fine */
    engram_config_destroy(cfg);

    /* Declarations a transport gets wrong are refused before any use. */
    const struct {
        const char *transport;
        engram_config_key_decl_t decl;
        const char *message;
    } bad_decls[] = {
        {"x", {"Bad-Name", ENGRAM_CONFIG_INT, "1", "0..2", "h"}, "x: config key 'Bad-Name' is not 1..48 of [a-z0-9_]"},
        {"x", {"depth", ENGRAM_CONFIG_INT, "1", "0..2", "h"},
         "x: config key 'depth' is not named after its transport: transport x declares only keys named x_<rest>"},
        {"x", {"y_depth", ENGRAM_CONFIG_INT, "1", "0..2", "h"}, "x: config key 'y_depth' is not named after"},
        {"x", {"xx_depth", ENGRAM_CONFIG_INT, "1", "0..2", "h"}, "x: config key 'xx_depth' is not named after"},
        {"x", {"x_", ENGRAM_CONFIG_INT, "1", "0..2", "h"}, "x: config key 'x_' is not named after"},
        {"x", {"x", ENGRAM_CONFIG_INT, "1", "0..2", "h"}, "x: config key 'x' is not named after"},
        {"gpu", {"gpu_sms", ENGRAM_CONFIG_INT, "1", "0..2", "h"}, "x: config key 'gpu_sms' is a core key"},
        {NULL, {"x_depth", ENGRAM_CONFIG_INT, "1", "0..2", "h"},
         "x: declares config keys but has no transport name for them to begin with"},
        {"", {"x_depth", ENGRAM_CONFIG_INT, "1", "0..2", "h"}, "x: declares config keys but has no transport name"},
        {"Foo", {"foo_depth", ENGRAM_CONFIG_INT, "1", "0..2", "h"},
         "x: declares config keys, but its name 'Foo' holds 'F': keys are [a-z0-9_]"},
        {"my-plug", {"my_plug_depth", ENGRAM_CONFIG_INT, "1", "0..2", "h"}, "its name 'my-plug' holds '-'"},
        {"x", {"x_depth", ENGRAM_CONFIG_INT, "7", "0..2", "h"}, "x: default of x_depth: '7' is out of range 0..2"},
        {"x", {"x_kind", ENGRAM_CONFIG_ENUM, "c", "a|b", "h"}, "x: default of x_kind: 'c' is not one of a|b"},
        {"x", {"x_dirs", ENGRAM_CONFIG_PATHS, "rel", "dirs", "h"}, "x_dirs: entry 'rel' is relative"},
        {"x", {"x_n", ENGRAM_CONFIG_INT, "1", "lots", "h"}, "x_n: table range 'lots' is not min..max"},
        {"x", {"x_t", (engram_config_type_t)9, "1", "", "h"}, "x_t: declared with unknown type 9"},
        {"x", {"x_h", ENGRAM_CONFIG_INT, "1", "0..2", NULL},
         "x: config key 0 has a NULL name, default, accepted or help"},
    };
    for (size_t i = 0; i < sizeof(bad_decls) / sizeof(bad_decls[0]); i++) {
        engram_config_keyset_t set = {"x", &bad_decls[i].decl, 1, bad_decls[i].transport};
        CHECK_ERROR(engram_config_check_decls(&set), ENGRAM_ERR_INVALID, bad_decls[i].message);
    }
    static const engram_config_key_decl_t twice[] = {{"x_a", ENGRAM_CONFIG_INT, "1", "0..2", "h"},
                                                     {"x_a", ENGRAM_CONFIG_INT, "1", "0..2", "h"}};
    engram_config_keyset_t set = {"x", twice, 2, "x"};
    CHECK_ERROR(engram_config_check_decls(&set), ENGRAM_ERR_INVALID, "x: config key 'x_a' is declared twice");
    set.count = 1;
    CHECK_OK(engram_config_check_decls(&set));
    /* A transport without a name may declare nothing, and nothing is fine. */
    set = (engram_config_keyset_t){"x", NULL, 0, NULL};
    CHECK_OK(engram_config_check_decls(&set));
    clear_env();
}

/* One rule for blanks, whatever the source: those around a value are not
 * part of it (hal/blanks.h); ENGRAM_LOG_LEVEL follows it too, and a level
 * that is none is refused here as any bad value is. */
static void test_blanks(void)
{
    clear_env();
    use_file("fetch_slots = 8 \t\nmlx5dv_device =  mlx5_1  \n");
    CHECK(setenv("ENGRAM_FLUSH_DEPTH", " 12 ", 1) == 0);
    CHECK(setenv("ENGRAM_MODE", "hybrid\t", 1) == 0);
    CHECK(setenv("ENGRAM_UCX_WINDOW", "16 ", 1) == 0);
    CHECK(setenv("ENGRAM_LOG_LEVEL", "info ", 1) == 0);
    engram_config_t *cfg = create_ok();
    check_value(cfg, "fetch_slots", "8", ENGRAM_CONFIG_SRC_FILE);
    check_value(cfg, "mlx5dv_device", "mlx5_1", ENGRAM_CONFIG_SRC_FILE);
    check_value(cfg, "flush_depth", "12", ENGRAM_CONFIG_SRC_ENV);
    check_value(cfg, "mode", "hybrid", ENGRAM_CONFIG_SRC_ENV);
    check_value(cfg, "ucx_window", "16", ENGRAM_CONFIG_SRC_ENV);
    CHECK_OK(engram_config_set(cfg, "transport", "  loopback "));
    check_value(cfg, "transport", "loopback", ENGRAM_CONFIG_SRC_API);
    CHECK_OK(engram_config_set(cfg, "plugin_path", " /a:/b\n"));
    check_value(cfg, "plugin_path", "/a:/b", ENGRAM_CONFIG_SRC_API);
    engram_config_destroy(cfg);

    engram_log_level_t level = ENGRAM_LOG_LEVEL_ERROR;
    CHECK(engram_log_level_parse("info ", &level) && level == ENGRAM_LOG_LEVEL_INFO);
    CHECK(engram_log_level_parse(" Debug", &level) && level == ENGRAM_LOG_LEVEL_DEBUG);
    CHECK(engram_log_level_parse(" ", &level) && level == ENGRAM_LOG_LEVEL_WARN);
    CHECK(!engram_log_level_parse("inf", &level) && !engram_log_level_parse("info x", &level));
    CHECK(level == ENGRAM_LOG_LEVEL_WARN); /* untouched by a refusal */
    CHECK(setenv("ENGRAM_LOG_LEVEL", "verbose", 1) == 0);
    check_create_fails(ENGRAM_ERR_INVALID, "ENGRAM_LOG_LEVEL: 'verbose' is not one of error|warn|info|debug|trace");
    unsetenv("ENGRAM_LOG_LEVEL");
    clear_env();
}

/* A byte order mark opening a file is skipped; one anywhere else is named. */
static void test_file_bom(void)
{
    clear_env();
    use_file("\xEF\xBB\xBFtransport = loopback\nfetch_slots = 8\n");
    engram_config_t *cfg = create_ok();
    check_value(cfg, "transport", "loopback", ENGRAM_CONFIG_SRC_FILE);
    check_value(cfg, "fetch_slots", "8", ENGRAM_CONFIG_SRC_FILE);
    engram_config_destroy(cfg);
    use_file("\xEF\xBB\xBF# a comment first\n");
    engram_config_destroy(create_ok());

    char text[8192];
    use_file("fetch_slots = 8\n\xEF\xBB\xBFtransport = loopback\n");
    snprintf(text, sizeof(text), "%s:2: a UTF-8 byte order mark (U+FEFF) stands before key 'transport'; only a "
             "file's first bytes may be one", file_path);
    check_create_fails(ENGRAM_ERR_INVALID, text);
    clear_env();
}

/* A key set twice in one file: refused naming both lines (the second would
 * silently win); a core key and a transport's alike. */
static void test_file_twice(void)
{
    clear_env();
    char text[8192];
    use_file("fetch_slots = 8\nmode = hybrid\n\n# again:\nfetch_slots = 16\n");
    snprintf(text, sizeof(text), "%s:5: key 'fetch_slots' is set twice, on lines 1 and 5; set it once", file_path);
    check_create_fails(ENGRAM_ERR_INVALID, text);
    use_file("ucx_window = 16\nucx_window = 32\n");
    snprintf(text, sizeof(text), "%s:2: key 'ucx_window' is set twice, on lines 1 and 2; set it once", file_path);
    check_create_fails(ENGRAM_ERR_INVALID, text);
    /* the file and the environment may both set one: env wins, by precedence */
    use_file("fetch_slots = 8\n");
    CHECK(setenv("ENGRAM_FETCH_SLOTS", "16", 1) == 0);
    engram_config_t *cfg = create_ok();
    check_value(cfg, "fetch_slots", "16", ENGRAM_CONFIG_SRC_ENV);
    engram_config_destroy(cfg);
    clear_env();
}

/* procfs files report size 0 whatever they hold: read to EOF (the first
 * line is then what is refused, not the size), past the first guess of
 * 4096 bytes too (/proc/self/smaps). */
static void test_file_procfs(void)
{
    clear_env();
    CHECK(setenv("ENGRAM_CONFIG_FILE", "/proc/self/status", 1) == 0);
    check_create_fails(ENGRAM_ERR_INVALID, "/proc/self/status:1: expected 'key = value', got 'Name:");
    FILE *maps = fopen("/proc/self/smaps", "re");
    CHECK(maps != NULL);
    size_t bytes = 0;
    for (char buf[4096]; fgets(buf, sizeof(buf), maps) != NULL;)
        bytes += strlen(buf);
    fclose(maps);
    if (bytes > 4096) {
        CHECK(setenv("ENGRAM_CONFIG_FILE", "/proc/self/smaps", 1) == 0);
        check_create_fails(ENGRAM_ERR_INVALID, "/proc/self/smaps:1: expected 'key = value', got '");
    }
    clear_env();
}

int main(void)
{
    test_defaults();
    test_int_or_auto();
    test_env_over_default();
    test_file_over_default();
    test_env_over_file_api_over_env();
    test_file_errors();
    test_env_errors();
    test_api_errors();
    test_get_source_print();
    test_file_kinds();
    test_transport_keys();
    test_blanks();
    test_file_bom();
    test_file_twice();
    test_file_procfs();
    printf("config_test: all passed\n");
    return 0;
}
