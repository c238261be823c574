/* The planner's cost model on hand-computed cases: the composition of the
 * compute, the gradient allreduce's timeline (and its bf16 and
 * accumulation variants), replicated layers, exact redistribution, halo,
 * batch-normalization and channel-collective volumes, shared links and
 * margins.  The search's cases are tests/test_plan_search.c. */
#include "plan_fixture.h"

static struct sc_plan *plan_margin(const struct sc_net *net, const struct sc_calib *c, int P, int B,
                                   const char *grad_comm, double margin)
{
    struct sc_plan_opts o = {P, B, 1, 0, NULL, grad_comm, margin, 0, 0, 1, 0, SC_OPT_SGD};
    struct sc_plan *p = NULL;
    if (sc_plan_make(net, c, &o, &p))
        printf("plan: %s\n", sc_last_error());
    return p;
}

/* One rank: the sum of the kernels (no backward data for the first
 * layer), softmax streaming its 10 + 10 floats per sample, and SGD over
 * 20 + 330 parameters. */
static void test_compute(void)
{
    struct sc_net *net = model("m2.cfg", m2_text);
    struct sc_calib *c = calib(-1, -1);
    fill(c, net, 1, 2, FIXED);
    struct sc_plan *p = plan(net, c, 1, 2, NULL, 0);
    double s = 1e9, want = F1 + G1 + F2 + D2 + G2 + 160 / s + 320 / s + 20.0 * 350 / s;
    check(p && near(p->time, want), "1 rank: time %.9g = kernels + softmax + SGD %.9g", p ? p->time : -1, want);
    check(p && !strcmp(p->grid[0], "n1") && p->total.allreduce == 0, "1 rank: n1, no allreduce");
    sc_plan_free(p);
    /* Loading the batch: 2 samples x 16 values at the calibrated rate. */
    c->load = 1e-6;
    p = plan(net, c, 1, 2, NULL, 0);
    check(p && near(p->time, want + 32e-6) && near(p->layer[0].compute, F1 + G1 + 32e-6),
          "1 rank, loading the data: %.9g = %.9g + 32 values x 1 us", p ? p->time : -1, want);
    sc_plan_free(p);
    sc_calib_free(c);
    sc_net_destroy(net);
}

/* --grad-dtype bf16: a gradient of B bytes (fp32) above the direct path's
 * 64 KiB costs half the calibrated allreduce at B/2 (the reduce-scatter's
 * bf16) plus half at B (the allgather of the weights); one at most 64 KiB
 * (m2's fc, 1320 bytes) costs what it did. */
static void test_grad_dtype(void)
{
    static const char *big_text = "[net]\nchannels=1\nheight=64\nwidth=64\nclasses=10\n"
                                  "[connected]\noutput=10\nactivation=linear\n[softmax]\n";
    struct sc_net *nets[2] = {model("big.cfg", big_text), model("m2.cfg", m2_text)};
    double want_ratio[2];
    for (int k = 0; k < 2; k++) {
        struct sc_calib *c = calib(0, 0);
        fill(c, nets[k], 2, 2, FIXED);
        sc_calib_add_allreduce(c, 2, 100, 1e-3);
        sc_calib_add_allreduce(c, 2, 200000, 3e-3);
        struct sc_plan *p[2] = {NULL, NULL};
        for (int bf16 = 0; bf16 < 2; bf16++) {
            struct sc_plan_opts o = {2, 2, 1, 0, "n2", "layer", 0, 0, 0, 1, bf16};
            if (sc_plan_make(nets[k], c, &o, &p[bf16]))
                printf("plan: %s\n", sc_last_error());
        }
        int fc = k == 0 ? 0 : 1;
        double B = k == 0 ? 4.0 * (4096 * 10 + 10) : 1320;
        double a = 1e-3 + (B - 100) / 199900 * 2e-3, h = 1e-3 + (B / 2 - 100) / 199900 * 2e-3;
        double want = k == 0 ? 0.5 * (h + a) : a;
        want_ratio[k] = want / a;
        check(p[0] && p[1] && near(p[0]->layer[fc].allreduce, a) && near(p[1]->layer[fc].allreduce, want) &&
                  p[1]->grad_bf16 && !p[0]->grad_bf16,
              "--grad-dtype bf16, a gradient of %.0f bytes: allreduce %.9g (fp32 %.9g, %.3f of it)", B,
              p[1] ? p[1]->layer[fc].allreduce : -1, a, want_ratio[k]);
        sc_plan_free(p[0]);
        sc_plan_free(p[1]);
        sc_calib_free(c);
        sc_net_destroy(nets[k]);
    }
    check(want_ratio[0] < 1 && want_ratio[1] == 1, "bf16 prices the ring's gradient below fp32, the direct path alike");
}

/* Two ranks, n2: the fc's allreduce (1320 bytes, interpolated) runs
 * during conv's backward, conv's (80 bytes, below the smallest point)
 * after it; one allreduce at the end would take longer. */
