/* Replays a kept fuzz corpus through a harness without libFuzzer, so that
 * `make check` (built with the ordinary compiler, and sanitizers when
 * configured with --enable-sanitizers) runs every input that ever crashed
 * a parser.  Arguments: files or directories (every regular file in them,
 * in name order).  A broken input crashes or aborts, which fails the test;
 * so does one that takes longer than $FUZZ_REPLAY_TIMEOUT seconds (default
 * 60; 0: no limit), as libFuzzer's -timeout would. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *current;

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "replay: timeout on ";
    if (write(2, msg, sizeof msg - 1) >= 0 && write(2, current, strlen(current)) >= 0)
        (void)!write(2, "\n", 1);
    _exit(1);
}

static unsigned timeout = 60;

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    size_t cap = 4096, len = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            fprintf(stderr, "%s: out of memory\n", path);
            fclose(f);
            return -1;
        }
        len += fread(buf + len, 1, cap - len, f);
        if (len < cap)
            break;
        uint8_t *p = realloc(buf, cap *= 2);
        if (!p)
            free(buf);
        buf = p;
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        fprintf(stderr, "%s: read error\n", path);
        free(buf);
        return -1;
    }
    /* libFuzzer hands over an exact-size copy; so do we, so that ASan
     * catches a read one byte past the input. */
    uint8_t *exact = malloc(len ? len : 1);
    if (!exact) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, len);
    free(buf);
    current = path;
    alarm(timeout);
    LLVMFuzzerTestOneInput(exact, len);
    alarm(0);
    free(exact);
    return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv)
{
    long n = 0;
    int bad = 0;
    if (argc < 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", argv[0]);
        return 2;
    }
    const char *t = getenv("FUZZ_REPLAY_TIMEOUT");
    if (t && *t)
        timeout = (unsigned)strtoul(t, NULL, 10);
    signal(SIGALRM, on_alarm);
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            bad = 1;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (replay_file(argv[i]) == 0)
                n++;
            else
                bad = 1;
            continue;
        }
        struct dirent **ents;
        int m = scandir(argv[i], &ents, NULL, by_name);
        if (m < 0) {
            perror(argv[i]);
            bad = 1;
            continue;
        }
        for (int k = 0; k < m; k++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], ents[k]->d_name);
            if (ents[k]->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
                /* The name first: the input that crashes is the last one shown. */
                fprintf(stderr, "replay %s\n", path);
                if (replay_file(path) == 0)
                    n++;
                else
                    bad = 1;
            }
            free(ents[k]);
        }
        free(ents);
    }
    printf("%ld inputs replayed\n", n);
    return bad;
}
