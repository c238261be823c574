/* Ring allreduce and the reduce-scatter/SGD/allgather step on 1..P ranks,
 * for lengths that do not divide by the rank count, and the whole-batch
 * gate of --nonfinite skip; the ring with bf16 on the wire. */
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/bf16.h"
#include "src/runtime/runtime.h"
#include "src/starconv.h"
#include "tasks/tasks.h"

static float value(int rank, size_t i, int round)
{
    return (float)((rank + 1) * 0.5 + (double)(i % 97) * 0.01 + round);
}

static int check(const char *what, size_t n, const float *got, const float *want, int rank)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]) / (fabs(want[i]) + 1e-6);
        if (d > worst)
            worst = d;
    }
    int bad = worst > 1e-6;
    if (bad || rank == 0)
        printf("%s rank %d %s n=%zu max rel err %.2e\n", bad ? "FAIL" : "ok", rank, what, n, worst);
    return bad;
}

static int test_allreduce(struct sc_runtime *rt, size_t n, int window, size_t segment_bytes)
{
    float *v = malloc(n * sizeof(float)), *want = malloc(n * sizeof(float));
    starpu_data_handle_t h;
    starpu_vector_data_register(&h, STARPU_MAIN_RAM, (uintptr_t)v, n, sizeof(float));
    struct sc_ring *ring;
    struct sc_ring_opts ro = {segment_bytes, window};
    if (sc_ring_create(&ring, h, rt->comm, &ro, "test")) {
        printf("FAIL sc_ring_create: %s\n", sc_last_error());
        return 1;
    }
    int bad = 0;
    for (int round = 0; round < 3; round++) { /* the plan is reused, as in training */
        starpu_data_acquire(h, STARPU_W);
        for (size_t i = 0; i < n; i++)
            v[i] = value(rt->rank, i, round);
        starpu_data_release(h);
        if (sc_ring_allreduce_submit(ring, NULL)) {
            printf("FAIL submit: %s\n", sc_last_error());
            return 1;
        }
        sc_tasks_wait_all(rt->comm);
        for (size_t i = 0; i < n; i++) {
            double s = 0;
            for (int r = 0; r < rt->size; r++)
                s += value(r, i, round);
            want[i] = (float)s;
        }
        starpu_data_acquire(h, STARPU_R);
        char what[64];
        snprintf(what, sizeof what, "allreduce (window %d, %zu KiB segments)", window,
                 (segment_bytes ? segment_bytes : 512 << 10) >> 10);
        bad |= check(what, n, v, want, rt->rank);
        starpu_data_release(h);
    }
    sc_ring_destroy(ring);
    starpu_data_unregister(h);
    free(v);
    free(want);
    return bad;
}

static float via_bf16(float x)
{
    uint16_t h;
    float y;
    sc_bf16_from_f32(&h, &x, 1);
    sc_bf16_to_f32(&y, &h, 1);
    return y;
}

/* --grad-dtype bf16 (sc_ring_opts.wire_bf16), every vector through the
 * ring or the chain (no direct path), one segment a chunk: every rank
 * ends with the same bits, those of the sum along the ring with each sent
 * partial sum rounded to bf16 (chunk c from rank c on; the chain from rank
 * P-1 down to 0), and the reduce-scatter sends half its fp32 bytes. */
