/* Ring allreduce and the reduce-scatter/SGD/allgather step on 1..P ranks,
 * for lengths that do not divide by the rank count. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"
#include "starconv.h"
#include "tasks.h"

static float value(int rank, size_t i, int round) { return (float)((rank + 1) * 0.5 + (double)(i % 97) * 0.01 + round); }

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

static int test_allreduce(struct sc_runtime *rt, size_t n)
{
    float *v = malloc(n * sizeof(float)), *want = malloc(n * sizeof(float));
    starpu_data_handle_t h;
    starpu_vector_data_register(&h, STARPU_MAIN_RAM, (uintptr_t)v, n, sizeof(float));
    struct sc_ring *ring;
    if (sc_ring_create(&ring, h, rt->comm, "test")) {
        printf("FAIL sc_ring_create: %s\n", sc_last_error());
        return 1;
    }
    int bad = 0;
    for (int round = 0; round < 3; round++) { /* the plan is reused, as in training */
        starpu_data_acquire(h, STARPU_W);
        for (size_t i = 0; i < n; i++)
            v[i] = value(rt->rank, i, round);
        starpu_data_release(h);
        if (sc_ring_allreduce_submit(ring)) {
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
        bad |= check("allreduce", n, v, want, rt->rank);
        starpu_data_release(h);
    }
    sc_ring_destroy(ring);
    starpu_data_unregister(h);
    free(v);
    free(want);
    return bad;
}

/* Two SGD steps with momentum and weight decay against the same steps done
 * on the full vectors by each rank alone. */
static int test_sgd(struct sc_runtime *rt, size_t n)
{
    float *w = malloc(n * 4), *v = calloc(n, 4), *g = malloc(n * 4);
    float *rw = malloc(n * 4), *rv = calloc(n, 4);
    starpu_data_handle_t hw, hv, hg;
    starpu_vector_data_register(&hw, STARPU_MAIN_RAM, (uintptr_t)w, n, 4);
    starpu_vector_data_register(&hv, STARPU_MAIN_RAM, (uintptr_t)v, n, 4);
    starpu_vector_data_register(&hg, STARPU_MAIN_RAM, (uintptr_t)g, n, 4);
    struct sc_ring *ring;
    struct sc_sgd_sync *sync;
    if (sc_ring_create(&ring, hg, rt->comm, "g") || sc_sgd_sync_create(&sync, ring, hw, hv)) {
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
        sc_sgd_sync_submit(sync, &a);
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
    bad |= check("sgd weights", n, w, rw, rt->rank);
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
        bad |= test_allreduce(&rt, sizes[k]);
        bad |= test_sgd(&rt, sizes[k]);
    }
    int any = sc_runtime_agree(&rt, -bad);
    if (rt.rank == 0)
        printf("%s: collectives on %d ranks\n", any ? "FAIL" : "PASS", rt.size);
    sc_runtime_shutdown(&rt);
    return any ? 1 : 0;
}
