/* Layer types: each has its own params struct and its own file, and plugs
 * into the network through an ops table.  A layer submits the tasks of one
 * tile (a slice of the local batch) at a time and knows nothing of ranks. */
#ifndef SC_LAYERS_H
#define SC_LAYERS_H

#include <stdint.h>
#include <starpu.h>

#include "base/error.h"
#include "src/io/cfg.h"
#include "codelets/codelets.h"
#include "base/layout.h"
#include "tasks/tasks.h"

struct sc_shape {
    int c, h, w; /* one sample */
};

static inline size_t sc_shape_size(const struct sc_shape *s)
{
    return (size_t)s->c * s->h * s->w;
}

/* A parameter tensor as PyTorch names and lays it out. */
struct sc_param_tensor {
    const char *suffix; /* "weight" or "bias" */
    int ndim;
    int64_t shape[4];
    size_t offset, count; /* within the layer's parameter vector */
};

/* The handles one layer sees for one tile. */
struct sc_tile_io {
    int n;                                /* samples in this tile */
    starpu_data_handle_t x, y;            /* input, output */
    starpu_data_handle_t x2;              /* the second input ([shortcut]), else NULL */
    starpu_data_handle_t dx, dy;          /* their gradients; dx NULL for the first layer */
    starpu_data_handle_t scratch;         /* per-tile scratch (layer's scratch_bytes), or NULL */
    starpu_data_handle_t params, dparams; /* dparams: this tile's own partial gradient; NULL in
                                           * backward: skip it (see param_grad) */
    starpu_data_handle_t labels, stats;   /* used by the loss layer */
    float loss_scale;                     /* 1 / global batch */
    int train;                            /* 0: forward for evaluation only */
    const struct sc_task_opts *task;      /* how the tile's tasks are submitted */
    const struct sc_task_opts *grad_task; /* the parameter gradient's tasks: off the critical path of
                                           * backprop, at a priority of their own */
    const struct sc_tile_split *split;    /* NULL: the tile holds whole samples */
    /* The sums of a vector of doubles over the ranks that hold other
     * blocks of the same samples (sc_group_sum_submit; the layer's plans 0
     * and 1, of group_sum_len doubles); NULL when this rank holds whole
     * samples. */
    struct sc_group_sum *const *group_sum;
    /* Training under --nonfinite skip: the batch's verdict (one float, 0:
     * apply), known only after backward.  The forward pass then leaves the
     * layer's buffers alone, and update_buffers changes them, unless the
     * verdict says skip.  NULL: the forward pass updates them. */
    starpu_data_handle_t gate;
    /* The layouts of x (and dx, x2) and of y (and dy): 0 NCHW, else
     * channels in blocks of that many (the network's setup chooses them,
     * within what the layer's layouts flag allows). */
    int x_blk, y_blk;
    /* The arithmetic of the convolutions' products (enum sc_precision,
     * kernels.h: the network's --precision); every tensor stays fp32. */
    int precision;
};

/* A tile of a spatially split layer: the rank holds a block of each
 * sample's input and output, and the other blocks a kernel window reaches
 * arrive as halo pieces (sc_fetch_sources lists them). */
struct sc_tile_split {
    int tile, s0;                  /* the tile's index and its first sample's global index */
    struct sc_box in_box, out_box; /* this rank's blocks */
    /* The fetches that bring the halos of x and dy (NULL: the tile's own
     * block is all a window reaches, as for pointwise layers), over this
     * rank's tiles of x and dy. */
    const struct sc_fetch *halo_x, *halo_dy;
    starpu_data_handle_t *x_tiles, *dy_tiles;
};

struct sc_layer;

/* Which channel-blocked layouts (kernels.h: xblk, yblk) a layer's CPU
 * kernels take on whole samples, the network's setup choosing (setup.c,
 * plan_layouts): NCHW only; either layout for input and output, each its
 * own (convolution); one layout for every input and output (per-element
 * and per-channel layers); either for the input, NCHW for the output
 * (global average pooling, whose 1x1 output is the same bytes in both). */
enum sc_layer_layouts { SC_LAYOUTS_NCHW, SC_LAYOUTS_ANY, SC_LAYOUTS_SAME, SC_LAYOUTS_IN };

/* What a layer's kernels compute on one block (the planner's cost model,
 * src/plan.c, times it through a calibration): a library kernel with its
 * arguments, or, for the layers without one, memory streamed. */
enum sc_work_kind { SC_WORK_STREAM, SC_WORK_CONV, SC_WORK_POOL, SC_WORK_FC };
struct sc_layer_work {
    enum sc_work_kind kind;
    struct sc_conv_args conv;
    struct sc_pool_args pool;
    struct sc_fc_args fc;
};

