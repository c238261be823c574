/* JSON in: the lexer, the cursor and the tree (json.h). */
#include "json.h"
#include "error.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sc_json_verror_at(const struct sc_json *j, size_t pos, const char *fmt, va_list ap)
{
    char what[320];
    vsnprintf(what, sizeof what, fmt, ap);
    if (j->context)
        return sc_error(SC_ERR_PARSE, "%s: %s at byte %zu: %s", j->path, j->context, pos, what);
    return sc_error(SC_ERR_PARSE, "%s: byte %zu: %s", j->path, pos, what);
}

int sc_json_error_at(const struct sc_json *j, size_t pos, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = sc_json_verror_at(j, pos, fmt, ap);
    va_end(ap);
    return rc;
}

int sc_json_error(const struct sc_json *j, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = sc_json_verror_at(j, j->pos, fmt, ap);
    va_end(ap);
    return rc;
}

/* A syntax error at byte pos: what was expected, and what was found. */
static int found(const struct sc_json *j, size_t pos, const char *what)
{
    if (pos >= j->len)
        return sc_json_error_at(j, pos, "%s, found the end of the %s", what, j->context ? "text" : "file");
    unsigned char ch = (unsigned char)j->text[pos];
    if (ch >= 0x20 && ch < 0x7f)
        return sc_json_error_at(j, pos, "%s, found '%c'", what, ch);
    return sc_json_error_at(j, pos, "%s, found byte 0x%02x", what, ch);
}

static void skip_ws(struct sc_json *j)
{
    while (j->pos < j->len &&
           (j->text[j->pos] == ' ' || j->text[j->pos] == '\t' || j->text[j->pos] == '\n' || j->text[j->pos] == '\r'))
        j->pos++;
}

char sc_json_peek(struct sc_json *j)
{
    skip_ws(j);
    return j->pos < j->len ? j->text[j->pos] : 0;
}

int sc_json_expect(struct sc_json *j, char c)
{
    if (sc_json_peek(j) != c || j->pos >= j->len) {
        char what[16];
        snprintf(what, sizeof what, "expected '%c'", c);
        return found(j, j->pos, what);
    }
    j->pos++;
    return SC_OK;
}

int sc_json_expect_end(struct sc_json *j)
{
    if (sc_json_peek(j), j->pos < j->len)
        return found(j, j->pos, "expected the end of the file after the JSON value");
    return SC_OK;
}

/* ---- strings ---- */

/* The four hex digits at text[at]; -1 when they are not. */
static int hex4(const struct sc_json *j, size_t at, unsigned *out)
{
    if (j->len - at < 4 || at > j->len)
        return -1;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = j->text[at + i];
        unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                     : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                            : 16u;
        if (d == 16)
            return -1;
        v = v * 16 + d;
    }
    *out = v;
    return 0;
}

static size_t put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xc0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | cp >> 12);
        o[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | cp >> 18);
    o[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* The string whose opening quote is at the cursor.  Escapes only shrink,
 * so the raw length bounds the decoded one. */
static int lex_string(struct sc_json *j, char **out)
{
    *out = NULL;
    size_t end = ++j->pos;
    while (end < j->len && j->text[end] != '"')
        end += j->text[end] == '\\' ? 2 : 1;
    if (end >= j->len)
        return found(j, j->len, "unterminated string");
    char *o = malloc(end - j->pos + 1);
    if (!o)
        return sc_error(SC_ERR_NOMEM, "%s: out of memory", j->path);
    size_t n = 0;
    int rc = SC_OK;
    while (j->pos < end) {
        unsigned char c = (unsigned char)j->text[j->pos];
        if (c < 0x20) {
            rc = sc_json_error(j, "control character in string");
            goto fail;
        }
        if (c != '\\') {
            o[n++] = (char)c;
            j->pos++;
            continue;
        }
        char e = j->text[j->pos + 1];
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            o[n++] = "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
            j->pos += 2;
            continue;
        }
        if (e != 'u') {
            rc = sc_json_error(j, "bad escape '\\%c'", e);
            goto fail;
        }
        unsigned cp, lo;
        if (hex4(j, j->pos + 2, &cp)) {
            rc = sc_json_error(j, "bad \\u escape (a bad escape: \\u takes four hex digits)");
            goto fail;
        }
        if (cp >= 0xdc00 && cp <= 0xdfff) {
            rc = sc_json_error(j, "lone low surrogate in \\u escape");
            goto fail;
        }
        if (cp >= 0xd800 && cp <= 0xdbff) {
            if (end - j->pos < 12 || j->text[j->pos + 6] != '\\' || j->text[j->pos + 7] != 'u' ||
                hex4(j, j->pos + 8, &lo) || lo < 0xdc00 || lo > 0xdfff) {
                rc = sc_json_error(j, "high surrogate without a low one");
                goto fail;
            }
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            j->pos += 6;
        }
        if (cp == 0) {
            rc = sc_json_error(j, "\\u0000 in string");
            goto fail;
        }
        n += put_utf8(o + n, cp);
        j->pos += 6;
    }
    j->pos = end + 1;
    o[n] = '\0';
    *out = o;
    return SC_OK;
fail:
    free(o);
    return rc;
}

