/* The softmax cross-entropy on the GPU (cuda_ctx.h): one thread per
 * sample or pixel (cuda/sc_kernels_nn.cu), and the report of the labels
 * out of range from a host function on the stream.  Built only with
 * SC_USE_CUDA. */
#include "cuda_ctx.h"

#include <stdlib.h>

struct labels_report {
    const char *op;
    int classes;
    const struct sc_cuda_verdict *v;
    int worker;       /* that launched it */
    const char *task; /* its name, which outlives the task (the layer's) */
};

/* On no worker: the record names the worker and task that launched it. */
static void CUDART_CB labels_report_cb(void *arg)
{
    struct labels_report *r = arg;
    if (r->v->bad_labels) /* the data sets' labels are made valid: these are not */
        sc_fail_record_from(r->worker, r->task, r->op, "%d labels outside [0, %d)", r->v->bad_labels, r->classes);
    free(r);
}

void sc_xent_compute_cuda(const struct sc_cuda_ctx *c, const char *op, int n, int classes, int hw, float scale,
                          int pad_label, const float *logits, const int32_t *labels, float *dlogits, float *stats)
{
    cudaStream_t s = c->stream;
    struct sc_cuda_worker *w = c->cw;
    char *scratch = sc_cuda_buf(w, SC_CUDA_BUF_SMALL, SC_CUDA_XENT_SCRATCH + sizeof(int));
    struct labels_report *r = malloc(sizeof *r);
    if (!w || !w->pinned || !scratch || !r) {
        free(r);
        sc_fail_record(op, !w || !w->pinned ? "no CUDA worker state" : !scratch ? "no device buffer" : "out of memory");
        return;
    }
    int *bad = (int *)(scratch + SC_CUDA_XENT_SCRATCH);
    const char *task;
    int worker = sc_fail_current(&task);
    *r = (struct labels_report){op, classes, w->pinned, worker, task};
    if (sc_cuda_check(sc_cuda_xent(n, classes, hw, scale, pad_label, bad, logits, labels, dlogits, stats, scratch, s),
                      op) ||
        sc_cuda_check(cudaMemcpyAsync(&w->pinned->bad_labels, bad, sizeof(int), cudaMemcpyDeviceToHost, s), op) ||
        sc_cuda_check(cudaLaunchHostFunc(s, labels_report_cb, r), op))
        free(r);
}
