/* Configuration parser and error/logging helpers: good files in several
 * spellings, and every malformed input the parser must name by path:line. */
#define _POSIX_C_SOURCE 200809L
#include "src/starconv.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

static char tmpdir[256];

/* An error case passes when both the code and the message are right. */
static void expect_err(int rc, int want, const char *needle, const char *what)
{
    const char *msg = sc_last_error();
    check(rc == want && strstr(msg, needle) != NULL, "%s: rc %d (want %d), \"%s\" has \"%s\"", what, rc, want, msg,
          needle);
}

static const char *write_file(const char *name, const void *data, size_t len)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    return path;
}

static int parse(const char *text, struct sc_cfg **cfg)
{
    return sc_cfg_parse_string(text, "m.cfg", cfg);
}

/* Parses text and reads one int key of the first section. */
static int get_int_of(const char *text, const char *key, int min, int max, int *v)
{
    struct sc_cfg *cfg;
    int rc = parse(text, &cfg);
    if (rc == SC_OK) {
        rc = sc_cfg_get_int(cfg, &cfg->sections[0], key, -7, min, max, v);
        sc_cfg_free(cfg);
    }
    return rc;
}

static int get_float_of(const char *text, const char *key, double *v)
{
    struct sc_cfg *cfg;
    int rc = parse(text, &cfg);
    if (rc == SC_OK) {
        rc = sc_cfg_get_float(cfg, &cfg->sections[0], key, -7, v);
        sc_cfg_free(cfg);
    }
    return rc;
}

static const char *model = "# a small network\n"
                           "; another comment style\n"
                           "\n"
                           "[net]\n"
                           "batch=64\n"
                           "  learning_rate = 0.01   \n"
                           "\tmomentum\t=\t0.9\n"
                           "\n"
                           "[convolutional]   # first layer\n"
                           "filters=32\n"
                           "size = 3\n"
                           "activation=relu ; inline comment\n"
                           "[ maxpool ]\n"
                           "size=2\n"
                           "layers=-1,-4\n"
                           "path=/usr/share/x y/é.bin"; /* no final newline */

static void check_model(struct sc_cfg *cfg, const char *what)
{
    check(cfg->nsections == 3, "%s: 3 sections (got %d)", what, cfg->nsections);
    if (cfg->nsections != 3)
        return;
    struct sc_cfg_section *net = &cfg->sections[0], *conv = &cfg->sections[1], *pool = &cfg->sections[2];
    check(strcmp(net->name, "net") == 0 && net->line == 4 && net->nkeys == 3, "%s: [net] at line 4 with 3 keys", what);
    check(strcmp(conv->name, "convolutional") == 0 && conv->line == 9 && conv->nkeys == 3,
          "%s: [convolutional] at line 9 with 3 keys", what);
    check(strcmp(pool->name, "maxpool") == 0 && pool->nkeys == 3, "%s: spaces inside [ maxpool ] trimmed", what);
    int batch = 0, filters = 0, size = 0, groups = 0;
    double lr = 0, mom = 0, decay = 0;
    const char *act = NULL, *layers = NULL, *path = NULL, *none = "x";
    check(sc_cfg_get_int(cfg, net, "batch", 1, 1, 4096, &batch) == SC_OK && batch == 64, "%s: batch=64", what);
    check(sc_cfg_get_float(cfg, net, "learning_rate", 0, &lr) == SC_OK && lr == 0.01,
          "%s: learning_rate with spaces and trailing blanks", what);
    check(sc_cfg_get_float(cfg, net, "momentum", 0, &mom) == SC_OK && mom == 0.9, "%s: tabs around '='", what);
    check(sc_cfg_get_float(cfg, net, "decay", 5e-4, &decay) == SC_OK && decay == 5e-4, "%s: absent float gives default",
          what);
    check(sc_cfg_get_int(cfg, conv, "filters", 1, 1, 65536, &filters) == SC_OK && filters == 32, "%s: filters=32",
          what);
    check(sc_cfg_get_int(cfg, conv, "size", 1, 1, 11, &size) == SC_OK && size == 3 && conv->keys[1].line == 11,
          "%s: size=3 at line 11", what);
    check(sc_cfg_get_int(cfg, conv, "groups", 1, 1, 64, &groups) == SC_OK && groups == 1,
          "%s: absent int gives default", what);
    check(sc_cfg_get_str(cfg, conv, "activation", "linear", &act) == SC_OK && strcmp(act, "relu") == 0,
          "%s: inline ';' comment stripped", what);
    check(sc_cfg_get_str(cfg, conv, "nothing", NULL, &none) == SC_OK && none == NULL,
          "%s: absent string gives NULL default", what);
    check(sc_cfg_check_unused(cfg, net) == SC_OK && sc_cfg_check_unused(cfg, conv) == SC_OK,
          "%s: no unused keys after reading them all", what);
    check(sc_cfg_get_str(cfg, pool, "layers", NULL, &layers) == SC_OK && strcmp(layers, "-1,-4") == 0,
          "%s: list value kept verbatim", what);
    check(sc_cfg_get_str(cfg, pool, "path", NULL, &path) == SC_OK && strcmp(path, "/usr/share/x y/é.bin") == 0,
          "%s: inner spaces and UTF-8 kept, last line without newline", what);
    expect_err(sc_cfg_check_unused(cfg, pool), SC_ERR_PARSE, ":14: unknown key 'size' in [maxpool]",
               "unused key named with line and section");
}

