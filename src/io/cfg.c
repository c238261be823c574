/* Darknet-style INI configuration files. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "base/error.h"
#include "src/io/cfg.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A model definition is a few kilobytes; anything this large is the wrong
 * file, and refusing it early keeps a mistaken path from eating memory. */
#define CFG_MAX_BYTES (1024 * 1024)
/* Keeps every message that quotes a name within one readable line. */
#define CFG_MAX_NAME 64

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static int is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.';
}

static char *dup_range(const char *b, const char *e)
{
    size_t n = (size_t)(e - b);
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, b, n);
        s[n] = '\0';
    }
    return s;
}

SC_API void sc_cfg_free(struct sc_cfg *cfg)
{
    if (!cfg)
        return;
    for (int i = 0; i < cfg->nsections; i++) {
        struct sc_cfg_section *s = &cfg->sections[i];
        for (int k = 0; k < s->nkeys; k++) {
            free(s->keys[k].key);
            free(s->keys[k].value);
        }
        free(s->keys);
        free(s->name);
    }
    free(cfg->sections);
    free(cfg->path);
    free(cfg);
}

static int nomem(const char *path)
{
    return sc_error(SC_ERR_NOMEM, "%s: out of memory", path);
}

/* Returns arr with room for n + 1 elements of size elem, or NULL. */
static void *reserve(void *arr, int n, int *cap, size_t elem)
{
    if (n < *cap)
        return arr;
    int ncap = *cap ? 2 * *cap : 8;
    void *p = realloc(arr, (size_t)ncap * elem);
    if (p)
        *cap = ncap;
    return p;
}

/* The keys of the section being read, by hash, so that spotting a
 * duplicate costs O(1) rather than a scan of the section: a hostile file of
 * 10^5 keys would otherwise take a minute. */
struct keyset {
    int *slot;  /* 1 + index into the section's keys; 0: empty */
    size_t cap; /* a power of two, more than twice the keys; 0: none yet */
};

static size_t hash_key(const char *b, size_t n)
{
    uint64_t h = 0xcbf29ce484222325u; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)b[i]) * 0x100000001b3u;
    return (size_t)h;
}

/* The slot holding key [b, b + n) of s, or the empty slot where it goes. */
static int *keyset_slot(const struct keyset *ks, const struct sc_cfg_section *s, const char *b, size_t n)
{
    size_t mask = ks->cap - 1;
    for (size_t i = hash_key(b, n) & mask;; i = (i + 1) & mask) {
        int k = ks->slot[i];
        if (k == 0 || (strlen(s->keys[k - 1].key) == n && memcmp(s->keys[k - 1].key, b, n) == 0))
            return &ks->slot[i];
    }
}

/* Room for one more key of s. */
static int keyset_reserve(struct keyset *ks, const struct sc_cfg_section *s)
{
    if (2 * ((size_t)s->nkeys + 1) < ks->cap)
        return SC_OK;
    size_t cap = ks->cap ? 2 * ks->cap : 16;
    int *slot = calloc(cap, sizeof *slot);
    if (!slot)
        return SC_ERR_NOMEM;
    free(ks->slot);
    ks->slot = slot;
    ks->cap = cap;
    for (int k = 0; k < s->nkeys; k++)
        *keyset_slot(ks, s, s->keys[k].key, strlen(s->keys[k].key)) = k + 1;
    return SC_OK;
}

static void keyset_clear(struct keyset *ks)
{
    free(ks->slot);
    ks->slot = NULL;
    ks->cap = 0;
}

