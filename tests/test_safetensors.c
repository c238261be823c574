/* safetensors reader and writer: round trips, the exact bytes written,
 * hand-made malformed headers, and writes that fail part way. */
#define _POSIX_C_SOURCE 200809L
#include "src/starconv.h"

#include <dirent.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

static char dir[256];

static void expect_err(int rc, int want, const char *needle, const char *what)
{
    const char *msg = sc_last_error();
    check(rc == want && strstr(msg, needle) != NULL, "%s: rc %d (want %d), \"%s\" has \"%s\"", what, rc, want, msg,
          needle);
}

static const char *path_of(const char *name)
{
    static char p[4][512];
    static int i;
    i = (i + 1) % 4;
    snprintf(p[i], sizeof p[i], "%s/%s", dir, name);
    return p[i];
}

static void write_bytes(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
}

static size_t read_bytes(const char *path, uint8_t *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return n;
}

/* A file with the given header length field, header text and data bytes. */
static const char *craft(const char *name, uint64_t hlen, const char *header, size_t datalen)
{
    const char *p = path_of(name);
    size_t n = strlen(header);
    uint8_t *buf = calloc(1, 8 + n + datalen);
    for (int i = 0; i < 8; i++)
        buf[i] = (uint8_t)(hlen >> (8 * i));
    memcpy(buf + 8, header, n);
    for (size_t i = 0; i < datalen; i++)
        buf[8 + n + i] = (uint8_t)i;
    write_bytes(p, buf, 8 + n + datalen);
    free(buf);
    return p;
}

static int read_crafted(const char *header, size_t datalen, struct sc_st_file **f)
{
    return sc_st_read(craft("h.safetensors", strlen(header), header, datalen), f);
}

/* No temporary files left beside the targets. */
static int no_temporaries(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int clean = 1;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".tmp."))
            clean = 0;
    closedir(d);
    return clean;
}

static float w[2][3] = {{1, 2, 3}, {4, 5, -6.5f}};
static int64_t steps = 1234567890123;
static float bias[4] = {0.5f, -0.25f, 1e-8f, 3e38f};

static const char *expected_header =
    "{\"__metadata__\":{\"format\":\"pt\"},"
    "\"conv1.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
    "\"bn.num_batches_tracked\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[24,32]},"
    "\"conv1.bias\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[32,48]},"
    "\"empty\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[48,48]}}";

