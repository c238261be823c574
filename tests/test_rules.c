/* The rules the network's setup applies and the planner prices
 * (src/net/rules.h, base/ring_segment.h): each rule on its own, and the
 * planner following them where it used to restate them (the bytes of
 * bucket:MB, the cut of a bucket where the ranks that sum the gradients
 * change, a per-layer list under --fc-replicate, the setup's refusals). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/ring_segment.h"
#include "src/net/rules.h"
#include "src/planner/plan.h"

#include "check.h"

static char dir[] = "/tmp/sc_test_rules_XXXXXX";

static struct sc_net *model(const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s/m.cfg", dir);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    struct sc_net *net = NULL;
    if (sc_net_parse(path, &net))
        printf("parse: %s\n", sc_last_error());
    unlink(path);
    return net;
}

static struct sc_grid grid(const char *spec, int P)
{
    struct sc_grid g;
    if (sc_grid_parse(spec, P, &g))
        printf("grid %s: %s\n", spec, sc_last_error());
    return g;
}

static int near(double a, double b)
{
    return fabs(a - b) <= 1e-9 * (fabs(a) + fabs(b)) + 1e-15;
}

/* conv1 (the first layer), conv2, fc1, softmax. */
static const char *net_text = "[net]\nchannels=1\nheight=8\nwidth=8\nclasses=10\n"
                              "[convolutional]\nfilters=4\nsize=3\npad=1\n"
                              "[convolutional]\nfilters=6\nsize=3\npad=1\n"
                              "[connected]\noutput=10\nactivation=linear\n[softmax]\n";

static void test_layer_grid(void)
{
    struct sc_net *net = model(net_text);
    if (!net)
        return;
    const struct sc_layer *conv1 = &net->layers[0], *conv2 = &net->layers[1], *fc = &net->layers[2];
    struct sc_grid g;
    char s[64];
    check(!sc_rule_layer_grid(conv1, "c2", 2, &g) && (sc_grid_format(&g, s, sizeof s), !strcmp(s, "f2")),
          "the first layer splits its filters for c2: %s", s);
    check(!sc_rule_layer_grid(conv2, "c2", 2, &g) && (sc_grid_format(&g, s, sizeof s), !strcmp(s, "c2")),
          "a later convolution keeps c2: %s", s);
    check(!sc_rule_layer_grid(fc, "c2", 2, &g) && (sc_grid_format(&g, s, sizeof s), !strcmp(s, "n2")),
          "a fully connected layer takes sample parallelism for c2: %s", s);
    check(!sc_rule_layer_grid(fc, "h2", 2, &g) && (sc_grid_format(&g, s, sizeof s), !strcmp(s, "n2")),
          "and for h2 (it needs whole samples): %s", s);
    check(!sc_rule_layer_grid(conv2, "conv1=f2,conv2=h2", 2, &g) && (sc_grid_format(&g, s, sizeof s), !strcmp(s, "h2")),
          "a per-layer list gives conv2 its entry: %s", s);
    check(!sc_rule_layer_grid(fc, "conv1=f2,conv2=h2", 2, &g) && (sc_grid_format(&g, s, sizeof s), !strcmp(s, "n2")),
          "and a layer it does not name sample parallelism: %s", s);
    check(!sc_rule_layer_grid(conv2, NULL, 4, &g) && (sc_grid_format(&g, s, sizeof s), !strcmp(s, "n4")),
          "no --parallel: sample parallelism (%s)", s);
    check(sc_rule_layer_grid(conv2, "x2", 2, &g) == SC_ERR_ARG && strstr(sc_last_error(), "conv2"),
          "a grid that does not parse: %s", sc_last_error());
    sc_net_destroy(net);

    net = model("[net]\nchannels=1\nheight=8\nwidth=8\nclasses=10\n"
                "[convolutional]\nfilters=4\nsize=3\npad=1\n"
                "[connected]\nparallel=c2\noutput=10\nactivation=linear\n[softmax]\n");
    check(net && sc_rule_layer_grid(&net->layers[1], "n2", 2, &g) == SC_ERR_ARG &&
              strstr(sc_last_error(), "parallel=c2: a [connected] layer cannot split its channels"),
          "a cfg's parallel= the layer cannot take is refused: %s", sc_last_error());
    sc_net_destroy(net);
}

