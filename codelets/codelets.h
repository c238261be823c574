/* The kernels (kernels/) as StarPU codelets, and their submit wrappers.
 *
 * A kernel knows nothing of distribution: it sees one tile of a tensor.
 * Every buffer is a StarPU vector (float unless said otherwise); tensors are
 * NCHW, parameters of a layer are one vector [weights | bias] with weights in
 * PyTorch's layout (conv OIHW, linear [out][in]).  Buffers may be larger than
 * the arguments say (a handle sized for the largest tile); kernels use the
 * sizes in the args struct.
 *
 * Each sc_insert_<op>() submits one local task (name: shown in traces, may
 * be NULL) and returns 0 or a negative SC_ERR_*. */
#ifndef SC_CODELETS_H
#define SC_CODELETS_H

#include <starpu.h>
#include <stdint.h>

#include "kernels/fail.h"
#include "kernels/kernels.h"
#include "kernels/load.h"
#include "kernels/loss.h"

/* How a wrapper submits its task, given by the caller (every sc_insert_*
 * takes it first): the task's priority, and the kind of worker it may run
 * on.  The kind matters for computations that must give the same bits on
 * every rank: a CPU and a GPU kernel sum in other orders.  NULL: priority
 * 0, any worker. */
enum sc_where { SC_WHERE_ANY, SC_WHERE_CPU, SC_WHERE_CUDA };
struct sc_task_opts {
    int priority;
    enum sc_where where;
};

/* Call once after starpu_init: makes oneDNN (OpenMP) and OpenBLAS run
 * single-threaded inside each worker, since StarPU supplies the parallelism,
 * and registers the kernels' scratch memory.  0, or SC_ERR_ARG for a bad
 * SC_CUDNN_WORKSPACE_MB (CUDA build). */
int sc_codelets_init(void);
/* Release cached oneDNN primitives (before starpu_shutdown).  A kernel
 * failure recorded and never reported (sc_fail_set_reported) is printed
 * here, so that none goes unsaid. */
void sc_codelets_shutdown(void);

/* ---- kernel failures ----
 * The records the kernels and codelets make (sc_fail_record) and their
 * reading (sc_fail_first, sc_fail_describe, sc_fail_set_reported) are in
 * kernels/fail.h; sc_codelets_init says there which StarPU worker and task
 * each thread is. */

/* Failures injected for the tests (tests/test_kernel_failure.sh):
 * SC_TEST_FAIL_KERNEL=NAME@ITERATION[:RANK] makes the tasks named NAME (a
 * layer's task: conv2.fwd, fc1.bwd_weights, ...) that the training loop
 * submits for ITERATION (from 1, as the progress lines count) fail on rank
 * RANK (every rank without it): they do nothing and record "injected
 * failure".  spec NULL or "": none; a bad spec is SC_ERR_ARG naming it. */
int sc_fail_inject_setup(const char *spec, int rank);
/* The training iteration whose tasks the caller submits from now on (0:
 * none, e.g. evaluation); only the submitting thread calls it. */
void sc_fail_inject_iteration(int64_t iteration);
/* Stalls injected for the tests of the stall watchdog (tests/test_stall.sh):
 * SC_TEST_STALL=task:NAME@ITERATION[:RANK] makes the first task named NAME
 * of ITERATION never finish (its worker waits for ever, as in a kernel or
 * an NCCL call that never returns); send:NAME@ITERATION[:RANK] makes the
 * messages of the transfers named NAME (a fetch plan's or a ring's:
 * conv2.halo_x, fc1.grad_allreduce, ...) or the collectives of a direct
 * plan named NAME (fc2.grad_allreduce) from the first of ITERATION on
 * never be posted, as from a rank that never got there.  On rank RANK (every rank without it).
 * spec NULL or "": none; a bad spec is SC_ERR_ARG naming it. */
int sc_stall_inject_setup(const char *spec, int rank);
/* For tasks/: 1 when the message about to be sent is one to drop. */
int sc_stall_inject_send(const char *name);

