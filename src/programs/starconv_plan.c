/* starconv-plan: calibrate a machine, then predict and choose per-layer
 * distributions of a .cfg model (src/planner/plan.h). */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "src/planner/calibrate.h"
#include "src/programs/cli.h"
#include "src/planner/machine.h"
#include "src/planner/plan.h"
#include "src/runtime/runtime.h"
#include "kernels/kernels.h"

#define DEFAULT_CALIBRATION "starconv-calibration.txt"

static const char usage[] =
    "Usage: starconv-plan --model M --ranks P [--batch B] [options]\n"
    "       mpirun -np P starconv-plan calibrate --model M [--batch B] [options]\n"
    "       starconv-plan --machine FILE --model M [--batch B] [--max-ranks N] [--json]\n"
    "\n"
    "Predict the time of one training iteration of a .cfg model on P ranks and choose,\n"
    "per layer, how it is split (sample n, spatial h/w, channel c, filter f and their\n"
    "hybrids, as starconv-train --parallel takes them) and the gradient communication\n"
    "(--grad-comm), from the times a calibration measured on this machine.  The search\n"
    "is exact on chains and residual blocks for a sum of per-layer costs (DeePa's node\n"
    "and edge elimination), then improved on the iteration's timeline by a local search.\n"
    "Use the plan with: starconv-train --parallel auto (same calibration), or paste the\n"
    "printed --parallel value.\n"
    "\n"
    "Options:\n"
    "  --model FILE         the network (.cfg)\n"
    "  --ranks P            MPI ranks to plan for (calibrate: default the MPI size)\n"
    "  --batch B            global batch (default 64)\n"
    "  --accumulate K       price starconv-train --accumulate K: an iteration of K batches\n"
    "                       of B, the gradients reduced once, after the K-th: K times the\n"
    "                       compute and messages of a batch, one reduction and update\n"
    "                       (default 1)\n"
    "  --workers W          CPU workers per rank (default: the calibration's; calibrate:\n"
    "                       STARPU_NCPU, else 1)\n"
    "  --calibration FILE   the calibration to read or extend (default " DEFAULT_CALIBRATION ",\n"
    "                       or $STARCONV_CALIBRATION)\n"
    "  --mem-limit BYTES    the most memory a rank may use (default: none)\n"
    "  --parallel GRID      predict this grid for every layer instead of searching\n"
    "  --grad-comm MODE     layer, bucket:MB or end (default: the best of layer, bucket:25\n"
    "                       and end)\n"
    "  --comm-segment KB|auto  the ring's segments in training, as starconv-train\n"
    "                       --comm-segment (default auto: what training's rule gives the\n"
    "                       calibration's link); they size the wait of messages queued\n"
    "                       behind the collectives on one wire\n"
    "  --grad-dtype fp32|bf16  price the gradient allreduce as starconv-train --grad-dtype\n"
    "                       sends it (default fp32; bf16: its reduce-scatter at 2 bytes an\n"
    "                       element, the weights back at 4)\n"
    "  --fc-replicate F     price the first F [connected] layers as starconv-train\n"
    "                       --fc-replicate F runs them (inputs and errors gathered, the\n"
    "                       weight gradient on every rank); sample parallelism only, so\n"
    "                       the plan is n<ranks>; 0: none (default: the search tries\n"
    "                       n<ranks> with each F too)\n"
    "  --json               print the plan as JSON\n"
    "  --reps N             calibrate: passes over the kernels, and timed repetitions of\n"
    "                       each other measurement (default 7)\n"
    "  --quick              calibrate: 3 passes and repetitions instead of 7 (unless --reps\n"
    "                       is given): a plan in a third of the time, from noisier timings\n"
    "  --device cpu|cuda    calibrate: time the kernels on this machine's CPU (default)\n"
    "                       or on its GPU (CUDA build; one process, kernels only: for\n"
    "                       a machine description's calibration record, --machine)\n"
    "  --data D             calibrate: also time loading the samples of D (a Fashion-MNIST\n"
    "                       directory, synthetic:... or hdf5:FILE, as starconv-train --data\n"
    "                       takes it), which plans then count per input value a rank loads\n"
    "  --machine FILE       predict for the machine FILE describes (ranks per node, links,\n"
    "                       compute from a calibration made there or a roofline; see\n"
    "                       src/planner/machine.h and models/machines/) instead of this one: the\n"
    "                       planner's choice and pure sample parallelism on 1, 2, 4, ...\n"
    "                       --max-ranks ranks, with time per iteration and speedup\n"
    "  --max-ranks N        --machine: the most ranks to sweep to (default 1024); with\n"
    "                       --ranks P, the plan for P ranks of that machine instead\n"
    "  -h, --help           this text\n"
    "\n"
    "calibrate times, on the machine it runs on, the kernels of every layer's forward\n"
    "and backward for every block a distribution of P ranks gives it; StarPU-MPI's\n"
    "point-to-point latency and bandwidth; and starconv's task-based allreduce over\n"
    "every group size that divides the MPI size.  It adds them to the calibration file,\n"
    "so one file can serve several models.  Run it under bench/slow-net to describe a\n"
    "slower network.  Exit status: 0, 2 on bad input, 1 on other failures.\n";