struct sc_layer_ops {
    const char *section; /* cfg section name */
    const char *prefix;  /* layer names are prefix + number, e.g. conv2 */
    /* Read the section's keys into the layer's own params. */
    int (*parse)(struct sc_layer *l, const struct sc_cfg *cfg, struct sc_cfg_section *s);
    /* Given l->in, set l->out, l->nparams, l->tensors, l->scratch_bytes (for max_n samples). */
    int (*shapes)(struct sc_layer *l, int max_n);
    /* Fill the parameter vector (PyTorch's default initialization). */
    void (*init)(struct sc_layer *l, float *params, uint64_t seed);
    int (*forward)(struct sc_layer *l, const struct sc_tile_io *io);
    /* Optional: the activation's backward, dy in place (before backward,
     * and before dy's halo is exchanged). */
    int (*act_backward)(struct sc_layer *l, const struct sc_tile_io *io);
    /* Optional, with act_backward, for an output that several layers read:
     * dy += part (the last part of dy's sum, a vector as long as dy's
     * handle), then the activation's backward, in one task with the bits
     * of the two.  1 (and no task) when the layer has no activation there:
     * the network then adds part itself. */
    int (*act_backward_sum)(struct sc_layer *l, const struct sc_tile_io *io, starpu_data_handle_t part);
    /* Gradients: dx (when not NULL) and dparams (when the layer has parameters). */
    int (*backward)(struct sc_layer *l, const struct sc_tile_io *io);
    /* Optional, for layers whose statistics span the rank's batch (batch
     * normalization): forward and backward of all ntiles tiles at once,
     * instead of forward and backward; setup registers per-tile state
     * (after shapes), teardown releases it. */
    int (*forward_tiles)(struct sc_layer *l, const struct sc_tile_io *io, int ntiles);
    int (*backward_tiles)(struct sc_layer *l, const struct sc_tile_io *io, int ntiles);
    int (*setup)(struct sc_layer *l, int ntiles);
    void (*teardown)(struct sc_layer *l);
    /* Optional (the layers --fc-replicate applies to): the parameter gradient
     * alone, into dparams (overwritten), from x and a dy that has already
     * been through the activation's backward (by backward). */
    int (*param_grad)(struct sc_layer *l, const struct sc_tile_io *io);
    /* Optional (layers with nbuffers > 0, after setup): the buffers' handle. */
    starpu_data_handle_t (*buffer_handle)(struct sc_layer *l);
    /* Optional (layers whose forward updates buffers): with io[0].gate, the
     * update the forward pass left, after the gate closes. */
    int (*update_buffers)(struct sc_layer *l, const struct sc_tile_io *io, int ntiles);
    /* Optional (the layers that can split channels, c and f in parallel=):
     * this rank's share of l, a copy with a priv of its own, for cin input
     * and cout output channels, its shapes set (it gets its own setup and
     * teardown).  partial: its output is a partial sum over the input
     * channels (a channel-split convolution), which the network sums and
     * then passes through the activation, so the share leaves the
     * activation out (into post_relu) and has a bias only when bias. */
    int (*split_channels)(const struct sc_layer *l, struct sc_layer *local, int cin, int cout, int partial, int bias);
    /* With split_channels: index[i] = the position in l's parameters (and,
     * for layers with buffers, of l's buffers, laid out alike) of the
     * share's parameter i, the share's channels starting at in_ch0 (input)
     * and out_ch0 (output). */
    void (*param_index)(const struct sc_layer *l, const struct sc_layer *local, int in_ch0, int out_ch0, size_t *index);
    /* Optional (layers with a library kernel; the others stream memory):
     * the kernel's arguments for n samples of cin input and cout output
     * channels, ih x iw of input and oh x ow of output each. */
    void (*work)(const struct sc_layer *l, int n, int cin, int cout, int ih, int iw, int oh, int ow,
                 struct sc_layer_work *w);
};

