/* Errors and logging, for every layer of starconv (base/ is below
 * codelets/, tasks/ and src/).  Part of the public API: src/starconv.h
 * includes it.  Every function of starconv returns 0 or a negative
 * SC_ERR_*; on error a one-line message saying what and where is kept per
 * thread and returned by sc_last_error(). */
#ifndef SC_BASE_ERROR_H
#define SC_BASE_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

/* Marks what the shared library exports: the library is compiled with
 * -fvisibility=hidden, and only the definitions of the public API (this
 * header, src/io/cfg.h, src/io/safetensors.h, src/data/dataset.h) carry it;
 * tests/test_exports.sh checks the list. */
#define SC_API __attribute__((visibility("default")))

enum {
    SC_OK = 0,
    SC_ERR_NOMEM = -1,     /* allocation failed */
    SC_ERR_IO = -2,        /* a file could not be opened, read or written */
    SC_ERR_PARSE = -3,     /* malformed configuration or checkpoint header */
    SC_ERR_SHAPE = -4,     /* shapes that do not fit together */
    SC_ERR_DATA = -5,      /* missing or corrupt data set */
    SC_ERR_ARG = -6,       /* bad argument or option value */
    SC_ERR_RUNTIME = -7,   /* StarPU or MPI refused */
    SC_ERR_MISMATCH = -8,  /* checkpoint from another model */
    SC_ERR_NONFINITE = -9, /* training diverged: a NaN or an Inf */
    SC_ERR_KERNEL = -10    /* a kernel failed in a task: its outputs are not valid */
};

const char *sc_strerror(int err);

/* Record a printf-style message for the current thread and return err. */
int sc_error(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The last message recorded by this thread ("" if none). */
const char *sc_last_error(void);

/* Logging: SC_LOG(level, ...) prints "[rank R] message" on stderr when
 * level <= SC_LOG_LEVEL (environment, default 1). 0 error, 1 info, 2 debug. */
void sc_log_set_rank(int rank);
void sc_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define SC_LOG(level, ...) sc_log((level), __VA_ARGS__)

#ifdef __cplusplus
}
#endif

#endif