/* ---- convolution (oneDNN; struct sc_conv_args in kernels/kernels.h) ---- */
/* R x[n*c*h*w], R params[f*c*kh*kw + f], W y[n*f*oh*ow] */
int sc_insert_conv_fwd(const struct sc_task_opts *opts, const struct sc_conv_args *a, starpu_data_handle_t x,
                       starpu_data_handle_t params, starpu_data_handle_t y, const char *name);
/* R dy, R params, W dx   (dy is the gradient w.r.t. the pre-activation) */
int sc_insert_conv_bwd_data(const struct sc_task_opts *opts, const struct sc_conv_args *a, starpu_data_handle_t dy,
                            starpu_data_handle_t params, starpu_data_handle_t dx, const char *name);
/* R x, R dy, W dparams[f*c*kh*kw + f]  (overwritten, not accumulated) */
int sc_insert_conv_bwd_filter(const struct sc_task_opts *opts, const struct sc_conv_args *a, starpu_data_handle_t x,
                              starpu_data_handle_t dy, starpu_data_handle_t dparams, const char *name);

/* ---- pooling (kernels/pool.c; struct sc_pool_args and sc_pool_workspace_bytes in kernels/kernels.h) ---- */
/* R x, W y, W ws (uint8 vector of sc_pool_workspace_bytes; ignored, may be
 * a 1-byte handle, for average pooling) */
int sc_insert_pool_fwd(const struct sc_task_opts *opts, const struct sc_pool_args *a, starpu_data_handle_t x,
                       starpu_data_handle_t y, starpu_data_handle_t ws, const char *name);
/* R dy, R ws, W dx */
int sc_insert_pool_bwd(const struct sc_task_opts *opts, const struct sc_pool_args *a, starpu_data_handle_t dy,
                       starpu_data_handle_t ws, starpu_data_handle_t dx, const char *name);

/* ---- fully connected (CBLAS) ---- */
/* R x[n*in], R params[out*in + out], W y[n*out] */
int sc_insert_fc_fwd(const struct sc_task_opts *opts, const struct sc_fc_args *a, starpu_data_handle_t x,
                     starpu_data_handle_t params, starpu_data_handle_t y, const char *name);
/* R dy[n*out], R params, W dx[n*in] */
int sc_insert_fc_bwd_data(const struct sc_task_opts *opts, const struct sc_fc_args *a, starpu_data_handle_t dy,
                          starpu_data_handle_t params, starpu_data_handle_t dx, const char *name);
/* R x, R dy, W dparams[out*in + out] (overwritten) */
int sc_insert_fc_bwd_weights(const struct sc_task_opts *opts, const struct sc_fc_args *a, starpu_data_handle_t x,
                             starpu_data_handle_t dy, starpu_data_handle_t dparams, const char *name);

/* ---- ReLU backward: dy[i] = y[i] > 0 ? dy[i] : 0 for i < n ---- */
/* RW dy, R y */
int sc_insert_relu_bwd(const struct sc_task_opts *opts, int n, starpu_data_handle_t dy, starpu_data_handle_t y,
                       const char *name);
/* RW dy, R part, R y: dy += part (all of the vectors, which must be as
 * long), then ReLU's backward of the first n, in one task with the bits of
 * sc_insert_accumulate then sc_insert_relu_bwd (a gradient sum's last part
 * and the activation's backward of the layer whose dy it is). */
int sc_insert_accumulate_relu_bwd(const struct sc_task_opts *opts, int n, starpu_data_handle_t dy,
                                  starpu_data_handle_t part, starpu_data_handle_t y, const char *name);

/* ---- softmax cross-entropy (struct sc_xent_args in kernels/loss.h) ---- */
/* R logits[n*classes], R labels (int32 vector, n), W dlogits[n*classes],
 * W stats (float vector of 2: {sum over the n samples of -log p(label),
 * number of samples whose argmax equals the label}) */
int sc_insert_xent(const struct sc_task_opts *opts, const struct sc_xent_args *a, starpu_data_handle_t logits,
                   starpu_data_handle_t labels, starpu_data_handle_t dlogits, starpu_data_handle_t stats,
                   const char *name);
/* Evaluation only: R logits, R labels, W stats (as above). */
int sc_insert_xent_eval(const struct sc_task_opts *opts, const struct sc_xent_args *a, starpu_data_handle_t logits,
                        starpu_data_handle_t labels, starpu_data_handle_t stats, const char *name);

