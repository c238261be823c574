/* Machine descriptions (src/planner/machine.h): the strict parser's errors, the
 * hierarchical ring allreduce against hand-computed values, the links the
 * planner gets within and beyond a node, kernel times from a calibration
 * file and from the roofline, and the error for a kernel neither has. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/planner/machine.h"
#include "src/planner/plan.h"

#include "check.h"

static char dir[] = "/tmp/sc_test_machine_XXXXXX";

static const char *path_of(const char *name)
{
    static char path[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(path[k], sizeof path[k], "%s/%s", dir, name);
    return path[k];
}

static void write_file(const char *name, const char *text)
{
    FILE *f = fopen(path_of(name), "w");
    fputs(text, f);
    fclose(f);
}

static int near(double a, double b)
{
    return fabs(a - b) <= 1e-12 * (fabs(a) + fabs(b)) + 1e-18;
}

/* The machine of the hand-computed cases: 4 ranks per node, 1 us and
 * 10 GB/s within a node, 10 us and 1 GB/s per node between nodes, memory
 * 100 GB/s, a 1 TFLOP/s peak at half efficiency. */
#define HEAD                                                                                                           \
    "starconv-machine 1   # a comment\n"                                                                               \
    "name test machine\n"                                                                                              \
    "ranks-per-node 4\n"                                                                                               \
    "intra-node 1e-6 1e10\n"                                                                                           \
    "inter-node 1e-5 1e9\n"                                                                                            \
    "task 2e-6\n"

static const char net_cfg[] = "[net]\nchannels=1\nheight=8\nwidth=8\nclasses=10\n"
                              "[convolutional]\nfilters=4\nsize=3\npad=1\nactivation=relu\n"
                              "[connected]\noutput=10\n[softmax]\n";

/* Load text as a machine file; the error message (or "") into why. */
static int load(const char *text, struct sc_machine **m, char *why, size_t len)
{
    write_file("m.txt", text);
    int err = sc_machine_load(path_of("m.txt"), m);
    snprintf(why, len, "%s", err ? sc_last_error() : "");
    return err;
}

static void test_errors(void)
{
    struct sc_machine *m = NULL;
    char why[1024], want[512];
    struct {
        const char *text, *what;
    } cases[] = {
        {"starconv-machine 1\nranks-per-node 4\nintra-node 1e-6\n", ":3: 'intra-node' takes a latency"},
        {"starconv-machine 1\nranks-per-node four\n", ":2: 'ranks-per-node' takes a whole number"},
        {"starconv-machine 1\nwarp-drive 9\n", ":2: unknown record 'warp-drive'"},
        {"starconv-machine 2\n", ":1: machine description version '2'"},
        {"ranks-per-node 4\n", ":1: not a starconv machine description"},
        {HEAD "task 1\n", ":7: a second 'task' record (the first is on line 6)"},
        {HEAD "roofline 1e12 1e11 1.5\n", ":7: 'roofline': the efficiency must be > 0 and <= 1"},
        {HEAD "roofline 1e12 0 0.5\n", ":7: 'roofline': the memory bandwidth must be > 0"},
        {HEAD "inter-node 1e-5 -1e9\n", ":7: a second 'inter-node'"},
        {"starconv-machine 1\nranks-per-node 4\ninter-node 1e-5 1e9\ntask 0\nroofline 1 1 1\n",
         ":5: no 'intra-node <latency s> <bytes/s>' record"},
        {HEAD, ":6: no compute times"},
        {HEAD "calibration nope.txt\n", ":7: calibration nope.txt: cannot read calibration"},
        {HEAD "calibration bad.txt\n", ":7: calibration bad.txt: "},
    };
    write_file("bad.txt", "starconv-calibration 1\np2p 1\n");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int err = load(cases[i].text, &m, why, sizeof why);
        snprintf(want, sizeof want, "%s%s", path_of("m.txt"), cases[i].what);
        check(err == SC_ERR_PARSE && !m && !strncmp(why, want, strlen(want)) && !strchr(why, '\n'),
              "error %zu: '%s' (want '%s...')", i, why, want);
    }
    /* the calibration's own error follows, with its path and line */
    load(HEAD "calibration bad.txt\n", &m, why, sizeof why);
    check(strstr(why, "bad.txt:2: 'p2p' takes 2 numbers") != NULL, "the calibration's error is kept: %s", why);
    check(sc_machine_load(path_of("absent.txt"), &m) == SC_ERR_IO, "a missing machine file: SC_ERR_IO");
}