static int parse_section_header(struct sc_cfg *cfg, const char *b, const char *e, int line, int *seccap, int *keycap,
                                struct keyset *ks)
{
    const char *path = cfg->path;
    const char *close = memchr(b, ']', (size_t)(e - b));
    if (!close)
        return sc_error(SC_ERR_PARSE, "%s:%d: expected ']' to close the section name", path, line);
    for (const char *p = close + 1; p < e; p++)
        if (!is_space(*p))
            return sc_error(SC_ERR_PARSE, "%s:%d: unexpected text after ']'", path, line);
    const char *nb = b + 1, *ne = close;
    while (nb < ne && is_space(*nb))
        nb++;
    while (ne > nb && is_space(ne[-1]))
        ne--;
    if (nb == ne)
        return sc_error(SC_ERR_PARSE, "%s:%d: empty section name", path, line);
    if (ne - nb > CFG_MAX_NAME)
        return sc_error(SC_ERR_PARSE, "%s:%d: section name longer than %d characters", path, line, CFG_MAX_NAME);
    for (const char *p = nb; p < ne; p++)
        if (!is_name_char(*p))
            return sc_error(SC_ERR_PARSE, "%s:%d: bad character in section name", path, line);
    void *p = reserve(cfg->sections, cfg->nsections, seccap, sizeof *cfg->sections);
    if (!p)
        return nomem(path);
    cfg->sections = p;
    struct sc_cfg_section *s = &cfg->sections[cfg->nsections++];
    memset(s, 0, sizeof *s);
    s->line = line;
    s->name = dup_range(nb, ne);
    *keycap = 0;
    keyset_clear(ks);
    return s->name ? SC_OK : nomem(path);
}

static int parse_key_value(struct sc_cfg *cfg, const char *b, const char *e, int line, int *keycap, struct keyset *ks)
{
    const char *path = cfg->path;
    const char *eq = memchr(b, '=', (size_t)(e - b));
    if (!eq)
        return sc_error(SC_ERR_PARSE, "%s:%d: expected key=value", path, line);
    const char *kb = b, *ke = eq, *vb = eq + 1, *ve = e;
    while (ke > kb && is_space(ke[-1]))
        ke--;
    while (vb < ve && is_space(*vb))
        vb++;
    if (kb == ke)
        return sc_error(SC_ERR_PARSE, "%s:%d: missing key before '='", path, line);
    if (ke - kb > CFG_MAX_NAME)
        return sc_error(SC_ERR_PARSE, "%s:%d: key longer than %d characters", path, line, CFG_MAX_NAME);
    int klen = (int)(ke - kb);
    for (const char *p = kb; p < ke; p++)
        if (!is_name_char(*p))
            return sc_error(SC_ERR_PARSE, "%s:%d: bad character in key '%.*s'", path, line, klen, kb);
    if (cfg->nsections == 0)
        return sc_error(SC_ERR_PARSE, "%s:%d: key '%.*s' outside any section", path, line, klen, kb);
    struct sc_cfg_section *s = &cfg->sections[cfg->nsections - 1];
    if (vb == ve)
        return sc_error(SC_ERR_PARSE, "%s:%d: missing value for '%.*s' in [%s]", path, line, klen, kb, s->name);
    if (keyset_reserve(ks, s) != SC_OK)
        return nomem(path);
    int *slot = keyset_slot(ks, s, kb, (size_t)klen);
    if (*slot) {
        const struct sc_cfg_key *first = &s->keys[*slot - 1];
        return sc_error(SC_ERR_PARSE, "%s:%d: duplicate key '%s' in [%s] (first at line %d)", path, line, first->key,
                        s->name, first->line);
    }
    void *p = reserve(s->keys, s->nkeys, keycap, sizeof *s->keys);
    if (!p)
        return nomem(path);
    s->keys = p;
    struct sc_cfg_key *k = &s->keys[s->nkeys++];
    memset(k, 0, sizeof *k);
    k->line = line;
    k->key = dup_range(kb, ke);
    k->value = dup_range(vb, ve);
    if (!k->key || !k->value)
        return nomem(path);
    *slot = s->nkeys;
    return SC_OK;
}

