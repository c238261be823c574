/* libstarconv's side of the HDF5 reader (hdf5_module.h): the public
 * functions of hdf5.h and sc_dataset_hdf5, which open the module
 * starconv-hdf5.so the first time an HDF5 data set is opened and forward
 * to it.  Functions on a data set that no module opened (ds->file NULL:
 * IDX or generated data) answer without loading anything. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr */
#endif
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "base/error_va.h"
#include "kernels/fail.h"
#include "src/data/hdf5.h"
#include "src/data/hdf5_module.h"

#ifndef SC_PKGLIBDIR
#define SC_PKGLIBDIR ""
#endif

static struct sc_hdf5_api api;
static int loaded; /* 1: api holds the module's functions */
static char why[PATH_MAX + 256];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static const struct sc_hdf5_host host = {
    .version = SC_HDF5_MODULE_VERSION,
    .verror = sc_verror,
    .vfail_record = sc_fail_vrecord,
};

/* dir/SC_HDF5_MODULE_FILE opened into *handle; 0 when it is not there. */
static int try_dir(const char *dir, void **handle)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, SC_HDF5_MODULE_FILE) >= (int)sizeof path || access(path, F_OK))
        return 0;
    *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!*handle)
        snprintf(why, sizeof why, "%s", dlerror());
    return 1;
}

/* Where the module is: $SC_HDF5_MODULE (a file) if set; else beside the
 * object that holds this code (the program, which links libstarconv's
 * objects, or libstarconv.so) in the build tree's .libs, whether that
 * object is at the top of the tree or in a folder of it (tests/); else
 * the installed pkglibdir. */
static void load(void)
{
    void *handle = NULL;
    const char *env = getenv("SC_HDF5_MODULE");
    if (env && *env) {
        handle = dlopen(env, RTLD_NOW | RTLD_LOCAL);
        if (!handle)
            snprintf(why, sizeof why, "SC_HDF5_MODULE=%s: %s", env, dlerror());
    } else {
        int found = 0;
        Dl_info info;
        char dir[PATH_MAX], sub[PATH_MAX + 16];
        if (dladdr((void *)load, &info) && info.dli_fname && realpath(info.dli_fname, dir)) {
            char *slash = strrchr(dir, '/');
            if (slash)
                *slash = '\0';
            const char *beside[] = {"%s/.libs", "%s/../.libs", "%s"};
            for (size_t i = 0; !found && i < sizeof beside / sizeof *beside; i++) {
                snprintf(sub, sizeof sub, beside[i], dir);
                found = try_dir(sub, &handle);
            }
        }
        if (!found && *SC_PKGLIBDIR)
            found = try_dir(SC_PKGLIBDIR, &handle);
        if (!found)
            snprintf(why, sizeof why, "%s is neither in the build tree's .libs nor in %s (SC_HDF5_MODULE names it)",
                     SC_HDF5_MODULE_FILE, *SC_PKGLIBDIR ? SC_PKGLIBDIR : "an installed pkglibdir");
    }
    if (!handle)
        return;
    sc_hdf5_module_init_fn *init = (sc_hdf5_module_init_fn *)dlsym(handle, SC_HDF5_MODULE_INIT);
    if (!init || init(&host, &api)) {
        snprintf(why, sizeof why, "%s: not starconv's HDF5 module of this build", SC_HDF5_MODULE_FILE);
        dlclose(handle);
        return;
    }
    loaded = 1; /* the module stays loaded: data sets hold its pointers */
}

static int have_module(void)
{
    pthread_once(&load_once, load);
    return loaded;
}

SC_API int sc_dataset_hdf5(const char *spec, int test, struct sc_dataset *out)
{
    if (!spec || strncmp(spec, "hdf5:", 5))
        return 1;
    memset(out, 0, sizeof *out);
#ifndef SC_USE_HDF5
    (void)test;
    return sc_error(SC_ERR_ARG,
                    "--data %s: this starconv was built without HDF5 (install the Debian package "
                    "libhdf5-openmpi-dev, then ./configure && make)",
                    spec);
#else
    if (!have_module())
        return sc_error(SC_ERR_ARG, "--data %s: cannot load starconv's HDF5 reader: %s", spec, why);
    return api.open(spec, test, out);
#endif
}

void sc_data_file_read(void *source, const struct sc_load_read *req, const int32_t *idx, float *x, int32_t *labels)
{
    if (!source || !have_module()) {
        sc_fail_record("load_read", "no HDF5 file open");
        return;
    }
    api.read(source, req, idx, x, labels);
}

void sc_data_file_label_shape(const struct sc_dataset *ds, int *lh, int *lw)
{
    if (ds && ds->file && have_module())
        api.label_shape(ds, lh, lw);
    else
        *lh = *lw = 0;
}

void sc_data_file_stats(const struct sc_dataset *ds, struct sc_data_file_stats *out)
{
    if (ds && ds->file && have_module())
        api.stats(ds, out);
    else
        memset(out, 0, sizeof *out);
}

const char *sc_data_file_name(const struct sc_dataset *ds)
{
    return ds && ds->file && have_module() ? api.name(ds) : "";
}

const char *sc_data_file_h5_error(char buf[256])
{
    if (have_module())
        return api.h5_error(buf);
    /* why is longer than buf: the end of a long path may be cut */
    size_t n = strnlen(why, 255);
    memcpy(buf, why, n);
    buf[n] = '\0';
    return buf;
}

void sc_data_file_close(struct sc_data_file *f)
{
    if (f && have_module())
        api.close(f);
}
