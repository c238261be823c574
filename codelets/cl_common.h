/* Internal helpers shared by the CPU codelets: the oneDNN engine and
 * per-worker streams, a per-worker cache of primitives, plain<->blocked
 * layout plumbing, and argument checks for the submit wrappers. */
#ifndef SC_CL_COMMON_H
#define SC_CL_COMMON_H

#include <dnnl.h>
#include <starpu.h>

#include "codelets.h"
#include "base/error.h"

/* One engine for every thread: oneDNN engines are thread safe, streams are
 * not, hence one stream per worker. */
dnnl_engine_t sc_dnnl_engine(void);
dnnl_stream_t sc_dnnl_stream(void); /* NULL outside a StarPU worker */

/* Per-worker cache of what kernels build once per shape: oneDNN
 * primitives on CPU workers, the chosen cuDNN algorithms on CUDA workers.
 * Entries live in the calling worker's own slot, so no lock is needed;
 * create() builds one from the key, destroy() frees it (at
 * sc_codelets_shutdown).  Returns NULL (after a line on stderr) when not on
 * a worker or creation fails.  key must have no padding bytes (our args
 * structs are all int and float). */
enum { SC_PRIM_CONV_FWD, SC_PRIM_CONV_BWD_DATA, SC_PRIM_CONV_BWD_FILTER,
       SC_PRIM_POOL_FWD, SC_PRIM_POOL_BWD, SC_PRIM_CUDNN_CONV_ALGOS };
void *sc_prim_get(int op, const void *key, size_t len, void *(*create)(const void *key),
                  void (*destroy)(void *));

/* Buffer i (0 <= i < SC_WORKER_BUFS) of the calling worker, at least bytes
 * long, 64-byte aligned; grown on demand, kept until sc_codelets_shutdown.
 * A worker runs one task at a time, so a kernel may use its buffers freely
 * until it returns.  NULL when not on a worker or out of memory. */
enum { SC_WORKER_BUFS = 3 };
void *sc_worker_buf(int i, size_t bytes);

/* The kernels' scratch memory (cl_common.c): a task names it last, in
 * STARPU_SCRATCH mode, and its function finds the calling worker's
 * replicate of it there.  Registered by sc_codelets_init. */
starpu_data_handle_t sc_workspace_handle(void);
struct sc_workspace {
    void *ptr;
    size_t bytes;
};
static inline struct sc_workspace sc_workspace_of(void *buffer)
{
    return (struct sc_workspace){(void *)STARPU_VECTOR_GET_PTR(buffer), STARPU_VECTOR_GET_NX(buffer)};
}

/* A tensor argument of a primitive: the caller's plain buffer, and the
 * layout the primitive prefers when that differs (then a reorder goes
 * between them). */
struct sc_io {
    dnnl_memory_t user;
    dnnl_memory_t prim;        /* == user when no reorder is needed */
    dnnl_primitive_t reorder;  /* user->prim for inputs, prim->user for outputs */
    size_t bytes;              /* of prim, when it is a separate copy */
};
int sc_io_init(struct sc_io *io, const dnnl_memory_desc_t *user_md,
               const dnnl_memory_desc_t *prim_md, int output);
void sc_io_destroy(struct sc_io *io);
/* Give the separate copies of n arguments their room in the worker's
 * scratch buffer.  A worker runs one task at a time, so all its cached
 * primitives share one buffer instead of each keeping activation-sized
 * copies. */
int sc_io_bind(struct sc_io *io, int n);
/* Point the user memory at ptr; for an input, run its reorder.  Returns the
 * memory to pass to the primitive, or NULL on failure. */
dnnl_memory_t sc_io_in(struct sc_io *io, const void *ptr, dnnl_stream_t s);
dnnl_memory_t sc_io_out(struct sc_io *io, void *ptr);
/* After the primitive: move an output into the user's buffer. */
int sc_io_out_done(struct sc_io *io, dnnl_stream_t s);

void sc_md_nchw(dnnl_memory_desc_t *md, int n, int c, int h, int w, dnnl_format_tag_t tag);
void sc_md_1d(dnnl_memory_desc_t *md, int n);
/* Run and wait; 0 or -1.  Kernels report failures with sc_kernel_failed(),
 * one line on stderr, as a task has no way to return an error. */