static void good_files(void)
{
    struct sc_cfg *cfg = NULL;
    check(parse(model, &cfg) == SC_OK && cfg && strcmp(cfg->path, "m.cfg") == 0, "parse_string of a model");
    if (cfg)
        check_model(cfg, "string");
    sc_cfg_free(cfg);

    const char *path = write_file("lf.cfg", model, strlen(model));
    cfg = NULL;
    check(sc_cfg_load(path, &cfg) == SC_OK && cfg && strcmp(cfg->path, path) == 0, "load of a model file");
    if (cfg)
        check_model(cfg, "file");
    sc_cfg_free(cfg);

    /* The same model with CRLF line ends and trailing blanks everywhere. */
    size_t n = strlen(model);
    char *crlf = malloc(3 * n + 8), *o = crlf;
    for (const char *p = model; *p; p++) {
        if (*p == '\n') {
            *o++ = ' ';
            *o++ = '\r';
        }
        *o++ = *p;
    }
    path = write_file("crlf.cfg", crlf, (size_t)(o - crlf));
    free(crlf);
    cfg = NULL;
    check(sc_cfg_load(path, &cfg) == SC_OK, "load of a CRLF file");
    if (cfg)
        check_model(cfg, "crlf");
    sc_cfg_free(cfg);

    /* Long lines are legal; the 1 MiB bound is on the file, not on lines. */
    size_t big = 300000;
    char *text = malloc(big + 64);
    strcpy(text, "[net]\nnote=");
    memset(text + strlen(text), 'v', big);
    strcpy(text + 11 + big, "\nbatch=2\n");
    path = write_file("long.cfg", text, strlen(text));
    cfg = NULL;
    const char *note = NULL;
    int batch = 0;
    int rc = sc_cfg_load(path, &cfg);
    check(rc == SC_OK && sc_cfg_get_str(cfg, &cfg->sections[0], "note", NULL, &note) == SC_OK && strlen(note) == big &&
              sc_cfg_get_int(cfg, &cfg->sections[0], "batch", 0, 0, 9, &batch) == SC_OK && batch == 2 &&
              cfg->sections[0].keys[1].line == 3,
          "a %zu-character value", big);
    sc_cfg_free(cfg);
    cfg = NULL;
    rc = sc_cfg_parse_string("[a]\nk=1\n", NULL, &cfg);
    check(rc == SC_OK && strcmp(cfg->path, "<string>") == 0, "NULL name becomes <string>");
    sc_cfg_free(cfg);
    sc_cfg_free(NULL);
    free(text);

    int v;
    check(get_int_of("[a]\nk=+5\n", "k", 0, 9, &v) == SC_OK && v == 5, "int '+5'");
    check(get_int_of("[a]\nk=-3\n", "k", -3, 9, &v) == SC_OK && v == -3, "int '-3' at min");
    double d;
    check(get_float_of("[a]\nk=1e-3\n", "k", &d) == SC_OK && d == 1e-3, "float '1e-3'");
    check(get_float_of("[a]\nk=2\n", "k", &d) == SC_OK && d == 2.0, "float '2'");
}

