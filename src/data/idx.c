/* IDX data sets (MNIST layout), plain or gzip-compressed. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "base/error.h"
#include "src/data/dataset.h"
#include "src/data/hdf5.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define IDX_IMAGES_MAGIC 0x00000803u
#define IDX_LABELS_MAGIC 0x00000801u
#define IDX_CLASSES      10
/* Sample counts and byte offsets are ints elsewhere in the program. */
#define IDX_MAX_BYTES ((uint64_t)INT32_MAX)
/* Deflate cannot expand more than about 1032:1, so a header promising more
 * data than that from the compressed size is corrupt; checking it first
 * avoids a large allocation for a small damaged file. */
#define GZ_MAX_RATIO 1032

static const char *const missing_hint = "(install the Debian package dataset-fashion-mnist, or pass --data DIR)";

/* Picks "<dir>/<prefix>-<kind>.gz", else the same without ".gz". */
static int find_file(const char *dir, const char *prefix, const char *kind, char *path, size_t size, struct stat *st)
{
    struct stat dst;
    if (stat(dir, &dst) != 0) {
        int err = errno;
        if (err == ENOENT)
            return sc_error(SC_ERR_DATA, "%s: No such file or directory %s", dir, missing_hint);
        return sc_error(SC_ERR_IO, "%s: %s", dir, strerror(err));
    }
    if (!S_ISDIR(dst.st_mode))
        return sc_error(SC_ERR_DATA, "%s: Not a directory %s", dir, missing_hint);
    int len = snprintf(path, size, "%s/%s-%s.gz", dir, prefix, kind);
    if (len < 0 || (size_t)len >= size)
        return sc_error(SC_ERR_ARG, "%s: path too long", dir);
    if (stat(path, st) == 0)
        return SC_OK;
    path[len - 3] = '\0';
    if (stat(path, st) == 0)
        return SC_OK;
    int err = errno;
    path[len - 3] = '.';
    if (err == ENOENT)
        return sc_error(SC_ERR_DATA, "%s: No such file or directory %s", path, missing_hint);
    return sc_error(SC_ERR_IO, "%s: %s", path, strerror(err));
}

static const char *gz_message(gzFile gz, const char *path)
{
    int zerr;
    const char *msg = gzerror(gz, &zerr);
    if (zerr == Z_ERRNO)
        return strerror(errno);
    if (zerr == Z_BUF_ERROR)
        return "truncated (unexpected end of compressed data)";
    if (!msg || !*msg)
        return "read error";
    /* zlib prefixes its messages with the path, which ours already has. */
    size_t n = strlen(path);
    return strncmp(msg, path, n) == 0 && strncmp(msg + n, ": ", 2) == 0 ? msg + n + 2 : msg;
}

/* Reads up to n bytes into buf + *got, in chunks that fit gzread's int. */
static int read_some(gzFile gz, const char *path, uint8_t *buf, uint64_t n, uint64_t *got, const char *what)
{
    while (*got < n) {
        uint64_t chunk = n - *got < (1u << 24) ? n - *got : (1u << 24);
        int r = gzread(gz, buf + *got, (unsigned)chunk);
        if (r < 0)
            return sc_error(SC_ERR_DATA, "%s: %s while reading %s", path, gz_message(gz, path), what);
        if (r == 0)
            break;
        *got += (uint64_t)r;
    }
    return SC_OK;
}

static int truncated(const char *path, const char *what, uint64_t n, uint64_t got)
{
    return sc_error(SC_ERR_DATA, "%s: truncated: %s needs %llu bytes, found %llu", path, what, (unsigned long long)n,
                    (unsigned long long)got);
}

/* Reads exactly n bytes; a short read means a truncated or corrupt file. */
static int read_exact(gzFile gz, const char *path, void *buf, uint64_t n, const char *what)
{
    uint64_t got = 0;
    int rc = read_some(gz, path, buf, n, &got, what);
    if (rc == SC_OK && got < n)
        rc = truncated(path, what, n, got);
    return rc;
}

/* Reads n bytes into a new buffer.  For a plain file the size was checked
 * against the file's; a gzip file's size bounds its data only loosely
 * (1032:1), so its buffer grows with what actually decompresses: a small
 * damaged file that promises a gigabyte costs what it holds. */
