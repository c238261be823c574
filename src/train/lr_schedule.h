/* Learning-rate schedules, as torch.optim.lr_scheduler computes them per
 * iteration: a linear warm-up (LinearLR) followed by a main schedule
 * (constant, MultiStepLR or CosineAnnealingLR), the two chained as
 * SequentialLR chains them, so the main schedule counts its iterations
 * from the end of the warm-up. */
#ifndef SC_TRAIN_LR_SCHEDULE_H
#define SC_TRAIN_LR_SCHEDULE_H

enum sc_lr_kind { SC_LR_CONSTANT, SC_LR_STEP, SC_LR_COSINE };

#define SC_LR_MAX_MILESTONES 32

struct sc_lr_schedule {
    enum sc_lr_kind kind;
    int nmilestones;
    long milestones[SC_LR_MAX_MILESTONES]; /* step: increasing iterations after the warm-up */
    double gamma;                          /* step: the factor at each milestone */
    double min_lr;                         /* cosine: the learning rate it ends at */
    long warmup;                           /* iterations of linear warm-up (0: none) */
    double warmup_start;                   /* the warm-up's first factor (LinearLR's start_factor) */
};

/* constant (and no warm-up). */
void sc_lr_schedule_default(struct sc_lr_schedule *s);
/* --lr-schedule SPEC: "constant", "step:M1,M2,...[:GAMMA]" (GAMMA default
 * 0.1) or "cosine[:MIN_LR]" (default 0).  SC_ERR_ARG saying what is wrong. */
int sc_lr_schedule_parse(const char *spec, struct sc_lr_schedule *s);
/* --warmup SPEC: "W[:START_FACTOR]" (START_FACTOR in (0, 1], default 1/3
 * as LinearLR's).  SC_ERR_ARG saying what is wrong. */
int sc_lr_warmup_parse(const char *spec, struct sc_lr_schedule *s);
/* Whether s fits a run of total iterations: the warm-up shorter than the
 * run where a cosine follows it.  SC_ERR_ARG saying why not. */
int sc_lr_schedule_check(const struct sc_lr_schedule *s, long total);
/* The learning rate of iteration t (from 0) of a run of total iterations
 * that starts at base. */
double sc_lr_at(const struct sc_lr_schedule *s, double base, long t, long total);
/* s in the syntax the options take, for logs: "cosine:0 after 100 warm-up
 * iterations from 0.333". */
void sc_lr_schedule_describe(const struct sc_lr_schedule *s, char *buf, int n);

#endif
