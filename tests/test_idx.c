/* IDX data set reader: small plain and gzip files made here, good and
 * damaged, and the installed Fashion-MNIST when it is there. */
#define _POSIX_C_SOURCE 200809L
#include "src/starconv.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "check.h"

#define FASHION_DIR "/usr/share/datasets/fashion-mnist"

static char dir[256];

static void expect_err(int rc, int want, const char *needle, const char *what)
{
    const char *msg = sc_last_error();
    check(rc == want && strstr(msg, needle) != NULL, "%s: rc %d (want %d), \"%s\" has \"%s\"", what, rc, want, msg,
          needle);
}

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

enum { PLAIN, GZ };

/* Writes <dir>/<prefix>-<kind>[.gz]: magic, dims, then datalen bytes of
 * data; the file is cut to keep bytes when keep >= 0. */
static void write_idx(const char *prefix, const char *kind, int gz, uint32_t magic, int ndims, const uint32_t *dims,
                      const uint8_t *data, size_t datalen, long keep)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s-%s%s", dir, prefix, kind, gz ? ".gz" : "");
    size_t len = 4 + 4 * (size_t)ndims + datalen;
    uint8_t *buf = malloc(len);
    put_be32(buf, magic);
    for (int i = 0; i < ndims; i++)
        put_be32(buf + 4 + 4 * i, dims[i]);
    if (datalen)
        memcpy(buf + 4 + 4 * ndims, data, datalen);
    int ok;
    if (gz) {
        gzFile g = gzopen(path, "wb");
        ok = g && gzwrite(g, buf, (unsigned)len) == (int)len && gzclose(g) == Z_OK;
    } else {
        FILE *f = fopen(path, "wb");
        ok = f && fwrite(buf, 1, len, f) == len && fclose(f) == 0;
    }
    free(buf);
    if (ok && keep >= 0)
        ok = truncate(path, keep) == 0;
    if (!ok) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
}

enum { N = 5, H = 4, W = 3 };
static uint8_t images[N * H * W], labels[N];

/* A complete good pair under prefix, plain or gzip. */
static void write_pair(const char *prefix, int gz)
{
    uint32_t idims[3] = {N, H, W}, ldims[1] = {N};
    write_idx(prefix, "images-idx3-ubyte", gz, 0x803, 3, idims, images, sizeof images, -1);
    write_idx(prefix, "labels-idx1-ubyte", gz, 0x801, 1, ldims, labels, sizeof labels, -1);
}

static void check_good(const char *prefix, const char *what)
{
    struct sc_dataset ds;
    int rc = sc_dataset_load_idx(dir, prefix, &ds);
    check(rc == SC_OK, "%s: loads (%s)", what, rc ? sc_last_error() : "");
    if (rc)
        return;
    check(ds.n == N && ds.c == 1 && ds.h == H && ds.w == W && ds.classes == 10, "%s: n=%d c=%d h=%d w=%d classes=%d",
          what, ds.n, ds.c, ds.h, ds.w, ds.classes);
    check(memcmp(ds.images, images, sizeof images) == 0 && memcmp(ds.labels, labels, sizeof labels) == 0,
          "%s: pixels and labels as written", what);
    sc_dataset_free(&ds);
    check(ds.images == NULL && ds.labels == NULL && ds.n == 0, "%s: freed and cleared", what);
}

static void good_files(void)
{
    for (size_t i = 0; i < sizeof images; i++)
        images[i] = (uint8_t)(i * 37 + 11);
    for (int i = 0; i < N; i++)
        labels[i] = (uint8_t)(9 - i);
    write_pair("plain", PLAIN);
    check_good("plain", "plain files");
    write_pair("gz", GZ);
    check_good("gz", "gzip files");

    /* With both present the .gz wins: the plain one here is corrupt. */
    write_pair("both", GZ);
    uint32_t bad[3] = {N, H, W};
    write_idx("both", "images-idx3-ubyte", PLAIN, 0xdead, 3, bad, images, sizeof images, -1);
    check_good("both", ".gz preferred over the plain file");

    /* Plain images with gzip labels is fine too. */
    uint32_t ldims[1] = {N};
    write_pair("mixed", PLAIN);
    write_idx("mixed", "labels-idx1-ubyte", GZ, 0x801, 1, ldims, labels, sizeof labels, -1);
    char p[512];
    snprintf(p, sizeof p, "%s/mixed-labels-idx1-ubyte", dir);
    unlink(p);
    check_good("mixed", "plain images, gzip labels");
}

