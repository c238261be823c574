/* starconv-train: train a .cfg model on Fashion-MNIST under mpirun. */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/data/hdf5.h"
#include "src/programs/cli.h"
#include "src/train/preempt.h"
#include "src/train/train.h"

static const char usage[] =
    "Usage: mpirun -np P starconv-train [options]\n"
    "Train a convolutional network described by a .cfg file with data parallelism over\n"
    "the MPI ranks and the StarPU workers of each rank: by default one CPU worker per core\n"
    "of the rank's cores, bound to it (STARPU_NCPU sets the count, SC_CPU_BIND=auto|launcher|none\n"
    "the binding; docs/running.md).\n"
    "\n"
    "  --model FILE         network (.cfg); default models/lenet.cfg\n"
    "  --data DIR           IDX files (train-*, t10k-*); default /usr/share/datasets/fashion-mnist\n"
    "  --data synthetic:CxHxW:K  SYNTHETIC images of K classes generated on the fly (class-\n"
    "                       dependent smooth patterns plus noise; 10000 training, 500 test)\n"
    "  --data synthetic-mesh:SIZE  SYNTHETIC 18 x SIZE x SIZE smooth random fields with a\n"
    "                       per-pixel label that depends on each pixel's neighbourhood\n"
    "                       (like the mesh-tangling data of Dryden et al.; 1000 + 16)\n"
    "                       (Debian package dataset-fashion-mnist)\n"
    "  --data hdf5:FILE[:KEY=VALUE,...]  an HDF5 file, each rank reading only its tiles'\n"
    "                       blocks as training goes: images N x C x H x W (uint8, float16,\n"
    "                       float32), labels N or N x H x W at the loss's resolution; keys\n"
    "                       images=, labels=, classes=, split=K, test=FILE2 (docs/data.md)\n"
    "  --epochs N           passes over the training set; default 1\n"
    "  --iters N            stop after N iterations in all (0: initialize, save, stop)\n"
    "  --batch N            global batch, split evenly over the ranks; default 64\n"
    "  --accumulate K       gradient accumulation: an iteration is K batches of --batch\n"
    "                       (K x N samples, consecutive in the data order), their gradients\n"
    "                       summed on each rank and reduced once, after the K-th; the loss,\n"
    "                       the update and --nonfinite those of one batch of K x N (batch\n"
    "                       normalization's statistics stay per batch of N); --iters,\n"
    "                       --save-every, --log-every, --metrics, --lr-schedule and\n"
    "                       --trace-iters count these iterations; K in [1, 4096], default 1\n"
    "  --lr X               learning rate; default 0.05\n"
    "  --optimizer O        sgd (default: SGD with momentum, as torch.optim.SGD), adam or adamw\n"
    "                       (torch.optim.Adam, AdamW: bias-corrected moments in fp32, kept only\n"
    "                       on the rank that updates each chunk of the parameters)\n"
    "  --momentum X         SGD momentum; default 0.9 (not with adam or adamw)\n"
    "  --betas B1,B2        Adam's and AdamW's moment decays, each in [0, 1); default 0.9,0.999\n"
    "  --eps E              Adam's and AdamW's denominator term, >= 0; default 1e-8\n"
    "  --weight-decay X     weight decay: L2 added to the gradient (sgd, adam) or decoupled,\n"
    "                       w *= 1 - lr X (adamw); default 0, 0.01 for adamw\n"
    "  --lr-schedule S      constant (default), step:M1,M2,...[:GAMMA] (the rate times GAMMA,\n"
    "                       default 0.1, at each milestone iteration) or cosine[:MIN_LR] (down\n"
    "                       to MIN_LR, default 0, at the run's last iteration), as\n"
    "                       torch.optim.lr_scheduler's MultiStepLR and CosineAnnealingLR\n"
    "  --warmup W[:F]       first a linear warm-up over W iterations from F times the rate\n"
    "                       (default 1/3, as LinearLR); the schedule counts from its end\n"
    "  --seed N             initialization and shuffling seed; default 42\n"
    "  --shuffle on|off     off: global batch i is samples [i*B, (i+1)*B) in file order;\n"
    "                       on (default): a seeded permutation per epoch\n"
    "  --test on|off        measure test accuracy after each epoch (default on)\n"
    "  --log-every N        progress line every N iterations; default 50\n"
    "  --save FILE          write a checkpoint (safetensors, PyTorch state_dict names) at the end;\n"
    "                       written atomically: a failed save leaves the previous FILE intact\n"
    "  --save-every N       also write it every N iterations (needs --save)\n"
    "  --load FILE          start from a checkpoint's weights and optimizer state (saved on any\n"
    "                       number of ranks), with the data order of a fresh run\n"
    "  --resume FILE        go on from a checkpoint: weights, optimizer state (of the same\n"
    "                       --optimizer), iteration and data order; --epochs and --iters count\n"
    "                       the checkpoint's iterations; give the same --batch, --accumulate,\n"
    "                       --seed, --shuffle and --data (any ranks)\n"
    "  --checkpoint-signal  SIGTERM or SIGUSR1 (to mpirun, which forwards SIGUSR1, or to any\n"
    "                       rank) ends the current iteration on every rank, writes the --save\n"
    "                       checkpoint and stops with exit status 75; a second signal stops\n"
    "                       at once (needs --save)\n"
    "  --nonfinite stop|skip  a NaN or Inf in a gradient: stop (default; exit status 3, naming\n"
    "                       the iteration and the first layer where it appeared; the last\n"
    "                       checkpoint stays) or skip such batches whole, on every rank\n"
    "                       (the updates then wait for the whole batch's gradients)\n"
    "  --peer-timeout S     a rank not heard from for S seconds (killed, stopped, node lost)\n"
    "                       stops the job with a message naming it; default 20\n"
    "                       (or SC_PEER_TIMEOUT), 0: off\n"
    "  --stall-timeout S    training that makes no progress for S seconds (a message that\n"
    "                       never comes, a collective a rank never joins, a kernel that\n"
    "                       never returns) stops the job with status 4, each rank saying\n"
    "                       what it waits for and rank 0 which rank did not get there;\n"
    "                       default 20 times the slowest iteration, at least 60; 0: off\n"
    "  --precision fp32|bf16  the arithmetic of the convolutions and fully connected layers on\n"
    "                       CPU workers: fp32 (default), or bf16 inputs (x, weights, dy\n"
    "                       rounded to nearest even) with fp32 accumulation and fp32 outputs,\n"
    "                       through oneDNN's bf16 kernels; activations, exchanges, weights,\n"
    "                       SGD, batch normalization, pooling and the loss stay fp32.\n"
    "                       Refused (status 2) on a CPU without AVX512-BF16 or AMX, and with\n"
    "                       CUDA workers\n"
    "  --denormals keep|flush  denormal floats in the CPU workers' arithmetic: kept (default,\n"
    "                       as PyTorch) or flushed to zero (FTZ and DAZ): faster where values\n"
    "                       become tiny on CPUs that compute denormals slowly\n"
    "  --metrics FILE       JSON lines: iteration, epoch, loss, images/s, test accuracy\n"
    "  --sched NAME         StarPU scheduling policy (lws, eager, prio, dmda, ...; --list-sched)\n"
    "  --list-sched         print the valid policy names and stop\n"
    "\n"
    "How gradients travel (all give the same weights):\n"
    "  --grad-comm POLICY   layer (default): one collective per layer, right after its gradient;\n"
    "                       chunks:K: one over the last K layers with parameters as soon as\n"
    "                       they exist, one over the rest after backprop (Lee et al.);\n"
    "                       bucket:MB: buckets of at least MB megabytes in backward order\n"
    "                       (PyTorch DDP uses 25); end: one collective after backprop\n"
    "  --fc-replicate F     the first F [connected] layers gather their inputs and errors\n"
    "                       from all ranks and compute the whole weight gradient on each,\n"
    "                       instead of reducing it (Lee et al.); default 0 (with\n"
    "                       --parallel auto: the planner's choice); at most the model's\n"
    "                       number of [connected] layers\n"
    "  --priorities on|off  task priorities (default on): each parameter gradient as soon as\n"
    "                       its inputs exist, then the backward chain, then the collectives'\n"
    "                       tasks in the order the next forward pass needs them\n"
    "  --input-slots auto|1|2  input buffers in rotation: 2 loads the next batch while one\n"
    "                       computes, 1 loads it after; auto (default): 2 where the second\n"
    "                       costs at most 2% of the rank's memory\n"
    "  --layouts blocked|nchw  activations between layers on whole samples in the\n"
    "                       channel-blocked layout oneDNN's convolutions prefer (default),\n"
    "                       NCHW where a layer or an exchange needs it; or NCHW everywhere\n"
    "  --comm-window N      a large collective keeps at most N segments of each\n"
    "                       step in flight, so that later, more urgent ones can pass it on\n"
    "                       the network; 0: all at once; default 2\n"
    "  --comm-segment KB|auto  segment size of the large collectives; default auto: sized to\n"
    "                       the link measured at start (512 KiB on a network, where small\n"
    "                       segments let urgent collectives pass sooner; 2-4 MiB on shared\n"
    "                       memory, where each StarPU-MPI message's 0.1 ms would dominate)\n"
    "  --comm-direct KB     gradients of at most KB KiB (default 64; 0: none) are reduced\n"
    "                       by one MPI nonblocking collective, posted as soon as the\n"
    "                       gradient is ready, rather than by the ring of StarPU-MPI\n"
    "                       messages (0.014 against 0.07 ms at 4 KiB here)\n"
    "  --collectives tasks|nccl  the gradient sums of the buckets: StarPU-MPI transfers and\n"
    "                       tasks (default), or one NCCL allreduce per bucket in a CUDA task\n"
    "                       (needs a CUDA build with NCCL, a GPU per rank and sample\n"
    "                       parallelism only, even on one rank)\n"
    "  --grad-dtype fp32|bf16  how the gradient reductions' partial sums travel: fp32\n"
    "                       (default), or bf16 (rounded to nearest even when sent, added in\n"
    "                       fp32 when received: half the bytes of the reduce-scatter).\n"
    "                       Sums, weights, momentum and the update stay fp32, and so do the\n"
    "                       weights sent back to the ranks and the gradients of at most\n"
    "                       --comm-direct KiB; not with --collectives nccl\n"
    "\n"
    "How layers are split (Dryden et al.):\n"
    "  --parallel GRID      the rank grid of every layer without a parallel= key in the cfg:\n"
    "                       letters n (samples), h, w (rows, columns of every image),\n"
    "                       c (channels) and f (filters) with extents whose product is\n"
    "                       the rank count: n4, h2w2, n2h2, c2, f4, c2f2, n2c2, h2c2, ...\n"
    "                       Default: n<ranks> (sample parallelism).  Spatially split\n"
    "                       convolutions and poolings exchange halos as tasks; under c a\n"
    "                       convolution splits its input channels and reduce-scatters\n"
    "                       its partial sums, under f its filters (x is allgathered, dx\n"
    "                       reduce-scattered), both (c2f2) a block of the weights each;\n"
    "                       other layers split channels under either; fully connected\n"
    "                       and softmax layers stay sample parallel (and the first layer\n"
    "                       takes f for c), and the data is redistributed between\n"
    "                       layers split differently.  A per-layer list, as\n"
    "                       starconv-plan prints it: conv1=f2,conv2=c2 (layers not\n"
    "                       named: n<ranks>).  auto: the planner's choice for this\n"
    "                       model, rank count, workers and batch, from --calibration\n"
    "                       (also its --grad-comm, unless given); rank 0 prints it\n"
    "  --calibration FILE   what --parallel auto plans from (default\n"
    "                       starconv-calibration.txt or $STARCONV_CALIBRATION; made by\n"
    "                       mpirun -np P starconv-plan calibrate --model M --batch B)\n"
    "  --report-memory      print each rank's bytes for activations, parameters and\n"
    "                       workspaces (all allocated at setup: starconv's peak)\n"
    "  --report-comm        at the end, print the bytes each rank sent for the gradient\n"
    "                       reductions, per iteration\n"
    "  --mem-limit BYTES    refuse to run when a rank would need more (e.g. 2e9)\n"
    "\n"
    "Seeing the overlap:\n"
    "  --trace FILE         Chrome trace-event JSON of the traced iterations (Perfetto,\n"
    "                       chrome://tracing; starconv-report FILE --svg OUT.svg draws it)\n"
    "  --trace-iters A:B    the traced iterations, from 1; default the 10 up to iteration 15\n"
    "  --report             per rank: compute, communication, exposed communication,\n"
    "                       overlap ratio, idle time and images/s over the traced iterations;\n"
    "                       then the tasks of an iteration by kind, and its FLOP rate; with\n"
    "                       --data hdf5:, the bytes each rank read and its time in reads\n"
    "  --peak GFLOPS        with --report: the fraction of this fp32 peak of all the cores\n"
    "                       the job runs on (bench/starconv-bench peak measures it)\n"
    "  -h, --help           this text\n"
    "\n"
    "Bad input (options, cfg, data, checkpoint) exits with status 2 and a one-line error;\n"
    "a diverged training (NaN or Inf) with status 3; a rank that stops responding, or a\n"
    "job that stalls (--stall-timeout), ends the job with status 4 (mpirun's own status\n"
    "when it notices a dead rank first); a kernel that fails (a oneDNN, cuDNN, cuBLAS\n"
    "or CUDA error, memory) ends it at the next progress line, checkpoint or evaluation\n"
    "with status 1, naming the kernel, its rank and worker and the cause, and writes no\n"
    "checkpoint after it; a checkpoint or trace that cannot be written (full disk) ends\n"
    "it with status 1, the previous file intact; a signal under --checkpoint-signal ends\n"
    "it with status 75 once its checkpoint is written.\n";

