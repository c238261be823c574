#define _GNU_SOURCE /* pthread_setname_np */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include <starpu.h>
#include <starpu_mpi.h>

#include "codelets/codelets.h"
#include "src/runtime/cpubind.h"
#include "src/runtime/runtime.h"
#include "base/error.h"
#include "tasks/tasks.h"
#include "src/runtime/stall.h"
#include "src/runtime/watchdog.h"

const char *sc_runtime_policies(void)
{
    static char list[1024];
    if (list[0])
        return list;
    struct starpu_sched_policy **p = starpu_sched_get_predefined_policies();
    for (; *p; p++) {
        size_t len = strlen(list);
        snprintf(list + len, sizeof(list) - len, "%s%s", len ? " " : "", (*p)->policy_name);
    }
    return list;
}

/* StarPU's predefined policy of that name, or NULL. */
static const struct starpu_sched_policy *find_policy(const char *name)
{
    struct starpu_sched_policy **p = starpu_sched_get_predefined_policies();
    for (; *p; p++)
        if (!strcmp((*p)->policy_name, name))
            return *p;
    return NULL;
}

int sc_runtime_policy_valid(const char *name)
{
    return find_policy(name) != NULL;
}

/* ---- CPU workers driven by our own threads ----
 *
 * StarPU 1.3 keeps the last awake worker of a scheduling context spinning
 * when it has nothing to do (with one worker per rank: always), and Debian's
 * build cannot be told otherwise.  When ranks x workers fill the cores, a
 * rank waiting for a transfer then spins on a core that the other rank's
 * worker or the MPI progress thread needs, and takes most of it.  So the
 * CPU drivers are "not
 * launched" by StarPU but run here: run_once in a loop, and after a short
 * spin without work, a wait for a wake-up (see wait_for_work). */

struct driver_thread {
    struct starpu_driver driver;
    pthread_t thread;
    struct sc_runtime_state *state;
};

/* What the runtime of this process holds besides the public part of
 * struct sc_runtime: its CPU driver threads, where they run, their idle
 * wake-ups, the wrapped scheduling policy, the rank's place on its node. */
struct sc_runtime_state {
    struct driver_thread *drivers;
    int ndrivers;
    struct sc_cpubind *placement; /* NULL: workers not bound by starconv */
    int drivers_stop;             /* atomic */
    long max_sleep_ns;            /* the longest idle sleep (SC_IDLE_SLEEP_US) */
    int flush_denormals;          /* workers run with FTZ and DAZ (--denormals flush) */
    /* Idle workers: see wait_for_work. */
    pthread_mutex_t idle_mutex;
    pthread_cond_t idle_cond;
    unsigned long wake_generation; /* atomic */
    int sleepers;                  /* atomic */
    /* The chosen scheduling policy, with a wake-up after each push. */
    struct starpu_sched_policy woken_policy;
    int (*base_push)(struct starpu_task *);
    void (*base_push_notify)(struct starpu_task *, int, int, unsigned);
    /* This rank among the ranks of its node (shared memory), whatever
     * launcher started them (find_node_ranks, right after MPI_Init). */
    int node_rank, node_size;
};

/* StarPU calls the policy's push hooks, and the collectives their wake
 * hook, without a context argument: those hooks reach the state of the
 * process's one runtime (StarPU allows one per process) through this. */
static struct sc_runtime_state *active;
/* Idle passes before a worker sleeps.  A push wakes it, so spinning only
 * saves a wake-up (tens of microseconds), and on cores that the other
 * ranks' threads need it costs more than that: a spinning worker delays
 * the transfers and the tasks of the rank beside it. */
#define IDLE_PASSES 2

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Idle: a worker that found no work for a while sleeps until a task is
 * pushed to the scheduler (push_and_wake below: every way work appears,
 * submissions, completed transfers, finished dependencies, goes through a
 * push) or for SC_IDLE_SLEEP_US (2 ms by default), a safety net for a
 * data request that a worker must serve without a push, which is rare.
 * Periodic wake-ups to look for work instead would take the cores from
 * the MPI transfers of the same processes (sc-allreduce-bench, "with
 * StarPU idle", shows what they cost).
 *
 * No wake-up is lost: a push bumps the generation before it looks for
 * sleepers, and a worker counts itself a sleeper before it compares the
 * generation with the one it saw before its last look for work (both
 * sequentially consistent), so either the worker sees the new generation
 * and looks again, or the push sees the sleeper and signals it. */

/* One sleeping worker (a push makes one task ready), or all of them. */
static void wake(struct sc_runtime_state *S, int all)
{
    __atomic_add_fetch(&S->wake_generation, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&S->sleepers, __ATOMIC_SEQ_CST) > 0) {
        pthread_mutex_lock(&S->idle_mutex);
        if (all)
            pthread_cond_broadcast(&S->idle_cond);
        else
            pthread_cond_signal(&S->idle_cond);
        pthread_mutex_unlock(&S->idle_mutex);
    }
}

