/* What the codelet files share: each worker's kernel state (kernels.h),
 * the scratch workspace, the macros that define codelets, and argument
 * checks for the submit wrappers. */
#ifndef SC_CL_COMMON_H
#define SC_CL_COMMON_H

#include <starpu.h>

#include "codelets.h"
#include "kernels/kernels.h"
#include "base/error.h"
#include "base/progress.h"

/* The calling worker's kernel state (kernels.h), made on its first use;
 * NULL outside a StarPU worker. */
struct sc_kernel_worker *sc_kernel_worker_self(void);

/* The kernels' scratch memory (cl_common.c): a task names it last, in
 * STARPU_SCRATCH mode, and its function finds the calling worker's
 * replicate of it there.  Registered by sc_codelets_init. */
starpu_data_handle_t sc_workspace_handle(void);
static inline struct sc_workspace sc_workspace_of(void *buffer)
{
    return (struct sc_workspace){(void *)STARPU_VECTOR_GET_PTR(buffer), STARPU_VECTOR_GET_NX(buffer)};
}

/* For the submit wrappers: SC_ERR_SHAPE unless h is a vector holding at
 * least count elements of elemsize bytes. */
int sc_check_vec(starpu_data_handle_t h, size_t count, size_t elemsize, const char *op, const char *what);
/* A codelet's history-based performance model: StarPU keys its
 * measurements by symbol and by footprint (NULL: the buffers' sizes). */
#define SC_PERFMODEL(id, symbol_, footprint_)                                                                          \
    static struct starpu_perfmodel id = {.type = STARPU_HISTORY_BASED, .symbol = (symbol_), .footprint = (footprint_)}

/* Failures injected for the tests (codelets.h, SC_TEST_FAIL_KERNEL;
 * cl_fail.c).  The task to fail is marked at its submission: its name is
 * then the injector's copy of the name (sc_fail_inject_name, in
 * SC_TASK_ATTRS), the same text at another address; every codelet function
 * asks sc_fail_injected first (SC_CODELET), which records the failure and
 * says 1 for that task.  One load and a branch when nothing is injected. */
extern int sc_fail_inject_on;
int sc_fail_inject_hit(void);
const char *sc_fail_inject_name(const char *name);
/* Also where a task notes that it has begun (base/progress.h), for the
 * stall watchdog's report. */
void sc_task_watch_begin(void);
static inline int sc_fail_injected(void)
{
    if (__builtin_expect(sc_progress_on, 0))
        sc_task_watch_begin();
    return __builtin_expect(sc_fail_inject_on, 0) && sc_fail_inject_hit();
}
/* For sc_codelets_init, before any kernel runs: the failure records
 * (kernels/fail.h) name the StarPU worker and task of the thread that
 * records (cl_fail.c). */
void sc_fail_workers_init(void);

/* The CUDA function of a codelet, asynchronous on the worker's stream
 * (StarPU waits for the stream, not the function), behind the injection's
 * check as the CPU function (SC_CODELET); none when f is NULL, and nothing
 * in a build without CUDA, where the function does not exist. */
#ifdef SC_USE_CUDA
#define SC_CUDA_ENTRY(id, f)                                                                                           \
    static void __attribute__((unused)) id##_cuda(void *buffers[], void *cl_arg)                                       \
    {                                                                                                                  \
        void (*f_)(void *[], void *) = (f);                                                                            \
        if (f_ && !sc_fail_injected())                                                                                 \
            f_(buffers, cl_arg);                                                                                       \
    }
#define SC_CUDA_FUNCS(id, f)                                                                                           \
    .cuda_funcs = {_Generic((f), void * : NULL, int : NULL, default : id##_cuda)}, .cuda_flags = {STARPU_CUDA_ASYNC},
#else
#define SC_CUDA_ENTRY(id, f)
#define SC_CUDA_FUNCS(id, f)
#endif

/* One codelet: id, its name in traces, its performance model (or NULL),
 * its CPU function, its CUDA function (NULL: CPU only), the number of
 * buffers (STARPU_VARIABLE_NBUFFERS: given per task) and their modes.  The
 * functions StarPU calls are id_cpu and id_cuda, which skip the task that
 * an injected failure names (sc_fail_injected). */
#define SC_CODELET(id, name_, model_, cpu, cuda, nbuffers_, ...)                                                       \
    static void id##_cpu(void *buffers[], void *cl_arg)                                                                \
    {                                                                                                                  \
        if (!sc_fail_injected())                                                                                       \
            cpu(buffers, cl_arg);                                                                                      \
    }                                                                                                                  \
    SC_CUDA_ENTRY(id, cuda)                                                                                            \
    static struct starpu_codelet id = {.cpu_funcs = {id##_cpu},                                                        \
                                       SC_CUDA_FUNCS(id, cuda).nbuffers = (nbuffers_),                                 \
                                       .modes = {__VA_ARGS__},                                                         \
                                       .model = (model_),                                                              \
                                       .name = (name_)}

/* Closes the argument list of every wrapper's starpu_task_insert: the
 * task's name (marked when an injected failure names it), priority, the
 * workers it may run on and, while a trace is recorded, its record. */
#define SC_TASK_ATTRS(opts, name)                                                                                      \
    STARPU_NAME, sc_fail_inject_name(name), STARPU_PRIORITY, sc_task_opts_priority(opts), STARPU_EXECUTE_WHERE,        \
        sc_task_opts_where_mask(opts), STARPU_CALLBACK_WITH_ARG_NFREE, sc_task_callback(), sc_task_callback_arg(name)

/* The convolution's argument check, for the region kernels' wrapper. */
int sc_conv_args_check(const struct sc_conv_args *a, const char *op);

/* Map starpu_task_insert's result to 0 / SC_ERR_RUNTIME. */
int sc_insert_result(int ret, const char *op);
/* 0 when h0 and h1 (op's buffers named n0 and n1) are vectors of floats of
 * the same length, else SC_ERR_SHAPE naming them. */
int sc_check_same_length(const char *op, starpu_data_handle_t h0, const char *n0, starpu_data_handle_t h1,
                         const char *n1);
/* An update refused for a non-finite gradient or a closed gate, in
 * iteration it: recorded in w atomically (cl_sgd.c; the CUDA SGD calls
 * it from a host callback). */
void sc_nonfinite_record(struct sc_nonfinite *w, int64_t it);

/* Perf-model footprint from the packed arguments, so that tasks on
 * same-sized buffers but different shapes get separate histories. */
uint32_t sc_footprint_args(struct starpu_task *task);

#endif