struct opts {
    const char *model, *calibration, *grid, *grad_comm, *machine, *data;
    enum sc_calibrate_device device;
    int calibrate, device_set, ranks, batch, workers, json, reps, max_ranks, fc_replicate, segment_kb, segment_set;
    int quick, reps_set, accumulate, grad_bf16;
    double mem_limit;
};

static int fail(int status, const char *msg)
{
    return sc_cli_fail("starconv-plan", status, msg);
}

static const struct option plan_options[] = {
    {"model", required_argument, 0, 'm'},
    {"ranks", required_argument, 0, 'P'},
    {"batch", required_argument, 0, 'b'},
    {"accumulate", required_argument, 0, 'A'},
    {"workers", required_argument, 0, 'W'},
    {"calibration", required_argument, 0, 'c'},
    {"mem-limit", required_argument, 0, 'M'},
    {"parallel", required_argument, 0, 'G'},
    {"grad-comm", required_argument, 0, 'g'},
    {"fc-replicate", required_argument, 0, 'F'},
    {"comm-segment", required_argument, 0, 'S'},
    {"grad-dtype", required_argument, 0, 'T'},
    {"json", no_argument, 0, 'j'},
    {"reps", required_argument, 0, 'r'},
    {"quick", no_argument, 0, 'Q'},
    {"machine", required_argument, 0, 'X'},
    {"max-ranks", required_argument, 0, 'R'},
    {"data", required_argument, 0, 'D'},
    {"device", required_argument, 0, 'd'},
    {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0},
};