static int test_allreduce_bf16(struct sc_runtime *rt, size_t n)
{
    int P = rt->size, bad = 0;
    float *v = malloc(n * sizeof(float)), *want = malloc(n * sizeof(float));
    starpu_data_handle_t h;
    starpu_vector_data_register(&h, STARPU_MAIN_RAM, (uintptr_t)v, n, sizeof(float));
    struct sc_ring *ring;
    struct sc_ring_opts ro = {(size_t)1 << 30, 0, NULL, 0, -1, 1};
    if (sc_ring_create(&ring, h, rt->comm, &ro, "bf16")) {
        printf("FAIL sc_ring_create: %s\n", sc_last_error());
        return 1;
    }
    starpu_data_acquire(h, STARPU_W);
    for (size_t i = 0; i < n; i++)
        v[i] = value(rt->rank, i, 0);
    starpu_data_release(h);
    if (sc_ring_allreduce_submit(ring, NULL)) {
        printf("FAIL submit: %s\n", sc_last_error());
        return 1;
    }
    sc_tasks_wait_all(rt->comm);
    size_t base = n / (size_t)P, extra = n % (size_t)P, rounded = 0;
    for (size_t i = 0; i < n; i++) {
        if (P == 1) {
            want[i] = value(0, i, 0);
            continue;
        }
        /* the ranks in the order they add, the first one's value sent alone */
        int first, step;
        if (n < (size_t)P) {
            first = P - 1, step = -1;
        } else {
            size_t c = 0;
            while (c + 1 < (size_t)P && (c + 1) * base + (c + 1 < extra ? c + 1 : extra) <= i)
                c++;
            first = (int)c, step = 1;
        }
        float acc = value(first, i, 0);
        for (int k = 1; k < P; k++)
            acc = value(((first + step * k) % P + P) % P, i, 0) + via_bf16(acc);
        want[i] = acc;
        double exact = 0;
        for (int r = 0; r < P; r++)
            exact += value(r, i, 0);
        rounded += acc != (float)exact;
    }
    starpu_data_acquire(h, STARPU_R);
    size_t diff = 0;
    for (size_t i = 0; i < n; i++)
        diff += memcmp(&v[i], &want[i], sizeof(float)) != 0;
    starpu_data_release(h);
    /* the reduce-scatter's P-1 chunks in bf16, the allgather's in fp32 (the
     * chain: one vector each way, but for the ends) */
    uint64_t sent = sc_ring_bytes_sent(ring), partial = sc_ring_partial_bytes_sent(ring);
    int me = rt->rank;
    uint64_t want_partial = 0;
    if (P > 1 && n < (size_t)P)
        want_partial = me > 0 ? 2 * n : 0;
    else if (P > 1)
        for (int s = 0; s < P - 1; s++) {
            int c = ((me - s) % P + P) % P;
            want_partial += 2 * (base + ((size_t)c < extra));
        }
    if (diff || (P > 1 && n >= 8 && !rounded) || partial != want_partial || sent < partial) {
        printf("FAIL rank %d bf16 allreduce n=%zu: %zu elements differ from the ring's bf16 order, %zu rounded, "
               "partial bytes %llu (want %llu), sent %llu\n",
               me, n, diff, rounded, (unsigned long long)partial, (unsigned long long)want_partial,
               (unsigned long long)sent);
        bad = 1;
    } else if (me == 0) {
        printf("ok bf16 allreduce n=%zu: the ring's order bit for bit (%zu of %zu sums differ from fp32), %llu "
               "bytes of partial sums\n",
               n, rounded, n, (unsigned long long)partial);
    }
    sc_ring_destroy(ring);
    starpu_data_unregister(h);
    free(v);
    free(want);
    return bad;
}

/* --comm-segment auto: the rule on hand-computed links, then the probe,
 * which must give every rank the same bandwidth, and a ring in the segments
 * it chooses. */
static int test_segments(struct sc_runtime *rt)
{
    /* want = bandwidth x 4 messages x 0.1 ms; the power of two at most that,
     * within [512 KiB, 64 MiB].  1 and 10 Gbit/s links keep 512 KiB; shared
     * memory here (13-16 GB/s one way) gets 4 MiB (want 5.1-6.1 MiB). */
    static const struct {
        double bytes_per_s;
        int kb;
    } rule[] = {{0, 512},      {0.06e9, 512}, {0.64e9, 512}, {1.4e9, 512},
                {2.7e9, 1024}, {13e9, 4096},  {16e9, 4096},  {1e12, 64 << 10}};
    int bad = 0;
    for (size_t i = 0; i < sizeof rule / sizeof *rule; i++) {
        int kb = sc_ring_segment_kb_for(rule[i].bytes_per_s);
        if (kb != rule[i].kb) {
            printf("FAIL rank %d segment for %.3g B/s: %d KiB, want %d\n", rt->rank, rule[i].bytes_per_s, kb,
                   rule[i].kb);
            bad = 1;
        }
    }
    if (rt->size == 1)
        return bad;
    double bw, lo, hi;
    int kb;
    if (sc_link_segment_kb(rt->ctl, &kb, &bw)) {
        printf("FAIL rank %d link probe: %s\n", rt->rank, sc_last_error());
        return 1;
    }
    MPI_Allreduce(&bw, &lo, 1, MPI_DOUBLE, MPI_MIN, rt->ctl);
    MPI_Allreduce(&bw, &hi, 1, MPI_DOUBLE, MPI_MAX, rt->ctl);
    if (!(bw > 0) || lo != hi) {
        printf("FAIL rank %d link probe: %g B/s here, %g to %g over the ranks\n", rt->rank, bw, lo, hi);
        bad = 1;
    } else if (rt->rank == 0)
        printf("ok link probe: %.2f GB/s, %d KiB segments\n", bw * 1e-9, kb);
    return bad | test_allreduce(rt, (1 << 20) + 5, 2, (size_t)kb << 10);
}

/* Two SGD steps with momentum and weight decay against the same steps done
 * on the full vectors by each rank alone. */