static void test_grid_check(void)
{
    struct sc_net *net = model(net_text);
    if (!net)
        return;
    const struct sc_layer *conv1 = &net->layers[0], *conv2 = &net->layers[1], *fc = &net->layers[2];
    struct sc_grid g = grid("n2", 2);
    check(!sc_rule_grid_check(conv2, &g, 4), "conv2 under n2, batch 4");
    check(sc_rule_grid_check(conv2, &g, 3) == SC_ERR_ARG && strstr(sc_last_error(), "does not split evenly over 2"),
          "batch 3 over n2: %s", sc_last_error());
    g = grid("h16", 16);
    check(sc_rule_grid_check(conv2, &g, 16) == SC_ERR_ARG && strstr(sc_last_error(), "every rank needs a row"),
          "8 rows over h16: %s", sc_last_error());
    g = grid("c4", 4);
    check(sc_rule_grid_check_split(conv2, &g, 4) == 0 && sc_rule_grid_check(conv2, &g, 4) == SC_ERR_ARG &&
              strstr(sc_last_error(), "its 6 output channels do not split evenly into 4 parts"),
          "c4: 6 filters, the channels' part of the check: %s", sc_last_error());
    g = grid("c2", 2);
    check(sc_rule_grid_check(conv1, &g, 4) == SC_ERR_ARG && strstr(sc_last_error(), "first layer cannot split"),
          "c2 on the first layer: %s", sc_last_error());
    check(sc_rule_grid_check(fc, &g, 4) == SC_ERR_ARG && strstr(sc_last_error(), "cannot split its channels"),
          "c2 on a fully connected layer: %s", sc_last_error());
    g = grid("h2", 2);
    check(sc_rule_grid_check(fc, &g, 4) == SC_ERR_ARG && strstr(sc_last_error(), "needs whole samples"),
          "h2 on a fully connected layer: %s", sc_last_error());
    g = grid("f2", 2);
    check(!sc_rule_grid_check(conv1, &g, 4), "f2 on the first layer");
    struct sc_layout in = sc_rule_layout_in(conv2, &g, 4, 3), out = sc_rule_layout_out(conv2, &g, 4, 3);
    check(in.cdims == SC_CDIMS_C && out.cdims == SC_CDIMS_CF && in.ntiles == 3 && out.c == 6 && in.c == 4,
          "a convolution's input by C, its output by C and F, in the tiles given");
    sc_net_destroy(net);
}

static void test_gradients(void)
{
    struct sc_grid n4 = grid("n4", 4), n2h2 = grid("n2h2", 4), c4 = grid("c4", 4), n2c2 = grid("n2c2", 4),
                   n2f2 = grid("n2f2", 4);
    check(sc_rule_grad_group(&n4) == 4 && sc_rule_grad_group(&n2c2) == 2 && sc_rule_grad_group(&c4) == 1,
          "gradients summed over N, H, W: n4 4 ranks, n2c2 2, c4 1");
    check(sc_rule_same_grad_ranks(&n4, &n2h2), "n4 and n2h2: all ranks both");
    check(!sc_rule_same_grad_ranks(&n4, &c4) && !sc_rule_same_grad_ranks(&c4, &n4), "n4 and c4: not the same ranks");
    check(!sc_rule_same_grad_ranks(&n2c2, &n2f2), "n2c2 and n2f2: groups of 2, but not the same ranks");
    check(sc_rule_same_grad_ranks(&n2c2, &n2c2), "n2c2 and n2c2: the same");

    struct sc_comm_opts c;
    sc_comm_opts_default(&c);
    /* backward order: fc (n4), two convolutions c4, one n2c2, one n4 */
    const struct sc_grid *walk[] = {&n4, &c4, &c4, &n2c2, &n4};
    double bytes[] = {3 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20};
    int bucket[5], nb;
    sc_comm_opts_parse_grad("end", &c);
    nb = sc_rule_buckets(&c, 5, walk, bytes, bucket);
    check(nb == 4 && bucket[0] == 0 && bucket[1] == 1 && bucket[2] == 1 && bucket[3] == 2 && bucket[4] == 3,
          "end: a bucket wherever the ranks that sum change (%d buckets: %d %d %d %d %d)", nb, bucket[0], bucket[1],
          bucket[2], bucket[3], bucket[4]);
    sc_comm_opts_parse_grad("bucket:1", &c);
    nb = sc_rule_buckets(&c, 5, walk, bytes, bucket);
    check(nb == 5 && bucket[2] == 2, "bucket:1: each conv's 1 MiB closes its bucket (%d buckets)", nb);
    sc_comm_opts_parse_grad("bucket:2", &c);
    nb = sc_rule_buckets(&c, 5, walk, bytes, bucket);
    check(nb == 4 && bucket[1] == bucket[2], "bucket:2: the two c4 convolutions share one (%d buckets)", nb);
    sc_comm_opts_parse_grad("chunks:2", &c);
    const struct sc_grid *same[] = {&n4, &n4, &n4, &n4, &n4};
    nb = sc_rule_buckets(&c, 5, same, bytes, bucket);
    check(nb == 2 && bucket[1] == 0 && bucket[2] == 1 && bucket[4] == 1, "chunks:2: the last 2 layers, then the rest");
    sc_comm_opts_default(&c);
    check(sc_rule_bucket_bytes(25) == 25.0 * 1024 * 1024, "bucket:25 holds 25 MiB (%.0f bytes)",
          sc_rule_bucket_bytes(25));
    sc_comm_opts_parse_grad("bucket:1", &c);
    check(!sc_rule_bucket_closed(&c, 1, 1e6) && sc_rule_bucket_closed(&c, 1, 1 << 20),
          "bucket:1 is open at 1e6 bytes, closed at 1 MiB");
    sc_comm_opts_parse_grad("layer", &c);
    check(sc_rule_bucket_closed(&c, 1, 4), "layer: every bucket closed");
    sc_comm_opts_parse_grad("end", &c);
    check(!sc_rule_bucket_closed(&c, 1, 1e12), "end: none closed");
    sc_comm_opts_parse_grad("chunks:2", &c);
    check(!sc_rule_bucket_closed(&c, 1, 4) && sc_rule_bucket_closed(&c, 2, 4) && !sc_rule_bucket_closed(&c, 3, 4),
          "chunks:2: closed after the first 2 layers only");
}

