/* Shared by the fuzz harnesses (fuzz/fuzz_*.c): a scratch directory per
 * process for the path-based readers, and the checks every input must pass
 * whatever it is.  A broken property aborts, which libFuzzer reports as a
 * crash and the corpus replay (fuzz/replay.c) as a failed test. */
#ifndef SC_FUZZ_COMMON_H
#define SC_FUZZ_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/starconv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char fuzz_dir[256];

static void fuzz_rmdir(void)
{
    if (!fuzz_dir[0])
        return;
    DIR *d = opendir(fuzz_dir);
    if (d) {
        struct dirent *e;
        char p[512];
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(p, sizeof p, "%s/%s", fuzz_dir, e->d_name);
                unlink(p);
            }
        closedir(d);
    }
    rmdir(fuzz_dir);
}

/* A private directory, in memory (/dev/shm) when there is one: fuzzing
 * writes a file per input, so a disk would be the bottleneck. */
static const char *fuzz_tmpdir(void)
{
    if (fuzz_dir[0])
        return fuzz_dir;
    const char *bases[] = {"/dev/shm", getenv("TMPDIR"), "/tmp"};
    for (size_t i = 0; i < sizeof bases / sizeof bases[0]; i++) {
        if (!bases[i] || !*bases[i])
            continue;
        snprintf(fuzz_dir, sizeof fuzz_dir, "%s/starconv-fuzz.XXXXXX", bases[i]);
        if (mkdtemp(fuzz_dir)) {
            atexit(fuzz_rmdir);
            return fuzz_dir;
        }
    }
    fprintf(stderr, "fuzz: cannot create a scratch directory\n");
    abort();
}

/* <scratch>/name, in a static buffer per slot (a harness needs a few). */
static const char *fuzz_path(int slot, const char *name)
{
    static char paths[4][512];
    snprintf(paths[slot], sizeof paths[slot], "%s/%s", fuzz_tmpdir(), name);
    return paths[slot];
}

static void fuzz_write(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f || (len && fwrite(data, 1, len, f) != len) || fclose(f) != 0) {
        fprintf(stderr, "fuzz: cannot write %s\n", path);
        abort();
    }
}

/* Clears the thread's last message, so that a failure that forgets to set
 * one is caught instead of passing with a stale message. */
static void fuzz_reset_error(void)
{
    sc_error(SC_OK, "%s", "");
}

__attribute__((noreturn)) static void fuzz_fail(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz: property broken: %s: %s\n", what, detail);
    abort();
}

/* What the user sees on a bad file: a known negative code and one
 * non-empty line, with no control character that would break or rewrite
 * the line on a terminal. */
static void fuzz_check_error(int rc, const char *what)
{
    if (rc >= 0)
        fuzz_fail(what, "error expected");
    if (rc < SC_ERR_MISMATCH)
        fuzz_fail(what, "unknown error code");
    const char *msg = sc_last_error();
    if (!msg[0])
        fuzz_fail(what, "error without a message");
    for (const unsigned char *p = (const unsigned char *)msg; *p; p++)
        if ((*p < 0x20 && *p != '\t') || *p == 0x7f)
            fuzz_fail(what, "control character in the error message");
}

#endif