int sc_json_string(struct sc_json *j, char **out)
{
    *out = NULL;
    if (sc_json_peek(j) != '"' || j->pos >= j->len)
        return found(j, j->pos, "expected '\"'");
    return lex_string(j, out);
}

/* ---- numbers ---- */

/* The number at the cursor (a '-' or a digit), as RFC 8259 writes them and
 * followed by whitespace, ',', ']', '}' or the end: its end, and whether
 * it is an integer (no fraction, no exponent).  The cursor stays. */
static int scan_number(const struct sc_json *j, size_t *end, int *integer)
{
    size_t s = j->pos, p = s, n = j->len;
    const char *t = j->text;
#define DIGIT(i) ((i) < n && t[i] >= '0' && t[i] <= '9')
    if (p < n && t[p] == '-')
        p++;
    if (!DIGIT(p))
        return found(j, s, "bad number");
    if (t[p] == '0' && DIGIT(p + 1))
        return sc_json_error_at(j, s, "bad number: leading zero");
    while (DIGIT(p))
        p++;
    *integer = 1;
    if (p < n && t[p] == '.') {
        *integer = 0;
        if (!DIGIT(p + 1))
            return sc_json_error_at(j, p + 1, "bad number: no digit after '.'");
        for (p++; DIGIT(p); p++)
            ;
    }
    if (p < n && (t[p] == 'e' || t[p] == 'E')) {
        *integer = 0;
        p++;
        if (p < n && (t[p] == '+' || t[p] == '-'))
            p++;
        if (!DIGIT(p))
            return sc_json_error_at(j, p, "bad number: no digit in the exponent");
        while (DIGIT(p))
            p++;
    }
#undef DIGIT
    if (p < n && !strchr(" \t\r\n,]}", t[p]))
        return found(j, s, "bad number");
    *end = p;
    return SC_OK;
}

static int lex_number(struct sc_json *j, double *out)
{
    size_t end;
    int integer, rc = scan_number(j, &end, &integer);
    if (rc)
        return rc;
    size_t len = end - j->pos;
    char small[64], *copy = len < sizeof small ? small : malloc(len + 1);
    if (!copy)
        return sc_error(SC_ERR_NOMEM, "%s: out of memory", j->path);
    memcpy(copy, j->text + j->pos, len);
    copy[len] = '\0';
    double v = strtod(copy, NULL);
    if (copy != small)
        free(copy);
    if (!isfinite(v))
        return sc_json_error(j, "number out of range");
    j->pos = end;
    *out = v;
    return SC_OK;
}

int sc_json_uint(struct sc_json *j, uint64_t max, uint64_t *out)
{
    char c = sc_json_peek(j);
    if (c < '0' || c > '9' || j->pos >= j->len)
        return sc_json_error(j, "expected a non-negative integer");
    size_t end;
    int integer, rc = scan_number(j, &end, &integer);
    if (rc)
        return rc;
    if (!integer)
        return sc_json_error(j, "expected an integer, not a fraction");
    uint64_t v = 0;
    for (size_t p = j->pos; p < end; p++) {
        unsigned d = (unsigned)(j->text[p] - '0');
        if (v > (max - d) / 10)
            return sc_json_error(j, "integer too large");
        v = v * 10 + d;
    }
    j->pos = end;
    *out = v;
    return SC_OK;
}

/* ---- the cursor over objects ---- */