static int parse_buffer(const char *text, size_t len, const char *name, struct sc_cfg **out)
{
    *out = NULL;
    struct sc_cfg *cfg = calloc(1, sizeof *cfg);
    if (!cfg || !(cfg->path = strdup(name))) {
        free(cfg);
        return nomem(name);
    }
    int seccap = 0, keycap = 0, rc = SC_OK;
    struct keyset ks = {NULL, 0};
    const char *p = text, *end = text + len;
    for (int line = 1; p < end && rc == SC_OK; line++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *b = p, *e = nl ? nl : end;
        p = nl ? nl + 1 : end;
        /* Reject binary content here, with a line number, rather than let it
         * surface later as a puzzling key or number error. */
        for (const char *q = b; q < e; q++) {
            unsigned char c = (unsigned char)*q;
            if (c == 0) {
                rc = sc_error(SC_ERR_PARSE, "%s:%d: NUL byte (not a text file?)", name, line);
                break;
            }
            if ((c < 0x20 && !is_space((char)c)) || c == 0x7f) {
                rc = sc_error(SC_ERR_PARSE, "%s:%d: control character 0x%02x (not a text file?)", name, line, c);
                break;
            }
        }
        if (rc != SC_OK)
            break;
        for (const char *q = b; q < e; q++)
            if (*q == '#' || *q == ';') {
                e = q;
                break;
            }
        while (b < e && is_space(*b))
            b++;
        while (e > b && is_space(e[-1]))
            e--;
        /* Blanks other than space and tab are fine around the text (CRLF
         * line ends), not inside it: keys and values are quoted in error
         * messages, where a CR or VT would break or overwrite the line. */
        for (const char *q = b; q < e && rc == SC_OK; q++)
            if (*q == '\r')
                rc = sc_error(SC_ERR_PARSE,
                              "%s:%d: carriage return inside a line (old Mac line "
                              "ends?)",
                              name, line);
            else if (*q != ' ' && *q != '\t' && is_space(*q))
                rc = sc_error(SC_ERR_PARSE, "%s:%d: control character 0x%02x (not a text file?)", name, line,
                              (unsigned char)*q);
        if (rc != SC_OK)
            break;
        if (b == e)
            continue;
        if (*b == '[')
            rc = parse_section_header(cfg, b, e, line, &seccap, &keycap, &ks);
        else
            rc = parse_key_value(cfg, b, e, line, &keycap, &ks);
    }
    keyset_clear(&ks);
    if (rc == SC_OK && cfg->nsections == 0)
        rc = sc_error(SC_ERR_PARSE, "%s: no [section] found (empty file?)", name);
    if (rc != SC_OK) {
        sc_cfg_free(cfg);
        return rc;
    }
    *out = cfg;
    return SC_OK;
}

SC_API int sc_cfg_parse_string(const char *text, const char *name, struct sc_cfg **out)
{
    if (!out)
        return sc_error(SC_ERR_ARG, "sc_cfg_parse_string: out is NULL");
    *out = NULL;
    if (!name)
        name = "<string>";
    if (!text)
        return sc_error(SC_ERR_ARG, "%s: no text", name);
    return parse_buffer(text, strlen(text), name, out);
}

SC_API int sc_cfg_load(const char *path, struct sc_cfg **out)
{
    if (!out)
        return sc_error(SC_ERR_ARG, "sc_cfg_load: out is NULL");
    *out = NULL;
    if (!path)
        return sc_error(SC_ERR_ARG, "sc_cfg_load: path is NULL");
    FILE *f = fopen(path, "rb");
    if (!f)
        return sc_error(SC_ERR_IO, "%s: %s", path, strerror(errno));
    /* Read one byte past the limit instead of trusting stat, so that pipes
     * and /dev files are bounded too.  The buffer grows with what arrives:
     * a model is a few kilobytes. */
    size_t cap = 16384, n = 0;
    char *buf = malloc(cap);
    errno = 0;
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap || cap == CFG_MAX_BYTES + 1)
            break;
        cap = 2 * cap < CFG_MAX_BYTES + 1 ? 2 * cap : CFG_MAX_BYTES + 1;
        char *p = realloc(buf, cap);
        if (!p)
            free(buf);
        buf = p;
    }
    if (!buf) {
        fclose(f);
        return nomem(path);
    }
    int err = ferror(f) ? (errno ? errno : EIO) : 0;
    fclose(f);
    int rc;
    if (err)
        rc = sc_error(SC_ERR_IO, "%s: %s", path, strerror(err));
    else if (n > CFG_MAX_BYTES)
        rc = sc_error(SC_ERR_PARSE, "%s: larger than %d bytes, not a model configuration", path, CFG_MAX_BYTES);
    else
        rc = parse_buffer(buf, n, path, out);
    free(buf);
    return rc;
}

