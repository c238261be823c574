/* safetensors files: an 8-byte little-endian header length N, N bytes of
 * JSON {"name": {"dtype", "shape", "data_offsets": [begin, end]}, ...,
 * "__metadata__": {str: str}}, then the data section that the offsets index.
 * The rules are those of the reference implementation (huggingface/
 * safetensors), so that a file one side accepts the other accepts too. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "base/error.h"
#include "src/io/safetensors.h"
#include "base/atomic_file.h"
#include "base/json.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The reference implementation refuses headers above 100 MB; so do we,
 * before allocating anything. */
#define ST_MAX_HEADER (100u * 1000 * 1000)

static const struct {
    const char *name;
    int size;
} dtypes[] = {
    {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
    {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"I64", 8},     {"U64", 8}, {"F64", 8},
};

static int dtype_size(const char *name)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (strcmp(dtypes[i].name, name) == 0)
            return dtypes[i].size;
    return 0;
}

/* numel * elem_size, or -1 on overflow or a negative dimension. */
static int tensor_bytes(int ndim, const int64_t *shape, int elem_size, size_t *out)
{
    uint64_t n = (uint64_t)elem_size;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return -1;
        if (shape[i] != 0 && n > SIZE_MAX / (uint64_t)shape[i])
            return -1;
        n *= (uint64_t)shape[i];
    }
    *out = (size_t)n;
    return 0;
}

/* ---- the header's schema, read with base/json.h's cursor ----------------
 * The reader knows where objects, arrays, strings and integers may appear
 * and refuses anything else, so nesting is at most three deep by
 * construction and no input can make it recurse. */

/* Reads an array of at most cap integers into vals, its length into *n. */
static int parse_uint_array(struct sc_json *j, uint64_t max, uint64_t *vals, int cap, int *n, const char *what)
{
    int rc = sc_json_expect(j, '[');
    *n = 0;
    if (rc != SC_OK)
        return rc;
    if (sc_json_peek(j) == ']') {
        j->pos++;
        return SC_OK;
    }
    for (;;) {
        uint64_t v = 0;
        if ((rc = sc_json_uint(j, max, &v)) != SC_OK)
            return rc;
        if (*n == cap)
            return sc_json_error(j, "%s has more than %d elements", what, cap);
        vals[(*n)++] = v;
        char c = sc_json_peek(j);
        j->pos++;
        if (c == ']')
            return SC_OK;
        if (c != ',') {
            j->pos--;
            return sc_json_error(j, "expected ',' or ']' in %s", what);
        }
    }
}

static int parse_metadata(struct sc_json *j)
{
    int rc = sc_json_expect(j, '{'), first = 1;
    char *key, *val;
    while (rc == SC_OK && (rc = sc_json_next_member(j, &first, &key)) == 1) {
        if (sc_json_peek(j) != '"')
            rc = sc_json_error(j, "__metadata__ value for '%.64s' is not a string", key);
        else if ((rc = sc_json_string(j, &val)) == SC_OK)
            free(val);
        free(key);
    }
    return rc;
}

static int parse_tensor(struct sc_json *j, struct sc_st_tensor *t, size_t data_bytes)
{
    int rc = sc_json_expect(j, '{'), first = 1;
    int have_dtype = 0, have_shape = 0, have_offsets = 0, noff = 0, elem = 0;
    uint64_t shape[SC_ST_MAXDIM], off[2];
    char *key;
    while (rc == SC_OK && (rc = sc_json_next_member(j, &first, &key)) == 1) {
        rc = SC_OK;
        if (strcmp(key, "dtype") == 0 && !have_dtype) {
            char *d;
            have_dtype = 1;
            if ((rc = sc_json_string(j, &d)) == SC_OK) {
                elem = dtype_size(d);
                if (!elem)
                    rc = sc_json_error(j, "tensor '%.100s': unknown dtype '%.16s'", t->name, d);
                else
                    strcpy(t->dtype, d); /* every known name fits dtype[8] */
                free(d);
            }
        } else if (strcmp(key, "shape") == 0 && !have_shape) {
            have_shape = 1;
            rc = parse_uint_array(j, INT64_MAX, shape, SC_ST_MAXDIM, &t->ndim, "shape");
        } else if (strcmp(key, "data_offsets") == 0 && !have_offsets) {
            have_offsets = 1;
            rc = parse_uint_array(j, UINT64_MAX, off, 2, &noff, "data_offsets");
            if (rc == SC_OK && noff != 2)
                rc = sc_json_error(j, "tensor '%.100s': data_offsets needs 2 integers", t->name);
        } else if (strcmp(key, "dtype") == 0 || strcmp(key, "shape") == 0 || strcmp(key, "data_offsets") == 0) {
            rc = sc_json_error(j, "tensor '%.100s': duplicate '%s'", t->name, key);
        } else {
            rc = sc_json_error(j, "tensor '%.100s': unknown field '%.64s'", t->name, key);
        }
        free(key);
    }
    if (rc != SC_OK)
        return rc;
    if (!have_dtype || !have_shape || !have_offsets)
        return sc_json_error(j, "tensor '%.100s' lacks '%s'", t->name,
                             !have_dtype   ? "dtype"
                             : !have_shape ? "shape"
                                           : "data_offsets");
    for (int i = 0; i < t->ndim; i++)
        t->shape[i] = (int64_t)shape[i];
    size_t want;
    if (off[0] > off[1] || off[1] > data_bytes)
        return sc_json_error(j,
                             "tensor '%.100s': data_offsets [%llu, %llu] outside the %zu-byte "
                             "data section",
                             t->name, (unsigned long long)off[0], (unsigned long long)off[1], data_bytes);
    if (tensor_bytes(t->ndim, t->shape, elem, &want) != 0 || want != off[1] - off[0])
        return sc_json_error(j,
                             "tensor '%.100s': data_offsets [%llu, %llu] do not match "
                             "%s with its shape",
                             t->name, (unsigned long long)off[0], (unsigned long long)off[1], t->dtype);
    t->offset = (size_t)off[0];
    t->nbytes = want;
    return SC_OK;
}