static void bad_text(void)
{
    struct sc_cfg *cfg = (struct sc_cfg *)1;
    static const struct {
        const char *text, *needle;
    } cases[] = {
        {"size=3\n[net]\n", "m.cfg:1: key 'size' outside any section"},
        {"\n\n# c\nsize=3\n", "m.cfg:4: key 'size' outside any section"},
        {"[net]\nbatch=1\nthis is not a pair\n", "m.cfg:3: expected key=value"},
        {"[net\nbatch=1\n", "m.cfg:1: expected ']'"},
        {"[]\n", "m.cfg:1: empty section name"},
        {"[ \t]\n", "m.cfg:1: empty section name"},
        {"[net] x\n", "m.cfg:1: unexpected text after ']'"},
        {"[n@t]\n", "m.cfg:1: bad character in section name"},
        {"[net]\nsize=1\n\nsize=2\n", "m.cfg:4: duplicate key 'size' in [net] (first at line 2)"},
        {"[net]\nsize=\n", "m.cfg:2: missing value for 'size' in [net]"},
        {"[net]\nsize=   # nothing\n", "m.cfg:2: missing value for 'size'"},
        {"[net]\n=3\n", "m.cfg:2: missing key before '='"},
        {"[net]\nfil ters=3\n", "m.cfg:2: bad character in key 'fil ters'"},
        {"[net]\nbatch=1\n\x01\x02\n", "m.cfg:3: control character 0x01"},
        {"[net]\nb\x1b[0m=1\n", "m.cfg:2: control character 0x1b"},
        {"", "m.cfg: no [section] found"},
        {"# only\n; comments\n\n   \n", "m.cfg: no [section] found"},
        {"\r\n\r\n", "m.cfg: no [section] found"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cfg = (struct sc_cfg *)1;
        int rc = parse(cases[i].text, &cfg);
        expect_err(rc, SC_ERR_PARSE, cases[i].needle, "bad text");
        check(cfg == NULL, "  *out is NULL after the error");
    }
    char longkey[200];
    memset(longkey, 'k', sizeof longkey);
    memcpy(longkey, "[a]\n", 4);
    strcpy(longkey + 150, "=1\n");
    expect_err(parse(longkey, &cfg), SC_ERR_PARSE, "m.cfg:2: key longer than", "146-char key");
    check(strlen(sc_last_error()) < 200, "  message stays short");
}

static void bad_values(void)
{
    int v = 42;
    double d = 42;
    const char *conv = "[net]\nbatch=1\n[convolutional]\nfilters=abc\n";
    expect_err(get_int_of(conv + 14, "filters", 1, 100, &v), SC_ERR_PARSE,
               "m.cfg:2: bad number 'abc' for 'filters' in [convolutional]", "int 'abc'");
    check(v == 42, "  output untouched on error");
    expect_err(get_int_of("[a]\nk=3x\n", "k", 0, 9, &v), SC_ERR_PARSE, "m.cfg:2: bad number '3x' for 'k' in [a]",
               "int '3x'");
    expect_err(get_int_of("[a]\nk=0x10\n", "k", 0, 99, &v), SC_ERR_PARSE, "bad number '0x10'", "int '0x10'");
    expect_err(get_int_of("[a]\nk=1.5\n", "k", 0, 9, &v), SC_ERR_PARSE, "bad number '1.5'", "int '1.5'");
    expect_err(get_int_of("[a]\nk=0\n", "k", 1, 9, &v), SC_ERR_PARSE, "m.cfg:2: k=0 out of range [1, 9] in [a]",
               "int below min");
    expect_err(get_int_of("[a]\nk=10\n", "k", 1, 9, &v), SC_ERR_PARSE, "k=10 out of range", "int above max");
    expect_err(get_int_of("[a]\nk=99999999999999999999\n", "k", 0, 9, &v), SC_ERR_PARSE, "out of range",
               "int beyond long");
    expect_err(get_int_of("[a]\nk=4294967297\n", "k", 0, 2147483647, &v), SC_ERR_PARSE, "out of range",
               "int beyond int");
    expect_err(get_float_of("[a]\n\nk=abc\n", "k", &d), SC_ERR_PARSE, "m.cfg:3: bad number 'abc' for 'k' in [a]",
               "float 'abc'");
    expect_err(get_float_of("[a]\nk=nan\n", "k", &d), SC_ERR_PARSE, "bad number 'nan'", "float 'nan'");
    expect_err(get_float_of("[a]\nk=inf\n", "k", &d), SC_ERR_PARSE, "bad number 'inf'", "float 'inf'");
    expect_err(get_float_of("[a]\nk=1e999\n", "k", &d), SC_ERR_PARSE, "m.cfg:2: k=1e999 out of range",
               "float overflow");
    expect_err(get_float_of("[a]\nk=0.1.2\n", "k", &d), SC_ERR_PARSE, "bad number '0.1.2'", "float '0.1.2'");
    check(d == 42, "  output untouched on error");

    /* A long bad value is quoted truncated, so the line stays readable. */
    char text[2100] = "[a]\nk=";
    memset(text + 6, '9', 2000);
    text[2006] = 'x';
    text[2007] = '\0';
    expect_err(get_int_of(text, "k", 0, 9, &v), SC_ERR_PARSE, "m.cfg:2: bad number '999", "2000-char bad number");
    check(strlen(sc_last_error()) < 200, "  message truncated to %zu chars", strlen(sc_last_error()));
}

static void bad_files(void)
{
    struct sc_cfg *cfg = NULL;
    char path[512];
    snprintf(path, sizeof path, "%s/missing.cfg", tmpdir);
    expect_err(sc_cfg_load(path, &cfg), SC_ERR_IO, "missing.cfg: No such file or directory", "missing file");
    expect_err(sc_cfg_load(tmpdir, &cfg), SC_ERR_IO, tmpdir, "a directory");

    static const char nul[] = "[net]\nbatch=1\0\nx=2\n";
    const char *p = write_file("nul.cfg", nul, sizeof nul - 1);
    char want[600];
    snprintf(want, sizeof want, "%s:2: NUL byte", p);
    expect_err(sc_cfg_load(p, &cfg), SC_ERR_PARSE, want, "NUL byte in a file");

    /* Random bytes, with a fixed seed so that a failure reproduces. */
    unsigned char garbage[4096];
    srand(12345);
    for (size_t i = 0; i < sizeof garbage; i++)
        garbage[i] = (unsigned char)rand();
    p = write_file("garbage.cfg", garbage, sizeof garbage);
    snprintf(want, sizeof want, "%s:", p);
    expect_err(sc_cfg_load(p, &cfg), SC_ERR_PARSE, want, "random binary file");
    check(cfg == NULL, "  no config returned");

    /* Garbage after a valid start: the error is on the line where it begins. */
    char mixed[600] = "[net]\nbatch=1\n";
    memcpy(mixed + 14, garbage, 500);
    p = write_file("mixed.cfg", mixed, 514);
    int rc = sc_cfg_load(p, &cfg);
    snprintf(want, sizeof want, "%s:3", p);
    expect_err(rc, SC_ERR_PARSE, want, "text then binary");

    /* Every prefix of a model parses or fails cleanly (run under ASan). */
    int ok = 1;
    for (size_t len = 0; len <= strlen(model); len++) {
        char *t = strndup(model, len);
        rc = parse(t, &cfg);
        if (rc == SC_OK)
            sc_cfg_free(cfg);
        else if (rc != SC_ERR_PARSE || strncmp(sc_last_error(), "m.cfg", 5) != 0)
            ok = 0;
        free(t);
    }
    check(ok, "every prefix of the model parses or fails with m.cfg:...");

    size_t big = 1024 * 1024 + 1;
    char *huge = malloc(big);
    memset(huge, '#', big);
    huge[0] = '[';
    p = write_file("huge.cfg", huge, big);
    free(huge);
    expect_err(sc_cfg_load(p, &cfg), SC_ERR_PARSE, "larger than 1048576 bytes", "1 MiB + 1 file");
    check(strstr(sc_last_error(), p) != NULL, "  message names the file");
    unlink(p);
}

static void *thread_error(void *arg)
{
    (void)arg;
    sc_error(SC_ERR_IO, "from the thread");
    return (void *)(strcmp(sc_last_error(), "from the thread") == 0 ? (void *)1 : NULL);
}

static void errors_and_log(void)
{
    check(strcmp(sc_strerror(SC_OK), "success") == 0 && strcmp(sc_strerror(SC_ERR_MISMATCH), sc_strerror(-100)) != 0 &&
              strcmp(sc_strerror(-100), "unknown error") == 0,
          "sc_strerror names codes, unknown ones too");
    int distinct = 1;
    for (int a = SC_ERR_MISMATCH; a <= SC_OK; a++)
        for (int b = a + 1; b <= SC_OK; b++)
            distinct &= strcmp(sc_strerror(a), sc_strerror(b)) != 0;
    check(distinct, "every code has its own name");
    check(sc_error(SC_ERR_SHAPE, "x %d", 3) == SC_ERR_SHAPE && strcmp(sc_last_error(), "x 3") == 0,
          "sc_error returns its code and keeps the message");
    sc_error(SC_ERR_IO, "inner");
    sc_error(SC_ERR_IO, "outer: %s", sc_last_error());
    check(strcmp(sc_last_error(), "outer: inner") == 0, "a message can wrap the previous one");
    char longs[2000];
    memset(longs, 'z', sizeof longs - 1);
    longs[sizeof longs - 1] = '\0';
    sc_error(SC_ERR_ARG, "%s", longs);
    check(strlen(sc_last_error()) > 400 && strlen(sc_last_error()) < 1000,
          "a long message is truncated, not overflowed");
    sc_error(SC_ERR_ARG, "main's message");
    pthread_t th;
    void *res = NULL;
    pthread_create(&th, NULL, thread_error, NULL);
    pthread_join(th, &res);
    check(res != NULL && strcmp(sc_last_error(), "main's message") == 0, "messages are per thread");

    /* Capture stderr in a file to see what sc_log prints. */
    char path[512];
    snprintf(path, sizeof path, "%s/log.txt", tmpdir);
    fflush(stderr);
    int saved = dup(2);
    if (!freopen(path, "w", stderr)) {
        check(0, "redirect stderr");
        return;
    }
    setenv("SC_LOG_LEVEL", "1", 1);
    sc_log_set_rank(3);
    SC_LOG(0, "error %d", 7);
    SC_LOG(1, "info line\n");
    SC_LOG(2, "debug hidden");
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char got[256] = "";
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(got, 1, sizeof got - 1, f) : 0;
    got[n] = '\0';
    if (f)
        fclose(f);
    check(strcmp(got, "[rank 3] error 7\n[rank 3] info line\n") == 0,
          "SC_LOG prefixes the rank, ends lines once, hides levels above SC_LOG_LEVEL");
    unlink(path);
}

int main(void)
{
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(tmpdir, sizeof tmpdir, "%s/test_cfg.XXXXXX", base);
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    good_files();
    bad_text();
    bad_values();
    bad_files();
    errors_and_log();
    static const char *files[] = {"lf.cfg", "crlf.cfg", "long.cfg", "nul.cfg", "garbage.cfg", "mixed.cfg"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s/%s", tmpdir, files[i]);
        unlink(p);
    }
    rmdir(tmpdir);
    printf("test_cfg: %d passed, %d failed\n", passes, failures);
    return failures ? 1 : 0;
}