static struct sc_cfg_key *find_key(struct sc_cfg_section *s, const char *key)
{
    for (int k = 0; k < s->nkeys; k++)
        if (strcmp(s->keys[k].key, key) == 0) {
            s->keys[k].used = 1;
            return &s->keys[k];
        }
    return NULL;
}

static const char *cfg_path(const struct sc_cfg *cfg)
{
    return cfg && cfg->path ? cfg->path : "<cfg>";
}

SC_API int sc_cfg_get_int(const struct sc_cfg *cfg, struct sc_cfg_section *s, const char *key, int def, int min,
                          int max, int *out)
{
    if (!s || !key || !out)
        return sc_error(SC_ERR_ARG, "%s: sc_cfg_get_int: NULL argument", cfg_path(cfg));
    struct sc_cfg_key *k = find_key(s, key);
    if (!k) {
        *out = def;
        return SC_OK;
    }
    char *end;
    errno = 0;
    long v = strtol(k->value, &end, 10);
    if (end == k->value || *end != '\0')
        return sc_error(SC_ERR_PARSE, "%s:%d: bad number '%.64s' for '%s' in [%s]", cfg_path(cfg), k->line, k->value,
                        key, s->name);
    if (errno == ERANGE || v < min || v > max)
        return sc_error(SC_ERR_PARSE, "%s:%d: %s=%.64s out of range [%d, %d] in [%s]", cfg_path(cfg), k->line, key,
                        k->value, min, max, s->name);
    *out = (int)v;
    return SC_OK;
}

SC_API int sc_cfg_get_float(const struct sc_cfg *cfg, struct sc_cfg_section *s, const char *key, double def,
                            double *out)
{
    if (!s || !key || !out)
        return sc_error(SC_ERR_ARG, "%s: sc_cfg_get_float: NULL argument", cfg_path(cfg));
    struct sc_cfg_key *k = find_key(s, key);
    if (!k) {
        *out = def;
        return SC_OK;
    }
    char *end;
    errno = 0;
    double v = strtod(k->value, &end);
    int overflow = errno == ERANGE && fabs(v) > 1.0;
    /* "nan" and "inf" parse, but as a learning rate or decay they are a typo. */
    if (end == k->value || *end != '\0' || (!isfinite(v) && !overflow))
        return sc_error(SC_ERR_PARSE, "%s:%d: bad number '%.64s' for '%s' in [%s]", cfg_path(cfg), k->line, k->value,
                        key, s->name);
    if (overflow)
        return sc_error(SC_ERR_PARSE, "%s:%d: %s=%.64s out of range in [%s]", cfg_path(cfg), k->line, key, k->value,
                        s->name);
    *out = v;
    return SC_OK;
}

SC_API int sc_cfg_get_str(const struct sc_cfg *cfg, struct sc_cfg_section *s, const char *key, const char *def,
                          const char **out)
{
    if (!s || !key || !out)
        return sc_error(SC_ERR_ARG, "%s: sc_cfg_get_str: NULL argument", cfg_path(cfg));
    struct sc_cfg_key *k = find_key(s, key);
    *out = k ? k->value : def;
    return SC_OK;
}

SC_API int sc_cfg_check_unused(const struct sc_cfg *cfg, const struct sc_cfg_section *s)
{
    if (!s)
        return sc_error(SC_ERR_ARG, "%s: sc_cfg_check_unused: NULL section", cfg_path(cfg));
    for (int k = 0; k < s->nkeys; k++)
        if (!s->keys[k].used)
            return sc_error(SC_ERR_PARSE, "%s:%d: unknown key '%s' in [%s]", cfg_path(cfg), s->keys[k].line,
                            s->keys[k].key, s->name);
    return SC_OK;
}
