/* Files of line records (see records.h). */
#include "base/records.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

int sc_records_read(const char *path, const char *what, size_t max_bytes, char **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return sc_error(SC_ERR_IO, "cannot read %s %s: %s", what, path, strerror(errno));
    size_t cap = 16384 < max_bytes + 1 ? 16384 : max_bytes + 1, n = 0;
    char *buf = malloc(cap + 1);
    errno = 0;
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap || cap == max_bytes + 1)
            break;
        cap = 2 * cap < max_bytes + 1 ? 2 * cap : max_bytes + 1;
        char *p = realloc(buf, cap + 1);
        if (!p)
            free(buf);
        buf = p;
    }
    int err = ferror(f) ? (errno ? errno : EIO) : 0;
    fclose(f);
    if (!buf)
        return sc_error(SC_ERR_NOMEM, "out of memory reading %s %s", what, path);
    if (err || n > max_bytes) {
        free(buf);
        if (err)
            return sc_error(SC_ERR_IO, "cannot read %s %s: %s", what, path, strerror(err));
        return max_bytes >= (1u << 20)
                   ? sc_error(SC_ERR_PARSE, "%s: larger than %zu MiB, not a %s", path, max_bytes >> 20, what)
                   : sc_error(SC_ERR_PARSE, "%s: larger than %zu KiB, not a %s", path, max_bytes >> 10, what);
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

int sc_records_lines(char *buf, size_t n, const char *path, int (*line)(void *ctx, int number, char *text), void *ctx,
                     int *lines)
{
    char *p = buf, *end = buf + n;
    int number = 0, err = 0;
    while (p < end && !err) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *eol = nl ? nl : end;
        number++;
        if (memchr(p, '\0', (size_t)(eol - p))) {
            err = sc_error(SC_ERR_PARSE, "%s:%d: a NUL byte: not a text file", path, number);
            break;
        }
        *eol = '\0';
        char *hash = strchr(p, '#');
        if (hash)
            *hash = '\0';
        err = line(ctx, number, p);
        p = eol + 1;
    }
    *lines = number;
    return err;
}

int sc_records_blank(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\v' || ch == '\f';
}

char *sc_records_field(char **p)
{
    char *s = *p;
    while (sc_records_blank(*s))
        s++;
    if (!*s) {
        *p = s;
        return NULL;
    }
    char *e = s;
    while (*e && !sc_records_blank(*e))
        e++;
    if (*e)
        *e++ = '\0';
    *p = e;
    return s;
}
