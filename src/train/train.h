/* The training program's pieces: checkpoints and the training loop.  They
 * see the network through sc_net_* only, never StarPU's task API. */
#ifndef SC_TRAIN_H
#define SC_TRAIN_H

#include "src/net/net.h"
#include "src/train/lr_schedule.h"

/* What fixes the samples of every iteration: a run resumed from a
 * checkpoint draws the same batches only when these agree. */
struct sc_data_order {
    int64_t seed, global_batch, train_samples, shuffle;
    int64_t accumulate; /* micro-batches of global_batch per iteration (1 when not saved) */
};

/* A checkpoint read from a file and checked against a network. */
struct sc_checkpoint {
    float **w, **v; /* per layer: parameters, momentum (NULL for no parameters) */
    float **b;      /* per layer: buffers (BN's running statistics), NULL for none or
                     * when the file has none (older checkpoints: the net keeps its own) */
    int64_t iteration;
    struct sc_data_order order; /* how the iteration's samples were drawn; -1 when not saved */
};

/* Read path and check it against net's tensors (names, shapes, dtypes).
 * No runtime needed: call it before starting MPI so a bad file fails fast. */
int sc_checkpoint_read(const struct sc_net *net, const char *path, struct sc_checkpoint **out);
void sc_checkpoint_free(const struct sc_net *net, struct sc_checkpoint *ck);
/* Sync point: every rank sets the state (all ranks call it). */
int sc_checkpoint_apply(struct sc_net *net, const struct sc_checkpoint *ck);
/* Sync point, collective: rank 0 writes the file atomically (temporary
 * file, fsync, rename: a failure leaves a previous file intact); every rank
 * returns the same result.  order: saved for --resume (NULL: not saved). */
int sc_checkpoint_save(struct sc_net *net, struct sc_runtime *rt, const char *path, const struct sc_data_order *order);

struct sc_train_opts;

/* Collective, at start-up: every rank was started with the same model
 * file's contents, the same options, the same data, the same checkpoint and
 * the same number of CPU workers as rank 0; otherwise an SC_ERR_ARG naming
 * the first rank and the thing that differs, on every rank.  Without it,
 * such ranks would wait forever for each other's transfers. */
int sc_train_check_ranks(const struct sc_train_opts *o, struct sc_runtime *rt, const struct sc_dataset *train,
                         const struct sc_dataset *test, const struct sc_net *net, const struct sc_checkpoint *ck);

struct sc_train_opts {
    const char *model, *data, *save, *load, *metrics, *sched;
    int resume;                  /* load is a --resume: go on with its iteration and data order */
    long save_every;             /* checkpoint to save every N iterations; 0: at the end only */
    double peer_timeout;         /* --peer-timeout seconds; < 0: the default */
    double stall_timeout;        /* --stall-timeout seconds; < 0: the default; 0: off */
    int checkpoint_signal;       /* --checkpoint-signal: SIGTERM and SIGUSR1 stop the run with
                                  * the --save checkpoint (src/train/preempt.h) */
    enum sc_denormals denormals; /* --denormals keep|flush */
    int skip_nonfinite;          /* 1: a batch whose gradient is not finite changes nothing and
                                  * training goes on; 0: training stops (SC_ERR_NONFINITE) */
    int epochs;
    long iters; /* < 0: no limit */
    int batch;
    float lr, momentum, weight_decay;
    struct sc_lr_schedule lr_schedule; /* the rate of each iteration from lr */
    uint64_t seed;
    int shuffle;
    int test; /* evaluate on the test set */
    int log_every;
    struct sc_comm_opts comm;
    const char *trace;            /* Chrome trace file, or NULL */
    long trace_first, trace_last; /* traced iterations (from 1); 0: none */
    int report;                   /* print the overlap report, the tasks and the FLOP rate */
    double peak_gflops;           /* --peak: the machine's fp32 peak for the report's fraction (0: none) */
    int report_memory;            /* print each rank's memory */
    int report_comm;              /* print each rank's gradient-reduction bytes at the end */
    double mem_limit;             /* bytes per rank; 0: none */
    const char *calibration;      /* --parallel auto's calibration file (NULL: the default) */
    int grad_comm_given;          /* --grad-comm was given (auto leaves it alone) */
    char *parallel_auto;          /* the plan --parallel auto took (comm.parallel points to it) */
};

void sc_train_opts_default(struct sc_train_opts *o);
/* The data order of a run with options o on train. */
struct sc_data_order sc_train_data_order(const struct sc_train_opts *o, const struct sc_dataset *train);
/* --resume: 0 when ck was saved with the data order of this run, else an
 * SC_ERR_ARG naming the option that differs. */
int sc_train_check_resume(const struct sc_train_opts *o, const struct sc_dataset *train,
                          const struct sc_checkpoint *ck);

/* --parallel auto, collective: plan net for rt's ranks and workers and
 * o's batch from the calibration (src/planner/plan.h), and take the plan as the
 * per-layer --parallel list (and its --grad-comm unless o has one); rank 0
 * prints it.  SC_ERR_IO or SC_ERR_PARSE, saying how to make one, when the
 * calibration is missing or lacks what the model needs. */
int sc_train_plan(struct sc_train_opts *o, const struct sc_runtime *rt, struct sc_net *net);

/* sc_train_run's return when a signal stopped it (--checkpoint-signal)
 * after writing its checkpoint. */
#define SC_TRAIN_SIGNALLED 1

/* The loop: epochs of iterations, progress and metrics on rank 0, test
 * accuracy after each epoch, checkpoints (every save_every iterations and at
 * the end), a final line with images/s.  With resume, the iterations before
 * net->iteration count as done and the data order goes on from there.
 * Returns 0, SC_TRAIN_SIGNALLED or an SC_ERR_*. */
int sc_train_run(const struct sc_train_opts *o, struct sc_runtime *rt, struct sc_net *net,
                 const struct sc_dataset *train, const struct sc_dataset *test);

#endif
