/* A calibration: what `starconv-plan calibrate` measured on one machine
 * (and, inside bench/slow-net, one network), for the planner's cost model
 * (src/planner/plan.h).  Pure data, a text file of one record per line:
 *
 *   starconv-calibration 1
 *   machine <text>                     (where it was made, for messages)
 *   cores 2                            (cores the ranks share)
 *   workers 1                          (CPU workers per rank of the compute times)
 *   p2p <alpha s> <beta s/byte>        (StarPU-MPI, every rank sending b bytes at once: alpha + beta b)
 *   node <ranks per node> <alpha s> <beta s/byte>
 *                                      (optional, a second level: messages between ranks r
 *                                       and q of one node, r / ranks == q / ranks, take this
 *                                       link, the others p2p's; without it every message
 *                                       takes p2p's)
 *   busy <s>                           (optional: a message of 1 MiB from every rank to the
 *                                       next while every worker runs long tasks: on cores
 *                                       the workers fill, a message waits for them)
 *   load <s>                           (optional: seconds per input element a rank loads,
 *                                       for the data set given to calibrate --data)
 *   rowcopy <s>                        (optional: a region task copies its window row by
 *                                       row; each row's cost beyond its bytes at stream's)
 *   task <s>                           (a task's overhead: submission to end)
 *   stream <bytes/s>                   (memory streamed by one worker)
 *   allreduce <group> <bytes> <s>      (the task-based ring allreduce, per group size)
 *   kernel <fwd s> <bwd_data s> <bwd_filter s> <key>
 *
 * The version line comes first; the other records may come in any order,
 * each at most once (allreduce: once per group and bytes; kernel: once per
 * key).  A kernel's key names its arguments (sc_calib_kernel_key) and has
 * spaces, so it is the rest of the line (blanks around it dropped, runs of
 * them inside it read as one space).  '#' starts a comment, to the end of
 * the line (a machine text's '#' is saved as a space).  Numbers are
 * finite and >= 0; counts and groups whole and >= 1.  What was not
 * measured is left out: cores, workers, task, stream and ranks_per_node
 * then read 0, and p2p_alpha, p2p_beta, p2p_node_alpha, p2p_node_beta,
 * busy, load and rowcopy -1. */
#ifndef SC_CALIB_H
#define SC_CALIB_H

#include <stddef.h>

#include "src/layers/layers.h"

#define SC_CALIB_KEY_LEN 128

struct sc_calib_kernel {
    char key[SC_CALIB_KEY_LEN];
    double fwd, bwd_data, bwd_filter; /* seconds; bwd_filter 0 for kernels without weights */
};
struct sc_calib_point {
    int group;
    double bytes, seconds;
};

struct sc_calib {
    char machine[128];
    int cores, workers;
    double p2p_alpha, p2p_beta; /* < 0: not measured (a calibration on one rank) */
    /* Two levels (the node record): ranks r and q with r / ranks_per_node
     * == q / ranks_per_node share a node and exchange over the within-node
     * link p2p_node_alpha + p2p_node_beta b; p2p_alpha and p2p_beta are
     * then the between-node link.  ranks_per_node 0: one level, every
     * message at p2p_alpha + p2p_beta b (the node link -1, unused). */
    int ranks_per_node;
    double p2p_node_alpha, p2p_node_beta;
    double busy;    /* < 0: not measured */
    double load;    /* < 0: not measured */
    double rowcopy; /* < 0: not measured */
    double task;
    double stream;
    struct sc_calib_kernel *kernels;
    int nkernels, cap_kernels;
    struct sc_calib_point *allreduce; /* sorted by group, then bytes */
    int npoints, cap_points;
};

/* An empty calibration (nothing measured: p2p_alpha < 0, one level). */
int sc_calib_new(struct sc_calib **out);
void sc_calib_free(struct sc_calib *c);
/* Read path; SC_ERR_IO when it cannot be read, SC_ERR_PARSE with
 * "path:line: what" for anything malformed. */
int sc_calib_load(const char *path, struct sc_calib **out);
/* Write it whole or not at all (base/atomic_file.h). */
int sc_calib_save(const struct sc_calib *c, const char *path);

/* The key of a layer's kernel work ("conv n=2 c=64 h=8 w=8 f=64 k=3x3
 * s=1x1 p=1x1 o=8x8"), or "" for SC_WORK_STREAM. */
void sc_calib_kernel_key(const struct sc_layer_work *w, char *key, size_t len);
const struct sc_calib_kernel *sc_calib_find(const struct sc_calib *c, const char *key);
/* Add or replace. */
int sc_calib_add_kernel(struct sc_calib *c, const char *key, double fwd, double bwd_data, double bwd_filter);
int sc_calib_add_allreduce(struct sc_calib *c, int group, double bytes, double seconds);
/* The ring allreduce of bytes over group ranks: linear between the two
 * measured sizes around bytes (beyond the largest, along the last two
 * points' slope; below the smallest, the smallest's time).  1 rank: 0.
 * < 0 when the group size was not measured. */
double sc_calib_allreduce(const struct sc_calib *c, int group, double bytes);

#endif