static void round_trip(void)
{
    const struct sc_st_out out[] = {
        {"conv1.weight", "F32", 2, {2, 3}, w},
        {"bn.num_batches_tracked", "I64", 0, {0}, &steps},
        {"conv1.bias", "F32", 1, {4}, bias},
        {"empty", "F32", 2, {0, 5}, NULL},
    };
    const char *p = path_of("model.safetensors");
    int rc = sc_st_write(p, out, 4);
    check(rc == SC_OK, "write 4 tensors (%s)", rc ? sc_last_error() : "");
    check(no_temporaries(), "  no temporary file left");

    static uint8_t buf[4096];
    size_t n = read_bytes(p, buf, sizeof buf);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | buf[i];
    size_t elen = strlen(expected_header);
    check(hlen % 8 == 0 && hlen >= elen && hlen < elen + 8, "header length %llu: padded to 8",
          (unsigned long long)hlen);
    check(n == 8 + hlen + 48, "file is 8 + header + 48 data bytes (%zu)", n);
    int spaces = 1;
    for (size_t i = elen; i < hlen; i++)
        spaces &= buf[8 + i] == ' ';
    check(memcmp(buf + 8, expected_header, elen) == 0 && spaces,
          "header is compact JSON in the given order, padded with spaces");
    check(memcmp(buf + 8 + hlen, w, 24) == 0 && memcmp(buf + 8 + hlen + 24, &steps, 8) == 0 &&
              memcmp(buf + 8 + hlen + 32, bias, 16) == 0,
          "data laid out contiguously in the given order");

    struct sc_st_file *f = NULL;
    rc = sc_st_read(p, &f);
    check(rc == SC_OK && f && f->ntensors == 4 && f->data_bytes == 48, "read back (%s)", rc ? sc_last_error() : "");
    if (!f)
        return;
    const struct sc_st_tensor *t = sc_st_find(f, "conv1.weight");
    check(t && strcmp(t->dtype, "F32") == 0 && t->ndim == 2 && t->shape[0] == 2 && t->shape[1] == 3 && t->offset == 0 &&
              t->nbytes == 24 && memcmp(f->data + t->offset, w, 24) == 0,
          "conv1.weight: F32 [2,3] at 0, values");
    t = sc_st_find(f, "bn.num_batches_tracked");
    int64_t s = 0;
    if (t)
        memcpy(&s, f->data + t->offset, 8);
    check(t && strcmp(t->dtype, "I64") == 0 && t->ndim == 0 && t->nbytes == 8 && s == steps,
          "num_batches_tracked: I64 scalar, value");
    t = sc_st_find(f, "conv1.bias");
    check(t && t->ndim == 1 && t->shape[0] == 4 && t->offset == 32 && memcmp(f->data + t->offset, bias, 16) == 0,
          "conv1.bias: F32 [4] at 32, values");
    t = sc_st_find(f, "empty");
    check(t && t->ndim == 2 && t->shape[0] == 0 && t->nbytes == 0, "empty: [0,5], 0 bytes");
    check(sc_st_find(f, "conv1") == NULL && sc_st_find(f, "") == NULL && sc_st_find(NULL, "x") == NULL &&
              sc_st_find(f, NULL) == NULL,
          "find: absent names and NULL arguments give NULL");
    sc_st_free(f);
    sc_st_free(NULL);

    /* Names that need escaping survive the trip. */
    const char *odd = "a\"b\\c\nd\te/\x01\xc3\xa9";
    const struct sc_st_out one = {odd, "U8", 1, {3}, "xyz"};
    p = path_of("odd.safetensors");
    f = NULL;
    check(sc_st_write(p, &one, 1) == SC_OK && sc_st_read(p, &f) == SC_OK && f->ntensors == 1 &&
              strcmp(f->tensors[0].name, odd) == 0 && memcmp(f->data, "xyz", 3) == 0,
          "a name with quote, backslash, control characters and UTF-8");
    sc_st_free(f);

    p = path_of("none.safetensors");
    f = NULL;
    check(sc_st_write(p, NULL, 0) == SC_OK && sc_st_read(p, &f) == SC_OK && f->ntensors == 0 && f->data_bytes == 0,
          "no tensors at all");
    sc_st_free(f);

    /* Overwriting replaces the old file completely. */
    p = path_of("model.safetensors");
    f = NULL;
    check(sc_st_write(p, &one, 1) == SC_OK && sc_st_read(p, &f) == SC_OK && f->ntensors == 1,
          "overwrite an existing file");
    sc_st_free(f);
}

static void good_headers(void)
{
    struct sc_st_file *f = NULL;
    int rc = read_crafted(" {\n \"b\" : { \"shape\" : [ 2 ] , \"data_offsets\" : [ 8 , 16 ] ,"
                          " \"dtype\" : \"F32\" } ,\r\n\t\"a\":{\"dtype\":\"I64\",\"shape\":[1],"
                          "\"data_offsets\":[0,8]}, \"__metadata__\": {\"k\": \"v\", \"x\": \"\"}"
                          " }    ",
                          16, &f);
    check(rc == SC_OK && f->ntensors == 2 && sc_st_find(f, "a")->offset == 0 && sc_st_find(f, "b")->offset == 8 &&
              sc_st_find(f, "b")->nbytes == 8,
          "whitespace, any field order, metadata last, header order unlike data order");
    sc_st_free(f);
    f = NULL;
    rc = read_crafted("{\"\\u00e9\\ud83d\\ude00\\/\\\"\":{\"dtype\":\"BF16\",\"shape\":[1,1,1,3],"
                      "\"data_offsets\":[0,6]}}",
                      6, &f);
    check(rc == SC_OK && f->ntensors == 1 && strcmp(f->tensors[0].name, "\xc3\xa9\xf0\x9f\x98\x80/\"") == 0 &&
              f->tensors[0].ndim == 4 && f->tensors[0].shape[3] == 3,
          "\\u escapes with a surrogate pair decode to UTF-8; BF16, 4 dimensions");
    sc_st_free(f);
    f = NULL;
    rc = read_crafted("{}", 0, &f);
    check(rc == SC_OK && f->ntensors == 0 && f->data_bytes == 0, "empty header {}");
    sc_st_free(f);
}

