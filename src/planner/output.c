/* The plan as --parallel takes it, as a table and as JSON (plan.h). */
#include <stdio.h>

#include "base/ring_segment.h"
#include "src/planner/plan.h"

void sc_plan_parallel_spec(const struct sc_net *net, const struct sc_plan *p, char *buf, size_t len)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int l = 0; l < net->nlayers && k < len; l++)
        if (p->grid[l][0])
            k += snprintf(buf + k, len - k, "%s%s=%s", k ? "," : "", net->layers[l].name, p->grid[l]);
}

void sc_plan_print(FILE *fp, const struct sc_net *net, const struct sc_plan *p)
{
    fprintf(fp, "%-10s %-7s %9s %9s %9s %9s %9s %9s %10s\n", "layer", "grid", "compute", "halo", "channels", "redist",
            "allreduce", "update", "memory");
    for (int l = 0; l < net->nlayers; l++) {
        if (!p->grid[l][0])
            continue;
        const struct sc_plan_cost *c = &p->layer[l];
        fprintf(fp, "%-10s %-7s %8.3fms %8.3fms %8.3fms %8.3fms %8.3fms %8.3fms %8.2fMB\n", net->layers[l].name,
                p->grid[l], 1e3 * c->compute, 1e3 * c->halo, 1e3 * c->channels, 1e3 * c->redistribute,
                1e3 * c->allreduce, 1e3 * c->update, c->memory / 1e6);
    }
    const struct sc_plan_cost *t = &p->total;
    fprintf(fp, "%-10s %-7s %8.3fms %8.3fms %8.3fms %8.3fms %8.3fms %8.3fms %8.2fMB\n", "total", "", 1e3 * t->compute,
            1e3 * t->halo, 1e3 * t->channels, 1e3 * t->redistribute, 1e3 * t->allreduce, 1e3 * t->update,
            t->memory / 1e6);
    fprintf(fp, "gradient communication: --grad-comm %s (allreduce is before hiding behind backward)\n", p->grad_comm);
    if (p->grad_bf16)
        fprintf(fp,
                "--grad-dtype bf16: the allreduce's reduce-scatter at 2 bytes an element, its allgather of "
                "weights at 4 (vectors of at most %d KiB: 4 and 4)\n",
                SC_RING_DIRECT_KB_DEFAULT);
    if (p->fc_replicate)
        fprintf(fp,
                "--fc-replicate %d: those [connected] layers' allreduce column is their inputs' and errors' "
                "allgathers\n",
                p->fc_replicate);
    fprintf(fp, "predicted time per iteration: %.3f ms\n", 1e3 * p->time);
}

void sc_plan_print_json(FILE *fp, const struct sc_net *net, const struct sc_plan_opts *o, const struct sc_plan *p)
{
    char spec[4096];
    sc_plan_parallel_spec(net, p, spec, sizeof spec);
    fprintf(fp, "{\"ranks\": %d, \"batch\": %d, ", o->ranks, o->batch);
    if (o->accumulate > 1) /* an iteration of K batches */
        fprintf(fp, "\"accumulate\": %d, ", o->accumulate);
    fprintf(
        fp,
        "\"time\": %.9g, \"grad_comm\": \"%s\", \"grad_dtype\": \"%s\", \"fc_replicate\": %d, \"parallel\": \"%s\",\n",
        p->time, p->grad_comm, p->grad_bf16 ? "bf16" : "fp32", p->fc_replicate, spec);
    const struct sc_plan_cost *t = &p->total;
    fprintf(fp,
            " \"total\": {\"compute\": %.9g, \"halo\": %.9g, \"channels\": %.9g, \"redistribute\": %.9g, "
            "\"allreduce\": %.9g, \"update\": %.9g, \"memory\": %.0f},\n",
            t->compute, t->halo, t->channels, t->redistribute, t->allreduce, t->update, t->memory);
    fprintf(fp, " \"candidates\": %ld, \"chain_time\": %.9g,\n \"layers\": [", p->candidates, p->chain_time);
    int first = 1;
    for (int l = 0; l < net->nlayers; l++) {
        if (!p->grid[l][0])
            continue;
        const struct sc_plan_cost *c = &p->layer[l];
        fprintf(fp,
                "%s\n  {\"name\": \"%s\", \"grid\": \"%s\", \"compute\": %.9g, \"halo\": %.9g, \"channels\": "
                "%.9g, \"redistribute\": %.9g, \"allreduce\": %.9g, \"update\": %.9g, \"memory\": %.0f}",
                first ? "" : ",", net->layers[l].name, p->grid[l], c->compute, c->halo, c->channels, c->redistribute,
                c->allreduce, c->update, c->memory);
        first = 0;
    }
    fprintf(fp, "\n ]}\n");
}
