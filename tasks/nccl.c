/* NCCL collectives (--collectives nccl): a gradient's sum over the ranks as
 * one ncclAllReduce, and the allgather of a replicated layer's tiles as one
 * group of ncclSend/ncclRecv, each inside a CUDA task, on the stream StarPU
 * gives the worker.  Compiled to an error without NCCL (config.h
 * SC_USE_NCCL).
 *
 * NCCL deadlocks when two ranks issue the same collectives in different
 * orders.  StarPU runs ready tasks in any order, so every NCCL task also
 * writes one token handle: sequential consistency then runs them in
 * submission order, which is the same on every rank (the task graphs are
 * built in the same order everywhere), and all on one CUDA worker, whose
 * stream then sees them in that order too. */
#include <stdio.h>
#include <stdlib.h>

#include "base/error.h"
#include "tasks.h"

#ifdef SC_USE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

struct sc_nccl {
    ncclComm_t comm;
    ncclUniqueId id;
    int rank, size;
    unsigned worker; /* the CUDA worker that issues every call */
    ncclResult_t init_result;
    starpu_data_handle_t order; /* the token */
    char name[64];
};

static void init_on_worker(void *arg)
{
    struct sc_nccl *n = arg;
    n->init_result = ncclCommInitRank(&n->comm, n->size, n->id, n->rank);
}

static void destroy_on_worker(void *arg)
{
    ncclCommDestroy(((struct sc_nccl *)arg)->comm);
}

int sc_nccl_check(void)
{
    int workers[STARPU_NMAXWORKERS];
    if (starpu_worker_get_ids_by_type(STARPU_CUDA_WORKER, workers, STARPU_NMAXWORKERS) < 1)
        return sc_error(SC_ERR_ARG, "--collectives nccl: this rank has no CUDA worker (STARPU_NCUDA=0, or no "
                                    "GPU); use --collectives tasks");
    return 0;
}

int sc_nccl_create(struct sc_nccl **out, MPI_Comm comm)
{
    int err = sc_nccl_check();
    if (err)
        return err;
    int workers[STARPU_NMAXWORKERS];
    starpu_worker_get_ids_by_type(STARPU_CUDA_WORKER, workers, STARPU_NMAXWORKERS);
    struct sc_nccl *n = calloc(1, sizeof(*n));
    if (!n)
        return sc_error(SC_ERR_NOMEM, "out of memory for an NCCL communicator");
    MPI_Comm_rank(comm, &n->rank);
    MPI_Comm_size(comm, &n->size);
    n->worker = (unsigned)workers[0];
    ncclResult_t r = ncclSuccess;
    if (n->rank == 0)
        r = ncclGetUniqueId(&n->id);
    /* Every rank learns whether rank 0 got an id, so none waits alone. */
    int ok = r == ncclSuccess;
    MPI_Bcast(&ok, 1, MPI_INT, 0, comm);
    if (!ok) {
        free(n);
        return sc_error(SC_ERR_RUNTIME, "NCCL: no unique id on rank 0 (%s)",
                        r == ncclSuccess ? "see rank 0" : ncclGetErrorString(r));
    }
    MPI_Bcast(&n->id, sizeof(n->id), MPI_BYTE, 0, comm);
    /* On the worker's thread, where StarPU made its GPU current. */
    starpu_execute_on_specific_workers(init_on_worker, n, 1, &n->worker, "nccl_init");
    ok = n->init_result == ncclSuccess;
    int all_ok;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
    if (!all_ok) {
        if (ok)
            starpu_execute_on_specific_workers(destroy_on_worker, n, 1, &n->worker, "nccl_destroy");
        int res = n->init_result;
        free(n);
        /* The usual cause: two ranks on one GPU ("Duplicate GPU detected"
         * under NCCL_DEBUG=WARN), which NCCL refuses. */
        return sc_error(SC_ERR_RUNTIME,
                        "NCCL: communicator initialisation failed%s%s; NCCL needs one GPU per rank "
                        "(ranks sharing a GPU fail), so run at most as many ranks per node as it has GPUs, or use "
                        "--collectives tasks",
                        res != ncclSuccess ? ": " : " on another rank",
                        res != ncclSuccess ? ncclGetErrorString((ncclResult_t)res) : "");
    }
    starpu_void_data_register(&n->order);
    snprintf(n->name, sizeof(n->name), "nccl_allreduce");
    *out = n;
    return 0;
}