static int fail(int status, const char *msg)
{
    return sc_cli_fail("starconv-train", status, msg);
}

static const struct option train_options[] = {
    {"model", required_argument, 0, 'm'},
    {"data", required_argument, 0, 'd'},
    {"epochs", required_argument, 0, 'e'},
    {"iters", required_argument, 0, 'i'},
    {"batch", required_argument, 0, 'b'},
    {"accumulate", required_argument, 0, 1050},
    {"lr", required_argument, 0, 'l'},
    {"momentum", required_argument, 0, 'M'},
    {"weight-decay", required_argument, 0, 'w'},
    {"optimizer", required_argument, 0, 1060},
    {"betas", required_argument, 0, 1061},
    {"eps", required_argument, 0, 1062},
    {"lr-schedule", required_argument, 0, 1020},
    {"warmup", required_argument, 0, 1021},
    {"seed", required_argument, 0, 's'},
    {"shuffle", required_argument, 0, 'S'},
    {"test", required_argument, 0, 't'},
    {"log-every", required_argument, 0, 'L'},
    {"save", required_argument, 0, 'o'},
    {"load", required_argument, 0, 'r'},
    {"metrics", required_argument, 0, 'j'},
    {"sched", required_argument, 0, 'p'},
    {"grad-comm", required_argument, 0, 'g'},
    {"fc-replicate", required_argument, 0, 'F'},
    {"priorities", required_argument, 0, 'P'},
    {"trace", required_argument, 0, 'T'},
    {"trace-iters", required_argument, 0, 'I'},
    {"report", no_argument, 0, 'R'},
    {"list-sched", no_argument, 0, 'Q'},
    {"parallel", required_argument, 0, 'G'},
    {"report-memory", no_argument, 0, 'Y'},
    {"report-comm", no_argument, 0, 1001},
    {"mem-limit", required_argument, 0, 'Z'},
    {"save-every", required_argument, 0, 'E'},
    {"resume", required_argument, 0, 'U'},
    {"nonfinite", required_argument, 0, 'N'},
    {"peer-timeout", required_argument, 0, 'W'},
    {"checkpoint-signal", no_argument, 0, 1040},
    {"stall-timeout", required_argument, 0, 1041},
    {"denormals", required_argument, 0, 1004},
    {"precision", required_argument, 0, 1007},
    {"peak", required_argument, 0, 1005},
    {"collectives", required_argument, 0, 'C'},
    {"layouts", required_argument, 0, 1006},
    {"comm-window", required_argument, 0, 'K'},
    {"comm-segment", required_argument, 0, 'J'},
    {"comm-direct", required_argument, 0, 1002},
    {"grad-dtype", required_argument, 0, 1042},
    {"calibration", required_argument, 0, 1003},
    {"input-slots", required_argument, 0, 1030},
    {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0},
};

