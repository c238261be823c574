/* Synthetic data sets: nothing is stored, the load tasks generate each
 * sample from (seed, index) (kernels/synth.c). */
#include <stdlib.h>
#include <string.h>

#include "codelets/codelets.h"
#include "base/error.h"
#include "src/data/dataset.h"

/* Sizes: enough for several epochs of the tests and benchmarks; the
 * held-out split uses another seed, hence other samples. */
#define IMAGE_TRAIN 10000
#define IMAGE_TEST  500
#define MESH_TRAIN  1000
#define MESH_TEST   16

static int parse_int(const char *s, char **end, int lo, int hi, int *out)
{
    long v = strtol(s, end, 10);
    if (*end == s || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

SC_API int sc_dataset_synthetic(const char *spec, int test, struct sc_dataset *out)
{
    char *end;
    memset(out, 0, sizeof *out);
    out->seed = test ? 0x7e57da7aULL : 0x5eedda7aULL;
    if (!strncmp(spec, "synthetic-mesh:", 15)) {
        int size;
        if (parse_int(spec + 15, &end, 8, 1 << 15, &size) || *end)
            return sc_error(SC_ERR_ARG, "--data %s: expected synthetic-mesh:SIZE with SIZE in [8, 32768]", spec);
        *out = (struct sc_dataset){.n = test ? MESH_TEST : MESH_TRAIN,
                                   .c = 18,
                                   .h = size,
                                   .w = size,
                                   .classes = 2,
                                   .synthetic = 1 + SC_SYNTH_MESH,
                                   .seed = out->seed};
        return 0;
    }
    if (!strncmp(spec, "synthetic:", 10)) {
        int c, h, w, k, nan = -1;
        const char *p = spec + 10;
        if (parse_int(p, &end, 1, 1 << 16, &c) || *end != 'x' || parse_int(end + 1, &end, 1, 1 << 16, &h) ||
            *end != 'x' || parse_int(end + 1, &end, 1, 1 << 16, &w) || *end != ':' ||
            parse_int(end + 1, &end, 2, 1 << 20, &k) ||
            (*end && (strncmp(end, ":nan=", 5) || parse_int(end + 5, &end, 0, IMAGE_TRAIN - 1, &nan) || *end)))
            return sc_error(SC_ERR_ARG, "--data %s: expected synthetic:CxHxW:K[:nan=I], e.g. synthetic:3x224x224:1000",
                            spec);
        *out = (struct sc_dataset){.n = test ? IMAGE_TEST : IMAGE_TRAIN,
                                   .c = c,
                                   .h = h,
                                   .w = w,
                                   .classes = k,
                                   .synthetic = 1 + SC_SYNTH_IMAGE,
                                   .seed = out->seed,
                                   .nan_sample = test || nan < 0 ? 0 : nan + 1};
        return 0;
    }
    return 1;
}