/* One option of starconv-plan (sc_cli_parse): 1 for --help. */
static int plan_option(int c, const char *name, const char *arg, void *ctx)
{
    struct opts *o = ctx;
    int err = 0;
    switch (c) {
    case 'm':
        o->model = arg;
        break;
    case 'P':
        err = sc_cli_int(name, arg, 1, 1024, &o->ranks);
        break;
    case 'b':
        err = sc_cli_int(name, arg, 1, 1 << 20, &o->batch);
        break;
    case 'A':
        err = sc_cli_accumulate(name, arg, &o->accumulate);
        break;
    case 'W':
        err = sc_cli_int(name, arg, 1, 1024, &o->workers);
        break;
    case 'r':
        err = sc_cli_int(name, arg, 1, 1000, &o->reps);
        o->reps_set = 1;
        break;
    case 'Q':
        o->quick = 1;
        break;
    case 'c':
        o->calibration = arg;
        break;
    case 'D':
        o->data = arg;
        break;
    case 'd':
        if (!strcmp(arg, "cpu") || !strcmp(arg, "cuda"))
            o->device = arg[1] == 'u' ? SC_CALIBRATE_CUDA : SC_CALIBRATE_CPU;
        else
            err = sc_error(SC_ERR_ARG, "--device: '%s' is neither cpu nor cuda", arg);
        o->device_set = 1;
        break;
    case 'X':
        o->machine = arg;
        break;
    case 'R':
        err = sc_cli_int(name, arg, 1, 1024, &o->max_ranks);
        break;
    case 'G':
        o->grid = arg;
        break;
    case 'g':
        o->grad_comm = arg;
        break;
    case 'F':
        err = sc_cli_int(name, arg, 0, 1 << 20, &o->fc_replicate);
        break;
    case 'S':
        err = sc_cli_segment(name, arg, &o->segment_kb);
        o->segment_set = 1;
        break;
    case 'T':
        err = sc_cli_grad_dtype(name, arg, &o->grad_bf16);
        break;
    case 'j':
        o->json = 1;
        break;
    case 'M':
        err = sc_cli_positive(name, arg, "bytes", &o->mem_limit);
        break;
    case 'h':
        return 1;
    default:
        err = sc_error(SC_ERR_ARG, "unknown option '--%s' (see --help)", name);
        break;
    }
    return err;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
    if (argc > 1 && !strcmp(argv[1], "calibrate")) {
        o->calibrate = 1;
        argv[1] = argv[0];
        argv++, argc--;
    }
    int err = sc_cli_parse(argc, argv, plan_options, plan_option, o);
    if (err > 0)
        return err;
    if (!err && !o->model)
        err = sc_error(SC_ERR_ARG, "--model FILE is required (see --help)");
    if (!err && o->data && !o->calibrate)
        err = sc_error(SC_ERR_ARG, "--data is an option of calibrate");
    if (!err && o->device_set && !o->calibrate)
        err = sc_error(SC_ERR_ARG, "--device is an option of calibrate");
    if (!err && o->device == SC_CALIBRATE_CUDA && o->data)
        err = sc_error(SC_ERR_ARG, "--data with --device cuda: data loading runs on CPU workers; time it with "
                                   "--device cpu");
    if (!err && o->machine && o->calibrate)
        err = sc_error(SC_ERR_ARG, "calibrate measures this machine; --machine describes another");
    if (!err && o->fc_replicate >= 0 && (o->calibrate || o->machine))
        err = sc_error(SC_ERR_ARG, "--fc-replicate is an option of a plan on this machine (not of calibrate or "
                                   "--machine)");
    if (!err && o->segment_set && (o->calibrate || o->machine))
        err = sc_error(SC_ERR_ARG, "--comm-segment is an option of a plan on this machine (not of calibrate, which "
                                   "times the ring as training sizes it, or --machine)");
    if (!err && o->grad_bf16 && (o->calibrate || o->machine))
        err = sc_error(SC_ERR_ARG, "--grad-dtype bf16 is an option of a plan on this machine (not of calibrate, "
                                   "which times the ring in fp32, or --machine)");
    if (!err && o->accumulate > 1 && (o->calibrate || o->machine))
        err = sc_error(SC_ERR_ARG, "--accumulate is an option of a plan on this machine (not of calibrate, whose "
                                   "kernels are those of one batch, or --machine)");
    if (!err && o->quick && !o->calibrate)
        err = sc_error(SC_ERR_ARG, "--quick is an option of calibrate");
    if (!err && o->quick && !o->reps_set)
        o->reps = 3;
    if (!err && !o->calibrate && !o->machine && !o->ranks)
        err = sc_error(SC_ERR_ARG, "--ranks P is required (see --help)");
    return err;
}

static int plan(const struct opts *o, const struct sc_net *net)
{
    struct sc_calib *c = NULL;
    struct sc_plan *p = NULL;
    struct sc_plan_opts po = {o->ranks,      o->batch,      o->workers,         o->mem_limit,
                              o->grid,       o->grad_comm,  SC_PLAN_MIX_MARGIN, o->fc_replicate,
                              o->segment_kb, o->accumulate, o->grad_bf16};
    int err = sc_calib_load(o->calibration, &c);
    if (err == SC_ERR_IO && access(o->calibration, F_OK))
        err = sc_error(err,
                       "no calibration %s: make one with `mpirun -np %d starconv-plan calibrate --model %s "
                       "--batch %d --calibration %s`",
                       o->calibration, o->ranks, o->model, o->batch, o->calibration);
    if (!err && (err = sc_plan_make(net, c, &po, &p)) == SC_ERR_PARSE)
        err = sc_error(err,
                       "%s: %s; extend it with `mpirun -np %d starconv-plan calibrate --model %s --batch %d%s "
                       "--calibration %s`",
                       o->calibration, sc_last_error(), o->ranks, o->model, o->batch, o->workers ? " --workers N" : "",
                       o->calibration);
    /* The planner replicates as many as the model has: a larger F is a
     * mistake to name, as starconv-train does. */
    if (!err && o->ranks > 1 && o->fc_replicate > p->fc_replicate)
        err = sc_error(SC_ERR_ARG, "--fc-replicate %d: the model has %d [connected] layers with parameters",
                       o->fc_replicate, p->fc_replicate);
    if (!err) {
        if (o->json) {
            sc_plan_print_json(stdout, net, &po, p);
        } else {
            char spec[4096];
            sc_plan_parallel_spec(net, p, spec, sizeof spec);
            char micro[48] = "";
            if (o->accumulate > 1)
                snprintf(micro, sizeof micro, " x %d micro-batches an iteration", o->accumulate);
            printf("%s on %d ranks x %d workers, batch %d%s (calibration %s: %s)\n", o->model, o->ranks,
                   o->workers ? o->workers : c->workers, o->batch, micro, o->calibration, c->machine);
            sc_plan_print(stdout, net, p);
            printf("starconv-train --parallel %s --grad-comm %s", spec, p->grad_comm);
            if (p->fc_replicate)
                printf(" --fc-replicate %d", p->fc_replicate);
            if (o->segment_kb)
                printf(" --comm-segment %d", o->segment_kb);
            if (o->accumulate > 1)
                printf(" --accumulate %d", o->accumulate);
            if (o->grad_bf16)
                printf(" --grad-dtype bf16");
            printf("\n");
        }
    }
    sc_plan_free(p);
    sc_calib_free(c);
    return err;
}

