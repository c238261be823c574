/* A worker's own state for the kernels, the oneDNN engine, and the
 * plumbing between plain and preferred layouts (kernels.h,
 * onednn.h).  No StarPU here: the codelets find the calling worker's
 * state and pass it. */
#include "onednn.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct prim_entry {
    int op;
    size_t len;
    void *key;
    void *val;
    void (*destroy)(void *);
};

struct sc_kernel_worker {
    dnnl_stream_t stream;
    struct prim_entry *e;
    int n, cap;
    void *scratch;
    size_t scratch_bytes;
    void *buf[SC_WORKER_BUFS];
    size_t buf_bytes[SC_WORKER_BUFS];
};

static pthread_mutex_t engine_lock = PTHREAD_MUTEX_INITIALIZER;
static dnnl_engine_t engine;

dnnl_engine_t sc_dnnl_engine(void)
{
    pthread_mutex_lock(&engine_lock);
    if (!engine && dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success) {
        sc_fail_record("dnnl_engine", "oneDNN: cannot create the CPU engine");
        engine = NULL;
    }
    dnnl_engine_t e = engine;
    pthread_mutex_unlock(&engine_lock);
    return e;
}

void sc_kernels_shutdown(void)
{
    pthread_mutex_lock(&engine_lock);
    if (engine)
        dnnl_engine_destroy(engine);
    engine = NULL;
    pthread_mutex_unlock(&engine_lock);
}

struct sc_kernel_worker *sc_kernel_worker_create(void)
{
    struct sc_kernel_worker *w = calloc(1, sizeof *w);
    if (!w)
        sc_fail_record("kernel state", "out of memory for a worker's kernel state");
    return w;
}

void sc_kernel_worker_destroy(struct sc_kernel_worker *w)
{
    if (!w)
        return;
    for (int i = 0; i < w->n; i++) {
        w->e[i].destroy(w->e[i].val);
        free(w->e[i].key);
    }
    free(w->e);
    free(w->scratch);
    for (int i = 0; i < SC_WORKER_BUFS; i++)
        free(w->buf[i]);
    if (w->stream)
        dnnl_stream_destroy(w->stream);
    free(w);
}

dnnl_stream_t sc_kernel_worker_stream(struct sc_kernel_worker *w)
{
    if (!w)
        return NULL;
    if (!w->stream) {
        dnnl_engine_t e = sc_dnnl_engine();
        if (!e || dnnl_stream_create(&w->stream, e, dnnl_stream_default_flags) != dnnl_success) {
            sc_fail_record("dnnl_stream", "oneDNN: cannot create a stream");
            w->stream = NULL;
        }
    }
    return w->stream;
}

/* The kernel of each SC_PRIM_* op, for the failure records. */
static const char *prim_kernel(int op)
{
    static const char *const names[] = {"conv_fwd", "conv_bwd_data", "conv_bwd_filter", "pool_fwd",
                                        "pool_bwd", "conv (cuDNN)",  "fc (bf16)"};
    return op >= 0 && op < (int)(sizeof names / sizeof names[0]) ? names[op] : "kernel";
}

void *sc_kernel_worker_prim(struct sc_kernel_worker *w, int op, const void *key, size_t len,
                            void *(*create)(const void *key), void (*destroy)(void *))
{
    if (!w) {
        sc_fail_record(prim_kernel(op), "called without its worker's kernel state");
        return NULL;
    }
    for (int i = 0; i < w->n; i++)
        if (w->e[i].op == op && w->e[i].len == len && !memcmp(w->e[i].key, key, len))
            return w->e[i].val;
    if (w->n == w->cap) {
        int cap = w->cap ? 2 * w->cap : 16;
        struct prim_entry *e = realloc(w->e, cap * sizeof *e);
        if (!e) {
            sc_fail_record(prim_kernel(op), "out of memory for the kernels' cache");
            return NULL;
        }
        w->e = e;
        w->cap = cap;
    }
    void *k = malloc(len);
    void *val = k ? create(key) : NULL;
    if (!val) {
        free(k);
        if (!k)
            sc_fail_record(prim_kernel(op), "out of memory for the kernels' cache");
        else if (op == SC_PRIM_CUDNN_CONV_ALGOS)
            sc_fail_record(prim_kernel(op), "out of memory for the cuDNN algorithms' record");
        else
            sc_fail_record(prim_kernel(op), "oneDNN: could not create the primitive");
        return NULL;
    }
    memcpy(k, key, len);
    w->e[w->n++] = (struct prim_entry){op, len, k, val, destroy};
    return val;
}

void *sc_kernel_worker_buf(struct sc_kernel_worker *w, int i, size_t bytes)
{
    if (!w || i < 0 || i >= SC_WORKER_BUFS)
        return NULL;
    if (bytes > w->buf_bytes[i]) {
        free(w->buf[i]);
        w->buf_bytes[i] = 0;
        if (posix_memalign(&w->buf[i], 64, bytes)) {
            w->buf[i] = NULL;
            return NULL;
        }
        w->buf_bytes[i] = bytes;
    }
    return w->buf[i];
}

