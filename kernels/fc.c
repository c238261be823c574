/* The fully connected layer's products (kernels.h): x[n][in], params =
 * [W[out][in] | b[out]], all row-major.  fp32 through CBLAS; bf16
 * through oneDNN's matmul on bf16 copies of the two inputs, made by
 * reorders into the worker's buffers (rounding to nearest even). */
#include "onednn.h"

#include <cblas.h>
#include <stddef.h>
#include <stdlib.h>

static void fc_bias_grad(const struct sc_fc_args *a, const float *dy, float *db)
{
    for (int o = 0; o < a->out; o++)
        db[o] = 0.0f;
    for (int i = 0; i < a->n; i++)
        for (int o = 0; o < a->out; o++)
            db[o] += dy[(size_t)i * a->out + o];
}

static void fc_cblas(enum sc_fc_dir dir, const struct sc_fc_args *a, const float *in0, const float *in1, float *out)
{
    switch (dir) {
    case SC_FC_FWD: { /* y = relu?(x W^T + b): in0 x, in1 params, out y */
        const float *b = in1 + (size_t)a->out * a->in;
        for (int i = 0; i < a->n; i++)
            for (int o = 0; o < a->out; o++)
                out[(size_t)i * a->out + o] = b[o];
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, a->n, a->out, a->in, 1.0f, in0, a->in, in1, a->in, 1.0f,
                    out, a->out);
        if (a->relu)
            sc_relu_inplace(out, (size_t)a->n * a->out);
        break;
    }
    case SC_FC_BWD_DATA: /* dx = dy W: in0 dy, in1 params, out dx */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, a->n, a->in, a->out, 1.0f, in0, a->out, in1, a->in, 0.0f,
                    out, a->in);
        break;
    case SC_FC_BWD_WEIGHTS: /* dW = dy^T x, db = column sums of dy: in0 x, in1 dy, out dparams */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, a->out, a->in, a->n, 1.0f, in1, a->out, in0, a->in, 0.0f,
                    out, a->in);
        fc_bias_grad(a, in1, out + (size_t)a->out * a->in);
        break;
    }
}

/* ---- bf16: one matmul per direction ----
 * Each input is a row-major matrix (rows[i] x cols[i]) converted to bf16
 * as it is; the matmul reads it as is or transposed (the "ba" tag of the
 * swapped dims on the same bytes):
 *   forward       y[n][out]   = x[n][in]    . W^T[in][out]  (+ b, ReLU)
 *   backward data dx[n][in]   = dy[n][out]  . W[out][in]
 *   weights       dW[out][in] = dy^T[out][n] . x[n][in]      (in0 x, in1 dy) */
struct fc_bf16_key {
    struct sc_fc_args a;
    int dir;
};

struct fc_bf16 {
    dnnl_primitive_t mm, cvt[2];
    dnnl_memory_t f32[2], bf16[2], mm_in[2], dst, bias; /* mm_in: views of bf16 */
    size_t bytes[2];
};

static void fc_bf16_destroy(void *v)
{
    struct fc_bf16 *f = v;
    if (f->mm)
        dnnl_primitive_destroy(f->mm);
    for (int i = 0; i < 2; i++) {
        if (f->cvt[i])
            dnnl_primitive_destroy(f->cvt[i]);
        dnnl_memory_t m[3] = {f->f32[i], f->bf16[i], f->mm_in[i]};
        for (int j = 0; j < 3; j++)
            if (m[j])
                dnnl_memory_destroy(m[j]);
    }
    if (f->dst)
        dnnl_memory_destroy(f->dst);
    if (f->bias)
        dnnl_memory_destroy(f->bias);
    free(f);
}

static void md2(dnnl_memory_desc_t *md, int r, int c, dnnl_data_type_t t, dnnl_format_tag_t tag)
{
    dnnl_dims_t d = {r, c};
    dnnl_memory_desc_init_by_tag(md, 2, d, t, tag);
}