static void missing(void)
{
    struct sc_dataset ds;
    char want[600];
    snprintf(want, sizeof want, "%s/none-images-idx3-ubyte.gz: No such file or directory", dir);
    int rc = sc_dataset_load_idx(dir, "none", &ds);
    expect_err(rc, SC_ERR_DATA, want, "missing images");
    expect_err(rc, SC_ERR_DATA, "install the Debian package dataset-fashion-mnist, or pass --data", "  with the hint");
    check(ds.n == 0 && ds.images == NULL, "  output cleared");

    uint32_t idims[3] = {N, H, W};
    write_idx("nolab", "images-idx3-ubyte", PLAIN, 0x803, 3, idims, images, sizeof images, -1);
    snprintf(want, sizeof want, "%s/nolab-labels-idx1-ubyte.gz: No such file", dir);
    expect_err(sc_dataset_load_idx(dir, "nolab", &ds), SC_ERR_DATA, want, "missing labels");

    snprintf(want, sizeof want, "%s/nowhere: No such file or directory (install", dir);
    char nowhere[512];
    snprintf(nowhere, sizeof nowhere, "%s/nowhere", dir);
    expect_err(sc_dataset_load_idx(nowhere, "train", &ds), SC_ERR_DATA, want, "missing directory");

    char p[512];
    snprintf(p, sizeof p, "%s/dirp-images-idx3-ubyte.gz", dir);
    mkdir(p, 0700);
    write_idx("dirp", "labels-idx1-ubyte", PLAIN, 0x801, 1, idims, labels, N, -1);
    expect_err(sc_dataset_load_idx(dir, "dirp", &ds), SC_ERR_DATA, "is a directory",
               "a directory where the file should be");
    rmdir(p);

    expect_err(sc_dataset_load_idx(NULL, "train", &ds), SC_ERR_ARG, "", "NULL directory");
    expect_err(sc_dataset_load_idx(dir, "", &ds), SC_ERR_ARG, "", "empty prefix");
    expect_err(sc_dataset_load_idx(dir, "x", NULL), SC_ERR_ARG, "", "NULL output");
}

/* Loads prefix and expects SC_ERR_DATA naming the given file and word. */
static void expect_bad(const char *prefix, const char *file, int gz, const char *word, const char *what)
{
    struct sc_dataset ds;
    char path[512];
    snprintf(path, sizeof path, "%s/%s-%s%s", dir, prefix, file, gz ? ".gz" : "");
    int rc = sc_dataset_load_idx(dir, prefix, &ds);
    expect_err(rc, SC_ERR_DATA, path, what);
    expect_err(rc, SC_ERR_DATA, word, "  and says why");
    check(ds.images == NULL && ds.labels == NULL && ds.n == 0, "  output cleared");
}