/* ---- plain <-> preferred layouts ---- */

void sc_md_nchw(dnnl_memory_desc_t *md, int n, int c, int h, int w, dnnl_format_tag_t tag)
{
    sc_md_nchw_typed(md, n, c, h, w, tag, dnnl_f32);
}

void sc_md_nchw_typed(dnnl_memory_desc_t *md, int n, int c, int h, int w, dnnl_format_tag_t tag, dnnl_data_type_t type)
{
    dnnl_dims_t d = {n, c, h, w};
    dnnl_memory_desc_init_by_tag(md, 4, d, type, tag);
}

void sc_md_1d(dnnl_memory_desc_t *md, int n)
{
    dnnl_dims_t d = {n};
    dnnl_memory_desc_init_by_tag(md, 1, d, dnnl_f32, dnnl_a);
}

dnnl_primitive_t sc_prim_from_pd(dnnl_primitive_desc_t pd)
{
    dnnl_primitive_t p = NULL;
    if (pd && dnnl_primitive_create(&p, pd) != dnnl_success)
        p = NULL;
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    return p;
}

int sc_io_init(struct sc_io *io, const dnnl_memory_desc_t *user_md, const dnnl_memory_desc_t *prim_md, int output)
{
    dnnl_engine_t e = sc_dnnl_engine();
    dnnl_memory_t m;
    memset(io, 0, sizeof *io);
    if (!e || dnnl_memory_create(&m, user_md, e, DNNL_MEMORY_NONE) != dnnl_success)
        return -1;
    io->user = m;
    if (dnnl_memory_desc_equal(user_md, prim_md)) {
        io->prim = io->user;
        return 0;
    }
    dnnl_primitive_desc_t pd;
    if (dnnl_memory_create(&m, prim_md, e, DNNL_MEMORY_NONE) != dnnl_success)
        return -1;
    io->prim = m;
    io->bytes = dnnl_memory_desc_get_size(prim_md);
    if (dnnl_reorder_primitive_desc_create(&pd, output ? prim_md : user_md, e, output ? user_md : prim_md, e, NULL) !=
        dnnl_success)
        return -1;
    io->reorder = sc_prim_from_pd(pd);
    return io->reorder ? 0 : -1;
}

void sc_io_destroy(struct sc_io *io)
{
    if (io->reorder)
        dnnl_primitive_destroy(io->reorder);
    if (io->prim && io->prim != io->user)
        dnnl_memory_destroy(io->prim);
    if (io->user)
        dnnl_memory_destroy(io->user);
    memset(io, 0, sizeof *io);
}

int sc_exec(dnnl_primitive_t p, dnnl_stream_t s, int nargs, const dnnl_exec_arg_t *args)
{
    return dnnl_primitive_execute(p, s, nargs, args) == dnnl_success && dnnl_stream_wait(s) == dnnl_success ? 0 : -1;
}

static int reorder(struct sc_io *io, dnnl_stream_t s, int output)
{
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, output ? io->prim : io->user},
                               {DNNL_ARG_TO, output ? io->user : io->prim}};
    return sc_exec(io->reorder, s, 2, args);
}

int sc_io_bind(struct sc_kernel_worker *w, struct sc_io *io, int n)
{
    size_t need = 0, off = 0;
    for (int i = 0; i < n; i++)
        need += (io[i].bytes + 63) & ~(size_t)63;
    if (!w)
        return -1;
    if (need > w->scratch_bytes) {
        free(w->scratch);
        w->scratch_bytes = 0;
        if (posix_memalign(&w->scratch, 64, need)) {
            w->scratch = NULL;
            return -1;
        }
        w->scratch_bytes = need;
    }
    for (int i = 0; i < n; i++)
        if (io[i].bytes) {
            if (dnnl_memory_set_data_handle(io[i].prim, (char *)w->scratch + off) != dnnl_success)
                return -1;
            off += (io[i].bytes + 63) & ~(size_t)63;
        }
    return 0;
}

dnnl_memory_t sc_io_in(struct sc_io *io, const void *ptr, dnnl_stream_t s)
{
    if (dnnl_memory_set_data_handle(io->user, (void *)ptr) != dnnl_success)
        return NULL;
    if (io->reorder && reorder(io, s, 0))
        return NULL;
    return io->prim;
}

dnnl_memory_t sc_io_out(struct sc_io *io, void *ptr)
{
    return dnnl_memory_set_data_handle(io->user, ptr) == dnnl_success ? io->prim : NULL;
}

int sc_io_out_done(struct sc_io *io, dnnl_stream_t s)
{
    return io->reorder ? reorder(io, s, 1) : 0;
}
