/* NCCL collectives (--collectives nccl): a gradient's sum over the ranks as
 * one ncclAllReduce inside a CUDA task, on the stream StarPU gives the
 * worker.  Compiled to an error without NCCL (config.h SC_USE_NCCL).
 *
 * NCCL deadlocks when two ranks issue the same collectives in different
 * orders.  StarPU runs ready tasks in any order, so every NCCL task also
 * writes one token handle: sequential consistency then runs them in
 * submission order, which is the same on every rank (the task graphs are
 * built in the same order everywhere), and all on one CUDA worker, whose
 * stream then sees them in that order too. */
#include <stdio.h>
#include <stdlib.h>

#include "starconv.h"
#include "tasks.h"

#ifdef SC_USE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

struct sc_nccl {
    ncclComm_t comm;
    ncclUniqueId id;
    int rank, size;
    unsigned worker;              /* the CUDA worker that issues every call */
    ncclResult_t init_result;
    starpu_data_handle_t order;   /* the token */
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

int sc_nccl_create(struct sc_nccl **out, MPI_Comm comm)
{
    int workers[STARPU_NMAXWORKERS];
    int found = starpu_worker_get_ids_by_type(STARPU_CUDA_WORKER, workers, STARPU_NMAXWORKERS);
    if (found < 1)
        return sc_error(SC_ERR_ARG, "--collectives nccl: this rank has no CUDA worker (STARPU_NCUDA=0, or no "
                        "GPU); use --collectives tasks");
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
        return sc_error(SC_ERR_RUNTIME, "NCCL: communicator initialisation failed%s%s",
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

int sc_nccl_allreduce_submit(struct sc_nccl *n, starpu_data_handle_t vec, const char *name)
{
    int err = starpu_task_insert(&cl_nccl_allreduce, STARPU_RW, vec, STARPU_RW, n->order, STARPU_CL_ARGS_NFREE, n,
                                 (size_t)0, STARPU_EXECUTE_ON_WORKER, (int)n->worker, STARPU_PRIORITY, sc_task_priority(),
                                 STARPU_NAME, name ? name : n->name, 0);
    return err ? sc_error(SC_ERR_RUNTIME, "NCCL task submission failed (%d)", err) : 0;
}

#else /* no NCCL */

int sc_nccl_create(struct sc_nccl **out, MPI_Comm comm)
{
    (void)out, (void)comm;
    return sc_error(SC_ERR_ARG, "--collectives nccl: starconv was built without NCCL (./configure --with-cuda, "
                    "with a StarPU built with CUDA and NCCL under the CUDA folder: README, GPU)");
}

void sc_nccl_destroy(struct sc_nccl *n)
{
    (void)n;
}

int sc_nccl_allreduce_submit(struct sc_nccl *n, starpu_data_handle_t vec, const char *name)
{
    (void)n, (void)vec, (void)name;
    return sc_error(SC_ERR_ARG, "NCCL collectives are not built in");
}

#endif
