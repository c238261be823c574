/* Text files of one record per line (a calibration, a machine
 * description): the whole file read under a size limit, its lines with
 * '#' comments cut, and blank-separated fields.  Pure C: no StarPU, no
 * MPI. */
#ifndef SC_BASE_RECORDS_H
#define SC_BASE_RECORDS_H

#include <stddef.h>

/* path into a NUL-terminated buffer (*out, free it) of *len bytes.
 * SC_ERR_IO "cannot read WHAT PATH: why"; SC_ERR_PARSE when it is larger
 * than max_bytes (read one byte past the limit rather than trusting stat,
 * so that pipes and /dev files are bounded too). */
int sc_records_read(const char *path, const char *what, size_t max_bytes, char **out, size_t *len);

/* Each line of buf (n bytes, changed in place), its '#' comment cut, to
 * line(ctx, number from 1, text); stops at its first error.  A NUL byte
 * in a line is SC_ERR_PARSE "path:N: a NUL byte: not a text file".
 * *lines: how many lines were read. */
int sc_records_lines(char *buf, size_t n, const char *path, int (*line)(void *ctx, int number, char *text), void *ctx,
                     int *lines);

int sc_records_blank(char ch);
/* The next blank-separated field of *p, ended in place; NULL at the end. */
char *sc_records_field(char **p);

#endif