static void test_allreduce(void)
{
    struct sc_machine *m = NULL;
    char why[512];
    check(!load(HEAD "roofline 1e12 1e11 0.5\n", &m, why, sizeof why), "load a machine file %s", why);
    if (!m)
        return;
    check(m->ranks_per_node == 4 && m->intra_latency == 1e-6 && m->inter_bandwidth == 1e9 && m->task == 2e-6 &&
              m->memory == 1e11 && m->device_memory == 0 && !strcmp(m->name, "test machine"),
          "fields read; memory defaults to the roofline's");
    double n = 1e6;
    /* 4 ranks, one node: the flat ring within it,
     * 2*3*1e-6 + 2*(3/4)*1e6/1e10 + 3*(3/4)*1e6/1e11 */
    check(near(sc_machine_allreduce(m, 4, 4, n), 6e-6 + 1.5e-4 + 2.25e-5), "allreduce of 4 within a node: %.9g",
          sc_machine_allreduce(m, 4, 4, n));
    check(sc_machine_allreduce(m, 4, 1, n) == 0, "a group of one: 0");
    /* 8 ranks on 2 nodes, all of them: l = 4, k = 2,
     * 2*3*1e-6 + 2*(3/4)*1e6/1e10 + 2*1*1e-5 + 2*(1/2)*1e6/1e9 + 3*(7/8)*1e6/1e11 */
    check(near(sc_machine_allreduce(m, 8, 8, n), 6e-6 + 1.5e-4 + 2e-5 + 1e-3 + 2.625e-5),
          "allreduce of 8 over 2 nodes (hierarchical): %.9g", sc_machine_allreduce(m, 8, 8, n));
    /* a group of 2 of 8 ranks: one rank on each node (the worst placement),
     * 2*1e-5 + 2*(1/2)*1e6/1e9 + 3*(1/2)*1e6/1e11 */
    check(near(sc_machine_allreduce(m, 8, 2, n), 2e-5 + 1e-3 + 1.5e-5), "allreduce of 2 of 8 ranks: %.9g",
          sc_machine_allreduce(m, 8, 2, n));
    /* and of 4 of 8: l = 2, k = 2 */
    double want4of8 = 2e-6 + 1e-4 + 2e-5 + 1e-3 + 2.25e-5;
    check(near(sc_machine_allreduce(m, 8, 4, n), want4of8), "allreduce of 4 of 8 ranks: %.9g",
          sc_machine_allreduce(m, 8, 4, n));

    struct sc_net *net = NULL;
    write_file("net.cfg", net_cfg);
    check(!sc_net_parse(path_of("net.cfg"), &net), "parse the test net");
    struct sc_calib *c = NULL;
    int err = sc_machine_calib(m, net, 4, 8, &c);
    check(!err, "calib for 4 ranks%s%s", err ? ": " : "", err ? sc_last_error() : "");
    if (c) {
        check(c->ranks_per_node == 4 && c->p2p_node_alpha == 1e-6 && near(c->p2p_node_beta, 1e-10),
              "4 ranks, one node: within the node, the intra-node link (%d per node, %g, %g)", c->ranks_per_node,
              c->p2p_node_alpha, c->p2p_node_beta);
        check(c->cores == 0 && c->workers == 1 && c->task == 2e-6 && c->stream == 1e11,
              "cores 0, workers 1, task and stream");
        check(near(sc_calib_allreduce(c, 4, n), 6e-6 + 1.5e-4 + 2.25e-5), "the calibration's allreduce of 4");
        check(sc_calib_allreduce(c, 3, n) < 0, "no group of 3 among 4 ranks");
        sc_calib_free(c);
    }
    err = sc_machine_calib(m, net, 8, 8, &c);
    check(!err, "calib for 8 ranks%s%s", err ? ": " : "", err ? sc_last_error() : "");
    if (c) {
        check(c->p2p_alpha == 1e-5 && near(c->p2p_beta, 4 / 1e9),
              "8 ranks, 2 nodes: between nodes, the inter-node link at a rank's share (%g, %g)", c->p2p_alpha,
              c->p2p_beta);
        check(c->ranks_per_node == 4 && c->p2p_node_alpha == 1e-6 && near(c->p2p_node_beta, 1e-10),
              "8 ranks, 2 nodes: within a node, the intra-node link");
        check(near(sc_calib_allreduce(c, 4, n), want4of8) &&
                  near(sc_calib_allreduce(c, 8, 3e7), sc_machine_allreduce(m, 8, 8, 3e7)),
              "the calibration's points interpolate the formula exactly");
        check(sc_calib_allreduce(c, 2, 1) > 0 && sc_calib_allreduce(c, 8, 1) > 0 && sc_calib_allreduce(c, 6, 1) < 0,
              "groups 2, 4, 8, not 6");
        struct sc_plan *p = NULL;
        struct sc_plan_opts po = {.ranks = 8, .batch = 8, .workers = 1};
        err = sc_plan_make(net, c, &po, &p);
        check(!err && p && p->time > 0, "the planner takes it unchanged: %s", err ? sc_last_error() : p->grid[0]);
        sc_plan_free(p);
        sc_calib_free(c);
    }
    sc_net_destroy(net);
    sc_machine_free(m);
}

