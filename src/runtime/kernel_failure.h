/* A kernel that fails stops the run: the failures the workers record
 * (kernels/fail.h: struct sc_fail) are read where the training loop
 * waits for its tasks anyway, and every rank stops at the same sync
 * point. */
#ifndef SC_KERNEL_FAILURE_H
#define SC_KERNEL_FAILURE_H

#include <stdint.h>

#include "src/runtime/runtime.h"

/* Sync point, collective (every rank calls it at the same place): 0 when
 * no kernel of any rank has failed so far; else SC_ERR_KERNEL on every
 * rank, with the message "rank R: kernel OP failed on worker W: CAUSE" of
 * the lowest rank that has one (its first failure), and the failure
 * counted as reported.  It reads what has run: the caller has waited for
 * the tasks whose failures it must see. */
int sc_kernel_failure_check(struct sc_runtime *rt);

/* The training iteration whose tasks the main thread submits from now on
 * (0: none, e.g. evaluation): where SC_TEST_FAIL_KERNEL=NAME@ITERATION
 * strikes (codelets.h: sc_fail_inject_setup, which sc_runtime_init calls),
 * and, if not 0, the iteration the stall watchdog names (stall.h). */
void sc_kernel_failure_iteration(int64_t iteration);

#endif