/* One option of starconv-train (sc_cli_parse): 1 for --help, 2 for
 * --list-sched. */
static int train_option(int c, const char *name, const char *arg, void *ctx)
{
    struct sc_train_opts *o = ctx;
    long v;
    float v_mem = 0, v_timeout = 0;
    int err = 0;
    switch (c) {
    case 'm':
        o->model = arg;
        break;
    case 'd':
        o->data = arg;
        break;
    case 'o':
        o->save = arg;
        break;
    case 'r':
    case 'U':
        if (o->load)
            err = sc_error(SC_ERR_ARG, "--%s: --load or --resume, once", name);
        o->load = arg;
        o->resume = c == 'U';
        break;
    case 'N':
        if (!strcmp(arg, "stop") || !strcmp(arg, "skip"))
            o->skip_nonfinite = o->comm.gate_updates = !strcmp(arg, "skip");
        else
            err = sc_error(SC_ERR_ARG, "--nonfinite: '%s' is neither stop nor skip", arg);
        break;
    case 'C':
        if (!strcmp(arg, "tasks") || !strcmp(arg, "nccl"))
            o->comm.nccl = !strcmp(arg, "nccl");
        else
            err = sc_error(SC_ERR_ARG, "--collectives: '%s' is neither tasks nor nccl", arg);
        break;
    case 1006:
        if (!strcmp(arg, "blocked") || !strcmp(arg, "nchw"))
            o->comm.plain_layouts = !strcmp(arg, "nchw");
        else
            err = sc_error(SC_ERR_ARG, "--layouts: '%s' is neither blocked nor nchw", arg);
        break;
    case 'W':
        err = sc_cli_float(name, arg, 0, &v_timeout), o->peer_timeout = v_timeout;
        break;
    case 1040:
        o->checkpoint_signal = 1;
        break;
    case 1041:
        err = sc_cli_float(name, arg, 0, &v_timeout), o->stall_timeout = v_timeout;
        break;
    case 1005:
        err = sc_cli_positive(name, arg, "GFLOP/s", &o->peak_gflops);
        break;
    case 1004:
        if (!strcmp(arg, "keep") || !strcmp(arg, "flush"))
            o->denormals = !strcmp(arg, "flush") ? SC_DENORMALS_FLUSH : SC_DENORMALS_KEEP;
        else
            err = sc_error(SC_ERR_ARG, "--denormals: '%s' is neither keep nor flush", arg);
        break;
    case 1007:
        if (!strcmp(arg, "fp32") || !strcmp(arg, "bf16"))
            o->comm.precision = !strcmp(arg, "bf16") ? SC_PRECISION_BF16 : SC_PRECISION_FP32;
        else
            err = sc_error(SC_ERR_ARG, "--precision: '%s' is neither fp32 nor bf16", arg);
        break;
    case 'E':
        err = sc_cli_long(name, arg, 1, LONG_MAX / 2, &o->save_every);
        break;
    case 'j':
        o->metrics = arg;
        break;
    case 'p':
        o->sched = arg;
        if (!sc_runtime_policy_valid(arg))
            err =
                sc_error(SC_ERR_ARG, "--sched: unknown scheduling policy '%s' (valid: %s)", arg, sc_runtime_policies());
        break;
    case 'g':
        err = sc_comm_opts_parse_grad(arg, &o->comm), o->grad_comm_given = 1;
        break;
    case 1003:
        o->calibration = arg;
        break;
    case 'F':
        err = sc_cli_long(name, arg, 0, 1 << 20, &v), o->comm.fc_replicate = (int)v;
        break;
    case 'P':
        err = sc_cli_onoff(name, arg, &o->comm.priorities);
        break;
    case 'K':
        err = sc_cli_long(name, arg, 0, 1 << 20, &v), o->comm.window = (int)v;
        break;
    case 'J':
        err = sc_cli_segment(name, arg, &o->comm.segment_kb);
        break;
    case 1002:
        err = sc_cli_long(name, arg, 0, 1 << 20, &v), o->comm.direct_kb = v ? (int)v : -1;
        break;
    case 1042:
        err = sc_cli_grad_dtype(name, arg, &o->comm.grad_bf16);
        break;
    case 1030:
        if (!strcmp(arg, "auto"))
            o->comm.input_slots = 0;
        else if ((err = sc_cli_long(name, arg, 1, 2, &v)))
            err = sc_error(SC_ERR_ARG, "--%s: '%s' is neither auto, 1 nor 2", name, arg);
        else
            o->comm.input_slots = (int)v;
        break;
    case 'T':
        o->trace = arg;
        break;
    case 'G':
        o->comm.parallel = arg;
        break;
    case 'Y':
        o->report_memory = 1;
        break;
    case 1001:
        o->report_comm = 1;
        break;
    case 'Z':
        err = sc_cli_float(name, arg, 1, &v_mem), o->mem_limit = v_mem;
        break;
    case 'I':
        err = sc_cli_range(name, arg, &o->trace_first, &o->trace_last);
        break;
    case 'R':
        o->report = 1;
        break;
    case 'Q':
        return 2;
    case 'e':
        err = sc_cli_long(name, arg, 1, 1000000, &v), o->epochs = (int)v;
        break;
    case 'i':
        err = sc_cli_long(name, arg, 0, LONG_MAX / 2, &v), o->iters = v;
        break;
    case 'b':
        err = sc_cli_long(name, arg, 1, 1 << 20, &v), o->batch = (int)v;
        break;
    case 1050:
        err = sc_cli_accumulate(name, arg, &o->comm.accumulate);
        break;
    case 's':
        err = sc_cli_long(name, arg, 0, LONG_MAX, &v), o->seed = (uint64_t)v;
        break;
    case 'L':
        err = sc_cli_long(name, arg, 1, 1 << 30, &v), o->log_every = (int)v;
        break;
    case 'l':
        err = sc_cli_float(name, arg, 0, &o->lr);
        break;
    case 'M':
        err = sc_cli_float(name, arg, 0, &o->momentum);
        o->momentum_given = 1;
        break;
    case 'w':
        err = sc_cli_float(name, arg, 0, &o->weight_decay);
        o->weight_decay_given = 1;
        break;
    case 1060:
        err = sc_cli_optimizer(name, arg, &o->comm.optimizer);
        break;
    case 1061:
        err = sc_cli_betas(name, arg, &o->beta1, &o->beta2);
        o->adam_given = 1;
        break;
    case 1062:
        err = sc_cli_eps(name, arg, &o->eps);
        o->adam_given = 1;
        break;
    case 1020:
        err = sc_lr_schedule_parse(arg, &o->lr_schedule);
        break;
    case 1021:
        err = sc_lr_warmup_parse(arg, &o->lr_schedule);
        break;
    case 'S':
        err = sc_cli_onoff(name, arg, &o->shuffle);
        break;
    case 't':
        err = sc_cli_onoff(name, arg, &o->test);
        break;
    case 'h':
        return 1;
    default:
        err = sc_error(SC_ERR_ARG, "unknown option '--%s' (see --help)", name);
        break;
    }
    return err;
}

