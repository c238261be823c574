/* Files that readers see whole or not at all: the old contents or the new,
 * never half of them, even after a crash (checkpoints, traces, pictures). */
#ifndef SC_BASE_ATOMIC_FILE_H
#define SC_BASE_ATOMIC_FILE_H

#include <stdio.h>

/* Writes path through body(fp, ctx), which returns 0 or an errno value: into
 * a temporary file of a unique name beside path, then fflush, fsync, rename
 * over path and a best-effort fsync of the directory.  On failure nothing
 * is left behind and path is unchanged; returns SC_ERR_NOMEM or SC_ERR_IO
 * with a message that names path ("PATH: cannot create TMP: ...",
 * "PATH: File too large (file left unchanged)"). */
int sc_write_atomic(const char *path, int (*body)(FILE *fp, const void *ctx), const void *ctx);

#endif
