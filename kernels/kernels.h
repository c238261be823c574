/* The kernels: every computation of the codelets, on plain memory, with
 * no StarPU in it (tests/test_layering.sh).  A kernel gets what it works
 * on as pointers and sizes, and the calling worker's own state (its oneDNN
 * stream, its cache of primitives, its buffers) as an argument, from the
 * codelet that runs it (codelets/cl_<op>.c), so that it can be read, and
 * called, without the runtime.  Failures cannot be returned from a task:
 * a kernel records its failure (sc_fail_record, fail.h), leaves its
 * outputs invalid and returns; the training loop reads the record at its
 * next sync point and stops there.
 *
 * This header: the library kernels (convolution through oneDNN, pooling
 * (max pooling in plain loops, average through oneDNN), the fully
 * connected layer through CBLAS) and the worker state;
 * the others are in the headers beside it (bn.h, loss.h, vector.h,
 * load.h, region.h, synth.h), the CUDA side in cuda_ctx.h and cuda/. */
#ifndef SC_KERNELS_H
#define SC_KERNELS_H

#include <stddef.h>

#include "fail.h"

/* ---- convolution ---- */
/* The arithmetic of a convolution's products (--precision).  Either way
 * the caller's tensors are fp32. */
enum sc_precision {
    SC_PRECISION_FP32 = 0, /* fp32 inputs, products and outputs */
    SC_PRECISION_BF16 = 1, /* the inputs (x, weights, dy) rounded to bf16 (to nearest even, by
                            * oneDNN's reorders into the worker's scratch), products accumulated
                            * in fp32, outputs (y, dx, dw, the bias gradient) fp32 */
};
/* "fp32", "bf16". */
const char *sc_precision_name(enum sc_precision p);

struct sc_conv_args {
    int n, c, h, w;     /* input */
    int f, kh, kw;      /* filters, kernel */
    int sh, sw, ph, pw; /* stride, padding (symmetric) */
    int oh, ow;         /* output: (h + 2ph - kh)/sh + 1 */
    int relu;           /* 1: y = max(0, conv(x) + b) (ReLU as a oneDNN post-op) */
    int nobias;         /* 1: no bias: the parameters are the weights alone, and backward
                         * makes no bias gradient (a channel-split convolution's partial
                         * sums but one) */
    int xblk, yblk;     /* the layouts of x (and dx) and of y (and dy): 0 NCHW, else
                         * channels in blocks of that many (nChw8c: 8), C a multiple of it */
    int precision;      /* enum sc_precision */
};

/* ---- pooling ---- */
struct sc_pool_args {
    int n, c, h, w;
    int kh, kw, sh, sw, ph, pw;
    int oh, ow;
    int max;         /* 1 max pooling, 0 average */
    int include_pad; /* average only: 1 divides by kh*kw (PyTorch's default) */
    int blk;         /* the layout of x, y and their gradients: 0 NCHW, else channels in
                      * blocks of that many, c a multiple of it (sc_conv_act_block) */
};
/* Bytes of the max-pooling workspace for these args (0 for average). */
size_t sc_pool_workspace_bytes(const struct sc_pool_args *a);
/* Whether max pooling a runs faster on NCHW than blocked: the 2x2
 * stride-2 windows have a vector path on NCHW that the blocked loops
 * lack, which costs more than the reorders it saves. */
int sc_pool_max_prefers_nchw(const struct sc_pool_args *a);
/* The implementation pooling runs with, into buf: "starconv:nchw" for max
 * pooling, oneDNN's name for average pooling (e.g. "jit:avx2"); 0, or -1
 * when there is none. */
int sc_pool_impl(const struct sc_pool_args *a, char *buf, size_t n);

/* ---- fully connected ---- */
struct sc_fc_args {
    int n, in, out;
    int relu;      /* 1: y = max(0, x W^T + b) */
    int precision; /* enum sc_precision: fp32 through CBLAS; bf16 through oneDNN's matmul on
                    * bf16 copies of the two inputs (x, W, dy), fp32 accumulation and outputs
                    * (the bias gradient sums the fp32 dy) */
};

/* ---- a worker's own state ----
 * One per worker thread, used by that thread only (no lock): its oneDNN
 * stream, the primitives built once per shape, scratch for the layouts the
 * primitives prefer, and buffers a kernel may use until it returns.
 * Destroyed on the thread that used it: oneDNN backs primitives with a
 * per-thread scratchpad whose reference count is thread_local. */
struct sc_kernel_worker;
struct sc_kernel_worker *sc_kernel_worker_create(void);
void sc_kernel_worker_destroy(struct sc_kernel_worker *w);
/* Buffer i (0 <= i < SC_WORKER_BUFS) of w, at least bytes long, 64-byte
 * aligned; grown on demand.  NULL without w or memory. */
enum { SC_WORKER_BUFS = 3 };
void *sc_kernel_worker_buf(struct sc_kernel_worker *w, int i, size_t bytes);
/* w's cache of what kernels build once per shape (oneDNN primitives; the
 * cuDNN algorithms chosen, on CUDA workers): the entry of (op, key), made
 * by create(key) when missing, freed by destroy at the worker's end.  key
 * must have no padding bytes (the args structs are all int and float).
 * NULL (the failure recorded, sc_fail_record) without w or when creation
 * fails. */