static void test_allreduce_timeline(void)
{
    struct sc_net *net = model("m2.cfg", m2_text);
    struct sc_calib *c = calib(0, 0);
    fill(c, net, 2, 2, FIXED);
    sc_calib_add_allreduce(c, 2, 100, 1e-3);
    sc_calib_add_allreduce(c, 2, 10000, 2e-3);
    struct sc_plan *p = plan(net, c, 2, 2, "n2", 0);
    double s = 1e9, upd = 20.0 * 350 / s;
    double fwd = F1 + F2 + 80 / s, t_fc = fwd + 160 / s + D2 + G2, t_end = t_fc + G1;
    double ar_fc = 1e-3 + (1320.0 - 100) / 9900 * 1e-3, ar_conv = 1e-3, ar_all = 1e-3 + 1300.0 / 9900 * 1e-3;
    double chan = t_fc + ar_fc;
    chan = (chan > t_end ? chan : t_end) + ar_conv;
    double layer = chan + upd, end = t_end + ar_all + upd;
    check(layer < end, "hand computation: per layer %.9g beats at the end %.9g", layer, end);
    check(p && near(p->time, layer) && !strcmp(p->grad_comm, "layer"), "n2: time %.9g = %.9g, policy %s",
          p ? p->time : -1, layer, p ? p->grad_comm : "?");
    check(p && near(p->layer[1].allreduce, ar_fc) && near(p->layer[0].allreduce, ar_conv),
          "n2: per-layer allreduce from the calibration's points");
    sc_plan_free(p);
    struct sc_plan_opts o = {2, 2, 1, 0, "n2", "end", 0, 0, 0, 1, 0, SC_OPT_SGD};
    sc_plan_make(net, c, &o, &p);
    check(p && near(p->time, end) && !strcmp(p->grad_comm, "end"), "--grad-comm end: %.9g = %.9g", p ? p->time : -1,
          end);
    double compute1 = p ? p->layer[1].compute : -1;
    sc_plan_free(p);
    /* --accumulate 4: three micro-batches of compute alone (t_end each),
     * then the last one's timeline as above: one reduction, one update */
    for (int pol = 0; pol < 2; pol++) {
        struct sc_plan_opts ok = {2, 2, 1, 0, "n2", pol ? "end" : "layer", 0, 0, 0, 4, 0, SC_OPT_SGD};
        double want = 3 * t_end + (pol ? end : layer);
        p = NULL;
        sc_plan_make(net, c, &ok, &p);
        check(p && near(p->time, want) && near(p->total.allreduce, ar_fc + ar_conv) &&
                  near(p->layer[1].compute, 4 * compute1),
              "--accumulate 4, %s: time %.9g = 3 x %.9g + %.9g; one reduction, 4 x the compute", ok.grad_comm,
              p ? p->time : -1, t_end, pol ? end : layer);
        sc_plan_free(p);
    }
    sc_calib_free(c);
    sc_net_destroy(net);
}

/* --fc-replicate 1 on the same network and calibration: the fc's
 * allreduce gives way to the allgathers of its inputs (2 samples x 32
 * floats, 256 bytes) and errors (80 bytes), each half the calibrated
 * allreduce of its bytes, and each rank computes the other rank's share
 * of the fc's weight gradient (G2) beside the update.  Per layer the fc's
 * collective hid behind conv's backward anyway, so replication costs G2;
 * at the end, conv's gradient goes alone (80 bytes) instead of with the
 * fc's (1400). */
static void test_fc_replicate(void)
{
    struct sc_net *net = model("m2.cfg", m2_text);
    struct sc_calib *c = calib(0, 0);
    fill(c, net, 2, 2, FIXED);
    sc_calib_add_allreduce(c, 2, 100, 1e-3);
    sc_calib_add_allreduce(c, 2, 10000, 2e-3);
    double s = 1e9, upd = 20.0 * 350 / s;
    double t_end = F1 + F2 + 80 / s + 160 / s + D2 + G2 + G1;
    double gather = 0.5 * (1e-3 + 156.0 / 9900 * 1e-3 + 1e-3), ar_all = 1e-3 + 1300.0 / 9900 * 1e-3;
    const char *pol[2] = {"layer", "end"};
    double want[2][2] = {{t_end + 1e-3 + upd, t_end + 1e-3 + upd + G2},
                         {t_end + ar_all + upd, t_end + 1e-3 + upd + G2}};
    for (int k = 0; k < 2; k++)
        for (int f = 0; f < 2; f++) {
            /* f: no grid, which --fc-replicate makes n2; 5: as many as there are, 1 */
            struct sc_plan_opts o = {2, 2, 1, 0, f ? NULL : "n2", pol[k], 0, f ? 5 : 0, 0};
            struct sc_plan *p = NULL;
            sc_plan_make(net, c, &o, &p);
            check(p && near(p->time, want[k][f]) && p->fc_replicate == f && !strcmp(p->grid[1], "n2") &&
                      (!f || near(p->layer[1].allreduce, gather)),
                  "--grad-comm %s --fc-replicate %d: %.9g s = %.9g s, fc's collectives %.9g s", pol[k], f,
                  p ? p->time : -1, want[k][f], p ? p->layer[1].allreduce : -1);
            sc_plan_free(p);
        }
    struct sc_plan_opts o = {2, 2, 1, 0, "c2", NULL, 0, 1, 0};
    struct sc_plan *p = NULL;
    int err = sc_plan_make(net, c, &o, &p);
    check(err == SC_ERR_ARG && !p && strstr(sc_last_error(), "sample parallelism only"),
          "--fc-replicate with c2: refused (%s)", sc_last_error());
    sc_calib_free(c);
    /* A search free to replicate (fc_replicate < 0): with the fc's
     * allreduce at 0.1 s and a message at 50 ms (no split of the fc
     * without messages), n2 with the fc replicated (its allgathers 8 ms)
     * beats every plan without. */
    c = calib(0.05, 0);
    fill(c, net, 2, 2, FIXED);
    sc_calib_add_allreduce(c, 2, 80, 1e-3);
    sc_calib_add_allreduce(c, 2, 1320, 0.1);
    struct sc_plan_opts none = {2, 2, 1, 0, NULL, NULL, 0.05, 0, 0}, free = none;
    free.fc_replicate = -1;
    struct sc_plan *q = NULL;
    sc_plan_make(net, c, &none, &q);
    sc_plan_make(net, c, &free, &p);
    check(p && q && p->fc_replicate == 1 && !strcmp(p->grid[0], "n2") && !strcmp(p->grid[1], "n2") &&
              p->time < 0.95 * q->time && q->fc_replicate == 0,
          "the search replicates the fc: %.6f s (%s/%s, F=%d) against %.6f s without", p ? p->time : -1,
          p ? p->grid[0] : "?", p ? p->grid[1] : "?", p ? p->fc_replicate : -1, q ? q->time : -1);
    sc_plan_free(p);
    sc_plan_free(q);
    sc_calib_free(c);
    sc_net_destroy(net);
}