static void bad_headers(void)
{
    static const struct {
        const char *header;
        size_t datalen;
        const char *needle;
    } cases[] = {
        {"[]", 0, "expected '{'"},
        {"", 0, "expected '{'"},
        {"   ", 0, "expected '{'"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},}", 8, "expected '\"'"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]} \"b\":{}}", 1, "expected ',' or '}'"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", 8, "expected ',' or '}'"},
        {"{\"t", 0, "unterminated string"},
        {"{\"t\\", 0, "unterminated string"},
        {"{\"a\\xb\":{}}", 0, "bad escape '\\x'"},
        {"{\"\\udc00\":{}}", 0, "lone low surrogate"},
        {"{\"\\ud800x\":{}}", 0, "high surrogate without a low one"},
        {"{\"\\ud800\\u0041\":{}}", 0, "high surrogate without a low one"},
        {"{\"\\u0000\":{}}", 0, "\\u0000 in string"},
        {"{\"\\u12\":{}}", 0, "bad \\u escape"},
        {"{\"a\tb\":{}}", 0, "control character in string"},
        {"{\"t\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "tensor 't' lacks 'dtype'"},
        {"{\"t\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8, "lacks 'shape'"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "lacks 'data_offsets'"},
        {"{\"t\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "unknown dtype 'F33'"},
        {"{\"t\":{\"dtype\":\"f32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "unknown dtype 'f32'"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"foo\":1}}", 8, "unknown field 'foo'"},
        {"{\"t\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "duplicate 'dtype'"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "expected a non-negative integer"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,2],\"data_offsets\":[0,8]}}", 8,
         "shape has more than 4 elements"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8, "not a fraction"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2e0],\"data_offsets\":[0,8]}}", 8, "not a fraction"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[02],\"data_offsets\":[0,8]}}", 8, "leading zero"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,99999999999999999999]}}", 8, "integer too large"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[9223372036854775808],\"data_offsets\":[0,8]}}", 8, "integer too large"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,8]}}", 8,
         "data_offsets has more than 2 elements"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8]}}", 8, "data_offsets needs 2 integers"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, "outside the 4-byte data section"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, "outside"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4,
         "[0, 4] do not match F32 with its shape"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],"
         "\"data_offsets\":[0,8]}}",
         8, "do not match"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
         12, "tensor 'b' starts at byte 8 of the data section, the previous tensor ends at 4 (gap)"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
         12, "(overlap)"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "(gap)"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8,
         "the tensors cover 4 bytes but the data section has 8"},
        {"{}", 1, "cover 0 bytes but the data section has 1"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
         8, "duplicate tensor name 't'"},
        {"{\"__metadata__\":{},\"__metadata__\":{}}", 0, "duplicate __metadata__"},
        {"{\"__metadata__\":{\"epoch\":3}}", 0, "__metadata__ value for 'epoch' is not a string"},
        {"{\"__metadata__\":{\"a\":{}}}", 0, "is not a string"},
        {"{\"__metadata__\":[]}", 0, "expected '{'"},
        {"{} x", 0, "unexpected text after the header object"},
        {"{}{}", 0, "unexpected text after the header object"},
        {"{\"t\":{\"dtype\":3,\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "expected '\"'"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}}", 8, "expected '['"},
        {"{\"t\":\"F32\"}", 0, "expected '{'"},
        {"{\"t\":null}", 0, "expected '{'"},
        {"{\"t\":[1]}", 0, "expected '{'"},
        {"{\"t\" {}}", 0, "expected ':'"},
        {"{3:{}}", 0, "expected '\"'"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2 3],\"data_offsets\":[0,8]}}", 8, "expected ',' or ']' in shape"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct sc_st_file *f = (struct sc_st_file *)1;
        int rc = read_crafted(cases[i].header, cases[i].datalen, &f);
        char what[160];
        snprintf(what, sizeof what, "header %.60s%s", cases[i].header, strlen(cases[i].header) > 60 ? "..." : "");
        expect_err(rc, SC_ERR_PARSE, cases[i].needle, what);
        check(f == NULL && strstr(sc_last_error(), "h.safetensors"), "  names the file, no output");
    }

    /* Deep nesting is refused at the first unexpected bracket, without
     * recursing. */
    size_t depth = 100000;
    char *deep = malloc(depth + 8);
    if (!deep)
        return;
    strcpy(deep, "{\"a\":");
    memset(deep + 5, '[', depth);
    deep[5 + depth] = '\0';
    struct sc_st_file *f = NULL;
    expect_err(read_crafted(deep, 0, &f), SC_ERR_PARSE, "expected '{'", "100000 nested arrays");
    memset(deep, '{', depth);
    deep[depth] = '\0';
    expect_err(read_crafted(deep, 0, &f), SC_ERR_PARSE, "expected '\"'", "100000 nested objects");
    free(deep);

    /* A NUL byte inside the header is not the end of it. */
    const char *p = path_of("nul.safetensors");
    static const uint8_t nul[] = {6, 0, 0, 0, 0, 0, 0, 0, '{', '}', 0, 'x', ' ', ' '};
    write_bytes(p, nul, sizeof nul);
    expect_err(sc_st_read(p, &f), SC_ERR_PARSE, "unexpected text after the header object", "NUL byte after the object");
}