static int test_sgd(struct sc_runtime *rt, size_t n, int window)
{
    float *w = malloc(n * 4), *v = calloc(n, 4), *g = malloc(n * 4);
    float *rw = malloc(n * 4), *rv = calloc(n, 4);
    starpu_data_handle_t hw, hv, hg;
    starpu_vector_data_register(&hw, STARPU_MAIN_RAM, (uintptr_t)w, n, 4);
    starpu_vector_data_register(&hv, STARPU_MAIN_RAM, (uintptr_t)v, n, 4);
    starpu_vector_data_register(&hg, STARPU_MAIN_RAM, (uintptr_t)g, n, 4);
    struct sc_ring *ring;
    struct sc_sgd_sync *sync;
    struct sc_ring_opts ro = {0, window};
    if (sc_ring_create(&ring, hg, rt->comm, &ro, "g") || sc_sgd_sync_create(&sync, ring, hw, hv)) {
        printf("FAIL plan: %s\n", sc_last_error());
        return 1;
    }
    struct sc_sgd_args a = {0.1f, 0.9f, 0.01f};
    starpu_data_acquire(hw, STARPU_W);
    for (size_t i = 0; i < n; i++)
        w[i] = rw[i] = (float)sin((double)i);
    starpu_data_release(hw);
    int bad = 0;
    for (int step = 0; step < 2; step++) {
        starpu_data_acquire(hg, STARPU_W);
        for (size_t i = 0; i < n; i++)
            g[i] = value(rt->rank, i, step);
        starpu_data_release(hg);
        sc_sgd_sync_submit(sync, NULL, &a);
        for (size_t i = 0; i < n; i++) {
            float s = 0;
            for (int r = 0; r < rt->size; r++)
                s += value(r, i, step);
            float d = s + a.weight_decay * rw[i];
            rv[i] = a.momentum * rv[i] + d;
            rw[i] -= a.lr * rv[i];
        }
    }
    sc_tasks_wait_all(rt->comm);
    starpu_data_acquire(hw, STARPU_R);
    char what[40];
    snprintf(what, sizeof what, "sgd weights (window %d)", window);
    bad |= check(what, n, w, rw, rt->rank);
    starpu_data_release(hw);
    size_t first, count;
    sc_ring_owned_range(ring, &first, &count);
    starpu_data_acquire(hv, STARPU_R);
    bad |= check("sgd owned momentum", count, v + first, rv + first, rt->rank);
    starpu_data_release(hv);
    sc_sgd_sync_destroy(sync);
    sc_ring_destroy(ring);
    starpu_data_unregister(hw);
    starpu_data_unregister(hv);
    starpu_data_unregister(hg);
    free(w), free(v), free(g), free(rw), free(rv);
    return bad;
}

/* --nonfinite skip's gate: two layers (plans a and b) take three steps;
 * at step 1 one value of b's gradient on the last rank is NaN.  The whole
 * step must change nothing on any rank, a's update included, and be
 * recorded once; steps 0 and 2 apply as usual. */
