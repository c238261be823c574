/* Atomic file writes (see atomic_file.h). */
#include "base/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"

static void sync_parent_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir)
        return;
    int fd = open(dir, O_RDONLY);
    if (fd >= 0) {
        fsync(fd); /* best effort: the data itself is already safe */
        close(fd);
    }
    free(dir);
}

/* body, then what makes the data durable; 0 or errno. */
static int write_durably(FILE *fp, int (*body)(FILE *, const void *), const void *ctx)
{
    errno = 0;
    int err = body(fp, ctx);
    if (!err && (fflush(fp) != 0 || ferror(fp)))
        err = errno ? errno : EIO;
    /* Without fsync a crash after the rename can leave an empty file in
     * place of both the old file and the new one. */
    if (!err && fsync(fileno(fp)) != 0)
        err = errno;
    return err;
}

int sc_write_atomic(const char *path, int (*body)(FILE *fp, const void *ctx), const void *ctx)
{
    /* A unique name beside the target, so that rename() is atomic (same
     * file system) and concurrent writers do not share a temporary. */
    static atomic_uint counter;
    size_t tlen = strlen(path) + 48;
    char *tmp = malloc(tlen);
    int fd = -1, err = 0, rc = 0;
    for (int tries = 0; tmp && fd < 0 && tries < 100; tries++) {
        snprintf(tmp, tlen, "%s.tmp.%ld.%u", path, (long)getpid(), atomic_fetch_add(&counter, 1));
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        err = errno;
        if (fd < 0 && err != EEXIST)
            break;
    }
    if (!tmp) {
        rc = sc_error(SC_ERR_NOMEM, "%s: out of memory", path);
    } else if (fd < 0) {
        rc = sc_error(SC_ERR_IO, "%s: cannot create %s: %s", path, tmp, strerror(err));
    } else {
        FILE *fp = fdopen(fd, "wb");
        if (!fp) {
            err = errno;
            close(fd);
        } else {
            err = write_durably(fp, body, ctx);
            if (fclose(fp) != 0 && !err)
                err = errno ? errno : EIO;
        }
        if (!err && rename(tmp, path) != 0)
            err = errno;
        if (err) {
            unlink(tmp);
            rc = sc_error(SC_ERR_IO, "%s: %s (file left unchanged)", path, strerror(err));
        } else {
            sync_parent_dir(path);
        }
    }
    free(tmp);
    return rc;
}