/* The collectives' hook: a completed receive may release several tasks
 * at once. */
static void wake_workers(void)
{
    wake(active, 1);
}

static int push_and_wake(struct starpu_task *task)
{
    int ret = active->base_push(task);
    wake(active, 0);
    return ret;
}

/* A task pushed to one given worker bypasses push_task. */
static void notify_and_wake(struct starpu_task *task, int workerid, int perf_workerid, unsigned ctx)
{
    if (active->base_push_notify)
        active->base_push_notify(task, workerid, perf_workerid, ctx);
    wake(active, 1);
}

/* name: the policy StarPU would have taken (STARPU_SCHED first, as StarPU
 * reads it, then --sched, then StarPU's default). */
static int make_woken_policy(struct sc_runtime_state *S, const char *name)
{
    const char *env = getenv("STARPU_SCHED");
    if (env && *env)
        name = env;
    if (!name)
        name = "lws";
    const struct starpu_sched_policy *p = find_policy(name);
    if (!p)
        return sc_error(SC_ERR_ARG, "unknown scheduling policy '%s'%s (valid: %s)", name,
                        env && *env ? " in STARPU_SCHED" : "", sc_runtime_policies());
    S->woken_policy = *p;
    S->base_push = S->woken_policy.push_task;
    S->base_push_notify = S->woken_policy.push_task_notify;
    S->woken_policy.push_task = push_and_wake;
    S->woken_policy.push_task_notify = notify_and_wake;
    return 0;
}

static void wait_for_work(struct sc_runtime_state *S, unsigned long *seen, long timeout_ns)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += timeout_ns;
    until.tv_sec += until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    pthread_mutex_lock(&S->idle_mutex);
    __atomic_add_fetch(&S->sleepers, 1, __ATOMIC_SEQ_CST);
    if (*seen == __atomic_load_n(&S->wake_generation, __ATOMIC_SEQ_CST))
        pthread_cond_timedwait(&S->idle_cond, &S->idle_mutex, &until);
    __atomic_sub_fetch(&S->sleepers, 1, __ATOMIC_SEQ_CST);
    *seen = __atomic_load_n(&S->wake_generation, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&S->idle_mutex);
}

/* Denormal floats flushed to zero on this thread's results (FTZ) and read
 * as zero in its inputs (DAZ): x86's MXCSR bits 15 and 6. */
static int flush_denormals_here(void)
{
#if defined(__x86_64__) || defined(__i386__)
    _mm_setcsr(_mm_getcsr() | 0x8040);
    return 0;
#else
    return -1;
#endif
}

static void *drive_worker(void *arg)
{
    struct driver_thread *dt = arg;
    struct sc_runtime_state *S = dt->state;
    struct starpu_driver *d = &dt->driver;
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0); /* timeouts of tens of us must be that */
    if (S->flush_denormals)
        flush_denormals_here();
    starpu_driver_init(d);
    char name[16]; /* as top -H and /proc/PID/task/TID/comm show it; after StarPU's own */
    snprintf(name, sizeof name, "sc-cpu%u", d->id.cpu_id % 1000u);
    pthread_setname_np(pthread_self(), name);
    sc_cpubind_worker(S->placement, (int)d->id.cpu_id);
    int idle = 0;
    unsigned long seen = 0;
    while (!__atomic_load_n(&S->drivers_stop, __ATOMIC_ACQUIRE)) {
        double t0 = now_ns();
        starpu_driver_run_once(d);
        /* An idle pass takes about a microsecond; a task, far more. */
        if (now_ns() - t0 > 20000)
            idle = 0;
        else if (++idle > IDLE_PASSES) {
            wait_for_work(S, &seen, S->max_sleep_ns);
            idle = 0;
        }
    }
    starpu_driver_deinit(d);
    return NULL;
}