/* The iteration is no barrier: the next one's conv forward runs while the
 * fc's long allreduce (0.1 s) is still on the wire.  The conv's (1 ms),
 * issued G1 later, shares the wire with it (each at half speed: it ends
 * 2 ms after it starts, and the fc's 1 ms later) instead of queueing
 * behind it; so the iteration is the fc's collective's end, less the conv
 * forward that ran over its tail, plus the updates: F1 less than the fc's
 * collective and then the conv's, one after the other. */
static void test_next_forward(void)
{
    struct sc_net *net = model("m2.cfg", m2_text);
    struct sc_calib *c = calib(0, 0);
    fill(c, net, 2, 2, FIXED);
    sc_calib_add_allreduce(c, 2, 80, 1e-3);
    sc_calib_add_allreduce(c, 2, 1320, 0.1);
    struct sc_plan_opts o = {2, 2, 1, 0, "n2", "layer", 0, 0, 0};
    struct sc_plan *p = NULL;
    sc_plan_make(net, c, &o, &p);
    double s = 1e9, upd = 20.0 * 350 / s, t_fc = F1 + F2 + 80 / s + 160 / s + D2 + G2;
    double queued = t_fc + 0.1 + 1e-3 + upd, want = t_fc + 0.1 + 1e-3 - F1 + upd;
    check(p && near(p->time, want), "next forward over the fc's collective: %.9g s = %.9g s (queued, no overlap: %.9g)",
          p ? p->time : -1, want, queued);
    sc_plan_free(p);
    sc_calib_free(c);
    sc_net_destroy(net);
}

/* The same network on 2 cores, 2 ranks x 1 worker, messages copied in
 * memory (a cost per byte near memory's): the fc's allreduce during conv's
 * backward takes the cores for all of its time, so per layer costs both
 * collectives in full and the end policy (one collective) wins.  Over a
 * wire (a cost per byte far above memory's) it hides as before. */
static void test_shared_memory_policy(void)
{
    struct sc_net *net = model("m2.cfg", m2_text);
    struct sc_calib *c = calib(0, 1e-9);
    c->cores = 2;
    fill(c, net, 2, 2, FIXED);
    sc_calib_add_allreduce(c, 2, 100, 1e-3);
    sc_calib_add_allreduce(c, 2, 10000, 2e-3);
    double s = 1e9, upd = 20.0 * 350 / s;
    double t_end = F1 + F2 + 80 / s + 160 / s + D2 + G2 + G1;
    double ar_fc = 1e-3 + (1320.0 - 100) / 9900 * 1e-3, ar_conv = 1e-3, ar_all = 1e-3 + 1300.0 / 9900 * 1e-3;
    struct sc_plan_opts o = {2, 2, 1, 0, "n2", "layer", 0, 0, 0};
    struct sc_plan *p = NULL;
    sc_plan_make(net, c, &o, &p);
    double layer = t_end + ar_fc + ar_conv + upd, end = t_end + ar_all + upd;
    check(p && near(p->time, layer), "shared memory, per layer: %.9g = backward + both collectives %.9g",
          p ? p->time : -1, layer);
    sc_plan_free(p);
    p = plan(net, c, 2, 2, "n2", 0);
    check(p && near(p->time, end) && !strcmp(p->grad_comm, "end"), "shared memory: policy %s, %.9g = %.9g",
          p ? p->grad_comm : "?", p ? p->time : -1, end);
    sc_plan_free(p);
    /* Behind busy workers with the ranks' workers 2 to a core, the fc's
     * collective during backward also waits for one backward task of the
     * fc (the longer of D2 and G2, its own time: the other rank has the
     * core meanwhile);
     * with a core each it does not (it was measured to hide there). */
    c->busy = 2e-3;
    sc_plan_make(net, c, &o, &p);
    check(p && near(p->time, layer), "busy, a core each: per layer %.9g = %.9g, no wait", p ? p->time : -1, layer);
    sc_plan_free(p);
    c->cores = 1;
    struct sc_plan *busy = NULL;
    sc_plan_make(net, c, &o, &busy);
    c->busy = -1;
    sc_plan_make(net, c, &o, &p);
    check(p && busy && near(busy->time - p->time, G2),
          "busy, 2 workers a core: the fc's collective waits %.9g = G2 more (its longer backward task)",
          p && busy ? busy->time - p->time : -1);
    sc_plan_free(p);
    sc_plan_free(busy);
    c->cores = 2;
    c->p2p_beta = 1e-7; /* 100 times memory's: a wire */
    p = plan(net, c, 2, 2, "n2", 0);
    check(p && !strcmp(p->grad_comm, "layer"), "over a wire, same cores: policy %s", p ? p->grad_comm : "?");
    sc_plan_free(p);
    sc_calib_free(c);
    sc_net_destroy(net);
}