static int parse_args(int argc, char **argv, struct sc_train_opts *o)
{
    int err = sc_cli_parse(argc, argv, train_options, train_option, o);
    if (err > 0)
        return err;
    if (!err && o->save_every && !o->save)
        err = sc_error(SC_ERR_ARG, "--save-every needs --save FILE (where to write the checkpoints)");
    if (!err && o->checkpoint_signal && !o->save)
        err = sc_error(SC_ERR_ARG, "--checkpoint-signal needs --save FILE (where to write the checkpoint)");
    if (!err && o->comm.grad_bf16 && o->comm.nccl)
        err = sc_error(SC_ERR_ARG, "--grad-dtype bf16: not with --collectives nccl (its allreduce would sum in "
                                   "bf16); use --collectives tasks or --grad-dtype fp32");
    int adam = o->comm.optimizer != SC_OPT_SGD;
    if (!err && adam && o->momentum_given)
        err = sc_error(SC_ERR_ARG, "--momentum is SGD's: --optimizer %s takes --betas B1,B2",
                       o->comm.optimizer == SC_OPT_ADAM ? "adam" : "adamw");
    if (!err && !adam && o->adam_given)
        err = sc_error(SC_ERR_ARG, "--betas and --eps are Adam's: give --optimizer adam or adamw");
    if (!err && o->comm.optimizer == SC_OPT_ADAMW && !o->weight_decay_given)
        o->weight_decay = 0.01f; /* torch.optim.AdamW's default */
    return err;
}