static MPI_Comm find_node_ranks(struct sc_runtime_state *S)
{
    MPI_Comm node;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS)
        MPI_Comm_dup(MPI_COMM_SELF, &node); /* alone, as far as we can tell */
    MPI_Comm_rank(node, &S->node_rank);
    MPI_Comm_size(node, &S->node_size);
    return node;
}

#ifdef SC_USE_CUDA
#include <cuda_runtime_api.h>

/* The CUDA workers StarPU will start in this rank: STARPU_NCUDA, else
 * every device it sees. */
static int cuda_worker_count(void)
{
    const char *env = getenv("STARPU_NCUDA");
    if (env && atoi(env) >= 0)
        return atoi(env);
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

/* Unless the user chose the CUDA workers: with several ranks on a node and
 * several GPUs, local rank r takes device r mod ngpus as its one CUDA
 * worker, so that ranks do not all crowd onto every GPU (and NCCL, which
 * refuses two ranks on one GPU, works).  With one GPU, every rank keeps
 * it.  Before StarPU reads its environment. */
static void spread_gpus(const struct sc_runtime_state *S)
{
    int ngpus = 0;
    if (getenv("STARPU_NCUDA") || getenv("STARPU_WORKERS_CUDAID") || S->node_size < 2 ||
        cudaGetDeviceCount(&ngpus) != cudaSuccess || ngpus < 2)
        return;
    char dev[16];
    snprintf(dev, sizeof(dev), "%d", S->node_rank % ngpus);
    setenv("STARPU_WORKERS_CUDAID", dev, 1);
    setenv("STARPU_NCUDA", "1", 1);
    SC_LOG(2, "CUDA device %s of %d for local rank %d of %d", dev, ngpus, S->node_rank, S->node_size);
}
#endif

/* CPU workers: STARPU_NCPU if set (*asked = 1), else the rank's cores
 * less one per CUDA worker, whose driver thread needs a core of its own, and
 * at most what this StarPU takes (*capped = 1). */
static int cpu_worker_count(int cores, int *asked, int *capped)
{
    const char *env = getenv("STARPU_NCPU");
    *asked = *capped = 0;
    if (env && atoi(env) >= 0) {
        *asked = 1;
        return atoi(env);
    }
    int n = cores;
#ifdef SC_USE_CUDA
    n -= cuda_worker_count();
#endif
    if (n > STARPU_MAXCPUS) {
        n = STARPU_MAXCPUS;
        *capped = 1;
    }
    return n < 1 ? 1 : n;
}

/* One line for the whole job: printed by the lowest rank for which
 * `applies` holds (collective over comm). */
static int lowest_rank_where(MPI_Comm comm, int rank, int applies)
{
    int lowest = applies ? rank : INT_MAX;
    MPI_Allreduce(MPI_IN_PLACE, &lowest, 1, MPI_INT, MPI_MIN, comm);
    return lowest == rank;
}

/* Chooses the rank's cores and its number of CPU workers (ndrivers),
 * places the workers, says where, and gathers every rank's placement line
 * on rank 0 (rt->placements).  Collective. */
static int place_workers(struct sc_runtime *rt, MPI_Comm node)
{
    struct sc_runtime_state *S = rt->state;
    int err = sc_cpubind_setup(node, &S->placement);
    if ((err = sc_runtime_agree(rt, err)))
        return err;
    int cores = S->placement ? sc_cpubind_cores(S->placement) : (int)(sysconf(_SC_NPROCESSORS_ONLN) / S->node_size);
    int asked, capped;
    S->ndrivers = cpu_worker_count(cores < 1 ? 1 : cores, &asked, &capped);
    if (S->ndrivers < 1 || S->ndrivers > STARPU_MAXCPUS)
        err = sc_error(SC_ERR_ARG, "STARPU_NCPU=%d: this StarPU takes 1 to %d CPU workers per rank", S->ndrivers,
                       STARPU_MAXCPUS);
    if (!err && S->placement)
        err = sc_cpubind_place(S->placement, S->ndrivers);
    if ((err = sc_runtime_agree(rt, err)))
        return err;
    if (S->placement)
        snprintf(rt->placement, sizeof rt->placement, "%s", sc_cpubind_describe(S->placement));
    else
        snprintf(rt->placement, sizeof rt->placement, "%d CPU worker%s, not bound by starconv (SC_CPU_BIND=none)",
                 S->ndrivers, S->ndrivers == 1 ? "" : "s");
    SC_LOG(rt->rank == 0 || rt->size <= 16 ? 1 : 2, "%s", rt->placement);
    int over = S->placement && asked && S->ndrivers > cores;
    if (lowest_rank_where(rt->ctl, rt->rank, over)) {
        char fix[160];
        if (sc_cpubind_launcher_limits(S->placement))
            snprintf(fix, sizeof fix, "give each rank %d cores (mpirun --bind-to none, or --map-by ppr:%d:node:PE=%d)",
                     S->ndrivers, S->node_size, S->ndrivers);
        else
            snprintf(fix, sizeof fix, "the node has no more for it: STARPU_NCPU=%d or fewer", cores);
        SC_LOG(1, "warning: STARPU_NCPU=%d CPU workers, but this rank has %d core%s (%s): its workers share cores; %s",
               S->ndrivers, cores, cores == 1 ? "" : "s", sc_cpubind_where(S->placement), fix);
    }
    if (lowest_rank_where(rt->ctl, rt->rank, capped))
        SC_LOG(1,
               "note: this StarPU takes at most %d CPU workers per rank (STARPU_MAXCPUS), and this rank has %d "
               "cores: use more ranks per node, or a StarPU built without the cap (gpu/build-starpu --without-cuda "
               "PREFIX; docs/install.md)",
               STARPU_MAXCPUS, cores);
    /* Every rank's line on rank 0, for --metrics and the trace. */
    if (rt->rank == 0 && !(rt->placements = calloc((size_t)rt->size, sizeof(rt->placement))))
        err = sc_error(SC_ERR_NOMEM, "out of memory");
    if ((err = sc_runtime_agree(rt, err)))
        return err;
    MPI_Gather(rt->placement, (int)sizeof(rt->placement), MPI_CHAR, rt->placements, (int)sizeof(rt->placement),
               MPI_CHAR, 0, rt->ctl);
    return 0;
}

static int start_drivers(struct sc_runtime_state *S)
{
    for (int i = 0; i < S->ndrivers; i++)
        if (pthread_create(&S->drivers[i].thread, NULL, drive_worker, &S->drivers[i])) {
            __atomic_store_n(&S->drivers_stop, 1, __ATOMIC_RELEASE);
            for (int j = 0; j < i; j++)
                pthread_join(S->drivers[j].thread, NULL);
            return sc_error(SC_ERR_RUNTIME, "cannot start the thread of CPU worker %d", i);
        }
    return 0;
}

static void stop_drivers(struct sc_runtime_state *S)
{
    __atomic_store_n(&S->drivers_stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < S->ndrivers; i++)
        pthread_join(S->drivers[i].thread, NULL);
    free(S->drivers);
    S->drivers = NULL;
    S->ndrivers = 0;
}

/* ---- peer watchdog ---- */

static double peer_timeout_value(double peer_timeout)
{
    if (peer_timeout >= 0)
        return peer_timeout;
    const char *env = getenv("SC_PEER_TIMEOUT");
    char *end;
    double t = env && *env ? strtod(env, &end) : -1;
    /* 20 s: a dead rank is reported within 30 s, and a rank on a
     * loaded node whose heartbeat thread waits seconds for a core (several
     * runnable processes per core) is not taken for dead. */
    return env && *env && !*end && t >= 0 ? t : 20.0;
}

/* For tests of the watchdog (tests/test_rank_failure.sh):
 * SC_TEST_FINISH_DELAY=R:S makes rank R finish S seconds after the others,
 * at the end of sc_runtime_shutdown, as a rank late to finish would. */
static void test_finish_delay(int rank)
{
    const char *env = getenv("SC_TEST_FINISH_DELAY");
    int r;
    double s;
    if (env && sscanf(env, "%d:%lf", &r, &s) == 2 && r == rank && s > 0 && s < 3600) {
        struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
        while (nanosleep(&ts, &ts) != 0)
            ;
    }
}

static void forget_state(struct sc_runtime *rt)
{
    struct sc_runtime_state *S = rt->state;
    if (S) {
        sc_cpubind_free(S->placement);
        pthread_cond_destroy(&S->idle_cond);
        pthread_mutex_destroy(&S->idle_mutex);
        free(S);
    }
    rt->state = NULL;
    active = NULL;
    free(rt->placements);
    rt->placements = NULL;
}

/* Undo MPI's start after a failed init, and return err. */
static int abandon_init(struct sc_runtime *rt, int err)
{
    forget_state(rt);
    sc_stall_stop();
    sc_watchdog_stop(0); /* the other ranks may not get to their shutdown */
    MPI_Comm_free(&rt->ctl);
    MPI_Finalize();
    return err;
}

int sc_runtime_mpi_init(int *argc, char ***argv)
{
    int provided, started;
    MPI_Initialized(&started);
    if (started) {
        MPI_Query_thread(&provided);
        return provided < MPI_THREAD_MULTIPLE
                   ? sc_error(SC_ERR_RUNTIME, "this MPI does not support MPI_THREAD_MULTIPLE")
                   : 0;
    }
    /* StarPU-MPI's progress thread polls MPI while transfers are pending;
     * when ranks x workers fill the cores, Open MPI must yield the core
     * between polls or the polling starves the workers. */
    setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
    /* StarPU binds its first worker to core 0 whatever cores mpirun gave the
     * rank, which stacks the ranks of a node on one core; leave binding to
     * mpirun unless the user asks StarPU for it. */
    setenv("STARPU_WORKERS_NOBIND", "1", 0);
    if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
        return sc_error(SC_ERR_RUNTIME, "MPI_Init_thread failed");
    if (provided < MPI_THREAD_MULTIPLE) {
        MPI_Finalize();
        return sc_error(SC_ERR_RUNTIME, "this MPI does not support MPI_THREAD_MULTIPLE");
    }
    return 0;
}

void sc_runtime_opts_default(struct sc_runtime_opts *o)
{
    *o = (struct sc_runtime_opts){
        .sched = NULL, .peer_timeout = -1, .stall_timeout = -1, .denormals = SC_DENORMALS_KEEP};
}

/* The state, before MPI's collectives: it holds the node ranks. */
static int new_state(struct sc_runtime *rt, const struct sc_runtime_opts *o)
{
    struct sc_runtime_state *S = calloc(1, sizeof *S);
    if (!S)
        return sc_error(SC_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&S->idle_mutex, NULL);
    pthread_cond_init(&S->idle_cond, NULL);
    S->max_sleep_ns = 2000000;
    const char *sleep_env = getenv("SC_IDLE_SLEEP_US");
    if (sleep_env && atol(sleep_env) >= 0)
        S->max_sleep_ns = atol(sleep_env) * 1000;
    S->node_size = 1;
    S->flush_denormals = o->denormals == SC_DENORMALS_FLUSH;
    rt->state = active = S;
    if (S->flush_denormals && flush_denormals_here() != 0)
        return sc_error(SC_ERR_ARG, "--denormals flush: not supported on this CPU (x86 only)");
    return 0;
}

int sc_runtime_init(int *argc, char ***argv, const struct sc_runtime_opts *opts, struct sc_runtime *rt)
{
    struct sc_runtime_opts defaults;
    if (!opts) {
        sc_runtime_opts_default(&defaults);
        opts = &defaults;
    }
    const char *sched = opts->sched;
    memset(rt, 0, sizeof(*rt));
    int err = sc_runtime_mpi_init(argc, argv);
    if (err)
        return err;
    rt->comm = MPI_COMM_WORLD;
    MPI_Comm_rank(rt->comm, &rt->rank);
    MPI_Comm_size(rt->comm, &rt->size);
    MPI_Comm_dup(MPI_COMM_WORLD, &rt->ctl);
    sc_log_set_rank(rt->rank);
    if ((err = sc_runtime_agree(rt, new_state(rt, opts))))
        return abandon_init(rt, err);
    struct sc_runtime_state *S = rt->state;
    MPI_Comm node = find_node_ranks(S);
    /* Right after MPI_Init, which the ranks leave together: the watch then
     * also covers StarPU's start, and the whole run up to MPI_Finalize. */
    int werr = sc_watchdog_start(MPI_COMM_WORLD, peer_timeout_value(opts->peer_timeout));
    if (!werr) /* before anything is submitted: it registers what is */
        werr = sc_stall_start(MPI_COMM_WORLD, opts->stall_timeout);
    if (werr) {
        MPI_Comm_free(&node);
        return abandon_init(rt, werr);
    }

    err = place_workers(rt, node);
    MPI_Comm_free(&node);
    if (err)
        return abandon_init(rt, err);
    if (sched && !sc_runtime_policy_valid(sched))
        return abandon_init(
            rt, sc_error(SC_ERR_ARG, "unknown scheduling policy '%s' (valid: %s)", sched, sc_runtime_policies()));
    /* The failure a test injects (codelets.h, src/runtime/kernel_failure.h). */
    if ((err = sc_runtime_agree(rt, sc_fail_inject_setup(getenv("SC_TEST_FAIL_KERNEL"), rt->rank))) ||
        (err = sc_runtime_agree(rt, sc_stall_inject_setup(getenv("SC_TEST_STALL"), rt->rank))))
        return abandon_init(rt, err);
#ifdef SC_USE_CUDA
    spread_gpus(S);
#endif
    struct starpu_conf conf;
    starpu_conf_init(&conf);
    if ((err = make_woken_policy(S, sched)))
        return abandon_init(rt, err);
    conf.sched_policy = &S->woken_policy;
    if (!(S->drivers = calloc(S->ndrivers, sizeof(*S->drivers))))
        return abandon_init(rt, sc_error(SC_ERR_NOMEM, "out of memory"));
    struct starpu_driver list[STARPU_MAXCPUS];
    for (int i = 0; i < S->ndrivers; i++) {
        list[i] = (struct starpu_driver){.type = STARPU_CPU_WORKER, .id.cpu_id = (unsigned)i};
        S->drivers[i] = (struct driver_thread){.driver = list[i], .state = S};
    }
    conf.ncpus = S->ndrivers;
    conf.reserve_ncpus = 0;
    conf.not_launched_drivers = list;
    conf.n_not_launched_drivers = (unsigned)S->ndrivers;
    err = starpu_mpi_init_conf(argc, argv, 0, MPI_COMM_WORLD, &conf);
    if (err) {
        free(S->drivers);
        S->drivers = NULL;
        return abandon_init(rt, sc_error(SC_ERR_RUNTIME, "StarPU-MPI failed to start (error %d)", err));
    }
    sc_tasks_set_wake_hook(wake_workers);
    if ((err = start_drivers(S))) {
        free(S->drivers);
        S->drivers = NULL;
        sc_tasks_set_wake_hook(NULL);
        starpu_mpi_shutdown();
        return abandon_init(rt, err);
    }
    rt->ncpu = (int)starpu_cpu_worker_get_count();
    rt->ncuda = starpu_worker_get_count_by_type(STARPU_CUDA_WORKER);
    const char *cuda_only = getenv("SC_CUDA_ONLY");
    rt->cuda_only = rt->ncuda > 0 && cuda_only && *cuda_only && strcmp(cuda_only, "0") != 0;
    if ((err = sc_codelets_init())) {
        sc_codelets_shutdown();
        stop_drivers(S);
        sc_tasks_set_wake_hook(NULL);
        starpu_mpi_shutdown();
        if (starpu_is_initialized())
            starpu_shutdown();
        return abandon_init(rt, err);
    }
    return 0;
}

void sc_runtime_shutdown(struct sc_runtime *rt)
{
    sc_tasks_wait_all(rt->comm);
    sc_codelets_shutdown();
    stop_drivers(rt->state);
    sc_tasks_set_wake_hook(NULL);
    starpu_mpi_shutdown();
    if (starpu_is_initialized()) /* StarPU-MPI started it; depending on the version it stops it */
        starpu_shutdown();
    MPI_Comm_free(&rt->ctl);
    forget_state(rt);
    test_finish_delay(rt->rank);
    sc_stall_stop();
    /* Last: a rank that died while the others drained their transfers or
     * waited in StarPU-MPI's shutdown is still noticed. */
    sc_watchdog_stop(1);
    MPI_Finalize();
}

int sc_runtime_agree(struct sc_runtime *rt, int err)
{
    int worst = err, all;
    MPI_Allreduce(&worst, &all, 1, MPI_INT, MPI_MIN, rt->ctl);
    return all;
}