static int read_data(gzFile gz, const char *path, uint64_t n, int direct, const char *what, uint8_t **out)
{
    uint64_t cap = direct || n < (1u << 20) ? n : (1u << 20), got = 0;
    uint8_t *buf = malloc(cap ? cap : 1);
    int rc = SC_OK;
    for (;;) {
        if (!buf) {
            rc = sc_error(SC_ERR_NOMEM, "%s: out of memory for %llu bytes", path, (unsigned long long)cap);
            break;
        }
        if ((rc = read_some(gz, path, buf, cap, &got, what)) != SC_OK || got < cap || cap == n)
            break;
        cap = 2 * cap < n ? 2 * cap : n;
        uint8_t *p = realloc(buf, cap);
        if (!p)
            free(buf);
        buf = p;
    }
    if (rc == SC_OK && got < n)
        rc = truncated(path, what, n, got);
    if (rc != SC_OK) {
        free(buf);
        buf = NULL;
    }
    *out = buf;
    return rc;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Loads one IDX file with the given magic; dims[0] is the sample count. */
static int load_idx(const char *path, const struct stat *st, uint32_t magic, int ndims, uint32_t *dims, uint8_t **data)
{
    *data = NULL;
    if (S_ISDIR(st->st_mode))
        return sc_error(SC_ERR_DATA, "%s: is a directory", path);
    /* Only regular files: a FIFO would block the open (O_NONBLOCK keeps a
     * file swapped in after the stat from doing so), and the size bounds
     * below need a real size. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return sc_error(SC_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat fst;
    if (fstat(fd, &fst) != 0 || !S_ISREG(fst.st_mode)) {
        close(fd);
        return sc_error(SC_ERR_DATA, "%s: not a regular file", path);
    }
    st = &fst;
    gzFile gz = NULL;
    int flags = fcntl(fd, F_GETFL);
    if (flags == -1 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == -1 || !(gz = gzdopen(fd, "rb"))) {
        int err = errno;
        close(fd);
        return sc_error(err == ENOMEM ? SC_ERR_NOMEM : SC_ERR_IO, "%s: %s", path, err ? strerror(err) : "cannot open");
    }
    uint8_t head[4 + 4 * 3];
    size_t headlen = 4 + 4 * (size_t)ndims;
    int rc = read_exact(gz, path, head, headlen, "the header");
    if (rc != SC_OK)
        goto out;
    uint32_t m = be32(head);
    if (m != magic) {
        rc = sc_error(SC_ERR_DATA, "%s: bad magic number 0x%08x, expected 0x%08x (%s)", path, m, magic,
                      magic == IDX_IMAGES_MAGIC ? "idx3 images" : "idx1 labels");
        goto out;
    }
    uint64_t total = 1;
    for (int i = 0; i < ndims; i++) {
        dims[i] = be32(head + 4 + 4 * i);
        if (dims[i] == 0) {
            rc = sc_error(SC_ERR_DATA, "%s: dimension %d is zero", path, i);
            goto out;
        }
        /* Each factor is below 2^32 and total stays below 2^31 before
         * multiplying, so the product cannot overflow 64 bits. */
        total *= dims[i];
        if (total > IDX_MAX_BYTES) {
            rc = sc_error(SC_ERR_DATA, "%s: dimensions too large (more than %llu bytes)", path,
                          (unsigned long long)IDX_MAX_BYTES);
            goto out;
        }
    }
    int direct = gzdirect(gz);
    uint64_t size = (uint64_t)st->st_size;
    uint64_t limit = direct ? (size > headlen ? size - headlen : 0) : size * GZ_MAX_RATIO;
    if (total > limit) {
        rc = sc_error(SC_ERR_DATA,
                      "%s: truncated: the header promises %llu bytes of data, "
                      "more than a %s file of %llu bytes can hold",
                      path, (unsigned long long)total, direct ? "plain" : "gzip", (unsigned long long)st->st_size);
        goto out;
    }
    rc = read_data(gz, path, total, direct, magic == IDX_IMAGES_MAGIC ? "images" : "labels", data);
    if (rc != SC_OK)
        goto out;
    /* Extra bytes mean the dimensions do not describe the file (a
     * concatenation, the wrong file): not data to silently ignore.  At the
     * end of input gzread returns 0 even when the gzip stream is cut short;
     * only gzerror tells, and not for a file cut inside its 8-byte CRC and
     * length trailer, which zlib accepts (the data itself is complete). */
    char extra;
    int r = gzread(gz, &extra, 1), zerr;
    gzerror(gz, &zerr);
    if (r > 0)
        rc = sc_error(SC_ERR_DATA, "%s: trailing bytes after the data", path);
    else if (r < 0 || zerr != Z_OK)
        rc = sc_error(SC_ERR_DATA, "%s: %s", path, gz_message(gz, path));
out:
    gzclose(gz);
    if (rc != SC_OK) {
        free(*data);
        *data = NULL;
    }
    return rc;
}

SC_API void sc_dataset_free(struct sc_dataset *ds)
{
    if (!ds)
        return;
    free(ds->images);
    free(ds->labels);
    sc_data_file_close(ds->file);
    memset(ds, 0, sizeof *ds);
}

SC_API int sc_dataset_load_idx(const char *dir, const char *prefix, struct sc_dataset *out)
{
    if (!out)
        return sc_error(SC_ERR_ARG, "sc_dataset_load_idx: out is NULL");
    memset(out, 0, sizeof *out);
    if (!dir || !prefix || !*dir || !*prefix)
        return sc_error(SC_ERR_ARG, "sc_dataset_load_idx: empty directory or prefix");
    char ipath[4096], lpath[4096];
    struct stat ist, lst;
    int rc = find_file(dir, prefix, "images-idx3-ubyte", ipath, sizeof ipath, &ist);
    if (rc == SC_OK)
        rc = find_file(dir, prefix, "labels-idx1-ubyte", lpath, sizeof lpath, &lst);
    if (rc != SC_OK)
        return rc;
    uint32_t idims[3], ldims[1];
    uint8_t *images = NULL, *labels = NULL;
    rc = load_idx(ipath, &ist, IDX_IMAGES_MAGIC, 3, idims, &images);
    if (rc == SC_OK)
        rc = load_idx(lpath, &lst, IDX_LABELS_MAGIC, 1, ldims, &labels);
    if (rc == SC_OK && idims[0] != ldims[0])
        rc = sc_error(SC_ERR_DATA, "%s has %u images but %s has %u labels", ipath, idims[0], lpath, ldims[0]);
    for (uint32_t i = 0; rc == SC_OK && i < ldims[0]; i++)
        if (labels[i] >= IDX_CLASSES)
            rc = sc_error(SC_ERR_DATA, "%s: label %u of sample %u is not below %d", lpath, labels[i], i, IDX_CLASSES);
    if (rc != SC_OK) {
        free(images);
        free(labels);
        return rc;
    }
    out->n = (int)idims[0];
    out->c = 1;
    out->h = (int)idims[1];
    out->w = (int)idims[2];
    out->classes = IDX_CLASSES;
    out->images = images;
    out->labels = labels;
    return SC_OK;
}