/* A calibration for 2 ranks and a batch of 4 whose kernels and
 * allreduces (of 4 and 8 bytes) take no time: only messages cost. */
static struct sc_calib *calib_free_kernels(const struct sc_net *net, double alpha, double beta)
{
    struct sc_calib *c = calib(alpha, beta);
    fill(c, net, 2, 4, ZERO);
    sc_calib_add_allreduce(c, 2, 4, 0);
    sc_calib_add_allreduce(c, 2, 8, 0);
    return c;
}

/* Redistribution h2 -> n2 and back, and conv0's halos, with kernels that
 * take no time (nothing hides the halo): B=4, 4 channels of 8x8.
 *  - forward: rank 0 has rows 0-3 of all 4 samples and needs all rows of
 *    samples 0-1: 2 samples x 4 channels x 4 rows x 8 = 256 floats from
 *    rank 1; backward the same the other way;
 *  - halo of x: one row of 8 columns x 2 input channels x 4 samples;
 *    none of dy: conv0 is the first layer, which computes no dx (the
 *    runtime makes no dy halo for it, src/net/setup.c). */
static void test_redistribution_and_halo(void)
{
    struct sc_net *net = model("m1.cfg", "[net]\nchannels=2\nheight=8\nwidth=8\nclasses=10\n"
                                         "[convolutional]\nparallel=h2\nfilters=4\nsize=3\npad=1\nactivation=linear\n"
                                         "[convolutional]\nparallel=n2\nfilters=4\nsize=3\npad=1\nactivation=linear\n"
                                         "[connected]\noutput=10\nactivation=linear\n[softmax]\n");
    double a = 1e-5, b = 1e-9, s = 1e9;
    struct sc_calib *c = calib_free_kernels(net, a, b);
    struct sc_plan *p = plan(net, c, 2, 4, NULL, 0);
    check(p && !strcmp(p->grid[0], "h2") && !strcmp(p->grid[1], "n2"), "cfg parallel= kept: %s %s",
          p ? p->grid[0] : "?", p ? p->grid[1] : "?");
    check(p && near(p->layer[1].redistribute, 2 * (a + 1024 * b + 3072 / s)),
          "h2 -> n2: %.9g = 2 (alpha + 1024 beta + (1024 + 2048) / stream)", p ? p->layer[1].redistribute : -1);
    check(p && p->layer[1].halo == 0 && p->layer[2].redistribute == 0, "n2 layers: no halo, no redistribution");
    sc_plan_free(p);
    /* The region tasks' copies (at the stream bandwidth) would hide part
     * of the halo: with memory that takes no time, nothing does. */
    c->stream = 1e30;
    p = plan(net, c, 2, 4, NULL, 0);
    check(p && near(p->layer[0].halo, a + 256 * b), "conv0's halo: %.9g = alpha + 256 beta (x's; no dy halo)",
          p ? p->layer[0].halo : -1);
    /* Each row a region task copies costs rowcopy.  Rank 1's block, rows
     * 4-7 of 4 samples: forward, the interior (outputs 5-7, over input
     * rows 4-7 and the padding) and the boundary (output 4, over inputs
     * 3-5); the filter gradient, outputs 4-7 over inputs 3-7.  Rows: 4
     * samples x (2 input channels x (4 + 3 + 5) + 4 output channels x
     * (3 + 1 + 4)) = 224; the n2 layer copies none. */
    c->rowcopy = 1e-6;
    struct sc_plan *rows = plan(net, c, 2, 4, NULL, 0);
    check(p && rows && near(rows->layer[0].compute - p->layer[0].compute, 224e-6) &&
              rows->layer[1].compute == p->layer[1].compute,
          "rows copied: conv0 %.9g later (224 rows), conv1 %.9g",
          rows && p ? rows->layer[0].compute - p->layer[0].compute : -1,
          rows && p ? rows->layer[1].compute - p->layer[1].compute : -1);
    sc_plan_free(rows);
    sc_plan_free(p);
    /* The halo's pack task copies its pieces row by row as well: one row
     * of x per sample and input channel (4 x 2), 8 rows in all.  Behind
     * busy workers (both cores have one; busy too short to wait for) the
     * interior hides none of it. */
    c->cores = 2;
    c->busy = 1e-20;
    struct sc_plan *packed = plan(net, c, 2, 4, NULL, 0);
    c->rowcopy = 0;
    p = plan(net, c, 2, 4, NULL, 0);
    check(p && packed && near(packed->layer[0].halo - p->layer[0].halo, 8e-6), "halo packs: conv0 %.9g later (8 rows)",
          p && packed ? packed->layer[0].halo - p->layer[0].halo : -1);
    sc_plan_free(packed);
    sc_plan_free(p);
    sc_calib_free(c);
    sc_net_destroy(net);
}

/* A spatially split layer after the first exchanges both halos: conv1
 * (4 channels in and out, 8x8, B=4, h2) one row of x forward and one of
 * dy backward, 8 columns x 4 channels x 4 samples each; the first layer,
 * which computes no dx, only x's (2 channels). */
