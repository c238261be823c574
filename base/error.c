/* Error messages and rank-prefixed logging. */
#include "base/error.h"
#include "base/error_va.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Per thread, so that StarPU workers and the main thread do not overwrite
 * each other's message between the failing call and its caller reading it. */
static _Thread_local char last_error[512];

static atomic_int log_rank = 0;
static atomic_int log_level = -1; /* -1: SC_LOG_LEVEL not read yet */

SC_API const char *sc_strerror(int err)
{
    switch (err) {
    case SC_OK:
        return "success";
    case SC_ERR_NOMEM:
        return "out of memory";
    case SC_ERR_IO:
        return "input/output error";
    case SC_ERR_PARSE:
        return "parse error";
    case SC_ERR_SHAPE:
        return "shape mismatch";
    case SC_ERR_DATA:
        return "missing or corrupt data set";
    case SC_ERR_ARG:
        return "bad argument";
    case SC_ERR_RUNTIME:
        return "runtime error";
    case SC_ERR_MISMATCH:
        return "checkpoint does not match the model";
    case SC_ERR_NONFINITE:
        return "training diverged (NaN or Inf)";
    case SC_ERR_KERNEL:
        return "a kernel failed";
    default:
        return "unknown error";
    }
}

int sc_verror(int err, const char *fmt, va_list ap)
{
    /* Format into a temporary first: callers often wrap the previous message,
     * sc_error(e, "%s: %s", what, sc_last_error()), and vsnprintf into its own
     * source is undefined. */
    char tmp[sizeof last_error];
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    /* One line, whatever a file put in a name it quotes. */
    for (char *c = tmp; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
    memcpy(last_error, tmp, sizeof tmp);
    return err;
}

SC_API int sc_error(int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    err = sc_verror(err, fmt, ap);
    va_end(ap);
    return err;
}

SC_API const char *sc_last_error(void)
{
    return last_error;
}

SC_API void sc_log_set_rank(int rank)
{
    atomic_store(&log_rank, rank);
}

/* Read once: getenv races with setenv in other threads, and sc_log may be
 * called from StarPU workers. */
static int current_log_level(void)
{
    int level = atomic_load(&log_level);
    if (level >= 0)
        return level;
    level = 1;
    const char *env = getenv("SC_LOG_LEVEL");
    if (env && *env) {
        char *end;
        long v = strtol(env, &end, 10);
        if (*end == '\0' && v >= 0 && v <= 100)
            level = (int)v;
    }
    atomic_store(&log_level, level);
    return level;
}

SC_API void sc_log(int level, const char *fmt, ...)
{
    if (level > current_log_level())
        return;
    /* One fputs per message, so that lines from several threads or ranks
     * sharing a terminal do not interleave mid-line. */
    char line[1024];
    int len = snprintf(line, sizeof line, "[rank %d] ", atomic_load(&log_rank));
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + len, sizeof line - (size_t)len - 1, fmt, ap);
    va_end(ap);
    size_t n = strlen(line);
    if (n == 0 || line[n - 1] != '\n') {
        line[n] = '\n';
        line[n + 1] = '\0';
    }
    fputs(line, stderr);
}
