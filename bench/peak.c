/* sc-peak: the fp32 FMA peak of this machine, on one core and on all the
 * cores this process may run on: the figure the benchmarks quote their
 * fraction of peak against (bench/starconv-bench peak runs it).
 *
 *   sc-peak [--isa avx512|avx2|auto] [--reps N] [--seconds S] [--csv]
 *
 * Each thread runs independent vector FMAs on registers, more chains than
 * an FMA's latency times the FMA ports, so that the units never wait; the
 * values converge to 1.0 and stay normal floats (denormals would run far
 * slower on some cores).  One thread per core of the affinity mask, each
 * pinned to its core, all started together; the rate of a repetition is
 * the FLOPs of all threads over the slowest thread's time, and the figure
 * is the median over the repetitions.  Exit status 0, 2 on bad arguments. */
#define _GNU_SOURCE
#include <errno.h>
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHAINS 12 /* independent FMA chains per thread: fit the 16 AVX2 registers */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* iters x CHAINS FMAs of one vector each; returns a value that depends on
 * all of them, so that none is optimized away. */
__attribute__((target("avx512f"))) static float fma_avx512(long iters)
{
    const __m512 b = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-6f);
    __m512 a[CHAINS];
    for (int i = 0; i < CHAINS; i++)
        a[i] = _mm512_set1_ps(1.0f + i * 1e-3f);
    for (long it = 0; it < iters; it++)
#pragma GCC unroll 16 /* the chains in registers, not in memory */
        for (int i = 0; i < CHAINS; i++)
            a[i] = _mm512_fmadd_ps(a[i], b, c);
    __m512 s = a[0];
    for (int i = 1; i < CHAINS; i++)
        s = _mm512_add_ps(s, a[i]);
    return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"))) static float fma_avx2(long iters)
{
    const __m256 b = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-6f);
    __m256 a[CHAINS];
    for (int i = 0; i < CHAINS; i++)
        a[i] = _mm256_set1_ps(1.0f + i * 1e-3f);
    for (long it = 0; it < iters; it++)
#pragma GCC unroll 16 /* the chains in registers, not in memory */
        for (int i = 0; i < CHAINS; i++)
            a[i] = _mm256_fmadd_ps(a[i], b, c);
    __m256 s = a[0];
    for (int i = 1; i < CHAINS; i++)
        s = _mm256_add_ps(s, a[i]);
    float v[8];
    _mm256_storeu_ps(v, s);
    return v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
}

struct isa {
    const char *name;
    int lanes;
    float (*run)(long iters);
};

static const struct isa isas[] = {
    {"avx512", 16, fma_avx512},
    {"avx2", 8, fma_avx2},
};

