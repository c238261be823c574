/* A machine description: a machine the planner (src/planner/plan.h) has not been
 * calibrated on, described by its links and its compute, and turned, for
 * P ranks, into the struct sc_calib the planner takes unchanged.  One
 * rank is one device.  Pure data, a text file of one record per line:
 *
 *   starconv-machine 1
 *   name <text>                          (for messages)
 *   ranks-per-node <n>                   (devices of a node, one rank each)
 *   intra-node <latency s> <bytes/s>     (one rank to another in its node;
 *                                         not needed when ranks-per-node is 1)
 *   inter-node <latency s> <bytes/s>     (a node's bandwidth to the network, one
 *                                         direction, shared by its ranks)
 *   task <s>                             (a task's overhead: a kernel's launch)
 *   calibration <FILE>                   (kernel times measured elsewhere, e.g. on
 *                                         the device; relative to this file's folder)
 *   roofline <peak FLOP/s> <memory bytes/s> <efficiency>
 *                                        (kernels missing from the calibration:
 *                                         max(2 MACs / (peak eff), bytes / memory))
 *   memory <bytes/s>                     (memory a rank streams; default the
 *                                         roofline's, else the calibration's)
 *   device-memory <bytes>                (a rank's memory: the planner's --mem-limit;
 *                                         default none)
 *
 * The version line comes first; each other record at most once.  At least
 * one of calibration and roofline.  '#' starts a comment.  Numbers are
 * finite and >= 0; bandwidths, peak and memory > 0; efficiency in (0, 1].
 * Errors are SC_ERR_PARSE "path:line: what". */
#ifndef SC_MACHINE_H
#define SC_MACHINE_H

#include <stdio.h>

#include "src/planner/calib.h"
#include "src/net/net.h"

struct sc_machine {
    char name[128];
    int ranks_per_node;
    double intra_latency, intra_bandwidth; /* s, bytes/s */
    double inter_latency, inter_bandwidth; /* s, bytes/s per node */
    double task;                           /* s */
    double memory;                         /* bytes/s streamed by a rank: the calib's stream */
    double device_memory;                  /* bytes per rank; 0: no limit */
    int roofline;                          /* 1: peak, mem_bw and efficiency hold a roofline */
    double peak, mem_bw, efficiency;
    char path[4096];        /* the description's file, for messages */
    int calib_line;         /* the calibration record's line */
    char calib_path[4096];  /* the calibration record's file, resolved; "" none */
    struct sc_calib *calib; /* it, loaded; NULL none */
};

/* Read path (and the calibration it names).  SC_ERR_IO when path cannot be
 * read; SC_ERR_PARSE "path:line: what" for anything malformed, and for a
 * calibration file that cannot be read or is malformed (the line of its
 * record, then the calibration's own error). */
int sc_machine_load(const char *path, struct sc_machine **out);
void sc_machine_free(struct sc_machine *m);

/* Nodes that P ranks take. */
int sc_machine_nodes(const struct sc_machine *m, int ranks);
/* The predicted time of a ring allreduce of bytes over a group of group
 * ranks among ranks (the formula in machine.c).  0 for one rank. */
double sc_machine_allreduce(const struct sc_machine *m, int ranks, int group, double bytes);
/* A kernel's forward, backward-data and backward-filter times under the
 * roofline (0 each when the machine has none). */
void sc_machine_roofline(const struct sc_machine *m, const struct sc_layer_work *w, double *fwd, double *bwd_data,
                         double *bwd_filter);

/* The calibration the planner needs to plan net on ranks ranks at batch:
 * the links, the allreduce of every group size dividing ranks, and every
 * kernel sc_plan_kernels lists (the calibration file's time when it has
 * the key, else the roofline's; SC_ERR_PARSE naming the key when neither).
 * cores 0 (no oversubscription), workers 1. */
int sc_machine_calib(const struct sc_machine *m, const struct sc_net *net, int ranks, int batch, struct sc_calib **out);

/* starconv-plan --machine: for P = 1, 2, 4, ... max_ranks, the planner's
 * choice (predicted time per iteration, speedup, the grids it uses) and
 * pure sample parallelism's time, as a table or JSON on fp.  A P without
 * a plan prints why; errors of the machine file (a missing kernel time)
 * are returned. */
/* starconv-plan --machine --ranks P: the plan (or, with grid, the
 * prediction of that grid) for ranks ranks of the machine, printed as
 * sc_plan_print or sc_plan_print_json do.  mem_limit 0: the machine's
 * device memory. */
int sc_machine_plan(FILE *fp, const struct sc_machine *m, const struct sc_net *net, const char *model, int ranks,
                    int batch, const char *grid, const char *grad_comm, double mem_limit, int json);
int sc_machine_sweep(FILE *fp, const struct sc_machine *m, const char *machine_path, const struct sc_net *net,
                     const char *model, int batch, int max_ranks, int json);

#endif