/* ---- input: gather samples of a uint8 data set into a float tile ---- */
/* x[i*pixels + p] = images[idx[i]*pixels + p] / 255.0f, labels[i] = src_labels[idx[i]].
 * The data set memory must outlive the task.  W x, W labels (int32). */
int sc_insert_load_batch(const struct sc_task_opts *opts, const uint8_t *images, const uint8_t *src_labels, int pixels,
                         int n, const int32_t *idx, starpu_data_handle_t x, starpu_data_handle_t labels,
                         const char *name);

/* A block of each sample, for spatially split inputs (struct
 * sc_load_block in kernels/load.h), and the labels on their own (the loss
 * layer's tiles may hold other samples than the input's).  An index of -1
 * is a padding sample (evaluation's last batch): zeros, and label -1,
 * which the loss ignores.  W x[n*c*rows*cols]. */
int sc_insert_load_images(const struct sc_task_opts *opts, const uint8_t *images, const struct sc_load_block *b, int n,
                          const int32_t *idx, starpu_data_handle_t x, const char *name);
/* W labels (int32, n) */
int sc_insert_load_labels(const struct sc_task_opts *opts, const uint8_t *src_labels, int n, const int32_t *idx,
                          starpu_data_handle_t labels, const char *name);

/* A tile read by a data source's own function (a file read by tile:
 * src/data/hdf5.c), so that this layer knows nothing of files.  fn fills x
 * (n * nch * (r1-r0) * (c1-c0) floats, NCHW of the block: channels
 * ch0..ch0+nch of rows r0..r1 and columns c0..c1 of the input) and labels
 * (n * label_pixels int32: one a sample, or the block lr0..lr1 x lc0..lc1
 * at the loss's resolution), either of them NULL when the task has no such
 * buffer; an index of -1 is padding (zeros, label -1).  It records a
 * failure with sc_fail_record (kernels/fail.h).  source must outlive the
 * task.  W x, W labels (either may be NULL, not both). */
struct sc_load_read {
    int ch0, nch, r0, r1, c0, c1;
    int lr0, lr1, lc0, lc1, label_pixels;
    int n;
};
typedef void (*sc_load_read_fn)(void *source, const struct sc_load_read *req, const int32_t *idx, float *x,
                                int32_t *labels);
int sc_insert_load_read(const struct sc_task_opts *opts, sc_load_read_fn fn, void *source,
                        const struct sc_load_read *req, const int32_t *idx, starpu_data_handle_t x,
                        starpu_data_handle_t labels, const char *name);

/* ---- vector ops (lengths from the handles, which must match) ---- */
/* RW dst, R src: dst += src */
int sc_insert_accumulate(const struct sc_task_opts *opts, starpu_data_handle_t dst, starpu_data_handle_t src,
                         const char *name);

/* The ends of a bf16 transfer (kernels/bf16.h): R src (floats), W dst
 * (uint16 bf16, as many): dst = src rounded to nearest even; and RW dst
 * (floats), R src (bf16, as many): dst += src in fp32. */
int sc_insert_pack_bf16(const struct sc_task_opts *opts, starpu_data_handle_t src, starpu_data_handle_t dst,
                        const char *name);
int sc_insert_accumulate_bf16(const struct sc_task_opts *opts, starpu_data_handle_t dst, starpu_data_handle_t src,
                              const char *name);

/* SGD exactly as torch.optim.SGD (dampening 0, no Nesterov):
 * g' = g + wd*w; v = momentum*v + g'; w -= lr*v.  With v starting at 0 the
 * first step gives v = g', as PyTorch's first step does. */
struct sc_sgd_args {
    float lr, momentum, weight_decay;
    int64_t iteration;          /* the update's iteration, from 1 (for watch) */
    struct sc_nonfinite *watch; /* NULL: no check */
    /* NULL, or a count (one float) of the pieces of this batch's gradient
     * that are not finite, on all ranks: when it is not 0 the update
     * changes nothing and is recorded in watch (a whole batch skipped). */
    starpu_data_handle_t gate;
};
/* Gradients that are not finite (NaN or Inf), as the SGD tasks of a rank
 * see them: such a gradient changes nothing (its weights and momentum stay
 * as they were) and is recorded here, in plain memory that the tasks update
 * atomically and the caller reads with __atomic loads.  freeze: after the
 * first one, every later update is skipped too, so that the weights stay
 * those the bad iteration started from. */