/* --precision bf16 where oneDNN would run bf16 convolutions on its
 * reference code or an emulation on fp32 instructions: slower than fp32,
 * so refused before anything starts. */
static int check_precision(const struct sc_train_opts *o)
{
    char impl[64];
    if (o->comm.precision != SC_PRECISION_BF16 || !sc_conv_bf16_native(impl, sizeof impl))
        return 0;
    const char *limit = getenv("ONEDNN_MAX_CPU_ISA");
    if (!limit)
        limit = getenv("DNNL_MAX_CPU_ISA");
    const char *has = !strcmp(impl, "none")      ? "no bf16 convolution"
                      : !strncmp(impl, "ref", 3) ? "only its reference bf16 convolution"
                                                 : "only its emulation of bf16 on fp32 instructions";
    return sc_error(SC_ERR_ARG,
                    "--precision bf16: this CPU has neither AVX512-BF16 nor AMX-BF16 (oneDNN has %s here%s%s%s%s)", has,
                    strcmp(impl, "none") ? ", " : "", strcmp(impl, "none") ? impl : "",
                    limit ? "; ONEDNN_MAX_CPU_ISA=" : "", limit ? limit : "");
}

/* An unwritable output is an error now, not after the training. */
static int check_writable(const char *opt, const char *path)
{
    char *copy = strdup(path);
    if (!copy)
        return sc_error(SC_ERR_NOMEM, "out of memory");
    int ok = access(dirname(copy), W_OK) == 0;
    free(copy);
    return ok ? 0 : sc_error(SC_ERR_IO, "--%s %s: the directory is not writable", opt, path);
}