/* 8 ranks on 2 nodes of HEAD's machine, batch 8, two convolutions of 4
 * filters on 8x8, redistributions priced per link (task 2 us, memory
 * 100 GB/s):
 *  - conv1 n2w4 -> conv2 n2h4: rank 4n + h gets rows 2h-2h+1 of samples
 *    4n-4n+3 from ranks 4n to 4n+3, its node: 3 pieces of 4 samples x 4
 *    channels x 2 rows x 2 columns (256 bytes) at the intra-node link,
 *    4 tasks, 768 bytes sent and 1024 assembled; back the same;
 *  - conv1 h2w4 -> conv2 n2w4: rank 4n + w holds half its block and gets
 *    the other half, 4 samples x 4 channels x 4 rows x 2 columns (512
 *    bytes), from rank 4 (1 - n) + w, of the other node, at the
 *    inter-node link (a rank's share: 4 / 1 GB/s), 2 tasks, 512 + 1024
 *    bytes copied; back the same. */
static void test_links(void)
{
    struct sc_machine *m = NULL;
    char why[512];
    check(!load(HEAD "roofline 1e12 1e11 0.5\n", &m, why, sizeof why), "load a machine file %s", why);
    write_file("net2.cfg", "[net]\nchannels=1\nheight=8\nwidth=8\nclasses=10\n"
                           "[convolutional]\nfilters=4\nsize=3\npad=1\nactivation=linear\n"
                           "[convolutional]\nfilters=4\nsize=3\npad=1\nactivation=linear\n"
                           "[connected]\noutput=10\n[softmax]\n");
    struct sc_net *net = NULL;
    struct sc_calib *c = NULL;
    if (!m || sc_net_parse(path_of("net2.cfg"), &net) || sc_machine_calib(m, net, 8, 8, &c)) {
        check(0, "the machine, the net and the calibration: %s", sc_last_error());
        sc_net_destroy(net);
        sc_machine_free(m);
        return;
    }
    struct {
        const char *grids, *what;
        double want;
    } cases[] = {
        {"conv1=n2w4,conv2=n2h4", "within a node, at the intra-node link",
         2 * (3 * 1e-6 + 768 * 1e-10 + 4 * 2e-6 + (768 + 1024) / 1e11)},
        {"conv1=h2w4,conv2=n2w4", "across nodes, at the inter-node link",
         2 * (1e-5 + 512 * 4e-9 + 2 * 2e-6 + (512 + 1024) / 1e11)},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct sc_plan *p = NULL;
        struct sc_plan_opts po = {.ranks = 8, .batch = 8, .workers = 1, .grid = cases[i].grids};
        int err = sc_plan_make(net, c, &po, &p);
        check(!err && p && near(p->layer[1].redistribute, cases[i].want), "%s: %s, %.9g s (want %.9g)", cases[i].grids,
              cases[i].what, p ? p->layer[1].redistribute : -1, cases[i].want);
        sc_plan_free(p);
    }
    sc_calib_free(c);
    sc_net_destroy(net);
    sc_machine_free(m);
}