static void test_replication(void)
{
    struct sc_net *net = model("[net]\nchannels=1\nheight=8\nwidth=8\nclasses=10\n"
                               "[convolutional]\nfilters=4\nsize=3\npad=1\n"
                               "[connected]\noutput=20\n[connected]\noutput=10\nactivation=linear\n[softmax]\n");
    if (!net)
        return;
    int rep[8];
    check(!sc_rule_replicable(&net->layers[0]) && sc_rule_replicable(&net->layers[1]) &&
              !sc_rule_replicable(&net->layers[3]),
          "replicable: a [connected], not a convolution or the softmax");
    int n = sc_rule_replicated(net, 1, 2, rep);
    check(n == 1 && !rep[0] && rep[1] && !rep[2], "--fc-replicate 1: fc1 only");
    n = sc_rule_replicated(net, 5, 2, rep);
    check(n == 2 && rep[1] && rep[2], "--fc-replicate 5: both [connected] layers (%d)", n);
    n = sc_rule_replicated(net, 5, 1, rep);
    check(n == 0 && !rep[1], "one rank: none");
    struct sc_grid n2 = grid("n2", 2), h2 = grid("h2", 2);
    check(!sc_rule_replicate_grid(&n2) && sc_rule_replicate_grid(&h2) == SC_ERR_ARG, "replication under n2 only: %s",
          sc_last_error());
    sc_net_destroy(net);
}

static void test_segment(void)
{
    check(sc_ring_segment_kb_for(0) == SC_RING_SEGMENT_KB_DEFAULT, "no link measured: the default, %d KiB",
          sc_ring_segment_kb_for(0));
    check(sc_ring_segment_kb_for(125e6) == 512, "1 Gbit/s: 512 KiB");
    check(sc_ring_segment_kb_for(10e9) == 2048, "10 GB/s: %d KiB (4 message overheads' worth, a power of two)",
          sc_ring_segment_kb_for(10e9));
    check(sc_ring_segment_kb_for(1e15) == 64 << 10, "never above 64 MiB");
}

/* ---- the planner follows the rules ---- */

static int add_kernel(void *ctx, const struct sc_layer_work *w, const char *key)
{
    (void)w;
    return sc_calib_add_kernel(ctx, key, 1e-4, 1e-4, 1e-4);
}

static struct sc_calib *calib(const struct sc_net *net, int P, int B, double alpha, double beta)
{
    struct sc_calib *c;
    sc_calib_new(&c);
    c->workers = 1;
    c->cores = 0;
    c->stream = 1e9;
    c->task = 0;
    c->p2p_alpha = alpha;
    c->p2p_beta = beta;
    struct sc_plan_opts o = {.ranks = P, .batch = B, .workers = 1};
    sc_plan_kernels(net, &o, add_kernel, c);
    return c;
}