static void test_dy_halo(void)
{
    struct sc_net *net = model("m2.cfg", "[net]\nchannels=2\nheight=8\nwidth=8\nclasses=10\n"
                                         "[convolutional]\nparallel=h2\nfilters=4\nsize=3\npad=1\nactivation=linear\n"
                                         "[convolutional]\nparallel=h2\nfilters=4\nsize=3\npad=1\nactivation=linear\n"
                                         "[connected]\nparallel=n2\noutput=10\nactivation=linear\n[softmax]\n");
    double a = 1e-5, b = 1e-9;
    struct sc_calib *c = calib_free_kernels(net, a, b);
    c->stream = 1e30;
    struct sc_plan *p = plan(net, c, 2, 4, NULL, 0);
    check(p && near(p->layer[0].halo, a + 256 * b) && near(p->layer[1].halo, 2 * a + 1024 * b),
          "halos: conv0 %.9g = alpha + 256 beta, conv1 %.9g = 2 alpha + (512 + 512) beta", p ? p->layer[0].halo : -1,
          p ? p->layer[1].halo : -1);
    sc_plan_free(p);
    sc_calib_free(c);
    sc_net_destroy(net);
}

/* Batch normalization split over rows (h2) sums its statistics, 2 x 4
 * channels of doubles, with the other rank before it goes on, forward and
 * backward: each a message of 64 bytes (and two tasks, free here). */
static void test_bn_statistics(void)
{
    struct sc_net *net = model("bn.cfg", "[net]\nchannels=2\nheight=8\nwidth=8\nclasses=10\n"
                                         "[convolutional]\nparallel=h2\nfilters=4\nsize=3\npad=1\nactivation=linear\n"
                                         "[batchnorm]\nparallel=h2\nactivation=relu\n"
                                         "[connected]\nparallel=n2\noutput=10\nactivation=linear\n[softmax]\n");
    double a = 1e-5, b = 1e-9;
    struct sc_calib *c = calib_free_kernels(net, a, b);
    struct sc_plan *p = plan(net, c, 2, 4, NULL, 0);
    check(p && !strcmp(p->grid[1], "h2") && near(p->layer[1].halo, 2 * (a + 64 * b)),
          "bn h2: statistics summed each way %.9g = 2 (alpha + 64 beta)", p ? p->layer[1].halo : -1);
    sc_plan_free(p);
    sc_calib_free(c);
    sc_net_destroy(net);
}

/* Filter and channel splitting, B=2, 4 channels of 4x4 (16 floats each):
 *  - conv0 f2 -> conv1 f2: x allgathered (the other rank's 2 channels x 2
 *    samples = 64 floats), dx's partial sums reduce-scattered (as much);
 *  - conv1 f2 -> conv2 c2: the same channels on the same rank: nothing;
 *  - conv2 c2: its partial sums reduce-scattered (2 channels x 2 samples),
 *    plus summing 4 channels x 2 samples locally, and dy allgathered;
 *  - conv2 c2 -> fc n2: one sample's 2 channels each way (32 floats). */
static void test_channels(void)
{
    struct sc_net *net = model("m3.cfg", "[net]\nchannels=2\nheight=4\nwidth=4\nclasses=10\n"
                                         "[convolutional]\nparallel=f2\nfilters=4\nsize=3\npad=1\nactivation=linear\n"
                                         "[convolutional]\nparallel=f2\nfilters=4\nsize=3\npad=1\nactivation=linear\n"
                                         "[convolutional]\nparallel=c2\nfilters=4\nsize=3\npad=1\nactivation=linear\n"
                                         "[connected]\noutput=10\nactivation=linear\n[softmax]\n");
    double a = 1e-5, b = 1e-9, s = 1e9;
    struct sc_calib *c = calib(a, b);
    fill(c, net, 2, 2, ZERO);
    sc_calib_add_allreduce(c, 2, 4, 0);
    sc_calib_add_allreduce(c, 2, 8, 0);
    struct sc_plan *p = plan(net, c, 2, 2, NULL, 0);
    check(p && near(p->layer[1].redistribute, 2 * a + 512 * b + 1280 / s), "f2 -> f2: allgather + reduce-scatter %.9g",
          p ? p->layer[1].redistribute : -1);
    check(p && near(p->layer[2].redistribute, 512 / s), "f2 -> c2: same channels, a local copy each way");
    check(p && near(p->layer[2].channels, 2 * a + 512 * b + 1280 / s), "c2: reduce-scatter + allgather %.9g",
          p ? p->layer[2].channels : -1);
    check(p && near(p->layer[3].redistribute, 2 * (a + 128 * b + 384 / s)), "c2 -> n2 (fc): %.9g",
          p ? p->layer[3].redistribute : -1);
    check(p && p->layer[0].allreduce == 0 && p->layer[1].allreduce == 0 && p->total.allreduce == 0,
          "c and f split layers hold their weights alone: no allreduce on 2 ranks");
    sc_plan_free(p);
    sc_calib_free(c);
    sc_net_destroy(net);
    /* One grid for every layer without parallel=, as --parallel c2
     * applies it: the first convolution takes f2, the fc n2. */
    net = model("m2.cfg", m2_text);
    c = calib(a, b);
    fill(c, net, 2, 2, ZERO);
    sc_calib_add_allreduce(c, 2, 4, 0);
    p = plan(net, c, 2, 2, "c2", 0);
    check(p && !strcmp(p->grid[0], "f2") && !strcmp(p->grid[1], "n2"), "--parallel c2: the first layer %s, the fc %s",
          p ? p->grid[0] : "?", p ? p->grid[1] : "?");
    sc_plan_free(p);
    sc_calib_free(c);
    sc_net_destroy(net);
}

