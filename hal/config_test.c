/* Config: defaults, file, env and API precedence with per-key sources, and
 * every error naming what was wrong. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hal/config.h"
#include "hal/config_keys.h"
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
    for (const engram_config_key_info_t *k; (k = engram_config_key(n)) != NULL; n++)
        check_value(cfg, k->name, k->def, ENGRAM_CONFIG_SRC_DEFAULT);
    CHECK(n == ENGRAM_CONFIG_NUM_KEYS);
    CHECK(engram_config_key(-1) == NULL);
    CHECK(strcmp(engram_config_key(0)->type, "STRING") == 0);
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
    use_file("flush_depth = 16\nflush_dept = 3\n");
    snprintf(text, sizeof(text), "%s:2: unknown key 'flush_dept'; keys are: transport, mode, num_qps", file_path);
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
    check_create_fails(ENGRAM_ERR_INVALID,
                       "unknown configuration variable ENGRAM_FLUSH_DEPT; keys are: transport, mode, num_qps");
    clear_env();
    CHECK(setenv("ENGRAM_flush_depth", "3", 1) == 0);
    check_create_fails(ENGRAM_ERR_INVALID, "unknown configuration variable ENGRAM_flush_depth");
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
        {"ENGRAM_FLUSH_DEPTH", " 12", "flush_depth: ' 12' is not a decimal integer"},
        {"ENGRAM_FLUSH_DEPTH", "+12", "flush_depth: '+12' is not a decimal integer"},
        {"ENGRAM_FLUSH_DEPTH", "", "flush_depth: '' is not a decimal integer"},
        {"ENGRAM_FLUSH_DEPTH", "-", "flush_depth: '-' is not a decimal integer"},
        {"ENGRAM_TIMEOUT_MS", "99999999999999999999", "timeout_ms: '99999999999999999999' is not a decimal"},
        {"ENGRAM_MODE", "rail", "ENGRAM_MODE: mode: 'rail' is not one of direct|hybrid"},
        {"ENGRAM_MODE", "Direct", "mode: 'Direct' is not one of direct|hybrid"},
        {"ENGRAM_HUGE_PAGES", "au", "huge_pages: 'au' is not one of auto|on|off"},
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
    CHECK_ERROR(engram_config_set(cfg, "flush_dept", "3"), ENGRAM_ERR_INVALID,
                "unknown key 'flush_dept'; keys are: transport");
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
    printf("config_test: all passed\n");
    return 0;
}