static int by_offset(const void *a, const void *b)
{
    const struct sc_st_tensor *x = a, *y = b;
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    return (x->nbytes > y->nbytes) - (x->nbytes < y->nbytes);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The reference implementation requires the tensors, in offset order, to
 * tile the data section exactly: no gap, no overlap, nothing after.  Names
 * must be unique, or a lookup would depend on which one came first. */
static int check_layout(struct sc_st_file *f, const char *path)
{
    if (f->ntensors > 1)
        qsort(f->tensors, (size_t)f->ntensors, sizeof *f->tensors, by_offset);
    size_t at = 0;
    for (int i = 0; i < f->ntensors; i++) {
        const struct sc_st_tensor *t = &f->tensors[i];
        if (t->offset != at)
            return sc_error(SC_ERR_PARSE,
                            "%s: tensor '%.100s' starts at byte %zu of the data "
                            "section, the previous tensor ends at %zu (%s)",
                            path, t->name, t->offset, at, t->offset < at ? "overlap" : "gap");
        at += t->nbytes;
    }
    if (at != f->data_bytes)
        return sc_error(SC_ERR_PARSE,
                        "%s: the tensors cover %zu bytes but the data section "
                        "has %zu",
                        path, at, f->data_bytes);
    if (f->ntensors < 2)
        return SC_OK;
    char **names = malloc((size_t)f->ntensors * sizeof *names);
    if (!names)
        return sc_error(SC_ERR_NOMEM, "%s: out of memory", path);
    for (int i = 0; i < f->ntensors; i++)
        names[i] = f->tensors[i].name;
    qsort(names, (size_t)f->ntensors, sizeof *names, by_name);
    int rc = SC_OK;
    for (int i = 1; i < f->ntensors && rc == SC_OK; i++)
        if (strcmp(names[i - 1], names[i]) == 0)
            rc = sc_error(SC_ERR_PARSE, "%s: duplicate tensor name '%.100s'", path, names[i]);
    free(names);
    return rc;
}

static int parse_header(const char *text, size_t len, const char *path, struct sc_st_file *f)
{
    struct sc_json j = {text, len, 0, path, "bad safetensors header"};
    int rc = sc_json_expect(&j, '{'), first = 1, cap = 0, have_meta = 0;
    char *key;
    while (rc == SC_OK && (rc = sc_json_next_member(&j, &first, &key)) == 1) {
        rc = SC_OK;
        if (strcmp(key, "__metadata__") == 0) {
            free(key);
            if (have_meta)
                rc = sc_json_error(&j, "duplicate __metadata__");
            else
                rc = parse_metadata(&j);
            have_meta = 1;
            continue;
        }
        if (f->ntensors == cap) {
            int ncap = cap ? 2 * cap : 16;
            void *p = realloc(f->tensors, (size_t)ncap * sizeof *f->tensors);
            if (!p) {
                free(key);
                return sc_error(SC_ERR_NOMEM, "%s: out of memory", path);
            }
            f->tensors = p;
            cap = ncap;
        }
        struct sc_st_tensor *t = &f->tensors[f->ntensors++];
        memset(t, 0, sizeof *t);
        t->name = key;
        rc = parse_tensor(&j, t, f->data_bytes);
    }
    if (rc != SC_OK)
        return rc;
    /* Writers pad the header with spaces to align the data section. */
    sc_json_peek(&j);
    if (j.pos != j.len)
        return sc_json_error(&j, "unexpected text after the header object");
    return check_layout(f, path);
}

SC_API void sc_st_free(struct sc_st_file *f)
{
    if (!f)
        return;
    for (int i = 0; i < f->ntensors; i++)
        free(f->tensors[i].name);
    free(f->tensors);
    free(f->data);
    free(f);
}

SC_API const struct sc_st_tensor *sc_st_find(const struct sc_st_file *f, const char *name)
{
    if (!f || !name)
        return NULL;
    for (int i = 0; i < f->ntensors; i++)
        if (strcmp(f->tensors[i].name, name) == 0)
            return &f->tensors[i];
    return NULL;
}

static int read_exact(FILE *fp, void *buf, size_t n, const char *path, const char *what)
{
    if (n && fread(buf, 1, n, fp) != n)
        return ferror(fp) ? sc_error(SC_ERR_IO, "%s: reading the %s: %s", path, what, strerror(errno))
                          : sc_error(SC_ERR_PARSE, "%s: truncated %s", path, what);
    return SC_OK;
}

SC_API int sc_st_read(const char *path, struct sc_st_file **out)
{
    if (!out)
        return sc_error(SC_ERR_ARG, "sc_st_read: out is NULL");
    *out = NULL;
    if (!path)
        return sc_error(SC_ERR_ARG, "sc_st_read: path is NULL");
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return sc_error(SC_ERR_IO, "%s: %s", path, strerror(errno));
    struct sc_st_file *f = calloc(1, sizeof *f);
    char *header = NULL;
    struct stat st;
    uint8_t lenbuf[8];
    int rc;
    if (!f) {
        rc = sc_error(SC_ERR_NOMEM, "%s: out of memory", path);
        goto out;
    }
    if (fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = sc_error(SC_ERR_IO, "%s: not a regular file", path);
        goto out;
    }
    uint64_t size = (uint64_t)st.st_size;
    if (size < 8) {
        rc = sc_error(SC_ERR_PARSE, "%s: %llu bytes, too short for a safetensors file", path, (unsigned long long)size);
        goto out;
    }
    if ((rc = read_exact(fp, lenbuf, 8, path, "header length")) != SC_OK)
        goto out;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | lenbuf[i];
    if (hlen > size - 8) {
        rc = sc_error(SC_ERR_PARSE, "%s: header length %llu is larger than the file (%llu bytes)", path,
                      (unsigned long long)hlen, (unsigned long long)size);
        goto out;
    }
    if (hlen > ST_MAX_HEADER) {
        rc = sc_error(SC_ERR_PARSE, "%s: header length %llu above the %u-byte limit", path, (unsigned long long)hlen,
                      ST_MAX_HEADER);
        goto out;
    }
    f->data_bytes = (size_t)(size - 8 - hlen);
    if (!(header = malloc((size_t)hlen + 1))) {
        rc = sc_error(SC_ERR_NOMEM, "%s: out of memory", path);
        goto out;
    }
    if ((rc = read_exact(fp, header, (size_t)hlen, path, "header")) != SC_OK)
        goto out;
    header[hlen] = '\0';
    /* Validate the header before reading what may be gigabytes of data. */
    if ((rc = parse_header(header, (size_t)hlen, path, f)) != SC_OK)
        goto out;
    if (!(f->data = malloc(f->data_bytes ? f->data_bytes : 1))) {
        rc = sc_error(SC_ERR_NOMEM, "%s: out of memory for %zu bytes of tensors", path, f->data_bytes);
        goto out;
    }
    rc = read_exact(fp, f->data, f->data_bytes, path, "data section");
out:
    fclose(fp);
    free(header);
    if (rc != SC_OK) {
        sc_st_free(f);
        return rc;
    }
    *out = f;
    return SC_OK;
}

/* ---- writer ----------------------------------------------------------------- */

struct sbuf {
    char *p;
    size_t len, cap;
    int oom;
};

static void sb_put(struct sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

__attribute__((format(printf, 2, 3))) static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    sb_put(b, tmp, (size_t)n);
}

static void sb_json_string(struct sbuf *b, const char *s)
{
    sb_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            sb_put(b, esc, 2);
        } else if (c < 0x20) {
            sb_printf(b, "\\u%04x", c);
        } else {
            sb_put(b, s, 1);
        }
    }
    sb_put(b, "\"", 1);
}