/* test_channels' network with every layer's split given (the fc n2). */
static const char *m3_split_text = "[net]\nchannels=2\nheight=4\nwidth=4\nclasses=10\n"
                                   "[convolutional]\nparallel=f2\nfilters=4\nsize=3\npad=1\nactivation=linear\n"
                                   "[convolutional]\nparallel=f2\nfilters=4\nsize=3\npad=1\nactivation=linear\n"
                                   "[convolutional]\nparallel=c2\nfilters=4\nsize=3\npad=1\nactivation=linear\n"
                                   "[connected]\nparallel=n2\noutput=10\nactivation=linear\n[softmax]\n";

/* The same splits on 2 cores with messages copied in memory and a
 * calibrated busy time of 2 ms: each exchange waits behind the task the
 * sender's worker runs next, at most 2 ms (forward the consuming layer's,
 * backward the layer whose input gradient moves); conv's forward task
 * takes F1, its longer backward one D1 (capped); a local copy waits for
 * nothing, and so does c2 -> n2: c2's reduce-scatter has just brought the
 * ranks together (forward), and its dy allgather follows at once
 * (backward).  With the ranks' workers 2 to a core the tasks
 * take twice as long, but a wait is one task's own time: the other rank's
 * worker has the core meanwhile. */
static void test_busy(void)
{
    struct sc_net *net = model("m3.cfg", m3_split_text);
    struct sc_calib *c = calib(1e-5, 1e-9);
    c->cores = 2;
    fill(c, net, 2, 2, FIXED);
    sc_calib_add_allreduce(c, 2, 4, 0);
    sc_calib_add_allreduce(c, 2, 8, 0);
    struct sc_plan *idle = plan(net, c, 2, 2, NULL, 0);
    c->busy = 2e-3;
    struct sc_plan *p = plan(net, c, 2, 2, NULL, 0);
    double conv = F1 + 2e-3;
    check(p && idle && near(p->layer[1].redistribute - idle->layer[1].redistribute, conv),
          "busy: f2 -> f2 waits %.9g = F1 + 2 ms (capped)",
          p && idle ? p->layer[1].redistribute - idle->layer[1].redistribute : -1);
    check(p && idle && near(p->layer[2].redistribute, idle->layer[2].redistribute),
          "busy: a local copy waits for nothing");
    check(p && idle && near(p->layer[2].channels - idle->layer[2].channels, conv), "busy: c2's collectives wait %.9g",
          p && idle ? p->layer[2].channels - idle->layer[2].channels : -1);
    check(p && idle && idle->layer[3].redistribute > 0 && near(p->layer[3].redistribute, idle->layer[3].redistribute),
          "busy: c2 -> n2 waits nothing after c2's collectives (%.9g = %.9g)", p ? p->layer[3].redistribute : -1,
          idle ? idle->layer[3].redistribute : -1);
    sc_plan_free(p);
    /* Uncapped, a message waits for one task: backward the longer of the
     * data and filter gradients (D1), not both. */
    c->busy = 1;
    p = plan(net, c, 2, 2, NULL, 0);
    check(p && idle && near(p->layer[2].channels - idle->layer[2].channels, F1 + D1),
          "busy, uncapped: c2's collectives wait %.9g = F1 + D1, one task each way",
          p && idle ? p->layer[2].channels - idle->layer[2].channels : -1);
    sc_plan_free(p);
    sc_plan_free(idle);
    c->cores = 1;
    c->busy = -1;
    idle = plan(net, c, 2, 2, NULL, 0);
    c->busy = 2e-3;
    p = plan(net, c, 2, 2, NULL, 0);
    check(p && idle && near(p->layer[1].redistribute - idle->layer[1].redistribute, conv) &&
              near(p->layer[2].channels - idle->layer[2].channels, conv),
          "busy, 2 workers a core: f2 -> f2 waits %.9g, c2's collectives %.9g, as on a core each",
          p && idle ? p->layer[1].redistribute - idle->layer[1].redistribute : -1,
          p && idle ? p->layer[2].channels - idle->layer[2].channels : -1);
    c->cores = 2;
    sc_plan_free(p);
    /* Over a wire the rank's StarPU-MPI thread still moves the messages
     * (Open MPI's TCP sends while it is in MPI): the same waits; with a
     * core to spare for it, none. */
    c->p2p_beta = 1e-7;
    p = plan(net, c, 2, 2, NULL, 0);
    sc_plan_free(idle);
    c->busy = -1;
    idle = plan(net, c, 2, 2, NULL, 0);
    check(p && idle && near(p->layer[2].channels - idle->layer[2].channels, conv) &&
              near(p->layer[1].redistribute - idle->layer[1].redistribute, conv),
          "busy, over a wire: c2's collectives wait %.9g, f2 -> f2 %.9g",
          p && idle ? p->layer[2].channels - idle->layer[2].channels : -1,
          p && idle ? p->layer[1].redistribute - idle->layer[1].redistribute : -1);
    sc_plan_free(p);
    c->cores = 4;
    c->busy = 2e-3;
    p = plan(net, c, 2, 2, NULL, 0);
    check(p && idle && near(p->layer[2].channels, idle->layer[2].channels) &&
              near(p->layer[1].redistribute, idle->layer[1].redistribute),
          "busy, over a wire, cores to spare: no wait");
    sc_plan_free(p);
    sc_plan_free(idle);
    sc_calib_free(c);
    sc_net_destroy(net);
    /* A halo waits too, where its interior does not hide the wait: the
     * second convolution's message forward behind the layer's forward
     * work on the tile, backward behind its backward (one tile per rank
     * here), each capped at the busy time, while the interior region runs
     * (one region each way, every kernel its fixed time: F1 forward, D1
     * backward).  Against a busy time of 1 ps (no wait): capped at 2 ms,
     * forward 2 ms - F1 and backward nothing (D1 is longer); uncapped, the
     * layer's compute less F1 and D1. */
    net = model("m4.cfg", "[net]\nchannels=2\nheight=4\nwidth=4\nclasses=10\n"
                          "[convolutional]\nparallel=h2\nfilters=4\nsize=3\npad=1\nactivation=linear\n"
                          "[convolutional]\nparallel=h2\nfilters=4\nsize=3\npad=1\nactivation=linear\n"
                          "[connected]\nparallel=n2\noutput=10\nactivation=linear\n[softmax]\n");
    c = calib(1e-5, 1e-9);
    c->cores = 2;
    fill(c, net, 2, 2, FIXED);
    sc_calib_add_allreduce(c, 2, 4, 0);
    c->busy = 1e-12;
    idle = plan(net, c, 2, 2, NULL, 0);
    c->busy = 2e-3;
    p = plan(net, c, 2, 2, NULL, 0);
    check(p && idle && p->layer[1].halo > 0 && near(p->layer[1].halo - idle->layer[1].halo, 2e-3 - F1),
          "busy: h2's halo waits %.9g = 2 ms - F1 (capped, the interior hiding F1)",
          p && idle ? p->layer[1].halo - idle->layer[1].halo : -1);
    sc_plan_free(p);
    c->busy = 1;
    p = plan(net, c, 2, 2, NULL, 0);
    check(p && idle && near(p->layer[1].halo - idle->layer[1].halo, p->layer[1].compute - F1 - D1),
          "busy: h2's halo waits %.9g = the layer's compute %.9g less its interiors F1 + D1",
          p && idle ? p->layer[1].halo - idle->layer[1].halo : -1, p ? p->layer[1].compute : -1);
    /* The first layer's input load (2 samples x 2 channels x 2 x 4 values
     * a rank, 1 us each) is a task of its own before the layer's: it adds
     * to the layer's compute, and the layer's x halo (it has no dy halo)
     * does not wait behind it. */
    c->load = 1e-6;
    struct sc_plan *loaded = plan(net, c, 2, 2, NULL, 0);
    c->load = 0;
    check(p && loaded && near(loaded->layer[0].compute - p->layer[0].compute, 32e-6) &&
              near(loaded->layer[0].halo, p->layer[0].halo),
          "busy: the first layer's load, 32 values, adds %.9g to its compute and %.9g to its halo",
          p && loaded ? loaded->layer[0].compute - p->layer[0].compute : -1,
          p && loaded ? loaded->layer[0].halo - p->layer[0].halo : -1);
    sc_plan_free(loaded);
    sc_plan_free(p);
    sc_plan_free(idle);
    sc_calib_free(c);
    sc_net_destroy(net);
}