static double predict(const struct sc_net *net, const struct sc_calib *c, int P, const char *grid,
                      const char *grad_comm, int fc_replicate, int segment_kb, char *policy, size_t len)
{
    struct sc_plan_opts o = {.ranks = P,
                             .batch = 4,
                             .workers = 1,
                             .grid = grid,
                             .grad_comm = grad_comm,
                             .fc_replicate = fc_replicate,
                             .segment_kb = segment_kb};
    struct sc_plan *p = NULL;
    if (sc_plan_make(net, c, &o, &p))
        return -1;
    double t = p->time;
    if (policy)
        snprintf(policy, len, "%s", p->grad_comm);
    sc_plan_free(p);
    return t;
}

/* fc1's gradient holds 25,616,000 bytes: more than 25e6, less than 25
 * MiB.  In backward order fc2 and fc1 fill a bucket of 25.8e6 bytes,
 * which bucket:25 leaves open, so conv1 joins it and the one collective
 * goes at the end of backward, as under end; bucket:24 closes it after
 * fc1 and conv1 pays a collective of its own. */
static void test_plan_bucket_mib(void)
{
    struct sc_net *net = model("[net]\nchannels=1\nheight=40\nwidth=40\nclasses=10\n"
                               "[convolutional]\nfilters=1\nsize=1\nactivation=linear\n"
                               "[connected]\noutput=4000\nactivation=linear\n"
                               "[connected]\noutput=10\nactivation=linear\n[softmax]\n");
    if (!net)
        return;
    check(net->layers[1].nparams * 4 > 25e6 && net->layers[1].nparams * 4 < (1 << 20) * 25.0,
          "fc1: %zu bytes of gradient, between 25e6 and 25 MiB", net->layers[1].nparams * 4);
    struct sc_calib *c = calib(net, 2, 4, 1e-6, 1e-10);
    sc_calib_add_allreduce(c, 2, 4, 10e-3);
    sc_calib_add_allreduce(c, 2, 1e8, 10e-3 + 1e8 * 1e-10);
    char pol[32] = "";
    double end = predict(net, c, 2, "n2", "end", 0, 0, NULL, 0);
    double b25 = predict(net, c, 2, "n2", "bucket:25", 0, 0, pol, sizeof pol);
    double b24 = predict(net, c, 2, "n2", "bucket:24", 0, 0, NULL, 0);
    check(end > 0 && near(b25, end), "bucket:25 (%s): one bucket, %.9g s = end's %.9g s", pol, b25, end);
    check(b24 > end * 1.001, "bucket:24 (24 MiB): two collectives, %.9g s > %.9g s", b24, end);
    check(predict(net, c, 2, "n2", "chunks:2", 0, 0, NULL, 0) < 0 && strstr(sc_last_error(), "chunks:2"),
          "chunks:K is not priced: %s", sc_last_error());
    sc_calib_free(c);
    sc_net_destroy(net);
}

/* On 4 ranks: conv2 split n2c2, conv3 n2f2 (each sums its gradient over
 * 2 ranks, not the same 2), fc n4.  Under end the setup makes three
 * buckets, so three collectives, not one for the two groups of 2; on 2
 * ranks c2 and f2 sum over one rank each, and still cut fc's bucket from
 * conv1's, so end prices fc's collective in backward like layer. */
static void test_plan_bucket_ranks(void)
{
    struct sc_net *net = model("[net]\nchannels=1\nheight=8\nwidth=8\nclasses=10\n"
                               "[convolutional]\nfilters=8\nsize=3\npad=1\nactivation=linear\n"
                               "[convolutional]\nfilters=8\nsize=3\npad=1\nactivation=linear\n"
                               "[convolutional]\nfilters=8\nsize=3\npad=1\nactivation=linear\n"
                               "[connected]\noutput=10\nactivation=linear\n[softmax]\n");
    if (!net)
        return;
    struct sc_calib *c = calib(net, 4, 4, 1e-6, 1e-10);
    for (int g = 2; g <= 4; g += 2) {
        sc_calib_add_allreduce(c, g, 4, 10e-3);
        sc_calib_add_allreduce(c, g, 1e6, 10e-3);
    }
    double same = predict(net, c, 4, "conv1=n4,conv2=n2c2,conv3=n2c2,fc1=n4", "end", 0, 0, NULL, 0);
    double apart = predict(net, c, 4, "conv1=n4,conv2=n2c2,conv3=n2f2,fc1=n4", "end", 0, 0, NULL, 0);
    check(same > 0 && apart > same + 9e-3, "end, n2c2 then n2f2: one collective more than n2c2 twice (%.6g > %.6g s)",
          apart, same);
    sc_calib_free(c);
    c = calib(net, 2, 4, 1e-6, 1e-10);
    sc_calib_add_allreduce(c, 2, 4, 10e-3);
    sc_calib_add_allreduce(c, 2, 1e6, 10e-3);
    const char *split = "conv1=f2,conv2=c2,conv3=c2,fc1=n2";
    double end = predict(net, c, 2, split, "end", 0, 0, NULL, 0),
           layer = predict(net, c, 2, split, "layer", 0, 0, NULL, 0);
    check(end > 10e-3 && near(end, layer),
          "2 ranks, convolutions split by channels: fc1's bucket is cut from theirs and its collective issued once its "
          "own gradient is ready, as under layer (%.9g = %.9g s)",
          end, layer);
    sc_calib_free(c);
    sc_net_destroy(net);
}