static int check_outputs(const char *path, const struct sc_st_out *t, int n, size_t *nbytes)
{
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        const char *name = t[i].name;
        if (!name || !*name || strcmp(name, "__metadata__") == 0)
            return sc_error(SC_ERR_ARG, "%s: tensor %d has no usable name", path, i);
        int elem = t[i].dtype ? dtype_size(t[i].dtype) : 0;
        if (!elem)
            return sc_error(SC_ERR_ARG, "%s: tensor '%.100s': unknown dtype '%.16s'", path, name,
                            t[i].dtype ? t[i].dtype : "(null)");
        if (t[i].ndim < 0 || t[i].ndim > SC_ST_MAXDIM || tensor_bytes(t[i].ndim, t[i].shape, elem, &nbytes[i]) != 0)
            return sc_error(SC_ERR_ARG, "%s: tensor '%.100s': bad shape", path, name);
        if (nbytes[i] && !t[i].data)
            return sc_error(SC_ERR_ARG, "%s: tensor '%.100s': no data", path, name);
        if (nbytes[i] > SIZE_MAX - total)
            return sc_error(SC_ERR_ARG, "%s: tensors larger than memory", path);
        total += nbytes[i];
    }
    const char **names = malloc((size_t)n * sizeof *names + 1);
    if (!names)
        return sc_error(SC_ERR_NOMEM, "%s: out of memory", path);
    for (int i = 0; i < n; i++)
        names[i] = t[i].name;
    if (n > 1)
        qsort(names, (size_t)n, sizeof *names, by_name);
    int rc = SC_OK;
    for (int i = 1; i < n && rc == SC_OK; i++)
        if (strcmp(names[i - 1], names[i]) == 0)
            rc = sc_error(SC_ERR_ARG, "%s: duplicate tensor name '%.100s'", path, names[i]);
    free(names);
    return rc;
}