static void test_kernels(void)
{
    struct sc_machine *m = NULL;
    char why[512], file[1024], conv_key[SC_CALIB_KEY_LEN], fc_key[SC_CALIB_KEY_LEN];
    struct sc_layer_work w;
    /* The kernels of the test net at batch 4 on one rank. */
    memset(&w, 0, sizeof w);
    w.kind = SC_WORK_CONV;
    w.conv = (struct sc_conv_args){.n = 4,
                                   .c = 1,
                                   .h = 8,
                                   .w = 8,
                                   .f = 4,
                                   .kh = 3,
                                   .kw = 3,
                                   .sh = 1,
                                   .sw = 1,
                                   .ph = 1,
                                   .pw = 1,
                                   .oh = 8,
                                   .ow = 8,
                                   .relu = 1};
    sc_calib_kernel_key(&w, conv_key, sizeof conv_key);
    w.kind = SC_WORK_FC;
    w.fc = (struct sc_fc_args){.n = 4, .in = 256, .out = 10};
    sc_calib_kernel_key(&w, fc_key, sizeof fc_key);
    snprintf(file, sizeof file, "starconv-calibration 1\nstream 5e10\nkernel 1e-3 2e-3 3e-3 %s\n", conv_key);
    write_file("gpu.txt", file);

    struct sc_net *net = NULL;
    write_file("net.cfg", net_cfg);
    sc_net_parse(path_of("net.cfg"), &net);
    struct sc_calib *c = NULL;
    /* calibration and roofline: the file's time where it has one */
    check(!load(HEAD "calibration gpu.txt\nroofline 1e12 1e11 0.5\n", &m, why, sizeof why), "load a machine file %s",
          why);
    if (m && net && !sc_machine_calib(m, net, 1, 4, &c)) {
        const struct sc_calib_kernel *k = sc_calib_find(c, conv_key), *f = sc_calib_find(c, fc_key);
        check(k && k->fwd == 1e-3 && k->bwd_data == 2e-3 && k->bwd_filter == 3e-3, "conv from the calibration");
        /* fc: 10240 multiply-adds, 2*10240/(1e12*0.5) = 4.096e-8 s, under
         * 4*(4*256 + 256*10 + 4*10) = 14496 bytes / 1e11 = 1.4496e-7 s */
        check(f && near(f->fwd, 1.4496e-7) && near(f->bwd_data, 1.4496e-7) && near(f->bwd_filter, 1.4496e-7),
              "fc from the roofline, memory-bound: %.9g", f ? f->fwd : -1);
        check(c->nkernels == 2, "the two kernels the planner needs (%d)", c->nkernels);
        sc_calib_free(c);
    }
    sc_machine_free(m);
    /* a compute-bound convolution: 2 MACs / (peak eff) */
    check(!load(HEAD "roofline 1e12 1e11 0.5\n", &m, why, sizeof why), "load a machine file %s", why);
    if (m) {
        w.kind = SC_WORK_CONV;
        w.conv = (struct sc_conv_args){.n = 32,
                                       .c = 64,
                                       .h = 56,
                                       .w = 56,
                                       .f = 64,
                                       .kh = 3,
                                       .kw = 3,
                                       .sh = 1,
                                       .sw = 1,
                                       .ph = 1,
                                       .pw = 1,
                                       .oh = 56,
                                       .ow = 56};
        double a, b, g, macs = 32.0 * 64 * 56 * 56 * 64 * 9;
        sc_machine_roofline(m, &w, &a, &b, &g);
        check(near(a, 2 * macs / 5e11) && near(b, a) && near(g, a), "conv 3x3 64->64 on 32x56x56: %.6g s", a);
        check(m->memory == 1e11, "memory from the roofline");
        sc_machine_free(m);
    }
    /* no roofline: a kernel the calibration lacks is an error naming it */
    check(!load(HEAD "calibration gpu.txt\n", &m, why, sizeof why), "load a machine file %s", why);
    if (m && net) {
        check(m->memory == 5e10, "memory from the calibration's stream");
        int err = sc_machine_calib(m, net, 1, 4, &c);
        check(err == SC_ERR_PARSE && strstr(sc_last_error(), fc_key) &&
                  strstr(sc_last_error(), "m.txt:7: calibration "),
              "missing kernel: %s", sc_last_error());
        if (!err)
            sc_calib_free(c);
    }
    sc_machine_free(m);
    /* the sweep prints a row per rank count */
    check(!load(HEAD "roofline 1e12 1e11 0.5\n", &m, why, sizeof why), "load a machine file %s", why);
    if (m && net) {
        char *buf = NULL;
        size_t len = 0;
        FILE *fp = open_memstream(&buf, &len);
        int err = sc_machine_sweep(fp, m, "m.txt", net, "net.cfg", 4, 8, 0);
        fclose(fp);
        check(!err && strstr(buf, "\n     8     2 ") && strstr(buf, "no plan: fc1: no grid of 8 ranks"),
              "sweep to 8 ranks, 8 without a plan:\n%s", buf);
        free(buf);
        fp = open_memstream(&buf, &len);
        err = sc_machine_sweep(fp, m, "m.txt", net, "net.cfg", 4, 4, 1);
        fclose(fp);
        check(!err && strstr(buf, "\"ranks\": 4, \"nodes\": 1") && strstr(buf, "\"speedup\": 1,"), "json:\n%s", buf);
        free(buf);
    }
    sc_machine_free(m);
    sc_net_destroy(net);
}

int main(void)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_errors();
    test_allreduce();
    test_links();
    test_kernels();
    const char *names[] = {"m.txt", "bad.txt", "gpu.txt", "net.cfg", "net2.cfg"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        unlink(path_of(names[i]));
    rmdir(dir);
    printf("%d passed, %d failed\n", passes, failures);
    return failures ? 1 : 0;
}