/* The traced iterations must exist; the default range shrinks to fit. */
static int check_trace_range(struct sc_train_opts *o, int nsamples)
{
    long total = (long)o->epochs * (nsamples / ((long)o->batch * o->comm.accumulate));
    if (o->iters >= 0 && o->iters < total)
        total = o->iters;
    if (!o->trace && !o->report)
        return 0;
    if (o->trace_first > 0) {
        if (o->trace_last > total)
            return sc_error(SC_ERR_ARG, "--trace-iters %ld:%ld: the run has %ld iterations", o->trace_first,
                            o->trace_last, total);
        return 0;
    }
    if (total < 1)
        return sc_error(SC_ERR_ARG, "--trace/--report: the run has no iterations to trace");
    o->trace_last = total < 15 ? total : 15;
    o->trace_first = o->trace_last > 10 ? o->trace_last - 9 : 1;
    return 0;
}

/* --report-memory and --mem-limit: every rank's share, on rank 0. */
static int check_memory(const struct sc_train_opts *o, const struct sc_runtime *rt, const struct sc_net *net)
{
    struct sc_mem_report m;
    sc_net_memory(net, &m);
    double mine[3] = {(double)m.activations, (double)m.parameters, (double)m.workspaces};
    double *all = malloc(sizeof(double) * 4 * rt->size), state = (double)m.optimizer_state;
    if (!all)
        return sc_error(SC_ERR_NOMEM, "out of memory");
    MPI_Allgather(mine, 3, MPI_DOUBLE, all, 3, MPI_DOUBLE, rt->ctl);
    double *states = all + 3 * rt->size;
    MPI_Allgather(&state, 1, MPI_DOUBLE, states, 1, MPI_DOUBLE, rt->ctl);
    int worst = 0;
    for (int r = 0; r < rt->size; r++)
        if (all[3 * r] + all[3 * r + 1] + all[3 * r + 2] > all[3 * worst] + all[3 * worst + 1] + all[3 * worst + 2])
            worst = r;
    if (o->report_memory && rt->rank == 0) {
        printf("memory per rank (bytes)\n%4s %14s %14s %14s %14s\n", "rank", "activations", "parameters", "workspaces",
               "total");
        for (int r = 0; r < rt->size; r++)
            printf("%4d %14.0f %14.0f %14.0f %14.0f\n", r, all[3 * r], all[3 * r + 1], all[3 * r + 2],
                   all[3 * r] + all[3 * r + 1] + all[3 * r + 2]);
        static const char *const names[] = {"SGD's momentum", "Adam's", "AdamW's"};
        for (int r = 0; r < rt->size; r++)
            printf("rank %d optimizer state %.0f bytes (%s, of its parameters)\n", r, states[r],
                   names[o->comm.optimizer]);
        fflush(stdout);
    }
    double total = all[3 * worst] + all[3 * worst + 1] + all[3 * worst + 2];
    int err = 0;
    if (o->mem_limit > 0 && total > o->mem_limit)
        err = sc_error(SC_ERR_ARG,
                       "rank %d needs %.0f bytes (activations %.0f, parameters %.0f, workspaces "
                       "%.0f), over --mem-limit %.0f: split the samples over more ranks (--parallel h2w2) or "
                       "use a smaller batch",
                       worst, total, all[3 * worst], all[3 * worst + 1], all[3 * worst + 2], o->mem_limit);
    free(all);
    return err;
}

