/* libFuzzer harness for the network builder (sc_net_parse in src/net.c and
 * the layers' parse and shapes functions): a .cfg file's bytes, read as
 * starconv-train --model reads them.  No StarPU is started: parsing needs
 * none.  A refused file gives one error line; an accepted one has layers
 * whose shapes are positive and whose sources come before them. */
#include "fuzz_common.h"
#include "src/net/net.h"

static void check_net(const struct sc_net *net)
{
    if (net->nlayers < 1 || !net->layers || net->classes < 2)
        fuzz_fail("net", "accepted a network without layers or classes");
    for (int i = 0; i < net->nlayers; i++) {
        const struct sc_layer *l = &net->layers[i];
        if (l->in.c < 1 || l->in.h < 1 || l->in.w < 1 || l->out.c < 1 || l->out.h < 1 || l->out.w < 1)
            fuzz_fail("net", "a layer with an empty shape");
        for (int k = 0; k < l->nsrc; k++)
            if (l->src[k] >= i || l->src[k] < -1)
                fuzz_fail("net", "a layer reads a later one");
    }
    (void)sc_net_nparams(net);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_path(0, "fuzz.cfg");
    fuzz_write(path, data, size);
    struct sc_net *net = NULL;
    fuzz_reset_error();
    int rc = sc_net_parse(path, &net);
    if (rc != SC_OK) {
        fuzz_check_error(rc, "sc_net_parse");
        return 0;
    }
    check_net(net);
    sc_net_destroy(net);
    return 0;
}