/* What sc_write_atomic writes: the header, then the data. */
struct st_body {
    const struct sbuf *hdr;
    const struct sc_st_out *t;
    int n;
    const size_t *nbytes;
};

static int write_all(FILE *fp, const void *ctx)
{
    const struct st_body *b = ctx;
    uint8_t lenbuf[8];
    for (int i = 0; i < 8; i++)
        lenbuf[i] = (uint8_t)((uint64_t)b->hdr->len >> (8 * i));
    errno = 0;
    if (fwrite(lenbuf, 1, 8, fp) != 8 || fwrite(b->hdr->p, 1, b->hdr->len, fp) != b->hdr->len)
        return errno ? errno : EIO;
    for (int i = 0; i < b->n; i++)
        if (b->nbytes[i] && fwrite(b->t[i].data, 1, b->nbytes[i], fp) != b->nbytes[i])
            return errno ? errno : EIO;
    return 0;
}

SC_API int sc_st_write(const char *path, const struct sc_st_out *tensors, int n)
{
    if (!path || !*path || n < 0 || (n > 0 && !tensors))
        return sc_error(SC_ERR_ARG, "%s: sc_st_write: bad arguments", path ? path : "(null)");
    size_t *nbytes = malloc((size_t)n * sizeof *nbytes + 1);
    if (!nbytes)
        return sc_error(SC_ERR_NOMEM, "%s: out of memory", path);
    int rc = check_outputs(path, tensors, n, nbytes);
    if (rc != SC_OK) {
        free(nbytes);
        return rc;
    }

    /* Compact JSON; "format": "pt" as transformers writes it, for loaders that check. */
    struct sbuf hdr = {0};
    static const char meta[] = "{\"__metadata__\":{\"format\":\"pt\"}";
    sb_put(&hdr, meta, sizeof meta - 1);
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        sb_put(&hdr, ",", 1);
        sb_json_string(&hdr, tensors[i].name);
        sb_printf(&hdr, ":{\"dtype\":\"%s\",\"shape\":[", tensors[i].dtype);
        for (int d = 0; d < tensors[i].ndim; d++)
            sb_printf(&hdr, d ? ",%lld" : "%lld", (long long)tensors[i].shape[d]);
        sb_printf(&hdr, "],\"data_offsets\":[%zu,", at);
        at += nbytes[i];
        sb_printf(&hdr, "%zu]}", at);
    }
    sb_put(&hdr, "}", 1);
    /* Pad as the reference writer does, so that the data section starts
     * 8-byte aligned in the file (and in a mapping of it). */
    while (!hdr.oom && hdr.len % 8)
        sb_put(&hdr, " ", 1);
    if (hdr.oom) {
        free(hdr.p);
        free(nbytes);
        return sc_error(SC_ERR_NOMEM, "%s: out of memory", path);
    }

    struct st_body body = {&hdr, tensors, n, nbytes};
    rc = sc_write_atomic(path, write_all, &body);
    free(hdr.p);
    free(nbytes);
    return rc;
}