static int isa_supported(const struct isa *i)
{
    __builtin_cpu_init();
    if (i->run == fma_avx512)
        return __builtin_cpu_supports("avx512f");
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

struct worker {
    pthread_t thread;
    int cpu;
    const struct isa *isa;
    long iters;
    pthread_barrier_t *start;
    double seconds;
    float sink;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(w->cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    w->isa->run(w->iters / 10); /* warm up: the core's frequency, the code in cache */
    pthread_barrier_wait(w->start);
    double t0 = now();
    w->sink = w->isa->run(w->iters);
    w->seconds = now() - t0;
    return NULL;
}

/* GFLOP/s of nthreads threads on cpus[0..nthreads-1], one repetition. */
static double measure(const struct isa *isa, const int *cpus, int nthreads, long iters)
{
    struct worker *w = calloc((size_t)nthreads, sizeof *w);
    pthread_barrier_t start;
    if (!w || pthread_barrier_init(&start, NULL, (unsigned)nthreads)) {
        free(w);
        return -1;
    }
    for (int t = 0; t < nthreads; t++) {
        w[t] = (struct worker){.cpu = cpus[t], .isa = isa, .iters = iters, .start = &start};
        pthread_create(&w[t].thread, NULL, work, &w[t]);
    }
    double slowest = 0;
    float sink = 0;
    for (int t = 0; t < nthreads; t++) {
        pthread_join(w[t].thread, NULL);
        if (w[t].seconds > slowest)
            slowest = w[t].seconds;
        sink += w[t].sink;
    }
    pthread_barrier_destroy(&start);
    free(w);
    if (sink != sink) /* NaN: cannot happen; keeps sink live */
        fprintf(stderr, "sc-peak: unexpected NaN\n");
    return 2.0 * CHAINS * isa->lanes * (double)iters * nthreads / slowest * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(const struct isa *isa, const int *cpus, int nthreads, long iters, int reps)
{
    double *r = malloc((size_t)reps * sizeof *r);
    if (!r)
        return -1;
    for (int i = 0; i < reps; i++)
        r[i] = measure(isa, cpus, nthreads, iters);
    qsort(r, (size_t)reps, sizeof *r, cmp_double);
    double m = reps % 2 ? r[reps / 2] : 0.5 * (r[reps / 2 - 1] + r[reps / 2]);
    free(r);
    return m;
}

static int usage(FILE *f, int status)
{
    fputs("usage: sc-peak [--isa avx512|avx2|auto] [--reps N] [--seconds S] [--csv]\n"
          "The fp32 FMA peak of this machine in GFLOP/s: one core, and all the cores this\n"
          "process may run on (one pinned thread each), median of N repetitions (default 5)\n"
          "of about S seconds each (default 0.3).  --isa: the vector instructions\n"
          "(default auto: the widest the CPU has).  --csv: one line isa,cores,per_core,all.\n",
          f);
    return status;
}

int main(int argc, char **argv)
{
    const char *want = "auto";
    int reps = 5, csv = 0;
    double seconds = 0.3;
    for (int i = 1; i < argc; i++) {
        char *end;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            return usage(stdout, 0);
        else if (!strcmp(argv[i], "--csv"))
            csv = 1;
        else if (i + 1 < argc && !strcmp(argv[i], "--isa"))
            want = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--reps")) {
            errno = 0;
            long v = strtol(argv[++i], &end, 10);
            if (errno || *end || v < 1 || v > 1000) {
                fprintf(stderr, "sc-peak: --reps: '%s' is not an integer in [1, 1000]\n", argv[i]);
                return 2;
            }
            reps = (int)v;
        } else if (i + 1 < argc && !strcmp(argv[i], "--seconds")) {
            errno = 0;
            seconds = strtod(argv[++i], &end);
            if (errno || *end || !(seconds > 0) || seconds > 60) {
                fprintf(stderr, "sc-peak: --seconds: '%s' is not a number in (0, 60]\n", argv[i]);
                return 2;
            }
        } else {
            fprintf(stderr, "sc-peak: unknown or incomplete argument '%s' (see --help)\n", argv[i]);
            return 2;
        }
    }
    const struct isa *isa = NULL;
    for (size_t i = 0; i < sizeof isas / sizeof isas[0] && !isa; i++)
        if ((!strcmp(want, "auto") || !strcmp(want, isas[i].name)) && isa_supported(&isas[i]))
            isa = &isas[i];
    if (!isa) {
        if (strcmp(want, "auto") && strcmp(want, "avx512") && strcmp(want, "avx2"))
            fprintf(stderr, "sc-peak: --isa: '%s' is none of avx512, avx2, auto\n", want);
        else
            fprintf(stderr, "sc-peak: this CPU has no %s FMA\n", !strcmp(want, "auto") ? "AVX2 or AVX-512" : want);
        return 2;
    }
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set)) {
        fprintf(stderr, "sc-peak: sched_getaffinity: %s\n", strerror(errno));
        return 1;
    }
    int cpus[CPU_SETSIZE], ncpu = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
            cpus[ncpu++] = c;
    /* Size the loop to about the requested time on one core. */
    long iters = 1 << 20;
    double t0 = now();
    isa->run(iters);
    double t = now() - t0;
    iters = (long)(iters * (seconds / (t > 1e-6 ? t : 1e-6)));
    if (iters < 1000)
        iters = 1000;
    double one = median_of(isa, cpus, 1, iters, reps);
    double all = median_of(isa, cpus, ncpu, iters, reps);
    if (one < 0 || all < 0) {
        fprintf(stderr, "sc-peak: out of memory or threads\n");
        return 1;
    }
    if (csv)
        printf("%s,%d,%.1f,%.1f\n", isa->name, ncpu, one, all);
    else
        printf("fp32 FMA peak (%s): 1 core %.1f GFLOP/s; %d cores %.1f GFLOP/s (%.1f per core); median of %d\n",
               isa->name, one, ncpu, all, all / ncpu, reps);
    return 0;
}
