#include "cl_common.h"
#ifdef SC_USE_CUDA
#include "cuda/sc_cuda.h"
#endif

#include <cblas.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct prim_entry {
    int op;
    size_t len;
    void *key;
    void *val;
    void (*destroy)(void *);
};

/* Each worker touches only its own slot while tasks run; shutdown walks
 * them all once no task is left. */
static struct worker_slot {
    dnnl_stream_t stream;
    struct prim_entry *e;
    int n, cap;
    void *scratch;
    size_t scratch_bytes;
    void *buf[SC_WORKER_BUFS]; /* sc_worker_buf */
    size_t buf_bytes[SC_WORKER_BUFS];
} slots[STARPU_NMAXWORKERS];

static pthread_mutex_t engine_lock = PTHREAD_MUTEX_INITIALIZER;
static dnnl_engine_t engine;

dnnl_engine_t sc_dnnl_engine(void)
{
    pthread_mutex_lock(&engine_lock);
    if (!engine && dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success) {
        fprintf(stderr, "starconv: cannot create the oneDNN CPU engine\n");
        engine = NULL;
    }
    dnnl_engine_t e = engine;
    pthread_mutex_unlock(&engine_lock);
    return e;
}

static struct worker_slot *my_slot(void)
{
    int id = starpu_worker_get_id();
    return id >= 0 && id < STARPU_NMAXWORKERS ? &slots[id] : NULL;
}

dnnl_stream_t sc_dnnl_stream(void)
{
    struct worker_slot *s = my_slot();
    if (!s)
        return NULL;
    if (!s->stream) {
        dnnl_engine_t e = sc_dnnl_engine();
        if (!e || dnnl_stream_create(&s->stream, e, dnnl_stream_default_flags) != dnnl_success) {
            fprintf(stderr, "starconv: cannot create a oneDNN stream\n");
            s->stream = NULL;
        }
    }
    return s->stream;
}

/* StarPU gives the parallelism (one worker per core), so every library
 * must stay on its worker's core; OpenMP's thread count is per calling
 * thread, hence set on each worker. */
static void single_thread(void *arg)
{
    (void)arg;
    omp_set_num_threads(1);
    sc_dnnl_stream();
}

/* The kernels' scratch memory, used in STARPU_SCRATCH mode: StarPU gives
 * each worker its own replicate on its memory node, allocated once from its
 * own allocator and kept between tasks, and adds no dependency between the
 * tasks that use it.  The cuDNN convolutions take their workspace from it;
 * where this rank has no CUDA worker it is 4 bytes, as no CPU kernel needs
 * one (oneDNN keeps its own per-thread scratchpad). */
static starpu_data_handle_t workspace;

starpu_data_handle_t sc_workspace_handle(void)
{
    return workspace;
}

int sc_codelets_init(void)
{
    size_t ws_bytes = 4;
#ifdef SC_USE_CUDA
    int err = sc_cuda_workspace_bytes(&ws_bytes);
    if (err)
        return err;
#endif
    sc_dnnl_engine();
#ifdef OPENBLAS_VERSION /* from OpenBLAS's cblas.h; its thread count is global */
    openblas_set_num_threads(1);
#endif
    starpu_execute_on_each_worker(single_thread, NULL, STARPU_CPU);
#ifdef SC_USE_CUDA
    if ((err = sc_cuda_init())) /* the CUDA workers' cuDNN/cuBLAS handles */
        return err;
#endif
    if (!workspace)
        starpu_vector_data_register(&workspace, -1, 0, (uint32_t)ws_bytes, 1);
    return 0;
}

static void release_slot(struct worker_slot *s)
{
    for (int i = 0; i < s->n; i++) {
        s->e[i].destroy(s->e[i].val);
        free(s->e[i].key);
    }
    free(s->e);
    free(s->scratch);
    for (int i = 0; i < SC_WORKER_BUFS; i++)
        free(s->buf[i]);
    if (s->stream)
        dnnl_stream_destroy(s->stream);
    memset(s, 0, sizeof *s);
}

static void release_my_slot(void *arg)
{
    (void)arg;
    struct worker_slot *s = my_slot();
    if (s)
        release_slot(s);
}

/* A worker's primitives are destroyed on that worker's thread: oneDNN
 * (without DNNL_ENABLE_CONCURRENT_EXEC, as Debian builds it) backs them with
 * a per-thread scratchpad whose reference count is thread_local, taken by
 * dnnl_primitive_create and dropped by dnnl_primitive_destroy.  Destroyed
 * from the main thread, the worker's count never came back to zero and its
 * scratchpad (and through it the engine) leaked when the worker thread
 * exited (LeakSanitizer; gemm-based convolution backward data). */
void sc_codelets_shutdown(void)
{
    if (workspace)
        starpu_data_unregister(workspace);
    workspace = NULL;
#ifdef SC_USE_CUDA
    sc_cuda_shutdown();
#endif
    if (starpu_is_initialized())
        starpu_execute_on_each_worker(release_my_slot, NULL, STARPU_CPU);
    for (int w = 0; w < STARPU_NMAXWORKERS; w++) /* whatever no CPU worker released */
        release_slot(&slots[w]);
    pthread_mutex_lock(&engine_lock);
    if (engine)
        dnnl_engine_destroy(engine);
    engine = NULL;
    pthread_mutex_unlock(&engine_lock);
}