/* The margin a mixed plan must beat every uniform one by: a net whose
 * first convolution loads its input slowly (split by samples, a rank
 * loads half of it; by filters, all of it) and holds few weights, and
 * whose last ones hold many weights on small activations (split by
 * filters or channels, under a slow allreduce).  The search's mix (margin 0) against
 * the best uniform plan (a margin nothing beats); the mix is kept under a
 * margin half its lead, and gives way under one twice its lead. */
static void test_mix_margin(void)
{
    struct sc_net *net = model("m5.cfg", "[net]\nchannels=4\nheight=32\nwidth=32\nclasses=10\n"
                                         "[convolutional]\nfilters=4\nsize=3\npad=1\n"
                                         "[maxpool]\nsize=8\nstride=8\n"
                                         "[convolutional]\nfilters=128\nsize=3\npad=1\n"
                                         "[convolutional]\nfilters=128\nsize=3\npad=1\n"
                                         "[connected]\noutput=10\nactivation=linear\n[softmax]\n");
    struct sc_calib *c = calib(1e-6, 1e-10);
    c->load = 1e-6;
    fill(c, net, 2, 4, WORK);
    sc_calib_add_allreduce(c, 2, 1000, 1e-3);
    sc_calib_add_allreduce(c, 2, 1e6, 1e-1);
    struct sc_plan *mix = plan_margin(net, c, 2, 4, NULL, 0), *uni = plan_margin(net, c, 2, 4, NULL, 100);
    double lead = mix && uni ? uni->time / mix->time - 1 : 0;
    check(lead > 0, "the mix %s,%s,%s,%s (%.6g s) is ahead of every uniform plan (%.6g s)", mix ? mix->grid[0] : "?",
          mix ? mix->grid[1] : "?", mix ? mix->grid[2] : "?", mix ? mix->grid[3] : "?", mix ? mix->time : 0,
          uni ? uni->time : 0);
    struct sc_plan *half = plan_margin(net, c, 2, 4, NULL, lead / 2),
                   *twice = plan_margin(net, c, 2, 4, NULL, lead * 2);
    check(half && twice && mix && uni && half->time == mix->time && twice->time == uni->time,
          "a margin of %.3g keeps the mix (%.6g s), one of %.3g takes the uniform plan (%.6g s)", lead / 2,
          half ? half->time : 0, lead * 2, twice ? twice->time : 0);
    sc_plan_free(mix);
    sc_plan_free(uni);
    sc_plan_free(half);
    sc_plan_free(twice);
    sc_calib_free(c);
    sc_net_destroy(net);
}