enum {
    SC_PRIM_CONV_FWD,
    SC_PRIM_CONV_BWD_DATA,
    SC_PRIM_CONV_BWD_FILTER,
    SC_PRIM_POOL_FWD,
    SC_PRIM_POOL_BWD,
    SC_PRIM_CUDNN_CONV_ALGOS,
    SC_PRIM_FC_BF16
};
void *sc_kernel_worker_prim(struct sc_kernel_worker *w, int op, const void *key, size_t len,
                            void *(*create)(const void *key), void (*destroy)(void *));
/* The process's oneDNN engine, made once (thread safe); released by
 * sc_kernels_shutdown once every worker's state is destroyed. */
void sc_kernels_shutdown(void);

/* y = max(y, 0) in place, in SIMD lanes: a branch per element would
 * mispredict on random signs. */
static inline void sc_relu_inplace(float *restrict y, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        y[i] = y[i] > 0.0f ? y[i] : 0.0f;
}

/* ---- the kernels ----
 * Which product a kernel computes.  The values are fixed: tables in the
 * kernels and the planner's calibration (its op 0, 1, 2) are indexed by
 * them. */
enum sc_conv_dir {
    SC_CONV_FWD = 0,        /* in0 x, in1 weights -> out y; bias: b */
    SC_CONV_BWD_DATA = 1,   /* in0 dy, in1 weights -> out dx */
    SC_CONV_BWD_FILTER = 2, /* in0 x, in1 dy -> out dw; bias: the bias gradient */
};
enum sc_fc_dir {
    SC_FC_FWD = 0,         /* in0 x, in1 params -> out y */
    SC_FC_BWD_DATA = 1,    /* in0 dy, in1 params -> out dx */
    SC_FC_BWD_WEIGHTS = 2, /* in0 x, in1 dy -> out dparams (weights, then bias) */
};
enum sc_pool_dir {
    SC_POOL_FWD = 0, /* in x -> out y; ws: the max-pooling workspace written */
    SC_POOL_BWD = 1, /* in dy -> out dx; ws read */
};
/* Convolution (and average pooling) through oneDNN, on w's stream and
 * primitives. */
void sc_conv_compute(struct sc_kernel_worker *w, enum sc_conv_dir dir, const struct sc_conv_args *a, const float *in0,
                     const float *in1, float *out, float *bias);
/* The name of the implementation oneDNN gives a's forward convolution on
 * this CPU ("jit:avx2", "brgconv:avx512_core_amx", ...) into buf: 0, or
 * -1 when oneDNN has none.  Users read it to see which ISA their
 * convolutions run in. */
int sc_conv_impl_name(const struct sc_conv_args *a, char *buf, size_t n);
/* Whether this CPU computes bf16 convolutions natively: 0 when oneDNN
 * gives a bf16 3x3 convolution (64 to 64 channels) a JIT kernel of an ISA
 * with bf16 instructions (AVX512-BF16, AMX), its name into buf
 * ("jit_bf16:avx512_core_bf16"); -1 when it has only its reference
 * implementation or an emulation of bf16 on fp32 instructions (buf: that
 * implementation's name, or "none"). */
int sc_conv_bf16_native(char *buf, size_t n);
/* Whether a convolution of c input channels computes its weight gradient
 * on plain NCHW (a GEMM): oneDNN's blocked kernels pad c to a whole block
 * and run far below peak for a few channels.  Its output gradient is then
 * best NCHW too, or it is reordered each iteration. */
int sc_conv_few_channels(int c);
/* The channel block of the activation layout oneDNN prefers for a's
 * forward convolution on this CPU (8 for nChw8c, 16 for nChw16c), 0 when
 * it prefers a layout without one block of channels (or has none). */
int sc_conv_act_block(const struct sc_conv_args *a);
void sc_pool_compute(struct sc_kernel_worker *w, enum sc_pool_dir dir, const struct sc_pool_args *a, const float *in,
                     float *out, void *ws);
/* Fully connected; params = [W[out][in] | b[out]].  fp32 through CBLAS
 * (w unused, may be NULL), bf16 through oneDNN on w's stream, primitives
 * and buffers. */
void sc_fc_compute(struct sc_kernel_worker *w, enum sc_fc_dir dir, const struct sc_fc_args *a, const float *in0,
                   const float *in1, float *out);

/* Right padding that makes oneDNN's floor-division shape check give o
 * (also the bottom and right padding of the cuDNN convolution). */
static inline int sc_pad_r(int i, int k, int s, int pl, int o)
{
    int pr = (o - 1) * s + k - i - pl;
    return pr < 0 ? 0 : pr;
}

/* Memory a kernel may use as it likes (cuDNN's workspace: the task's
 * replicate of the scratch handle). */
struct sc_workspace {
    void *ptr;
    size_t bytes;
};

#endif