static void bad_files(void)
{
    struct sc_st_file *f = NULL;
    const char *p = path_of("missing.safetensors");
    expect_err(sc_st_read(p, &f), SC_ERR_IO, "missing.safetensors: No such file or directory", "missing file");
    expect_err(sc_st_read(dir, &f), SC_ERR_IO, "not a regular file", "a directory");
    p = path_of("empty.safetensors");
    write_bytes(p, "", 0);
    expect_err(sc_st_read(p, &f), SC_ERR_PARSE, "0 bytes, too short", "empty file");
    write_bytes(p, "\x02\0\0\0\0\0\0", 7);
    expect_err(sc_st_read(p, &f), SC_ERR_PARSE, "7 bytes, too short", "7-byte file");

    p = craft("huge.safetensors", UINT64_C(1) << 60, "{}", 0);
    expect_err(sc_st_read(p, &f), SC_ERR_PARSE, "header length 1152921504606846976 is larger than the file (10 bytes)",
               "header length 2^60");
    p = craft("huge.safetensors", UINT64_MAX, "{}", 0);
    expect_err(sc_st_read(p, &f), SC_ERR_PARSE, "is larger than the file", "header length 2^64-1");
    p = craft("huge.safetensors", 3, "{}", 0);
    expect_err(sc_st_read(p, &f), SC_ERR_PARSE, "header length 3 is larger than the file",
               "header length one past the end");
    check(strstr(sc_last_error(), "huge.safetensors") != NULL, "  names the file");

    /* A sparse file large enough to hold a 100 MB + 1 header. */
    uint64_t big = 100u * 1000 * 1000 + 1;
    p = craft("sparse.safetensors", big, "{", 0);
    if (truncate(p, (off_t)(8 + big + 16)) == 0)
        expect_err(sc_st_read(p, &f), SC_ERR_PARSE, "above the 100000000-byte limit", "header above 100 MB");
    unlink(p);

    /* Every prefix of a good file is refused, and cleanly (run under ASan). */
    const struct sc_st_out out[] = {{"w", "F32", 2, {2, 3}, w}, {"b", "F32", 1, {4}, bias}};
    const char *good = path_of("good.safetensors");
    sc_st_write(good, out, 2);
    static uint8_t orig[1024];
    size_t len = read_bytes(good, orig, sizeof orig);
    p = path_of("cut.safetensors");
    int clean = 1;
    for (size_t n = 0; n < len; n++) {
        write_bytes(p, orig, n);
        int rc = sc_st_read(p, &f);
        if (rc == SC_OK || f || !strstr(sc_last_error(), "cut.safetensors"))
            clean = 0;
    }
    check(clean, "all %zu truncations of a good file refused, naming it", len);

    /* Random single-byte changes: refused or read consistently, never a crash. */
    srand(99);
    int refused = 0, accepted = 0;
    clean = 1;
    for (int i = 0; i < 3000; i++) {
        uint8_t copy[1024];
        memcpy(copy, orig, len);
        size_t at = (size_t)rand() % len;
        copy[at] = (uint8_t)rand();
        if (i % 3 == 0)
            copy[(size_t)rand() % len] = "{}[]\",:0\\u"[rand() % 10];
        write_bytes(p, copy, len);
        int rc = sc_st_read(p, &f);
        if (rc == SC_OK) {
            accepted++;
            for (int t = 0; t < f->ntensors; t++)
                if (f->tensors[t].offset + f->tensors[t].nbytes > f->data_bytes)
                    clean = 0;
            sc_st_free(f);
        } else {
            refused++;
            clean &= rc == SC_ERR_PARSE && f == NULL;
        }
    }
    check(clean, "3000 random corruptions: %d refused with SC_ERR_PARSE, %d still valid", refused, accepted);
}