/* One wire for every message (a cost per byte 100 times memory's, one
 * level): the channel collectives and redistributions of backward share it
 * with the gradient allreduce in flight, and both end later by the
 * shorter.  m3's fc allreduce (1 s) goes first in backward; then conv2's
 * allgather of dy (a + 256b + 768/s), conv1 -> conv2's local copy (256/s)
 * and conv0 -> conv1's sum of dx (a + 256b + 512/s) share the wire with
 * it: 2a + 512b + 1536/s later than with a node link of the same speed,
 * which does not share.  Under end the same: the convolutions below the
 * fc, split by channels on both ranks, sum their gradients over other
 * ranks than the fc (src/net/rules.h), so the network's setup cuts the
 * fc's bucket there and its allreduce runs during backward too. */
static void test_one_wire(void)
{
    struct sc_net *net = model("m3.cfg", m3_split_text);
    double a = 1e-5, b = 1e-7, s = 1e9;
    struct sc_calib *c = calib(a, b);
    fill(c, net, 2, 2, ZERO);
    sc_calib_add_allreduce(c, 2, 1e3, 1);
    sc_calib_add_allreduce(c, 2, 1e4, 1);
    struct sc_plan *one = plan_margin(net, c, 2, 2, "layer", 0), *one_end = plan_margin(net, c, 2, 2, "end", 0);
    c->ranks_per_node = 2;
    c->p2p_node_alpha = a;
    c->p2p_node_beta = b;
    struct sc_plan *node = plan_margin(net, c, 2, 2, "layer", 0), *node_end = plan_margin(net, c, 2, 2, "end", 0);
    double want = 2 * a + 512 * b + 1536 / s;
    check(one && node && near(one->time - node->time, want),
          "one wire: the allreduce in flight and the messages of backward share it, %.9g s later (%.9g)",
          one && node ? one->time - node->time : -1, want);
    check(one && one_end && node_end && near(one_end->time, one->time) && one_end->time > node_end->time,
          "one wire under end: the fc's bucket is cut where the ranks change, so its allreduce shares the wire with "
          "backward as under layer: %.9g = %.9g s > %.9g s with a node link",
          one_end ? one_end->time : -1, one ? one->time : -1, node_end ? node_end->time : -1);
    sc_plan_free(one);
    sc_plan_free(one_end);
    sc_plan_free(node);
    sc_plan_free(node_end);
    sc_calib_free(c);
    sc_net_destroy(net);
}

/* One wire, gradients' collectives issued during backward: each round of
 * messages waits, on average, half of what the other ranks keep queued
 * in the link (a 512 KiB segment each at the wire's p2p_beta / P per byte) with the
 * wire's busy fraction W / T, so T = (C + sqrt(C^2 + 2 R wait W)) / 2,
 * C the chain (compute, messages, update), W the collectives' time.
 * Two h2 convolutions (x's halo forward and dy's backward, 2 rounds, but
 * 1 for the first, which has no dy halo) and the fc n2 (conv1 -> fc
 * redistributed forward and back, 2): R = 5;
 * every allreduce takes 1 ms.  With the allreduce at the end, or a node
 * link of the same speed (not one wire), nothing waits so. */
static void test_one_wire_steady(void)
{
    struct sc_net *net = model("m4.cfg", "[net]\nchannels=2\nheight=4\nwidth=4\nclasses=10\n"
                                         "[convolutional]\nparallel=h2\nfilters=4\nsize=3\npad=1\nactivation=linear\n"
                                         "[convolutional]\nparallel=h2\nfilters=4\nsize=3\npad=1\nactivation=linear\n"
                                         "[connected]\nparallel=n2\noutput=10\nactivation=linear\n[softmax]\n");
    double a = 1e-5, b = 1e-7;
    struct sc_calib *c = calib(a, b);
    fill(c, net, 2, 2, FIXED);
    sc_calib_add_allreduce(c, 2, 4, 1e-3);
    sc_calib_add_allreduce(c, 2, 1e4, 1e-3);
    struct sc_plan *one = plan_margin(net, c, 2, 2, "layer", 0), *one_end = plan_margin(net, c, 2, 2, "end", 0);
    c->ranks_per_node = 2;
    c->p2p_node_alpha = a;
    c->p2p_node_beta = b;
    struct sc_plan *node = plan_margin(net, c, 2, 2, "layer", 0);
    double want = -1, wait = 512 * 1024 * b / 2, W = 3e-3;
    if (one) {
        const struct sc_plan_cost *t = &one->total;
        double C = t->compute + t->halo + t->channels + t->redistribute + t->update;
        want = 0.5 * (C + sqrt(C * C + 2 * 5 * wait * W));
    }
    check(one && near(one->total.allreduce, W) && near(one->time, want),
          "one wire, steady state: %.9g s = (C + sqrt(C^2 + 2 R wait W)) / 2 = %.9g s", one ? one->time : -1, want);
    check(one && one_end && node && one_end->time < want && node->time < want,
          "one wire at the end (%.9g s), a node link (%.9g s): no queueing wait", one_end ? one_end->time : -1,
          node ? node->time : -1);
    sc_plan_free(one);
    sc_plan_free(one_end);
    sc_plan_free(node);
    sc_calib_free(c);
    sc_net_destroy(net);
}

int main(void)
{
    if (!fixture_open())
        return 1;
    test_compute();
    test_allreduce_timeline();
    test_grad_dtype();
    test_fc_replicate();
    test_next_forward();
    test_shared_memory_policy();
    test_bn_statistics();
    test_busy();
    test_one_wire();
    test_one_wire_steady();
    test_mix_margin();
    test_redistribution_and_halo();
    test_dy_halo();
    test_channels();
    return fixture_close();
}