static int check_data(const struct sc_net *net, const struct sc_dataset *ds, const char *dir)
{
    if (ds->c != net->input.c || ds->h != net->input.h || ds->w != net->input.w)
        return sc_error(SC_ERR_SHAPE, "%s: samples are %dx%dx%d but the model's input is %dx%dx%d", dir, ds->c, ds->h,
                        ds->w, net->input.c, net->input.h, net->input.w);
    int lh, lw, oh, ow, whole = net->layers[net->nlayers - 1].whole_sample;
    sc_data_file_label_shape(ds, &lh, &lw);
    sc_net_label_shape(net, &oh, &ow);
    if (ds->file && whole && lh)
        return sc_error(SC_ERR_SHAPE, "%s: labels are %dx%d a sample but the model's loss takes one label a sample",
                        dir, lh, lw);
    if (ds->file && !whole && !lh)
        return sc_error(SC_ERR_SHAPE, "%s: one label a sample, but the model's per-pixel loss needs N x %d x %d labels",
                        dir, oh, ow);
    if (ds->file && !whole && (lh != oh || lw != ow))
        return sc_error(SC_ERR_SHAPE, "%s: labels are %dx%d a sample but the model's per-pixel loss is %dx%d", dir, lh,
                        lw, oh, ow);
    if (!whole && !ds->file && ds->synthetic != 1 + SC_SYNTH_MESH)
        return sc_error(SC_ERR_ARG, "%s: a per-pixel [softmax] needs per-pixel labels (--data synthetic-mesh:SIZE)",
                        dir);
    if (ds->classes != net->classes)
        return sc_error(SC_ERR_SHAPE, "%s: %d classes but the model has classes=%d", dir, ds->classes, net->classes);
    return 0;
}

/* The exit status of the training's outcome (the usage's last lines). */
static int train_status(int err)
{
    if (err == SC_TRAIN_SIGNALLED)
        return SC_EXIT_CHECKPOINTED;
    if (err == SC_ERR_ARG) /* a file that cannot be written now is no bad input: 1 */
        return SC_EXIT_BAD_INPUT;
    if (err == SC_ERR_NONFINITE)
        return 3;
    return err ? 1 : 0;
}

/* --data DIR (IDX files) or hdf5:FILE: the training and held-out sets. */
static int load_files(const struct sc_train_opts *o, struct sc_dataset *train, struct sc_dataset *test)
{
    int err = sc_dataset_hdf5(o->data, 0, train);
    if (err == 1)
        return (err = sc_dataset_load_idx(o->data, "train", train)) ? err : sc_dataset_load_idx(o->data, "t10k", test);
    return err ? err : sc_dataset_hdf5(o->data, 1, test);
}

/* An HDF5 file may hold no held-out samples; --test needs some. */
static int check_held_out(const struct sc_train_opts *o, const struct sc_dataset *train, const struct sc_dataset *test)
{
    if (o->test && train->file && !test->n)
        return sc_error(SC_ERR_ARG,
                        "--data %s: no held-out samples for --test (give split=K, test=FILE2, or data sets "
                        "test_images and test_labels), or pass --test off",
                        o->data);
    return 0;
}

/* --report with a data set read from a file: what each rank read. */
static void report_reads(const struct sc_runtime *rt, const struct sc_dataset *train, const struct sc_dataset *test)
{
    struct sc_data_file_stats a, b;
    sc_data_file_stats(train, &a);
    sc_data_file_stats(test, &b);
    double mine[4] = {(double)(a.bytes + b.bytes), (double)(a.image_bytes + b.image_bytes),
                      (double)(a.image_reads + b.image_reads), a.seconds + b.seconds};
    double *all = rt->rank == 0 ? malloc(sizeof mine * rt->size) : NULL;
    if (rt->rank == 0 && !all)
        return;
    MPI_Gather(mine, 4, MPI_DOUBLE, all, 4, MPI_DOUBLE, 0, rt->ctl);
    if (rt->rank != 0)
        return;
    printf("input read from %s (a sample is %.0f bytes as stored):\n", sc_data_file_name(train), a.sample_bytes);
    printf("  rank        bytes  blocks  of a sample  seconds\n");
    for (int r = 0; r < rt->size; r++) {
        const double *v = all + 4 * r;
        printf("  %4d %12.0f %7.0f %11.1f%% %8.3f\n", r, v[0], v[2],
               v[2] > 0 && a.sample_bytes > 0 ? 100 * v[1] / v[2] / a.sample_bytes : 0.0, v[3]);
    }
    free(all);
}

