/* Learning-rate schedules (lr_schedule.h). */
#include "src/train/lr_schedule.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

void sc_lr_schedule_default(struct sc_lr_schedule *s)
{
    *s = (struct sc_lr_schedule){.kind = SC_LR_CONSTANT, .gamma = 0.1, .warmup_start = 1.0 / 3};
}

/* A finite double filling [p, end): 0, or -1. */
static int parse_double(const char *p, const char *end, double *out)
{
    char buf[64], *e;
    size_t n = (size_t)(end - p);
    if (n == 0 || n >= sizeof buf)
        return -1;
    memcpy(buf, p, n);
    buf[n] = 0;
    errno = 0;
    *out = strtod(buf, &e);
    return *e || errno || !isfinite(*out) ? -1 : 0;
}

static int parse_long(const char *p, const char *end, long *out)
{
    char buf[32], *e;
    size_t n = (size_t)(end - p);
    if (n == 0 || n >= sizeof buf)
        return -1;
    memcpy(buf, p, n);
    buf[n] = 0;
    errno = 0;
    *out = strtol(buf, &e, 10);
    return *e || errno ? -1 : 0;
}

int sc_lr_schedule_parse(const char *spec, struct sc_lr_schedule *s)
{
    const char *colon = strchr(spec, ':');
    size_t name_len = colon ? (size_t)(colon - spec) : strlen(spec);
    if (name_len == 8 && !strncmp(spec, "constant", 8) && !colon) {
        s->kind = SC_LR_CONSTANT;
        return 0;
    }
    if (name_len == 6 && !strncmp(spec, "cosine", 6)) {
        s->kind = SC_LR_COSINE;
        s->min_lr = 0;
        if (colon && (parse_double(colon + 1, colon + 1 + strlen(colon + 1), &s->min_lr) || s->min_lr < 0))
            return sc_error(SC_ERR_ARG, "--lr-schedule %s: cosine[:MIN_LR] with MIN_LR >= 0", spec);
        return 0;
    }
    if (name_len == 4 && !strncmp(spec, "step", 4)) {
        if (!colon)
            return sc_error(SC_ERR_ARG, "--lr-schedule %s: step:M1,M2,...[:GAMMA] needs milestones", spec);
        s->kind = SC_LR_STEP;
        s->gamma = 0.1;
        s->nmilestones = 0;
        const char *p = colon + 1, *gamma = strchr(p, ':');
        const char *list_end = gamma ? gamma : p + strlen(p);
        if (gamma && (parse_double(gamma + 1, gamma + 1 + strlen(gamma + 1), &s->gamma) || s->gamma <= 0))
            return sc_error(SC_ERR_ARG, "--lr-schedule %s: GAMMA must be a number > 0", spec);
        while (p < list_end) {
            const char *comma = memchr(p, ',', (size_t)(list_end - p));
            const char *e = comma ? comma : list_end;
            long m;
            if (parse_long(p, e, &m) || m < 1)
                return sc_error(SC_ERR_ARG, "--lr-schedule %s: milestones are iterations >= 1", spec);
            if (s->nmilestones && m <= s->milestones[s->nmilestones - 1])
                return sc_error(SC_ERR_ARG, "--lr-schedule %s: milestones must increase", spec);
            if (s->nmilestones == SC_LR_MAX_MILESTONES)
                return sc_error(SC_ERR_ARG, "--lr-schedule %s: at most %d milestones", spec, SC_LR_MAX_MILESTONES);
            s->milestones[s->nmilestones++] = m;
            p = comma ? comma + 1 : e;
            if (comma && p == list_end)
                return sc_error(SC_ERR_ARG, "--lr-schedule %s: a milestone is missing after ','", spec);
        }
        if (!s->nmilestones)
            return sc_error(SC_ERR_ARG, "--lr-schedule %s: step:M1,M2,...[:GAMMA] needs milestones", spec);
        return 0;
    }
    return sc_error(SC_ERR_ARG, "--lr-schedule %s: constant, step:M1,M2,...[:GAMMA] or cosine[:MIN_LR]", spec);
}

int sc_lr_warmup_parse(const char *spec, struct sc_lr_schedule *s)
{
    const char *colon = strchr(spec, ':');
    const char *end = colon ? colon : spec + strlen(spec);
    long w;
    double f = 1.0 / 3;
    if (parse_long(spec, end, &w) || w < 0 ||
        (colon && (parse_double(colon + 1, colon + 1 + strlen(colon + 1), &f) || !(f > 0 && f <= 1))))
        return sc_error(SC_ERR_ARG, "--warmup %s: W[:START_FACTOR], W >= 0 iterations, 0 < START_FACTOR <= 1", spec);
    s->warmup = w;
    s->warmup_start = f;
    return 0;
}

int sc_lr_schedule_check(const struct sc_lr_schedule *s, long total)
{
    if (s->kind == SC_LR_COSINE && s->warmup >= total)
        return sc_error(SC_ERR_ARG,
                        "--warmup %ld: a cosine schedule needs a run longer than its warm-up (%ld iterations)",
                        s->warmup, total);
    return 0;
}

double sc_lr_at(const struct sc_lr_schedule *s, double base, long t, long total)
{
    if (t < s->warmup) /* LinearLR from start_factor to 1 over warmup iterations */
        return base * (s->warmup_start + (1 - s->warmup_start) * (double)t / (double)s->warmup);
    t -= s->warmup;
    switch (s->kind) {
    case SC_LR_STEP: {
        int passed = 0; /* MultiStepLR: milestones reached, t included */
        while (passed < s->nmilestones && s->milestones[passed] <= t)
            passed++;
        return base * pow(s->gamma, passed);
    }
    case SC_LR_COSINE: {
        double tmax = (double)(total - s->warmup);
        return s->min_lr + (base - s->min_lr) * (1 + cos(M_PI * (double)t / tmax)) / 2;
    }
    default:
        return base;
    }
}

void sc_lr_schedule_describe(const struct sc_lr_schedule *s, char *buf, int n)
{
    int k = 0;
    if (s->kind == SC_LR_CONSTANT)
        k = snprintf(buf, n, "constant");
    else if (s->kind == SC_LR_COSINE)
        k = snprintf(buf, n, "cosine:%g", s->min_lr);
    else {
        k = snprintf(buf, n, "step:");
        for (int i = 0; i < s->nmilestones && k < n; i++)
            k += snprintf(buf + k, n - k, "%s%ld", i ? "," : "", s->milestones[i]);
        if (k < n)
            k += snprintf(buf + k, n - k, ":%g", s->gamma);
    }
    if (s->warmup && k < n)
        snprintf(buf + k, n - k, " after %ld warm-up iterations from %g", s->warmup, s->warmup_start);
}