struct sc_nonfinite {
    int64_t first_iteration, last_iteration; /* 0: none yet */
    int64_t iterations;                      /* how many iterations had one */
    int freeze;
};
/* RW w, RW v, R g (and R a->gate) */
int sc_insert_sgd(const struct sc_task_opts *opts, const struct sc_sgd_args *a, starpu_data_handle_t w,
                  starpu_data_handle_t v, starpu_data_handle_t g, const char *name);
/* The updates of count vectors in one task (RW w[i], RW v[i], R g[i], and
 * R a->gate), each with the bits and the non-finite check of its own
 * sc_insert_sgd, in order; 1 <= count <= SC_SGD_MULTI_MAX. */
#define SC_SGD_MULTI_MAX 64
int sc_insert_sgd_multi(const struct sc_task_opts *opts, const struct sc_sgd_args *a, int count,
                        const starpu_data_handle_t *w, const starpu_data_handle_t *v, const starpu_data_handle_t *g,
                        const char *name);
/* W h: h = 0 (a vector of floats) */
int sc_insert_zero(const struct sc_task_opts *opts, starpu_data_handle_t h, const char *name);
/* RW count (one float), R g: count += 1 when some value of g is NaN or Inf.
 * Commutative: the counts of a batch's pieces run in any order. */
int sc_insert_count_nonfinite(const struct sc_task_opts *opts, starpu_data_handle_t count, starpu_data_handle_t g,
                              const char *name);

/* ---- attributes of the tasks the wrappers submit ---- */

/* As starpu_task's priority: opts' clamped to the scheduler's range
 * (policies without priorities ignore it); 0 for NULL opts. */
int sc_task_opts_priority(const struct sc_task_opts *opts);
/* As starpu_task::where takes it (-1: wherever the codelet can run). */
unsigned long long sc_task_opts_where_mask(const struct sc_task_opts *opts);

/* Trace records.  While recording is on, every task a wrapper submits gets a
 * record that its completion fills (worker, start and end from StarPU's
 * profiling), and the task graphs add records for their transfers.  Times
 * are starpu_timing_now() microseconds; end stays 0 until the task or
 * transfer is done.  Records never move, so callbacks may hold them. */
enum sc_rec_kind { SC_REC_TASK, SC_REC_COMM };
struct sc_trace_rec {
    char name[64];
    int64_t iteration;
    int kind;
    int worker; /* StarPU worker id (tasks) */
    double start, end;
    double bytes; /* a transfer: the bytes this rank sent (0: a receive) */
};
/* Start recording (or change the iteration the new records belong to). */
void sc_trace_record_on(int64_t iteration);
/* The iteration of the records created from now on (no-op when off). */
void sc_trace_set_iteration(int64_t iteration);
/* The iteration the new records belong to (the last one set). */
int64_t sc_trace_iteration(void);
/* Stop creating records; those of submitted work still complete. */
void sc_trace_record_off(void);
/* A new record, or NULL when recording is off (or memory is short). */
struct sc_trace_rec *sc_trace_new_rec(const char *name, int kind);
/* The completion callback to give a task with a record (NULL when off). */
void (*sc_trace_task_callback(void))(void *);
/* What SC_TASK_ATTRS gives a task: the completion callback and its
 * argument, which carry the task's trace record and, while the stall
 * watchdog is on, its entry among the things the rank waits for
 * (base/progress.h).  Callback NULL: neither. */
void (*sc_task_callback(void))(void *);
void *sc_task_callback_arg(const char *name);
size_t sc_trace_nrecs(void);
const struct sc_trace_rec *sc_trace_rec_at(size_t i);
/* Forget every record (when nothing recorded is in flight). */
void sc_trace_clear(void);

/* Kernels of the layers of deeper networks, synthetic inputs, and the
 * region kernels of spatially split tensors. */
#include "codelets_layers.h"
#include "codelets_synth.h"
#include "codelets_region.h"

#endif
