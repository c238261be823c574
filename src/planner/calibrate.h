/* The measurements behind a calibration (src/calib.h): what
 * `starconv-plan calibrate` runs.  Each fills its part of c and returns 0
 * or a negative SC_ERR_*. */
#ifndef SC_CALIBRATE_H
#define SC_CALIBRATE_H

#include <stdio.h>

#include "src/planner/calib.h"
#include "src/planner/plan.h"
#include "src/runtime/runtime.h"
#include "base/error.h"
#include "src/data/dataset.h"

/* The machine: its name (CPU model and "N cores"), its online cores, and
 * stream, the bytes per second (read plus written) one thread copies
 * between two arrays much larger than the caches.  No StarPU, no MPI. */
int sc_calibrate_machine(struct sc_calib *c);
/* This machine's name as sc_calibrate_machine writes it (a calibration
 * made elsewhere has another); returns its online cores. */
int sc_calibrate_machine_name(char *name, size_t len);

/* Times every kernel the model of net under o may look up
 * (sc_plan_kernels) that c does not hold yet: forward, backward data and
 * backward filter, each the median of reps passes over all of them that
 * call each kernel twice and time the second call.
 * SC_CALIBRATE_CPU: on the calling thread with oneDNN and OpenBLAS
 * single-threaded, as a StarPU CPU worker runs them.  SC_CALIBRATE_CUDA
 * (a CUDA build): the CUDA versions (cuDNN, cuBLAS, own kernels) on the
 * current device, on a stream of their own, each call timed by CUDA
 * events, with the cuDNN workspace a CUDA worker gets
 * (SC_CUDNN_WORKSPACE_MB); SC_ERR_ARG in a build without CUDA.  One line
 * per pass on progress (NULL: none).  Needs neither StarPU nor MPI. */
enum sc_calibrate_device { SC_CALIBRATE_CPU, SC_CALIBRATE_CUDA };
int sc_calibrate_compute(struct sc_calib *c, const struct sc_net *net, const struct sc_plan_opts *o, int reps,
                         enum sc_calibrate_device device, FILE *progress);
/* The device in place of the machine (calibrate --device cuda): the
 * current CUDA device's name, cores 0, and stream, the bytes per second
 * (read plus written) of a device-to-device copy of 256 MiB.  SC_ERR_ARG
 * in a build without CUDA, SC_ERR_RUNTIME without a device. */
int sc_calibrate_device_cuda(struct sc_calib *c);

/* load: seconds per input element of loading ds's samples, and their
 * labels at the resolution of net's loss, as the load tasks do
 * (kernels/load.c, synth.c): generated (a synthetic data set) or
 * converted from bytes, 8 samples, the median of reps.  Needs neither
 * StarPU nor MPI. */
int sc_calibrate_load(struct sc_calib *c, const struct sc_net *net, const struct sc_dataset *ds, int reps,
                      FILE *progress);

/* Collective over the ranks of rt (sc_runtime_init), results on every
 * rank: task, the overhead of a task (a chain of small ones); with 2 ranks
 * or more, p2p_alpha and p2p_beta (every rank sending 8 bytes, then 4 MiB,
 * to the next through StarPU-MPI, all at once), and the ring allreduce as training runs it
 * (segments, window and direct path of the defaults) at 4 KiB, 64 KiB,
 * 1 MiB and 8 MiB, for every group size g >= 2 dividing the rank count,
 * all groups of g consecutive ranks at once; on 1 rank p2p_alpha stays
 * -1.  Medians of reps; progress (NULL: none; rank 0 writes) gets a
 * line per measurement. */
int sc_calibrate_comm(struct sc_calib *c, struct sc_runtime *rt, int reps, FILE *progress);

#endif