/* --machine: the sweep over rank counts on the machine the file describes. */
static int machine_sweep(const struct opts *o, const struct sc_net *net)
{
    struct sc_machine *m = NULL;
    int err = sc_machine_load(o->machine, &m);
    if (!err && o->ranks) /* one rank count: the plan, as without --machine */
        err =
            sc_machine_plan(stdout, m, net, o->model, o->ranks, o->batch, o->grid, o->grad_comm, o->mem_limit, o->json);
    else if (!err)
        err = sc_machine_sweep(stdout, m, o->machine, net, o->model, o->batch, o->max_ranks, o->json);
    sc_machine_free(m);
    return err;
}

/* Every rank gets the first error of any rank (before StarPU runs). */
static int agree(int err)
{
    int all;
    MPI_Allreduce(&err, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (all && !err)
        return sc_error(all, "another rank failed");
    return all;
}

/* MPI_Barrier spins in Open MPI, and a spinning rank takes a core from
 * the one timing kernels: wait by polling and sleeping instead. */
static void quiet_barrier(MPI_Comm comm)
{
    MPI_Request req;
    int done = 0;
    MPI_Ibarrier(comm, &req);
    while (!done) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (!done)
            usleep(2000);
    }
}

/* The data set --data names: a synthetic one, an HDF5 file or a
 * directory of Fashion-MNIST's files. */