static int test_gate(struct sc_runtime *rt, size_t na, size_t nb)
{
    size_t n[2] = {na, nb};
    float *w[2], *v[2], *g[2], *rw[2], *rv[2];
    starpu_data_handle_t hw[2], hv[2], hg[2];
    struct sc_ring *ring[2];
    struct sc_sgd_sync *sync[2];
    struct sc_gate *gate;
    for (int k = 0; k < 2; k++) {
        w[k] = malloc(n[k] * 4), v[k] = calloc(n[k], 4), g[k] = malloc(n[k] * 4);
        rw[k] = malloc(n[k] * 4), rv[k] = calloc(n[k], 4);
        starpu_vector_data_register(&hw[k], STARPU_MAIN_RAM, (uintptr_t)w[k], n[k], 4);
        starpu_vector_data_register(&hv[k], STARPU_MAIN_RAM, (uintptr_t)v[k], n[k], 4);
        starpu_vector_data_register(&hg[k], STARPU_MAIN_RAM, (uintptr_t)g[k], n[k], 4);
        if (sc_ring_create(&ring[k], hg[k], rt->comm, NULL, "g") ||
            sc_sgd_sync_create(&sync[k], ring[k], hw[k], hv[k])) {
            printf("FAIL plan: %s\n", sc_last_error());
            return 1;
        }
        for (size_t i = 0; i < n[k]; i++)
            w[k][i] = rw[k][i] = (float)sin((double)i + k);
    }
    if (sc_gate_create(&gate, rt->comm, "gate")) {
        printf("FAIL gate: %s\n", sc_last_error());
        return 1;
    }
    struct sc_nonfinite watch = {0};
    struct sc_sgd_args a = {
        .lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.01f, .watch = &watch, .gate = sc_gate_handle(gate)};
    for (int step = 0; step < 3; step++) {
        a.iteration = step + 1;
        for (int k = 0; k < 2; k++) {
            starpu_data_acquire(hg[k], STARPU_W);
            for (size_t i = 0; i < n[k]; i++)
                g[k][i] = value(rt->rank, i, step);
            if (step == 1 && k == 1 && rt->rank == rt->size - 1)
                g[k][n[k] - 1] = NAN;
            starpu_data_release(hg[k]);
        }
        int err = sc_gate_open_submit(gate, NULL);
        for (int k = 1; k >= 0 && !err; k--) /* backward order, as in training */
            err = sc_sgd_sync_reduce_submit(sync[k], NULL, gate);
        if (!err)
            err = sc_gate_close_submit(gate, NULL);
        for (int k = 1; k >= 0 && !err; k--)
            err = sc_sgd_sync_update_submit(sync[k], NULL, &a);
        if (err) {
            printf("FAIL submit: %s\n", sc_last_error());
            return 1;
        }
        for (int k = 0; k < 2 && step != 1; k++)
            for (size_t i = 0; i < n[k]; i++) {
                float s = 0;
                for (int r = 0; r < rt->size; r++)
                    s += value(r, i, step);
                rv[k][i] = a.momentum * rv[k][i] + (s + a.weight_decay * rw[k][i]);
                rw[k][i] -= a.lr * rv[k][i];
            }
    }
    sc_tasks_wait_all(rt->comm);
    int bad = 0;
    for (int k = 0; k < 2; k++) {
        char what[64];
        snprintf(what, sizeof what, "gated sgd weights of %c", 'a' + k);
        starpu_data_acquire(hw[k], STARPU_R);
        bad |= check(what, n[k], w[k], rw[k], rt->rank);
        starpu_data_release(hw[k]);
        size_t first, count;
        sc_ring_owned_range(ring[k], &first, &count);
        snprintf(what, sizeof what, "gated sgd owned momentum of %c", 'a' + k);
        starpu_data_acquire(hv[k], STARPU_R);
        bad |= check(what, count, v[k] + first, rv[k] + first, rt->rank);
        starpu_data_release(hv[k]);
    }
    /* Each rank records the skips of the updates it runs (a small vector's
     * direct path updates on one rank only): over the ranks, as training
     * reads them. */
    int64_t mine[3] = {watch.first_iteration ? watch.first_iteration : INT64_MAX, -watch.last_iteration,
                       -watch.iterations},
            all[3];
    MPI_Allreduce(mine, all, 3, MPI_INT64_T, MPI_MIN, rt->ctl);
    if (all[0] != 2 || -all[1] != 2 || -all[2] != 1) {
        printf("FAIL rank %d gate recorded first %lld last %lld count %lld, want 2 2 1\n", rt->rank, (long long)all[0],
               (long long)-all[1], (long long)-all[2]);
        bad = 1;
    }
    sc_gate_destroy(gate);
    for (int k = 0; k < 2; k++) {
        sc_sgd_sync_destroy(sync[k]);
        sc_ring_destroy(ring[k]);
        starpu_data_unregister(hw[k]);
        starpu_data_unregister(hv[k]);
        starpu_data_unregister(hg[k]);
        free(w[k]), free(v[k]), free(g[k]), free(rw[k]), free(rv[k]);
    }
    return bad;
}

int main(int argc, char **argv)
{
    struct sc_runtime rt;
    if (sc_runtime_init(&argc, &argv, NULL, &rt)) {
        fprintf(stderr, "test_collectives: %s\n", sc_last_error());
        return 1;
    }
    static const size_t sizes[] = {1, 2, 3, 7, 1000, 1001, 4099, (1 << 18) + 3, (1 << 20) + 5};
    int bad = 0;
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        bad |= test_allreduce(&rt, sizes[k], 0, 0);
        bad |= test_sgd(&rt, sizes[k], 0);
    }
    /* With credits (sc_ring_opts.window): the largest vector has 2 to 4
     * segments per chunk here, so windows 1 and 2 hold sends back. */
    for (int window = 1; window <= 2; window++) {
        bad |= test_allreduce(&rt, (1 << 20) + 5, window, 0);
        bad |= test_sgd(&rt, (1 << 20) + 5, window);
    }
    bad |= test_segments(&rt);
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
        bad |= test_allreduce_bf16(&rt, sizes[k]);
    static const size_t gated[][2] = {{1000, 1}, {3, 1001}, {7, (1 << 20) + 5}};
    for (size_t k = 0; k < sizeof(gated) / sizeof(gated[0]); k++)
        bad |= test_gate(&rt, gated[k][0], gated[k][1]);
    int any = sc_runtime_agree(&rt, -bad);
    if (rt.rank == 0)
        printf("%s: collectives on %d ranks\n", any ? "FAIL" : "PASS", rt.size);
    sc_runtime_shutdown(&rt);
    return any ? 1 : 0;
}