int main(int argc, char **argv)
{
    /* Past a file size limit a write fails with EFBIG, which the savers
     * report, instead of killing the process in the middle of a save. */
    signal(SIGXFSZ, SIG_IGN);
    struct sc_train_opts o;
    sc_train_opts_default(&o);
    int err = parse_args(argc, argv, &o);
    if (err > 0) {
        if (sc_cli_rank0()) {
            if (err == 2)
                printf("%s\n", sc_runtime_policies());
            else
                fputs(usage, stdout);
        }
        return 0;
    }
    if (err || (err = check_precision(&o)))
        return fail(SC_EXIT_BAD_INPUT, sc_last_error());

    /* Everything that can be wrong with the input is checked before MPI
     * starts, identically on every rank, so all ranks stop together. */
    struct sc_net *net = NULL;
    struct sc_dataset train = {0}, test = {0};
    struct sc_checkpoint *ck = NULL;
    int on_disk = sc_dataset_synthetic(o.data, 0, &train); /* 1: a directory */
    if (on_disk < 0)
        return fail(SC_EXIT_BAD_INPUT, sc_last_error());
    if (!on_disk)
        sc_dataset_synthetic(o.data, 1, &test);
    if ((err = sc_net_parse(o.model, &net)) || (on_disk && (err = load_files(&o, &train, &test))) ||
        (err = check_data(net, &train, o.data)) ||
        ((test.n || !train.file) && (err = check_data(net, &test, o.data))) ||
        (err = check_held_out(&o, &train, &test)) ||
        (o.load && (err = sc_checkpoint_read(net, o.load, o.comm.optimizer, &ck))) ||
        (o.resume && (err = sc_train_check_resume(&o, &train, ck))) ||
        (o.save && (err = check_writable("save", o.save))) ||
        (o.metrics && (err = check_writable("metrics", o.metrics))) ||
        (o.trace && (err = check_writable("trace", o.trace))) || (err = check_trace_range(&o, train.n))) {
        int status = err == SC_ERR_NOMEM ? 1 : SC_EXIT_BAD_INPUT;
        fail(status, sc_last_error());
        sc_checkpoint_free(net, ck);
        sc_net_destroy(net);
        sc_dataset_free(&train);
        sc_dataset_free(&test);
        return status;
    }

    struct sc_runtime rt;
    struct sc_runtime_opts ro;
    sc_runtime_opts_default(&ro);
    ro.sched = o.sched;
    ro.peer_timeout = o.peer_timeout;
    ro.stall_timeout = o.stall_timeout;
    ro.denormals = o.denormals;
    if (o.checkpoint_signal) /* the runtime's threads never take them */
        sc_preempt_block_signals();
    if ((err = sc_runtime_init(&argc, &argv, &ro, &rt)))
        return fail(err == SC_ERR_ARG ? SC_EXIT_BAD_INPUT : 1, sc_last_error());
    if (o.checkpoint_signal && (err = sc_preempt_arm())) {
        fail(1, sc_last_error());
        sc_runtime_shutdown(&rt);
        return 1;
    }
    int status = 0;
    if ((err = sc_train_check_ranks(&o, &rt, &train, &test, net, ck)) ||
        (o.comm.parallel && !strcmp(o.comm.parallel, "auto") && (err = sc_train_plan(&o, &rt, net))) ||
        (err = sc_net_setup(net, &rt, o.batch, o.seed, &o.comm))) {
        status = err == SC_ERR_ARG || err == SC_ERR_PARSE || err == SC_ERR_IO ? SC_EXIT_BAD_INPUT : 1;
    } else {
        if (rt.rank == 0) {
            char impl[64];
            if (sc_net_conv_impl(net, o.batch / rt.size > 0 ? o.batch / rt.size : 1, o.comm.precision, impl,
                                 sizeof impl))
                snprintf(impl, sizeof impl, "none");
            SC_LOG(1,
                   "%s: %d layers, %zu parameters; %d ranks x %d CPU workers, global batch %d; %s; convolutions on "
                   "CPU: oneDNN %s%s",
                   o.model, net->nlayers, sc_net_nparams(net), rt.size, rt.ncpu, o.batch, sc_net_comm_summary(net),
                   impl, o.comm.precision == SC_PRECISION_BF16 ? " in bf16 (fp32 accumulation and outputs)" : "");
        }
        err = check_memory(&o, &rt, net);
        if (!err && ck)
            err = sc_checkpoint_apply(net, ck);
        if (!err)
            err = sc_train_run(&o, &rt, net, &train, &test);
        if (!err && o.report && train.file)
            report_reads(&rt, &train, &test);
        status = train_status(err);
        if (err > 0)
            err = 0;
    }
    if (err && rt.rank == 0)
        fprintf(stderr, "starconv-train: %s\n", sc_last_error());
    sc_checkpoint_free(net, ck);
    sc_net_destroy(net);
    free(o.parallel_auto);
    sc_runtime_shutdown(&rt);
    sc_dataset_free(&train);
    sc_dataset_free(&test);
    return status;
}
