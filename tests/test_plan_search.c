/* The planner's search on hand-computed cases: two levels of links, the
 * choice follows what communication costs, a memory limit is honoured
 * (with the optimizer's state), residual blocks keep their inputs alike,
 * the choice equals a brute-force search, and a calibration that lacks a
 * time is refused. */
#include "plan_fixture.h"

/* Two levels: 4 ranks, 2 per node (ranks 0, 1 and 2, 3), B=4, 4
 * channels of 8x8, kernels and tasks that take no time.
 *  - conv0 n2w2 -> conv1 w4, forward: rank 1 (columns 2-3 of every
 *    sample) gets samples 0-1 from rank 0, of its node, and samples 2-3
 *    from rank 2, of the other: 2 x 4 x 8 x 2 = 128 floats (512 bytes)
 *    from each, over two links at once (rank 2 likewise; ranks 0 and 3
 *    hold one piece and get the other from the other node);
 *  - backward, w4 -> n2w2: rank 1 (samples 0-1, columns 4-7) gets both of
 *    its pieces from ranks 2 and 3, of the other node, one after the
 *    other on that link (rank 2 likewise); ranks 0 and 3 hold one and
 *    get the other from their node;
 *  - conv0 under h4 (2 rows each): rank 1's halo row above comes from
 *    rank 0, its node, the one below from rank 2, the other node: 8
 *    columns x 4 samples x 2 input channels (256 bytes), and for dy 4
 *    output channels (512 bytes). */
static void test_two_levels(void)
{
    struct sc_net *net = model("m5.cfg", "[net]\nchannels=2\nheight=8\nwidth=8\nclasses=10\n"
                                         "[convolutional]\nparallel=n2w2\nfilters=4\nsize=3\npad=1\nactivation=linear\n"
                                         "[convolutional]\nparallel=w4\nfilters=4\nsize=3\npad=1\nactivation=linear\n"
                                         "[connected]\noutput=10\nactivation=linear\n[softmax]\n");
    double a = 2e-5, b = 4e-9, s = 1e9;
    struct sc_calib *c = calib(a, b);
    fill(c, net, 4, 4, ZERO);
    sc_calib_add_allreduce(c, 4, 4, 0);
    sc_calib_add_allreduce(c, 4, 8, 0);
    c->ranks_per_node = 2;
    for (int slow_node = 0; slow_node < 2; slow_node++) {
        double an = slow_node ? 1e-4 : 1e-5, bn = 1e-9;
        c->p2p_node_alpha = an;
        c->p2p_node_beta = bn;
        struct sc_plan *p = plan(net, c, 4, 4, NULL, 0);
        double in1 = an + 512 * bn, out1 = a + 512 * b, out2 = 2 * a + 1024 * b;
        double fwd = (in1 > out1 ? in1 : out1) + 2048 / s;
        double bwd = out2 + 2048 / s > in1 + 1536 / s ? out2 + 2048 / s : in1 + 1536 / s;
        check(p && near(p->layer[1].redistribute, fwd + bwd),
              "two levels, %s node link: n2w2 -> w4 %.9g = max(node, other node) %.9g + the slowest rank back %.9g",
              slow_node ? "a slow" : "a fast", p ? p->layer[1].redistribute : -1, fwd, bwd);
        sc_plan_free(p);
    }
    /* One level, every message at p2p: rank 2 (a representative) gets
     * its two pieces one after the other; back, the representatives 0
     * and 3 get one each. */
    c->ranks_per_node = 0;
    struct sc_plan *p = plan(net, c, 4, 4, NULL, 0);
    double one = 2 * a + 1024 * b + 2048 / s + a + 512 * b + 1536 / s;
    check(p && near(p->layer[1].redistribute, one), "one level: n2w2 -> w4 %.9g = %.9g",
          p ? p->layer[1].redistribute : -1, one);
    sc_plan_free(p);
    sc_calib_free(c);
    sc_net_destroy(net);

    net = model("m6.cfg", "[net]\nchannels=2\nheight=8\nwidth=8\nclasses=10\n"
                          "[convolutional]\nparallel=h4\nfilters=4\nsize=3\npad=1\nactivation=linear\n"
                          "[convolutional]\nparallel=n4\nfilters=4\nsize=3\npad=1\nactivation=linear\n"
                          "[connected]\noutput=10\nactivation=linear\n[softmax]\n");
    c = calib(a, b);
    fill(c, net, 4, 4, ZERO);
    sc_calib_add_allreduce(c, 4, 4, 0);
    sc_calib_add_allreduce(c, 4, 8, 0);
    c->stream = 1e30; /* copies that take no time */
    c->ranks_per_node = 2;
    c->p2p_node_alpha = 1e-5;
    c->p2p_node_beta = 1e-9;
    p = plan(net, c, 4, 4, NULL, 0);
    /* conv0, the first layer, has x's halo only (no dx, no dy halo) */
    double hx = (1e-5 + 256e-9 > a + 256 * b ? 1e-5 + 256e-9 : a + 256 * b);
    check(p && near(p->layer[0].halo, hx), "two levels: h4 halo %.9g = max(node, other node) for x %.9g",
          p ? p->layer[0].halo : -1, hx);
    sc_plan_free(p);
    c->ranks_per_node = 0;
    p = plan(net, c, 4, 4, NULL, 0);
    check(p && near(p->layer[0].halo, 2 * a + 512 * b), "one level: h4 halo %.9g = x's 2 messages at p2p",
          p ? p->layer[0].halo : -1);
    sc_plan_free(p);
    /* Every rank on one node: the node link for every message, as one
     * level with that link. */
    c->ranks_per_node = 4;
    p = plan(net, c, 4, 4, NULL, 0);
    check(p && near(p->layer[0].halo, 2e-5 + 512e-9), "two levels, one node: h4 halo %.9g at the node link",
          p ? p->layer[0].halo : -1);
    sc_plan_free(p);
    c->ranks_per_node = 2;
    c->p2p_node_beta = -1;
    struct sc_plan_opts o = {4, 4, 1, 0, NULL, NULL, 0, 0, 0};
    int err = sc_plan_make(net, c, &o, &p);
    check(err == SC_ERR_ARG && strstr(sc_last_error(), "within-node link"), "no node link: %s", sc_last_error());
    sc_calib_free(c);
    sc_net_destroy(net);
}