/* Writes that must fail leave the previous file byte for byte. */
static void bad_writes(void)
{
    const char *p = path_of("keep.safetensors");
    const struct sc_st_out good[] = {{"w", "F32", 2, {2, 3}, w}};
    sc_st_write(p, good, 1);
    static uint8_t before[1024], after[1024];
    size_t blen = read_bytes(p, before, sizeof before);

    static const struct {
        struct sc_st_out t[2];
        int n;
        const char *needle;
    } cases[] = {
        {{{"a", "F32", 1, {1}, bias}, {"a", "F32", 1, {1}, bias}}, 2, "duplicate tensor name 'a'"},
        {{{"a", "F33", 1, {1}, bias}}, 1, "tensor 'a': unknown dtype 'F33'"},
        {{{"a", NULL, 1, {1}, bias}}, 1, "unknown dtype '(null)'"},
        {{{"a", "F32", 5, {1}, bias}}, 1, "tensor 'a': bad shape"},
        {{{"a", "F32", -1, {1}, bias}}, 1, "bad shape"},
        {{{"a", "F32", 2, {2, -1}, bias}}, 1, "bad shape"},
        {{{"a", "F64", 4, {INT64_MAX, INT64_MAX, 2, 2}, bias}}, 1, "bad shape"},
        {{{"a", "F32", 1, {4}, NULL}}, 1, "tensor 'a': no data"},
        {{{NULL, "F32", 1, {4}, bias}}, 1, "tensor 0 has no usable name"},
        {{{"ok", "F32", 1, {4}, bias}, {"", "F32", 1, {4}, bias}}, 2, "tensor 1 has no usable name"},
        {{{"__metadata__", "F32", 1, {4}, bias}}, 1, "no usable name"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = sc_st_write(p, cases[i].t, cases[i].n);
        expect_err(rc, SC_ERR_ARG, cases[i].needle, "refused write");
        check(strstr(sc_last_error(), "keep.safetensors") != NULL && read_bytes(p, after, sizeof after) == blen &&
                  memcmp(before, after, blen) == 0,
              "  names the file, old file intact");
    }
    expect_err(sc_st_write(p, good, -1), SC_ERR_ARG, "bad arguments", "n = -1");
    expect_err(sc_st_write(NULL, good, 1), SC_ERR_ARG, "bad arguments", "NULL path");
    expect_err(sc_st_write(p, NULL, 1), SC_ERR_ARG, "bad arguments", "NULL tensors");

    char nodir[512];
    snprintf(nodir, sizeof nodir, "%s/no/such/dir/x.safetensors", dir);
    expect_err(sc_st_write(nodir, good, 1), SC_ERR_IO, "x.safetensors: cannot create", "directory missing");

    const char *d = path_of("adir");
    mkdir(d, 0700);
    expect_err(sc_st_write(d, good, 1), SC_ERR_IO, "adir: Is a directory (file left unchanged)",
               "target is a directory");
    check(no_temporaries(), "  temporary removed");
    rmdir(d);

    /* Fail in the middle of writing: a file size limit of 4 KiB against a
     * 64 KiB tensor; the write must report EFBIG, not die of SIGXFSZ. */
    static float big[16384];
    const struct sc_st_out large[] = {{"big", "F32", 1, {16384}, big}};
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 4096;
    signal(SIGXFSZ, SIG_IGN);
    if (setrlimit(RLIMIT_FSIZE, &lim) == 0) {
        int rc = sc_st_write(p, large, 1);
        setrlimit(RLIMIT_FSIZE, &old);
        expect_err(rc, SC_ERR_IO, "keep.safetensors: File too large (file left unchanged)", "disk limit hit mid-write");
        check(read_bytes(p, after, sizeof after) == blen && memcmp(before, after, blen) == 0, "  old file intact");
        check(no_temporaries(), "  temporary removed");
    } else {
        printf("skip - cannot lower RLIMIT_FSIZE\n");
    }
    signal(SIGXFSZ, SIG_DFL);
    struct sc_st_file *f = NULL;
    check(sc_st_write(p, large, 1) == SC_OK && sc_st_read(p, &f) == SC_OK && f->tensors[0].nbytes == sizeof big,
          "the same write succeeds without the limit");
    sc_st_free(f);
}

int main(void)
{
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(dir, sizeof dir, "%s/test_safetensors.XXXXXX", base);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    round_trip();
    good_headers();
    bad_headers();
    bad_files();
    bad_writes();
    DIR *d = opendir(dir);
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            unlink(path_of(e->d_name));
    closedir(d);
    rmdir(dir);
    printf("test_safetensors: %d passed, %d failed\n", passes, failures);
    return failures ? 1 : 0;
}