/* A per-layer list of sample parallelism under --fc-replicate, which the
 * setup takes; a grid that is not, refused with the setup's reason. */
static void test_plan_replication_list(void)
{
    struct sc_net *net = model(net_text);
    if (!net)
        return;
    struct sc_calib *c = calib(net, 2, 4, 1e-6, 1e-9);
    sc_calib_add_allreduce(c, 2, 4, 1e-4);
    sc_calib_add_allreduce(c, 2, 1e6, 1e-3);
    double list = predict(net, c, 2, "conv1=n2,conv2=n2,fc1=n2", "layer", 1, 0, NULL, 0);
    double one = predict(net, c, 2, "n2", "layer", 1, 0, NULL, 0);
    check(list > 0 && list == one, "--fc-replicate 1 with a list of n2: %.9g s, as with n2", list);
    check(predict(net, c, 2, "conv1=f2,conv2=n2,fc1=n2", "layer", 1, 0, NULL, 0) < 0 &&
              strstr(sc_last_error(), "--fc-replicate works with sample parallelism only"),
          "with conv1=f2: %s", sc_last_error());
    check(predict(net, c, 2, "c3", NULL, 0, 0, NULL, 0) < 0 && strstr(sc_last_error(), "c3"),
          "a grid of 3 ranks on 2: %s", sc_last_error());
    sc_calib_free(c);
    c = calib(net, 2, 4, 1e-6, 1e-9);
    sc_calib_add_allreduce(c, 2, 4, 1e-4);
    sc_calib_add_allreduce(c, 2, 1e6, 1e-3);
    check(predict(net, c, 2, "c2", NULL, 0, 0, NULL, 0) > 0, "c2: conv1 takes f2, fc1 n2 (as the setup)");
    sc_calib_free(c);
    sc_net_destroy(net);
}

/* One wire (no node record, beta far above memory's): messages queue
 * behind the ring's segments, so a larger --comm-segment predicts a
 * longer iteration; auto gives what the runtime's rule gives the
 * calibration's link (512 KiB at 10 MB/s). */
static void test_plan_segment(void)
{
    struct sc_net *net = model("[net]\nchannels=2\nheight=4\nwidth=4\nclasses=10\n"
                               "[convolutional]\nparallel=h2\nfilters=4\nsize=3\npad=1\nactivation=linear\n"
                               "[convolutional]\nparallel=h2\nfilters=4\nsize=3\npad=1\nactivation=linear\n"
                               "[connected]\nparallel=n2\noutput=10\nactivation=linear\n[softmax]\n");
    if (!net)
        return;
    struct sc_calib *c = calib(net, 2, 4, 1e-5, 1e-7);
    sc_calib_add_allreduce(c, 2, 4, 1e-3);
    sc_calib_add_allreduce(c, 2, 1e4, 1e-3);
    double aut = predict(net, c, 2, NULL, "layer", 0, 0, NULL, 0);
    double s512 = predict(net, c, 2, NULL, "layer", 0, 512, NULL, 0);
    double s4096 = predict(net, c, 2, NULL, "layer", 0, 4096, NULL, 0);
    check(aut > 0 && aut == s512 && s4096 > s512, "one wire: auto %.9g = 512 KiB %.9g < 4 MiB %.9g s", aut, s512,
          s4096);
    sc_calib_free(c);
    sc_net_destroy(net);
}

int main(void)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_layer_grid();
    test_grid_check();
    test_gradients();
    test_replication();
    test_segment();
    test_plan_bucket_mib();
    test_plan_bucket_ranks();
    test_plan_replication_list();
    test_plan_segment();
    rmdir(dir);
    printf("%d passed, %d failed\n", passes, failures);
    return failures ? 1 : 0;
}