void *sc_prim_get(int op, const void *key, size_t len, void *(*create)(const void *key),
                  void (*destroy)(void *))
{
    struct worker_slot *s = my_slot();
    if (!s) {
        fprintf(stderr, "starconv: a kernel was called outside a StarPU worker\n");
        return NULL;
    }
    for (int i = 0; i < s->n; i++)
        if (s->e[i].op == op && s->e[i].len == len && !memcmp(s->e[i].key, key, len))
            return s->e[i].val;
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 16;
        struct prim_entry *e = realloc(s->e, cap * sizeof *e);
        if (!e) {
            fprintf(stderr, "starconv: out of memory for the kernels' cache\n");
            return NULL;
        }
        s->e = e;
        s->cap = cap;
    }
    void *k = malloc(len);
    void *val = k ? create(key) : NULL;
    if (!val) {
        free(k);
        fprintf(stderr, "starconv: cannot create a kernel's cached state (op %d)\n", op);
        return NULL;
    }
    memcpy(k, key, len);
    s->e[s->n++] = (struct prim_entry){op, len, k, val, destroy};
    return val;
}

void sc_md_nchw(dnnl_memory_desc_t *md, int n, int c, int h, int w, dnnl_format_tag_t tag)
{
    dnnl_dims_t d = {n, c, h, w};
    dnnl_memory_desc_init_by_tag(md, 4, d, dnnl_f32, tag);
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

int sc_io_init(struct sc_io *io, const dnnl_memory_desc_t *user_md,
               const dnnl_memory_desc_t *prim_md, int output)
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
    if (dnnl_reorder_primitive_desc_create(&pd, output ? prim_md : user_md, e,
                                           output ? user_md : prim_md, e, NULL) != dnnl_success)
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
    return dnnl_primitive_execute(p, s, nargs, args) == dnnl_success &&
                   dnnl_stream_wait(s) == dnnl_success ? 0 : -1;
}

/* Called from the oneDNN and the CUDA paths alike; the CUDA, cuDNN and
 * cuBLAS checks print the library's error before it, where there is one. */
void sc_kernel_failed(const char *op)
{
    fprintf(stderr, "starconv: %s: the kernel failed; its outputs are not valid\n", op);
}

void *sc_worker_buf(int i, size_t bytes)
{
    struct worker_slot *s = my_slot();
    if (!s || i < 0 || i >= SC_WORKER_BUFS)
        return NULL;
    if (bytes > s->buf_bytes[i]) {
        free(s->buf[i]);
        s->buf_bytes[i] = 0;
        if (posix_memalign(&s->buf[i], 64, bytes)) {
            s->buf[i] = NULL;
            return NULL;
        }
        s->buf_bytes[i] = bytes;
    }
    return s->buf[i];
}

static int reorder(struct sc_io *io, dnnl_stream_t s, int output)
{
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, output ? io->prim : io->user},
                               {DNNL_ARG_TO, output ? io->user : io->prim}};
    return sc_exec(io->reorder, s, 2, args);
}

int sc_io_bind(struct sc_io *io, int n)
{
    struct worker_slot *s = my_slot();
    size_t need = 0, off = 0;
    for (int i = 0; i < n; i++)
        need += (io[i].bytes + 63) & ~(size_t)63;
    if (!s)
        return -1;
    if (need > s->scratch_bytes) {
        free(s->scratch);
        s->scratch_bytes = 0;
        if (posix_memalign(&s->scratch, 64, need)) {
            s->scratch = NULL;
            return -1;
        }
        s->scratch_bytes = need;
    }
    for (int i = 0; i < n; i++)
        if (io[i].bytes) {
            if (dnnl_memory_set_data_handle(io[i].prim, (char *)s->scratch + off) != dnnl_success)
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

int sc_check_vec(starpu_data_handle_t h, size_t count, size_t elemsize, const char *op,
                 const char *what)
{
    if (!h || starpu_data_get_interface_id(h) != STARPU_VECTOR_INTERFACE_ID)
        return sc_error(SC_ERR_SHAPE, "%s: %s is not a vector handle", op, what);
    size_t nx = starpu_vector_get_nx(h), es = starpu_vector_get_elemsize(h);
    if (es != elemsize || nx < count)
        return sc_error(SC_ERR_SHAPE, "%s: %s holds %zu elements of %zu bytes, needs %zu of %zu",
                        op, what, nx, es, count, elemsize);
    return 0;
}

int sc_insert_result(int ret, const char *op)
{
    if (ret == 0)
        return 0;
    return sc_error(SC_ERR_RUNTIME, "%s: starpu_task_insert failed (%s)", op, strerror(-ret));
}

uint32_t sc_footprint_args(struct starpu_task *task)
{
    return starpu_hash_crc32c_be_n(task->cl_arg, task->cl_arg_size, 0);
}

int sc_check_same_length(const char *op, starpu_data_handle_t h0, const char *n0, starpu_data_handle_t h1,
                         const char *n1)
{
    int ret;
    if ((ret = sc_check_vec(h0, 0, sizeof(float), op, n0)) || (ret = sc_check_vec(h1, 0, sizeof(float), op, n1)))
        return ret;
    if (starpu_vector_get_nx(h0) != starpu_vector_get_nx(h1))
        return sc_error(SC_ERR_SHAPE, "%s: %s has %zu elements, %s %zu", op, n0, (size_t)starpu_vector_get_nx(h0), n1,
                        (size_t)starpu_vector_get_nx(h1));
    return 0;
}

int sc_all_finite(const float *g, size_t n)
{
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &g[i], sizeof u);
        bad |= (u & 0x7f800000u) == 0x7f800000u;
    }
    return !bad;
}