int sc_exec(dnnl_primitive_t p, dnnl_stream_t s, int nargs, const dnnl_exec_arg_t *args);
void sc_kernel_failed(const char *op);
/* Primitive from a primitive descriptor, which is consumed. */
dnnl_primitive_t sc_prim_from_pd(dnnl_primitive_desc_t pd);

/* Right padding that makes oneDNN's floor-division shape check give o. */
static inline int sc_pad_r(int i, int k, int s, int pl, int o)
{
    int pr = (o - 1) * s + k - i - pl;
    return pr < 0 ? 0 : pr;
}

/* For the submit wrappers: SC_ERR_SHAPE unless h is a vector holding at
 * least count elements of elemsize bytes. */
int sc_check_vec(starpu_data_handle_t h, size_t count, size_t elemsize, const char *op,
                 const char *what);
/* A codelet's history-based performance model: StarPU keys its
 * measurements by symbol and by footprint (NULL: the buffers' sizes). */
#define SC_PERFMODEL(id, symbol_, footprint_)                                                                          \
    static struct starpu_perfmodel id = {.type = STARPU_HISTORY_BASED, .symbol = (symbol_), .footprint = (footprint_)}

/* The CUDA function of a codelet, asynchronous on the worker's stream
 * (StarPU waits for the stream, not the function); nothing in a build
 * without CUDA, where the function does not exist. */
#ifdef SC_USE_CUDA
#define SC_CUDA_FUNCS(f) .cuda_funcs = {f}, .cuda_flags = {STARPU_CUDA_ASYNC},
#else
#define SC_CUDA_FUNCS(f)
#endif

/* One codelet: id, its name in traces, its performance model (or NULL),
 * its CPU function, its CUDA function (NULL: CPU only), the number of
 * buffers (STARPU_VARIABLE_NBUFFERS: given per task) and their modes. */
#define SC_CODELET(id, name_, model_, cpu, cuda, nbuffers_, ...)                                                       \
    static struct starpu_codelet id = {.cpu_funcs = {cpu},                                                             \
                                       SC_CUDA_FUNCS(cuda).nbuffers = (nbuffers_),                                     \
                                       .modes = {__VA_ARGS__},                                                         \
                                       .model = (model_),                                                              \
                                       .name = (name_)}

/* Closes the argument list of every wrapper's starpu_task_insert: the
 * task's name, priority, the workers it may run on and, while a trace is
 * recorded, its record. */
#define SC_TASK_ATTRS(opts, name)                                                                                      \
    STARPU_NAME, (name), STARPU_PRIORITY, sc_task_opts_priority(opts), STARPU_EXECUTE_WHERE,                           \
        sc_task_opts_where_mask(opts), STARPU_CALLBACK_WITH_ARG_NFREE, sc_trace_task_callback(),                       \
        sc_trace_new_rec((name), SC_REC_TASK)

/* The oneDNN kernels behind the codelets, for the region kernels, which
 * run them on windows they assemble.  which: 0 forward (in0 x, in1
 * weights), 1 backward data (dy, weights), 2 backward weights (x, dy; bias
 * gets the bias gradient).  Pooling: ws is the max-pooling workspace. */
void sc_conv_compute(int which, const struct sc_conv_args *a, const float *in0, const float *in1, float *out,
                     float *bias);
int sc_conv_args_check(const struct sc_conv_args *a, const char *op);
void sc_pool_compute(int bwd, const struct sc_pool_args *a, const float *in, float *out, void *ws);

/* Map starpu_task_insert's result to 0 / SC_ERR_RUNTIME. */
int sc_insert_result(int ret, const char *op);
/* 0 when h0 and h1 (op's buffers named n0 and n1) are vectors of floats of
 * the same length, else SC_ERR_SHAPE naming them. */
int sc_check_same_length(const char *op, starpu_data_handle_t h0, const char *n0, starpu_data_handle_t h1,
                         const char *n1);
/* 1 when every value of g is finite; integer tests of the exponent bits,
 * so that the loop vectorizes and stays exact whatever the FP flags. */
int sc_all_finite(const float *g, size_t n);
/* An update refused for a non-finite gradient or a closed gate, in
 * iteration it: recorded in w atomically (cl_sgd.c; the CUDA SGD calls
 * it from a host callback). */
void sc_nonfinite_record(struct sc_nonfinite *w, int64_t it);

/* Perf-model footprint from the packed arguments, so that tasks on
 * same-sized buffers but different shapes get separate histories. */
uint32_t sc_footprint_args(struct starpu_task *task);

#endif
