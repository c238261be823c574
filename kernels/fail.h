/* Kernel failures (fail.c).  A kernel that fails in a task cannot return
 * an error: it records the failure (sc_fail_record), leaves its outputs
 * invalid and returns.  Each worker keeps its first failure; the record
 * is sticky: nothing clears it.  A program reads it where it waits for its
 * tasks anyway (the training loop: src/runtime/kernel_failure.h) and stops
 * there.
 *
 * Which worker and task the calling thread is, this layer does not know:
 * the layer that runs the kernels as tasks says it (sc_fail_set_workers;
 * codelets/cl_fail.c).  Until it does, and on a thread that is no worker
 * (a kernel called without the runtime), a failure is printed on stderr
 * instead, as there is no sync point to read it. */
#ifndef SC_KERNELS_FAIL_H
#define SC_KERNELS_FAIL_H

#include <stdarg.h>
#include <stddef.h>

/* Worker ids a record may name: 0 .. SC_FAIL_MAX_WORKERS - 1. */
#define SC_FAIL_MAX_WORKERS 256

struct sc_fail {
    char task[64];   /* the failing task's name ("conv2.fwd"); "" outside a task */
    char kernel[32]; /* the kernel's own name ("conv_fwd") */
    int worker;      /* the runtime's worker id */
    char where[32];  /* the worker, as the line names it: "cpu 1", "cuda 0" */
    char cause[256]; /* "oneDNN: could not create the primitive" */
};

/* A kernel's failure: op (the kernel's name, e.g. "conv_fwd") and a
 * printf-style cause (e.g. "oneDNN: could not create the primitive"),
 * kept in the calling worker's record, where the first failure stays.
 * Thread safe. */
void sc_fail_record(const char *op, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* sc_fail_record with a va_list (the HDF5 module's, through a pointer). */
void sc_fail_vrecord(const char *op, const char *fmt, va_list ap);
/* The calling thread's worker id (-1: none) and, into *task, the name of
 * the task it runs (NULL: none), for a failure that another thread
 * records later for it (sc_fail_record_from). */
int sc_fail_current(const char **task);
/* sc_fail_record from a thread that is no worker (a host function on a
 * CUDA worker's stream), for the worker and task that launched it, as
 * sc_fail_current said then; task must outlive the record's making (a
 * layer's task name does). */
void sc_fail_record_from(int worker, const char *task, const char *op, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* 1 and the first failure recorded on any worker of this process into
 * *f; 0 when there is none.  Any thread, at any time. */
int sc_fail_first(struct sc_fail *f);
/* f as one line: "kernel conv2.fwd (conv_fwd) failed on worker cpu 1:
 * CAUSE". */
void sc_fail_describe(const struct sc_fail *f, char *buf, size_t size);
/* The failure has been reported (the run stops on it): shutdown says no
 * more, whatever else fails while the tasks in flight drain. */
void sc_fail_set_reported(void);
/* At shutdown, once every task has run: the first failure on stderr,
 * unless it was reported. */
void sc_fail_say_unreported(void);

/* What the layer running the kernels says of its workers.  current: as
 * sc_fail_current; name: worker's name as a record's where ("cpu 1"), for
 * any worker id current gives, from any thread.  Set once, before the
 * workers run kernels; NULL (the default): no thread is a worker. */
struct sc_fail_workers {
    int (*current)(const char **task);
    void (*name)(int worker, char *buf, size_t size);
};
void sc_fail_set_workers(const struct sc_fail_workers *w);

#endif