static int open_data(const char *spec, struct sc_dataset *ds)
{
    int err = sc_dataset_synthetic(spec, 0, ds);
    if (err == 1)
        err = sc_dataset_hdf5(spec, 0, ds);
    if (err == 1)
        err = sc_dataset_load_idx(spec, "train", ds);
    return err ? sc_error(err, "--data: %s", sc_last_error()) : 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The calibration to extend (what it holds already is kept), or a new one. */
static int open_calibration(const struct opts *o, struct sc_calib **c)
{
    int err = !access(o->calibration, F_OK) ? sc_calib_load(o->calibration, c) : sc_calib_new(c);
    if (err == SC_ERR_PARSE)
        err = sc_error(err, "%s (delete it or calibrate into another --calibration FILE)", sc_last_error());
    if (!err && (*c)->nkernels && (*c)->workers != o->workers)
        err = sc_error(SC_ERR_ARG, "%s holds times for %d workers per rank, not %d: calibrate into another file",
                       o->calibration, (*c)->workers, o->workers);
    return err;
}

/* calibrate --device cuda: the kernels on this process's GPU, no MPI and
 * no communication (a machine description gives the links). */
static int calibrate_cuda(struct opts *o, const struct sc_net *net)
{
    const char *size = getenv("OMPI_COMM_WORLD_SIZE");
    if (size && atoi(size) > 1)
        return sc_error(SC_ERR_ARG, "--device cuda times one device from one process: run it without mpirun");
    if (!o->ranks)
        o->ranks = 1;
    o->workers = 1;
    struct sc_calib *c = NULL;
    char was[sizeof c->machine];
    int err = open_calibration(o, &c);
    if (!err) {
        snprintf(was, sizeof was, "%s", c->machine);
        err = sc_calibrate_device_cuda(c);
    }
    if (!err && c->nkernels && strcmp(was, c->machine))
        err = sc_error(SC_ERR_ARG, "%s holds kernel times of '%s', not of '%s': calibrate into another file",
                       o->calibration, was, c->machine);
    if (!err) {
        struct sc_plan_opts po = {o->ranks, o->batch, 1, 0, NULL, NULL, 0, 0, 0, 1, 0};
        c->workers = 1;
        double t0 = now_s();
        err = sc_calibrate_compute(c, net, &po, o->reps, SC_CALIBRATE_CUDA, stderr);
        fprintf(stderr, "calibrate: %d kernels, %.1f s\n", c->nkernels, now_s() - t0);
    }
    if (!err)
        err = sc_calib_save(c, o->calibration);
    if (!err)
        fprintf(stderr, "calibrate: wrote %s (%s)\n", o->calibration, c->machine);
    sc_calib_free(c);
    sc_kernels_shutdown();
    return err;
}

static int calibrate(struct opts *o, const struct sc_net *net, int *argc, char ***argv)
{
    if (o->device == SC_CALIBRATE_CUDA)
        return calibrate_cuda(o, net);
    int err, size = 1, rank = 0;
    if ((err = sc_runtime_mpi_init(argc, argv)))
        return err;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (!o->ranks)
        o->ranks = size;
    if (!o->workers) {
        const char *e = getenv("STARPU_NCPU");
        o->workers = e && atoi(e) > 0 ? atoi(e) : 1;
    }
    struct sc_calib *c = NULL;
    err = open_calibration(o, &c);
    /* The data set first: a bad --data costs no measurement. */
    struct sc_dataset ds = {0};
    if (!err && rank == 0 && o->data)
        err = open_data(o->data, &ds);
    err = agree(err);
    if (!err && rank == 0) {
        struct sc_plan_opts po = {o->ranks, o->batch, o->workers, 0, NULL, NULL, 0, 0, 0, 1, 0};
        c->workers = o->workers;
        double t0 = MPI_Wtime();
        err = sc_calibrate_machine(c);
        if (!err)
            err = sc_calibrate_compute(c, net, &po, o->reps, SC_CALIBRATE_CPU, stderr);
        if (!err && o->data)
            err = sc_calibrate_load(c, net, &ds, o->reps, stderr);
        fprintf(stderr, "calibrate: %d kernels, %.1f s\n", c->nkernels, MPI_Wtime() - t0);
    }
    quiet_barrier(MPI_COMM_WORLD);
    err = agree(err);
    struct sc_runtime rt;
    if (!err && size > 1 && !(err = sc_runtime_init(argc, argv, NULL, &rt))) {
        err = sc_calibrate_comm(c, &rt, o->reps, rank == 0 ? stderr : NULL);
        err = sc_runtime_agree(&rt, err);
        if (!err && rank == 0)
            err = sc_calib_save(c, o->calibration);
        err = sc_runtime_agree(&rt, err);
        sc_runtime_shutdown(&rt);
    } else {
        if (!err && rank == 0)
            err = sc_calib_save(c, o->calibration);
        MPI_Finalize();
    }
    if (!err && rank == 0)
        fprintf(stderr, "calibrate: wrote %s (%s)\n", o->calibration, c->machine);
    sc_dataset_free(&ds);
    sc_calib_free(c);
    sc_kernels_shutdown();
    return err;
}

int main(int argc, char **argv)
{
    struct opts o = {.batch = 64, .reps = 7, .max_ranks = 1024, .fc_replicate = -1, .accumulate = 1};
    int err = parse_args(argc, argv, &o);
    if (err > 0) {
        if (sc_cli_rank0())
            fputs(usage, stdout);
        return 0;
    }
    if (err)
        return fail(SC_EXIT_BAD_INPUT, sc_last_error());
    if (!o.calibration)
        o.calibration = getenv("STARCONV_CALIBRATION") ? getenv("STARCONV_CALIBRATION") : DEFAULT_CALIBRATION;
    struct sc_net *net = NULL;
    if ((err = sc_net_parse(o.model, &net)))
        return fail(SC_EXIT_BAD_INPUT, sc_last_error());
    err = o.calibrate ? calibrate(&o, net, &argc, &argv) : o.machine ? machine_sweep(&o, net) : plan(&o, net);
    sc_net_destroy(net);
    if (err)
        return fail(err == SC_ERR_NOMEM || err == SC_ERR_RUNTIME ? 1 : SC_EXIT_BAD_INPUT, sc_last_error());
    return 0;
}