static void damaged(int gz)
{
    const char *I = "images-idx3-ubyte", *L = "labels-idx1-ubyte";
    const char *kind = gz ? "gzip" : "plain";
    char what[128];
    uint32_t idims[3] = {N, H, W}, ldims[1] = {N};
    char pre[32];
#define PREFIX(name) (snprintf(pre, sizeof pre, "%s%s", name, gz ? "Z" : ""), pre)
#define WHAT(text)   (snprintf(what, sizeof what, "%s: %s", kind, text), what)

    write_pair(PREFIX("short"), gz);
    write_idx(pre, I, gz, 0x803, 3, idims, images, sizeof images - 1, -1);
    expect_bad(pre, I, gz, "truncated", WHAT("images one byte short"));

    write_pair(PREFIX("shortlab"), gz);
    write_idx(pre, L, gz, 0x801, 1, ldims, labels, 2, -1);
    expect_bad(pre, L, gz, "truncated", WHAT("labels three bytes short"));

    write_pair(PREFIX("head"), gz);
    write_idx(pre, I, gz, 0x803, 1, idims, NULL, 0, -1);
    expect_bad(pre, I, gz, "truncated", WHAT("header cut after the first dimension"));

    write_pair(PREFIX("empty"), gz);
    write_idx(pre, I, gz, 0x803, 0, idims, NULL, 0, 0);
    expect_bad(pre, I, gz, "truncated", WHAT("empty file"));

    write_pair(PREFIX("magic"), gz);
    write_idx(pre, I, gz, 0x801, 3, idims, images, sizeof images, -1);
    expect_bad(pre, I, gz, "bad magic number 0x00000801, expected 0x00000803", WHAT("labels magic in the images file"));

    write_pair(PREFIX("lmagic"), gz);
    write_idx(pre, L, gz, 0x08030000, 1, ldims, labels, sizeof labels, -1);
    expect_bad(pre, L, gz, "bad magic number", WHAT("byte-swapped magic in the labels file"));

    write_pair(PREFIX("count"), gz);
    uint32_t fewer[1] = {N - 1};
    write_idx(pre, L, gz, 0x801, 1, fewer, labels, N - 1, -1);
    expect_bad(pre, I, gz, "has 5 images but", WHAT("count mismatch"));
    expect_bad(pre, L, gz, "has 4 labels", WHAT("count mismatch names the labels file"));

    write_pair(PREFIX("label"), gz);
    uint8_t badlab[N] = {0, 1, 2, 10, 4};
    write_idx(pre, L, gz, 0x801, 1, ldims, badlab, N, -1);
    expect_bad(pre, L, gz, "label 10 of sample 3 is not below 10", WHAT("label 10"));

    write_pair(PREFIX("label255"), gz);
    badlab[3] = 3;
    badlab[4] = 255;
    write_idx(pre, L, gz, 0x801, 1, ldims, badlab, N, -1);
    expect_bad(pre, L, gz, "label 255 of sample 4", WHAT("label 255"));

    write_pair(PREFIX("huge"), gz);
    uint32_t huge[3] = {100000, 100000, 100000};
    write_idx(pre, I, gz, 0x803, 3, huge, images, sizeof images, -1);
    expect_bad(pre, I, gz, "dimensions too large", WHAT("1e15-byte dimensions"));

    write_pair(PREFIX("maxdim"), gz);
    uint32_t maxd[3] = {0xffffffffu, 0xffffffffu, 0xffffffffu};
    write_idx(pre, I, gz, 0x803, 3, maxd, images, sizeof images, -1);
    expect_bad(pre, I, gz, "dimensions too large", WHAT("2^32-1 in every dimension"));

    /* Within the 2 GiB bound, but far more than this small file can hold:
     * refused before allocating 1.5 GB. */
    write_pair(PREFIX("big"), gz);
    uint32_t big[3] = {2000000, 28, 28};
    write_idx(pre, I, gz, 0x803, 3, big, images, sizeof images, -1);
    expect_bad(pre, I, gz, "more than a", WHAT("1.5 GB promised by a small file"));

    write_pair(PREFIX("zero"), gz);
    uint32_t zero[3] = {N, 0, W};
    write_idx(pre, I, gz, 0x803, 3, zero, images, sizeof images, -1);
    expect_bad(pre, I, gz, "dimension 1 is zero", WHAT("zero height"));

    write_pair(PREFIX("trail"), gz);
    uint8_t more[sizeof images + 3] = {0};
    write_idx(pre, I, gz, 0x803, 3, idims, more, sizeof more, -1);
    expect_bad(pre, I, gz, "trailing bytes", WHAT("3 bytes after the data"));
#undef PREFIX
#undef WHAT
}