struct sc_layer {
    const struct sc_layer_ops *ops;
    void *priv;        /* the type's params struct */
    int index;         /* position in the cfg, from 0 */
    int torch_index;   /* index of its first module in PyTorch's nn.Sequential */
    int torch_modules; /* modules it stands for (conv + ReLU = 2) */
    int flattens;      /* reads its input as one vector per sample (PyTorch: an
                        * nn.Flatten before the first such layer, and only such
                        * layers and the loss after it) */
    int line;          /* cfg line of its section */
    char name[32];     /* e.g. "conv2", for traces */
    struct sc_shape in, out;
    size_t nparams;
    struct sc_param_tensor tensors[2];
    int ntensors;
    size_t scratch_bytes;
    int is_loss;
    /* Spatial splitting (set by shapes): whole_sample layers (fully
     * connected, softmax) need every pixel of a sample; the others read
     * windows win_r x win_c of their input (kernel 1 for pointwise), and
     * bwd_reads_x: backward needs x over the windows of the outputs it
     * reads (max pooling). */
    int whole_sample, bwd_reads_x;
    struct sc_window win_r, win_c;
    char parallel[32];    /* the cfg's parallel= ("" : the command line's) */
    size_t group_sum_len; /* > 0: the layer sums vectors of this many doubles over
                           * the ranks of its samples (two plans: 0 and 1) */
    /* Inputs: the layers whose outputs this one reads (src[0]: x, src[1]:
     * x2), -1 for the network's input.  Set by the network (src[0] the
     * previous layer) unless parse sets them; in2: src[1]'s shape. */
    int src[2], nsrc;
    struct sc_shape in2;
    int alias; /* [route]: no tasks; readers of it read src[0] */
    /* State that is not trained but saved (BN's running statistics): the
     * tensors within the float vector of nbuffer_values values that
     * ops->buffer_handle gives. */
    struct sc_param_tensor buffers[2];
    int nbuffers;
    size_t nbuffer_values;
    int dx_is_dy;                  /* the gradient of every input is dy itself ([shortcut]) */
    int reads_dy_only;             /* its backward reads dy and never writes it (no activation's
                                    * backward in place), so that its dy may be another layer's */
    int mixes_channels;            /* every output channel reads every input channel (convolution):
                                    * the grid's C splits the input channels, F the output ones;
                                    * for the other layers both split the channels alike */
    int post_relu;                 /* a partial share (split_channels): the ReLU the network applies
                                    * after summing the partial outputs */
    enum sc_layer_layouts layouts; /* the channel-blocked layouts its CPU kernels take */
};

extern const struct sc_layer_ops sc_layer_conv_ops;
extern const struct sc_layer_ops sc_layer_maxpool_ops;
extern const struct sc_layer_ops sc_layer_avgpool_ops;
extern const struct sc_layer_ops sc_layer_fc_ops;
extern const struct sc_layer_ops sc_layer_softmax_ops;
extern const struct sc_layer_ops sc_layer_batchnorm_ops;
extern const struct sc_layer_ops sc_layer_route_ops;
extern const struct sc_layer_ops sc_layer_shortcut_ops;
extern const struct sc_layer_ops sc_layer_gap_ops;

/* Uniform floats in [-bound, bound) from a counter-based generator: the same
 * for a given (seed, stream, i) whatever the number of ranks or workers. */
float sc_uniform(uint64_t seed, uint64_t stream, uint64_t i, float bound);

/* PyTorch's default initialization of conv and linear layers:
 * kaiming_uniform_(a=sqrt(5)) gives weights uniform in 1/sqrt(fan_in), and the
 * bias is uniform in the same bound. */
void sc_layer_init_uniform(const struct sc_layer *l, float *params, uint64_t seed, size_t fan_in);

/* Spatially split convolution and pooling (src/layer_region.c): submit the
 * region tasks of one tile, the parts that need no halo first.  t: the
 * template (op, geometry) whose regions and sources these fill. */
int sc_region_forward(const struct sc_layer *l, const struct sc_tile_io *io, struct sc_region_args *t,
                      starpu_data_handle_t params, starpu_data_handle_t y, const char *name);
int sc_region_backward_data(const struct sc_layer *l, const struct sc_tile_io *io, struct sc_region_args *t,
                            starpu_data_handle_t params, starpu_data_handle_t dx, const char *name);
int sc_region_filter(const struct sc_layer *l, const struct sc_tile_io *io, struct sc_region_args *t,
                     starpu_data_handle_t dparams, const char *name);

/* split_channels of the layers whose parameters and state are per channel:
 * a copy of l with a copy of its priv (priv_size bytes), cin channels in
 * and out, its shapes set; and their param_index, for nvec vectors of one
 * value per channel, one after the other. */
int sc_layer_split_copy(const struct sc_layer *l, struct sc_layer *local, int cin, size_t priv_size);
void sc_layer_channel_index(const struct sc_layer *l, const struct sc_layer *local, int nvec, int ch0, size_t *index);

/* Shared by the layer parsers: "activation=relu|linear". */
/* The FLOPs of a kernel's work, 2 per multiply-add: flops[0] forward,
 * [1] backward data, [2] backward filter (weights).  Convolutions and fully
 * connected products only; 0 for the others (pooling compares and adds). */
void sc_layer_work_flops(const struct sc_layer_work *w, double flops[3]);
int sc_layer_parse_activation(const struct sc_cfg *cfg, struct sc_cfg_section *s, int *relu);

#endif