void sc_nccl_destroy(struct sc_nccl *n)
{
    if (!n)
        return;
    starpu_data_unregister(n->order);
    starpu_execute_on_specific_workers(destroy_on_worker, n, 1, &n->worker, "nccl_destroy");
    free(n);
}

/* A failed collective leaves the communicator unusable on every rank; no
 * task can return an error, so the job ends here, saying why. */
static void nccl_allreduce_cuda(void *buffers[], void *cl_arg)
{
    struct sc_nccl *n = cl_arg;
    float *v = (float *)STARPU_VECTOR_GET_PTR(buffers[0]);
    size_t count = STARPU_VECTOR_GET_NX(buffers[0]);
    ncclResult_t r = ncclAllReduce(v, v, count, ncclFloat, ncclSum, n->comm, starpu_cuda_get_local_stream());
    if (r != ncclSuccess) {
        fprintf(stderr, "starconv-train: rank %d: NCCL allreduce of %zu floats failed: %s\n", n->rank, count,
                ncclGetErrorString(r));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

static struct starpu_codelet cl_nccl_allreduce = {
    .cuda_funcs = {nccl_allreduce_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
    .nbuffers = 2,
    .modes = {STARPU_RW, STARPU_RW},
    .name = "nccl_allreduce",
};

int sc_nccl_allreduce_submit(struct sc_nccl *n, const struct sc_task_opts *opts, starpu_data_handle_t vec,
                             const char *name)
{
    int err = starpu_task_insert(&cl_nccl_allreduce, STARPU_RW, vec, STARPU_RW, n->order, STARPU_CL_ARGS_NFREE, n,
                                 (size_t)0, STARPU_EXECUTE_ON_WORKER, (int)n->worker, STARPU_PRIORITY,
                                 sc_task_opts_priority(opts), STARPU_NAME, name ? name : n->name, 0);
    return err ? sc_error(SC_ERR_RUNTIME, "NCCL task submission failed (%d)", err) : 0;
}

/* Buffers: this rank's ntiles tiles, then ntiles receive buffers per peer
 * in rank order (this rank left out), then the token.  One group, so that
 * all the transfers progress together; within it, transfers between two
 * ranks run in the order they are issued, so tile t meets tile t. */
static void nccl_tiles_allgather_cuda(void *buffers[], void *cl_arg)
{
    struct sc_nccl *n;
    int ntiles;
    starpu_codelet_unpack_args(cl_arg, &n, &ntiles);
    cudaStream_t stream = starpu_cuda_get_local_stream();
    ncclResult_t r = ncclGroupStart();
    if (r == ncclSuccess) {
        for (int q = 0, peer = 0; q < n->size && r == ncclSuccess; q++) {
            if (q == n->rank)
                continue;
            void **from_q = buffers + (size_t)ntiles * (1 + peer++);
            for (int t = 0; t < ntiles && r == ncclSuccess; t++) {
                r = ncclSend((const void *)STARPU_VECTOR_GET_PTR(buffers[t]), STARPU_VECTOR_GET_NX(buffers[t]),
                             ncclFloat, q, n->comm, stream);
                if (r == ncclSuccess)
                    r = ncclRecv((void *)STARPU_VECTOR_GET_PTR(from_q[t]), STARPU_VECTOR_GET_NX(from_q[t]), ncclFloat,
                                 q, n->comm, stream);
            }
        }
        ncclResult_t end = ncclGroupEnd();
        if (r == ncclSuccess)
            r = end;
    }
    if (r != ncclSuccess) {
        fprintf(stderr, "starconv-train: rank %d: NCCL allgather of %d tiles over %d ranks failed: %s\n", n->rank,
                ntiles, n->size, ncclGetErrorString(r));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

static struct starpu_codelet cl_nccl_tiles_allgather = {
    .cuda_funcs = {nccl_tiles_allgather_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .name = "nccl_tiles_allgather",
};

int sc_nccl_tiles_allgather_submit(struct sc_nccl *n, const struct sc_task_opts *opts, int ntiles,
                                   starpu_data_handle_t *local, starpu_data_handle_t *remote, const char *name)
{
    if (ntiles < 1 || !local || !remote)
        return sc_error(SC_ERR_ARG, "NCCL allgather: %d tiles", ntiles);
    /* A count that differs between a send and its receive hangs NCCL or
     * corrupts memory; say so here instead. */
    for (int t = 0; t < ntiles; t++) {
        size_t nx = starpu_vector_get_nx(local[t]);
        if (starpu_vector_get_elemsize(local[t]) != sizeof(float))
            return sc_error(SC_ERR_SHAPE, "NCCL allgather: tile %d is not a vector of floats", t);
        for (int q = 0; q < n->size; q++)
            if (q != n->rank && (starpu_vector_get_nx(remote[q * ntiles + t]) != nx ||
                                 starpu_vector_get_elemsize(remote[q * ntiles + t]) != sizeof(float)))
                return sc_error(SC_ERR_SHAPE,
                                "NCCL allgather: the buffer of rank %d's tile %d holds %zu floats, "
                                "the local tile %zu",
                                q, t, (size_t)starpu_vector_get_nx(remote[q * ntiles + t]), nx);
    }
    int nbuf = n->size * ntiles + 1, k = 0;
    struct starpu_data_descr *d = malloc((size_t)nbuf * sizeof(*d));
    if (!d)
        return sc_error(SC_ERR_NOMEM, "out of memory for an NCCL allgather");
    for (int t = 0; t < ntiles; t++)
        d[k++] = (struct starpu_data_descr){.handle = local[t], .mode = STARPU_R};
    for (int q = 0; q < n->size; q++)
        for (int t = 0; t < ntiles && q != n->rank; t++)
            d[k++] = (struct starpu_data_descr){.handle = remote[q * ntiles + t], .mode = STARPU_W};
    d[k++] = (struct starpu_data_descr){.handle = n->order, .mode = STARPU_RW};
    int err =
        starpu_task_insert(&cl_nccl_tiles_allgather, STARPU_VALUE, &n, sizeof(n), STARPU_VALUE, &ntiles, sizeof(ntiles),
                           STARPU_DATA_MODE_ARRAY, d, k, STARPU_EXECUTE_ON_WORKER, (int)n->worker, STARPU_PRIORITY,
                           sc_task_opts_priority(opts), STARPU_NAME, name ? name : "nccl_tiles_allgather", 0);
    free(d);
    return err ? sc_error(SC_ERR_RUNTIME, "NCCL allgather submission failed (%d)", err) : 0;
}

#else /* no NCCL */

int sc_nccl_check(void)
{
    return sc_error(SC_ERR_ARG, "--collectives nccl: starconv was built without NCCL (./configure --with-cuda, "
                                "with a StarPU built with CUDA and NCCL under the CUDA folder: docs/gpu.md)");
}

int sc_nccl_create(struct sc_nccl **out, MPI_Comm comm)
{
    (void)out, (void)comm;
    return sc_nccl_check();
}

void sc_nccl_destroy(struct sc_nccl *n)
{
    (void)n;
}

int sc_nccl_allreduce_submit(struct sc_nccl *n, const struct sc_task_opts *opts, starpu_data_handle_t vec,
                             const char *name)
{
    (void)n, (void)opts, (void)vec, (void)name;
    return sc_error(SC_ERR_ARG, "NCCL collectives are not built in");
}

int sc_nccl_tiles_allgather_submit(struct sc_nccl *n, const struct sc_task_opts *opts, int ntiles,
                                   starpu_data_handle_t *local, starpu_data_handle_t *remote, const char *name)
{
    (void)n, (void)opts, (void)ntiles, (void)local, (void)remote, (void)name;
    return sc_error(SC_ERR_ARG, "NCCL collectives are not built in");
}

#endif