static void damaged_gzip(void)
{
    /* Enough incompressible data that cutting the compressed file leaves
     * the header readable and the data short. */
    enum { BN = 200 };
    static uint8_t noise[BN * 28 * 28];
    uint8_t blabels[BN] = {0};
    srand(7);
    for (size_t i = 0; i < sizeof noise; i++)
        noise[i] = (uint8_t)rand();
    uint32_t idims[3] = {BN, 28, 28}, ldims[1] = {BN};
    write_idx("cut", "labels-idx1-ubyte", GZ, 0x801, 1, ldims, blabels, BN, -1);
    write_idx("cut", "images-idx3-ubyte", GZ, 0x803, 3, idims, noise, sizeof noise, sizeof noise / 2);
    expect_bad("cut", "images-idx3-ubyte", GZ, "truncated", "gzip: compressed stream cut in half");

    write_idx("cut8", "labels-idx1-ubyte", GZ, 0x801, 1, ldims, blabels, BN, -1);
    write_idx("cut8", "images-idx3-ubyte", GZ, 0x803, 3, idims, noise, sizeof noise, -1);
    char p[512];
    snprintf(p, sizeof p, "%s/cut8-images-idx3-ubyte.gz", dir);
    struct stat st;
    /* Only the CRC and length trailer missing: zlib's gzread does not notice,
     * but every data byte is there; accept either outcome, never bad data. */
    if (stat(p, &st) != 0 || truncate(p, st.st_size - 8) != 0) {
        check(0, "cut the gzip trailer of %s", p);
        return;
    }
    struct sc_dataset ds;
    int rc = sc_dataset_load_idx(dir, "cut8", &ds);
    check(rc == SC_OK ? memcmp(ds.images, noise, sizeof noise) == 0
                      : rc == SC_ERR_DATA && strstr(sc_last_error(), p) != NULL,
          "gzip: trailer missing: %s", rc == SC_OK ? "loaded, data intact" : sc_last_error());
    if (rc == SC_OK)
        sc_dataset_free(&ds);

    /* A gzip magic followed by garbage. */
    write_idx("garb", "labels-idx1-ubyte", GZ, 0x801, 1, ldims, blabels, BN, -1);
    snprintf(p, sizeof p, "%s/garb-images-idx3-ubyte.gz", dir);
    FILE *f = fopen(p, "wb");
    uint8_t junk[256] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};
    for (size_t i = 10; i < sizeof junk; i++)
        junk[i] = (uint8_t)(i * 131);
    fwrite(junk, 1, sizeof junk, f);
    fclose(f);
    rc = sc_dataset_load_idx(dir, "garb", &ds);
    expect_err(rc, SC_ERR_DATA, p, "gzip: corrupt deflate data");

    /* Flip bytes all over a good compressed file: never a crash, and never
     * success unless the flip left the data intact. */
    write_idx("flip", "labels-idx1-ubyte", GZ, 0x801, 1, ldims, blabels, BN, -1);
    write_idx("flip", "images-idx3-ubyte", GZ, 0x803, 3, idims, noise, sizeof noise, -1);
    snprintf(p, sizeof p, "%s/flip-images-idx3-ubyte.gz", dir);
    f = fopen(p, "rb");
    static uint8_t orig[sizeof noise + 1024];
    size_t len = fread(orig, 1, sizeof orig, f);
    fclose(f);
    int clean = 1, tries = 0;
    for (size_t at = 0; at < len; at += len / 97 + 1, tries++) {
        uint8_t copy = orig[at];
        orig[at] ^= 0x5a;
        f = fopen(p, "wb");
        fwrite(orig, 1, len, f);
        fclose(f);
        orig[at] = copy;
        rc = sc_dataset_load_idx(dir, "flip", &ds);
        if (rc == SC_OK) {
            /* Bytes in the gzip header's mtime/xfl/os fields do not matter. */
            if (memcmp(ds.images, noise, sizeof noise) != 0)
                clean = 0;
            sc_dataset_free(&ds);
        } else if (rc != SC_ERR_DATA || !strstr(sc_last_error(), "flip-images")) {
            clean = 0;
        }
    }
    check(clean, "gzip: %d single-byte corruptions each refused or harmless", tries);
}

static void fashion_mnist(void)
{
    struct stat st;
    if (stat(FASHION_DIR, &st) != 0) {
        printf("skip - %s not installed\n", FASHION_DIR);
        return;
    }
    static const struct {
        const char *prefix;
        int n;
    } sets[] = {{"train", 60000}, {"t10k", 10000}};
    for (int s = 0; s < 2; s++) {
        struct sc_dataset ds;
        int rc = sc_dataset_load_idx(FASHION_DIR, sets[s].prefix, &ds);
        check(rc == SC_OK, "Fashion-MNIST %s loads (%s)", sets[s].prefix, rc ? sc_last_error() : "");
        if (rc)
            continue;
        check(ds.n == sets[s].n && ds.c == 1 && ds.h == 28 && ds.w == 28 && ds.classes == 10,
              "Fashion-MNIST %s: n=%d (want %d), %dx%dx%d", sets[s].prefix, ds.n, sets[s].n, ds.c, ds.h, ds.w);
        int count[10] = {0}, balanced = 1;
        for (int i = 0; i < ds.n; i++)
            count[ds.labels[i]]++;
        for (int c = 0; c < 10; c++)
            balanced &= count[c] == ds.n / 10;
        check(balanced, "Fashion-MNIST %s: %d samples in each of the 10 classes", sets[s].prefix, ds.n / 10);
        long sum = 0;
        for (long i = 0; i < (long)ds.n * 784; i++)
            sum += ds.images[i];
        double mean = (double)sum / ((double)ds.n * 784) / 255.0;
        check(mean > 0.27 && mean < 0.30, "Fashion-MNIST %s: mean pixel %.4f (about 0.286)", sets[s].prefix, mean);
        sc_dataset_free(&ds);
    }
}

int main(void)
{
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(dir, sizeof dir, "%s/test_idx.XXXXXX", base);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    good_files();
    missing();
    damaged(PLAIN);
    damaged(GZ);
    damaged_gzip();
    fashion_mnist();
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        char p[600];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (e->d_name[0] != '.')
            unlink(p);
    }
    if (d)
        closedir(d);
    if (rmdir(dir) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    printf("test_idx: %d passed, %d failed\n", passes, failures);
    return failures ? 1 : 0;
}