static const char *m4_text = "[net]\nchannels=4\nheight=4\nwidth=4\nclasses=10\n"
                             "[convolutional]\nfilters=64\nsize=3\npad=1\n"
                             "[convolutional]\nfilters=64\nsize=3\npad=1\n"
                             "[connected]\noutput=10\nactivation=linear\n[softmax]\n";

/* Kernels cost their multiply-adds whatever the split, so only
 * communication decides: slow collectives and fast messages send conv1
 * (37 K weights, small activations) to channel or filter splitting; fast
 * collectives and slow messages keep samples split. */
static void test_search_follows_network(void)
{
    struct sc_net *net = model("m4.cfg", m4_text);
    struct sc_calib *c = calib(1e-6, 1e-10);
    fill(c, net, 2, 2, WORK);
    sc_calib_add_allreduce(c, 2, 1000, 1e-2);
    sc_calib_add_allreduce(c, 2, 1e6, 1e-1);
    struct sc_plan *p = plan(net, c, 2, 2, NULL, 0);
    check(p && (p->grid[1][0] == 'c' || p->grid[1][0] == 'f'), "slow allreduce: conv1 split by %s",
          p ? p->grid[1] : "?");
    double slow_time = p ? p->time : 0;
    sc_plan_free(p);
    struct sc_plan *n2 = plan(net, c, 2, 2, "n2", 0);
    check(n2 && slow_time <= n2->time, "the plan (%.6g s) is no slower than n2 (%.6g s)", slow_time, n2 ? n2->time : 0);
    sc_plan_free(n2);
    sc_calib_free(c);
    c = calib(1e-2, 1e-6);
    fill(c, net, 2, 2, WORK);
    sc_calib_add_allreduce(c, 2, 1000, 1e-6);
    sc_calib_add_allreduce(c, 2, 1e6, 1e-5);
    p = plan(net, c, 2, 2, NULL, 0);
    int all_n = p != NULL;
    for (int l = 0; p && l < net->nlayers; l++)
        all_n &= !strcmp(p->grid[l], "n2");
    check(all_n, "slow messages, fast allreduce: every layer n2");
    check(p && p->chain_time >= 0, "a chain: the shortest path agrees with the elimination");
    /* A memory limit under the plan's memory moves layers off n2. */
    double mem = p ? p->total.memory : 0;
    sc_plan_free(p);
    p = plan(net, c, 2, 2, NULL, mem * 0.9);
    check(p && p->total.memory <= mem * 0.9, "--mem-limit %.0f: the plan takes %.0f", mem * 0.9,
          p ? p->total.memory : 0);
    sc_plan_free(p);
    struct sc_plan_opts o = {2, 2, 1, 1000, NULL, NULL, 0, 0, 0};
    int err = sc_plan_make(net, c, &o, &p);
    check(err == SC_ERR_ARG && strstr(sc_last_error(), "mem-limit"), "--mem-limit 1000: refused (%s)", sc_last_error());
    sc_calib_free(c);
    sc_net_destroy(net);
}