int sc_json_next_member(struct sc_json *j, int *first, char **key)
{
    *key = NULL;
    char c = sc_json_peek(j);
    if (c == '}' && j->pos < j->len) {
        j->pos++;
        return 0;
    }
    if (!*first) {
        if (c != ',' || j->pos >= j->len)
            return found(j, j->pos, "expected ',' or '}'");
        j->pos++;
    }
    *first = 0;
    int rc = sc_json_string(j, key);
    if (rc == SC_OK && (rc = sc_json_expect(j, ':')) != SC_OK) {
        free(*key);
        *key = NULL;
    }
    return rc != SC_OK ? rc : 1;
}

/* ---- the tree ---- */

void sc_json_free(struct sc_json_value *v)
{
    for (size_t i = 0; i < v->n; i++) {
        sc_json_free(&v->item[i]);
        if (v->key)
            free(v->key[i]);
    }
    free(v->item);
    free(v->key);
    free(v->str);
    memset(v, 0, sizeof *v);
}

/* Grows v's items by one zeroed slot; counted at once, so that
 * sc_json_free of the parent frees whatever a failed parse left in it. */
static struct sc_json_value *add_item(struct sc_json_value *v)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 4;
        struct sc_json_value *item = realloc(v->item, cap * sizeof *item);
        if (!item)
            return NULL;
        v->item = item;
        if (v->type == SC_JSON_OBJ) {
            char **key = realloc(v->key, cap * sizeof *key);
            if (!key)
                return NULL;
            v->key = key;
        }
        v->cap = cap;
    }
    struct sc_json_value *it = &v->item[v->n];
    memset(it, 0, sizeof *it);
    if (v->key)
        v->key[v->n] = NULL;
    v->n++;
    return it;
}

static int parse_value(struct sc_json *j, struct sc_json_value *v, int level, int limit);

static int parse_container(struct sc_json *j, struct sc_json_value *v, int level, int limit)
{
    char close = j->text[j->pos] == '{' ? '}' : ']';
    v->type = close == '}' ? SC_JSON_OBJ : SC_JSON_ARR;
    if (level >= limit)
        return sc_json_error(j, "nested deeper than %d", limit);
    j->pos++;
    if (sc_json_peek(j) == close && j->pos < j->len) {
        j->pos++;
        return SC_OK;
    }
    for (;;) {
        struct sc_json_value *it = add_item(v);
        if (!it)
            return sc_error(SC_ERR_NOMEM, "%s: out of memory", j->path);
        if (v->type == SC_JSON_OBJ) {
            if (sc_json_peek(j) != '"' || j->pos >= j->len)
                return found(j, j->pos, "expected a key string");
            int rc = lex_string(j, &v->key[v->n - 1]);
            if (rc || (rc = sc_json_expect(j, ':')))
                return rc;
        }
        int rc = parse_value(j, it, level + 1, limit);
        if (rc)
            return rc;
        char c = sc_json_peek(j);
        if (j->pos < j->len && (c == ',' || c == close)) {
            j->pos++;
            if (c == close)
                return SC_OK;
            continue;
        }
        return found(j, j->pos, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static int parse_value(struct sc_json *j, struct sc_json_value *v, int level, int limit)
{
    static const struct {
        const char *word;
        enum sc_json_type type;
    } words[] = {{"null", SC_JSON_NULL}, {"false", SC_JSON_FALSE}, {"true", SC_JSON_TRUE}};
    memset(v, 0, sizeof *v);
    skip_ws(j);
    v->pos = j->pos;
    if (j->pos >= j->len)
        return found(j, j->pos, "expected a value");
    char ch = j->text[j->pos];
    if (ch == '{' || ch == '[')
        return parse_container(j, v, level, limit);
    if (ch == '"') {
        v->type = SC_JSON_STR;
        return lex_string(j, &v->str);
    }
    if (ch == '-' || (ch >= '0' && ch <= '9')) {
        v->type = SC_JSON_NUM;
        return lex_number(j, &v->num);
    }
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        size_t len = strlen(words[i].word);
        if (j->len - j->pos >= len && memcmp(j->text + j->pos, words[i].word, len) == 0) {
            v->type = words[i].type;
            j->pos += len;
            return SC_OK;
        }
    }
    return found(j, j->pos, "expected a value");
}

int sc_json_parse_value(struct sc_json *j, struct sc_json_value *v, int max_depth)
{
    return parse_value(j, v, 0, max_depth);
}

const struct sc_json_value *sc_json_get(const struct sc_json_value *obj, const char *key)
{
    for (size_t i = 0; obj->type == SC_JSON_OBJ && i < obj->n; i++)
        if (strcmp(obj->key[i], key) == 0)
            return &obj->item[i];
    return NULL;
}