static void *fc_bf16_create(const void *key)
{
    const struct fc_bf16_key *k = key;
    const struct sc_fc_args *a = &k->a;
    /* rows x cols of in0, in1 as stored, whether the matmul reads each
     * transposed, its src is in0 (else in1), and its dst */
    int rows[2], cols[2], trans[2] = {0, 0}, src = 0, dr, dc;
    switch (k->dir) {
    case SC_FC_FWD:
        rows[0] = a->n, cols[0] = a->in, rows[1] = a->out, cols[1] = a->in, trans[1] = 1, dr = a->n, dc = a->out;
        break;
    case SC_FC_BWD_DATA:
        rows[0] = a->n, cols[0] = a->out, rows[1] = a->out, cols[1] = a->in, dr = a->n, dc = a->in;
        break;
    default:
        rows[0] = a->n, cols[0] = a->in, rows[1] = a->n, cols[1] = a->out, trans[1] = 1, src = 1, dr = a->out,
        dc = a->in;
        break;
    }
    struct fc_bf16 *f = calloc(1, sizeof *f);
    dnnl_engine_t e = sc_dnnl_engine();
    dnnl_memory_desc_t mm_md[2], dst_md, bias_md;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    if (!f || !e)
        goto fail;
    for (int i = 0; i < 2; i++) {
        dnnl_memory_desc_t m32, m16;
        md2(&m32, rows[i], cols[i], dnnl_f32, dnnl_ab);
        md2(&m16, rows[i], cols[i], dnnl_bf16, dnnl_ab);
        if (trans[i])
            md2(&mm_md[i], cols[i], rows[i], dnnl_bf16, dnnl_ba);
        else
            mm_md[i] = m16;
        f->bytes[i] = dnnl_memory_desc_get_size(&m16);
        if (dnnl_memory_create(&f->f32[i], &m32, e, DNNL_MEMORY_NONE) != dnnl_success ||
            dnnl_memory_create(&f->bf16[i], &m16, e, DNNL_MEMORY_NONE) != dnnl_success ||
            dnnl_memory_create(&f->mm_in[i], &mm_md[i], e, DNNL_MEMORY_NONE) != dnnl_success ||
            dnnl_reorder_primitive_desc_create(&pd, &m32, e, &m16, e, NULL) != dnnl_success ||
            !(f->cvt[i] = sc_prim_from_pd(pd)))
            goto fail;
        pd = NULL;
    }
    md2(&dst_md, dr, dc, dnnl_f32, dnnl_ab);
    md2(&bias_md, 1, a->out, dnnl_f32, dnnl_ab);
    int bias = k->dir == SC_FC_FWD;
    dnnl_matmul_desc_t d;
    if (dnnl_memory_create(&f->dst, &dst_md, e, DNNL_MEMORY_NONE) != dnnl_success ||
        (bias && dnnl_memory_create(&f->bias, &bias_md, e, DNNL_MEMORY_NONE) != dnnl_success) ||
        dnnl_matmul_desc_init(&d, &mm_md[src], &mm_md[1 - src], bias ? &bias_md : NULL, &dst_md) != dnnl_success ||
        dnnl_primitive_attr_create(&attr) != dnnl_success)
        goto fail;
    if (bias && a->relu &&
        (dnnl_post_ops_create(&po) != dnnl_success ||
         dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f) != dnnl_success ||
         dnnl_primitive_attr_set_post_ops(attr, po) != dnnl_success))
        goto fail;
    if (dnnl_primitive_desc_create(&pd, &d, attr, e, NULL) != dnnl_success || !(f->mm = sc_prim_from_pd(pd)))
        goto fail;
    if (po)
        dnnl_post_ops_destroy(po);
    dnnl_primitive_attr_destroy(attr);
    return f;
fail:
    if (po)
        dnnl_post_ops_destroy(po);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    if (f)
        fc_bf16_destroy(f);
    return NULL;
}

static void fc_bf16(struct sc_kernel_worker *w, enum sc_fc_dir dir, const struct sc_fc_args *a, const float *in0,
                    const float *in1, float *out)
{
    struct fc_bf16_key key = {*a, (int)dir};
    struct fc_bf16 *f = sc_kernel_worker_prim(w, SC_PRIM_FC_BF16, &key, sizeof key, fc_bf16_create, fc_bf16_destroy);
    dnnl_stream_t s = sc_kernel_worker_stream(w);
    if (!f || !s) /* recorded where it failed */
        return;
    const float *in[2] = {in0, in1};
    for (int i = 0; i < 2; i++) {
        void *buf = sc_kernel_worker_buf(w, i, f->bytes[i]);
        if (!buf) {
            sc_fail_record("fc (bf16)", "out of memory for the bf16 copies");
            return;
        }
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, f->f32[i]}, {DNNL_ARG_TO, f->bf16[i]}};
        if (dnnl_memory_set_data_handle(f->f32[i], (void *)in[i]) != dnnl_success ||
            dnnl_memory_set_data_handle(f->bf16[i], buf) != dnnl_success ||
            dnnl_memory_set_data_handle(f->mm_in[i], buf) != dnnl_success || sc_exec(f->cvt[i], s, 2, args))
            goto fail;
    }
    int src = dir == SC_FC_BWD_WEIGHTS;
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, f->mm_in[src]},
                               {DNNL_ARG_WEIGHTS, f->mm_in[1 - src]},
                               {DNNL_ARG_DST, f->dst},
                               {DNNL_ARG_BIAS, f->bias}};
    if (dnnl_memory_set_data_handle(f->dst, out) != dnnl_success ||
        (f->bias && dnnl_memory_set_data_handle(f->bias, (void *)(in1 + (size_t)a->out * a->in)) != dnnl_success) ||
        sc_exec(f->mm, s, f->bias ? 4 : 3, args))
        goto fail;
    if (dir == SC_FC_BWD_WEIGHTS)
        fc_bias_grad(a, in1, out + (size_t)a->out * a->in);
    return;
fail:
    sc_fail_record("fc (bf16)", "oneDNN: the matmul or a reorder failed to run");
}

void sc_fc_compute(struct sc_kernel_worker *w, enum sc_fc_dir dir, const struct sc_fc_args *a, const float *in0,
                   const float *in1, float *out)
{
    if (a->precision == SC_PRECISION_BF16)
        fc_bf16(w, dir, a, in0, in1, out);
    else
        fc_cblas(dir, a, in0, in1, out);
}