/* A residual network: the search is exact (node and edge elimination) and
 * a [shortcut] gets its inputs as they are split. */
static void test_residual(void)
{
    char path[512];
    const char *top = getenv("TOP_SRCDIR");
    snprintf(path, sizeof path, "%s/tests/models/residual.cfg", top ? top : ".");
    struct sc_net *net = NULL;
    if (sc_net_parse(path, &net)) {
        check(0, "parse %s: %s", path, sc_last_error());
        return;
    }
    struct sc_calib *c = calib(1e-5, 1e-9);
    fill(c, net, 2, 4, WORK);
    sc_calib_add_allreduce(c, 2, 1000, 1e-3);
    sc_calib_add_allreduce(c, 2, 1e6, 1e-2);
    struct sc_plan *p = plan(net, c, 2, 4, NULL, 0);
    int ok = p != NULL;
    for (int l = 0; p && l < net->nlayers; l++) {
        const struct sc_layer *L = &net->layers[l];
        if (!L->dx_is_dy)
            continue;
        for (int k = 0; k < L->nsrc; k++) {
            int s = L->src[k];
            while (net->layers[s].alias)
                s = net->layers[s].src[0];
            ok &= !strcmp(p->grid[s], p->grid[l]);
        }
    }
    check(ok, "residual: every [shortcut] split like its inputs");
    check(p && p->chain_time < 0, "residual: not a chain (no shortest-path cross-check)");
    sc_plan_free(p);
    sc_calib_free(c);
    sc_net_destroy(net);
}

/* The search against brute force on the timeline: 4 convolutions and an
 * fc on 4 ranks over one wire, under 40 random calibrations (a fixed
 * seed: message and collective costs over two to three decades), every
 * assignment of n4, c4, f4, n2c2, n2f2, c2f2, h2w2 and n2h2 to the 4
 * convolutions predicted (--parallel with one grid per layer) and the
 * best kept.  The elimination is exact for the sum of each layer's and
 * edge's cost with each gradient collective hidden behind the backward
 * before it; the timeline queues the collectives on one channel, so the
 * elimination alone missed the optimum in 6 of these 40 (by up to 5.8%).
 * Improved on the timeline (refine in src/planner/plan.c) from it alone, the
 * search missed 1, by 2.3%; with the second start from the best uniform
 * plan and suffixes up to cut points, none.  Still a local search, not
 * an exact one: the check holds it to none. */
static const char *m5_text = "[net]\nchannels=8\nheight=8\nwidth=8\nclasses=10\n"
                             "[convolutional]\nfilters=32\nsize=3\npad=1\n"
                             "[convolutional]\nfilters=64\nsize=3\npad=1\n"
                             "[convolutional]\nfilters=64\nsize=3\npad=1\n"
                             "[convolutional]\nfilters=64\nsize=3\npad=1\n"
                             "[connected]\noutput=10\nactivation=linear\n[softmax]\n";

static void test_search_against_brute_force(void)
{
    struct sc_net *net = model("m5.cfg", m5_text);
    static const char *grids[] = {"n4", "c4", "f4", "n2c2", "n2f2", "c2f2", "h2w2", "n2h2"};
    static const char *names[] = {"conv1", "conv2", "conv3", "conv4"};
    int cases = 0, exact = 0, complete = 1;
    double worst = 1;
    srand(7);
    for (int t = 0; net && t < 40; t++) {
        double u[4];
        for (int i = 0; i < 4; i++)
            u[i] = rand() / (double)RAND_MAX;
        double beta = 3e-10 * pow(30, u[0]), a1k = 1e-5 * pow(1000, u[1]), a1m = 1e-3 * pow(300, u[2]);
        struct sc_calib *c = calib(1e-6 * pow(1000, u[3]), beta);
        c->stream = 1e11; /* messages at 3 to 100 times memory's cost per byte: one wire */
        fill(c, net, 4, 8, WORK);
        a1m = a1m > a1k ? a1m : a1k;
        sc_calib_add_allreduce(c, 2, 1000, a1k);
        sc_calib_add_allreduce(c, 2, 1e6, a1m);
        sc_calib_add_allreduce(c, 4, 1000, 1.5 * a1k);
        sc_calib_add_allreduce(c, 4, 1e6, 1.5 * a1m);
        double best = INFINITY;
        int tried = 0;
        for (int code = 0; code < 8 * 8 * 8 * 8; code++) {
            char spec[256];
            int len = 0;
            for (int l = 0, k = code; l < 4; l++, k /= 8)
                len += snprintf(spec + len, sizeof spec - len, "%s=%s,", names[l], grids[k % 8]);
            snprintf(spec + len, sizeof spec - len, "fc1=n4,loss1=n4");
            struct sc_plan_opts o = {4, 8, 1, 0, spec, NULL, 0, 0, 0};
            struct sc_plan *p = NULL;
            if (sc_plan_make(net, c, &o, &p))
                continue; /* a grid this layer cannot take */
            tried++;
            best = p->time < best ? p->time : best;
            sc_plan_free(p);
        }
        struct sc_plan *p = plan(net, c, 4, 8, NULL, 0);
        complete &= p && tried == 8 * 8 * 8 * 8;
        if (p && isfinite(best)) {
            cases++;
            exact += p->time <= best * (1 + 1e-9);
            worst = p->time / best > worst ? p->time / best : worst;
        }
        sc_plan_free(p);
        sc_calib_free(c);
    }
    check(complete && cases == 40 && exact == 40 && worst <= 1 + 1e-9,
          "brute force: the plan is the best of the 4096 assignments in %d of %d calibrations, at worst %.4f times it",
          exact, cases, worst);
    sc_net_destroy(net);
}

