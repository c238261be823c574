/* The training program's pieces: checkpoints and the training loop.  They
 * see the network through sc_net_* only, never StarPU's task API. */
#ifndef SC_TRAIN_H
#define SC_TRAIN_H

#include "net.h"

/* A checkpoint read from a file and checked against a network. */
struct sc_checkpoint {
    float **w, **v;        /* per layer: parameters, momentum (NULL for no parameters) */
    float **b;             /* per layer: buffers (BN's running statistics), NULL for none or
                            * when the file has none (older checkpoints: the net keeps its own) */
    int64_t iteration;
};

/* Read path and check it against net's tensors (names, shapes, dtypes).
 * No runtime needed: call it before starting MPI so a bad file fails fast. */
int sc_checkpoint_read(const struct sc_net *net, const char *path, struct sc_checkpoint **out);
void sc_checkpoint_free(const struct sc_net *net, struct sc_checkpoint *ck);
/* Sync point: every rank sets the state (all ranks call it). */
int sc_checkpoint_apply(struct sc_net *net, const struct sc_checkpoint *ck);
/* Sync point, collective: rank 0 writes the file atomically; every rank
 * returns the same result. */
int sc_checkpoint_save(struct sc_net *net, struct sc_runtime *rt, const char *path);

struct sc_train_opts {
    const char *model, *data, *save, *load, *metrics, *sched;
    int epochs;
    long iters;            /* < 0: no limit */
    int batch;
    float lr, momentum, weight_decay;
    uint64_t seed;
    int shuffle;
    int test;              /* evaluate on the test set */
    int log_every;
    struct sc_comm_opts comm;
    const char *trace;     /* Chrome trace file, or NULL */
    long trace_first, trace_last;  /* traced iterations (from 1); 0: none */
    int report;            /* print the overlap report */
    int report_memory;     /* print each rank's memory */
    double mem_limit;      /* bytes per rank; 0: none */
};

void sc_train_opts_default(struct sc_train_opts *o);

/* The loop: epochs of iterations, progress and metrics on rank 0, test
 * accuracy after each epoch, a final line with images/s. */
int sc_train_run(const struct sc_train_opts *o, struct sc_runtime *rt, struct sc_net *net,
                 const struct sc_dataset *train, const struct sc_dataset *test);

#endif