/* A calibration without the model's kernels, or without communication
 * times for 2 ranks, is refused with what is missing. */
static void test_missing(void)
{
    struct sc_net *net = model("m2.cfg", m2_text);
    struct sc_calib *c = calib(1e-5, 1e-9);
    struct sc_plan_opts o = {1, 2, 1, 0, NULL, NULL, 0, 0, 0};
    struct sc_plan *p = NULL;
    int err = sc_plan_make(net, c, &o, &p);
    check(err == SC_ERR_PARSE && strstr(sc_last_error(), "conv n=2 c=1 h=4 w=4 f=2"), "no kernels: %s",
          sc_last_error());
    fill(c, net, 2, 2, FIXED);
    o.ranks = 2;
    err = sc_plan_make(net, c, &o, &p);
    check(err == SC_ERR_PARSE && strstr(sc_last_error(), "allreduce over 2 ranks"), "no allreduce: %s",
          sc_last_error());
    c->p2p_alpha = -1;
    err = sc_plan_make(net, c, &o, &p);
    check(err == SC_ERR_PARSE && strstr(sc_last_error(), "one rank"), "no p2p: %s", sc_last_error());
    sc_calib_free(c);
    sc_net_destroy(net);
}

/* --optimizer adam: no momentum, but the two moments of the chunk each
 * rank owns in the ring (1/group of its share): on 4 ranks of samples the
 * memory is 4 N - 2 N bytes less than SGD's (N parameters), on 1 rank 4 N
 * more; the update moves 28 bytes a parameter instead of 20. */
static void test_optimizer_memory(void)
{
    struct sc_net *net = model("m4.cfg", m4_text);
    double N = (double)sc_net_nparams(net);
    for (int P = 1; P <= 4; P += 3) {
        struct sc_calib *c = calib(1e-6, 1e-10);
        fill(c, net, P, 4, WORK);
        sc_calib_add_allreduce(c, P, 1000, 1e-6);
        sc_calib_add_allreduce(c, P, 1e6, 1e-5);
        char grid[8];
        snprintf(grid, sizeof grid, "n%d", P);
        struct sc_plan *p[2] = {NULL, NULL};
        for (int k = 0; k < 2; k++) {
            struct sc_plan_opts o = {P, 4, 1, 0, grid, NULL, 0, 0, 0, 1, 0, k ? SC_OPT_ADAM : SC_OPT_SGD};
            if (sc_plan_make(net, c, &o, &p[k]))
                printf("plan: %s\n", sc_last_error());
        }
        double want = 4 * N - 8 * N / P;
        check(p[0] && p[1] && near(p[0]->total.memory - p[1]->total.memory, want),
              "%s: SGD's memory - Adam's = %.0f bytes (want 4 N - 8 N / %d = %.0f)", grid,
              p[0] && p[1] ? p[0]->total.memory - p[1]->total.memory : 0, P, want);
        check(p[0] && p[1] && near(p[1]->total.update, p[0]->total.update * 28 / 20),
              "%s: Adam's update %.3g s, 28/20 of SGD's %.3g s", grid, p[1] ? p[1]->total.update : 0,
              p[0] ? p[0]->total.update : 0);
        sc_plan_free(p[0]), sc_plan_free(p[1]);
        sc_calib_free(c);
    }
    sc_net_destroy(net);
}

int main(void)
{
    if (!fixture_open())
        return 1;
    test_two_levels();
    test_search_follows_network();
    test_optimizer_memory();
    test_residual();
    test_search_against_brute_force();
    test_missing();
    return fixture_close();
}
