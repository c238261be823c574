/* The boundary between libstarconv and its HDF5 reader.
 *
 * The reader (hdf5.c) is built as a module, starconv-hdf5.so, that
 * libstarconv opens (hdf5_load.c) on the first use of an HDF5 data set:
 * HDF5 with MPI-IO brings some thirty shared libraries and several MiB
 * of resident memory to every rank, which runs that do not read HDF5
 * should not carry.  The module reaches libstarconv only through the host
 * table (libstarconv exports nothing but its public API), and libstarconv
 * reaches the module only through the api table. */
#ifndef SC_DATA_HDF5_MODULE_H
#define SC_DATA_HDF5_MODULE_H

#include <stdarg.h>
#include <stdint.h>

/* Bumped whenever either table changes: a module from another build is
 * refused rather than called through the wrong layout. */
#define SC_HDF5_MODULE_VERSION 1
#define SC_HDF5_MODULE_FILE    "starconv-hdf5.so"
#define SC_HDF5_MODULE_INIT    "sc_hdf5_module_init"

struct sc_dataset;
struct sc_data_file;
struct sc_load_read;
struct sc_data_file_stats;

/* What the module calls in libstarconv: sc_error and sc_fail_record. */
struct sc_hdf5_host {
    int version;
    int (*verror)(int err, const char *fmt, va_list ap);
    void (*vfail_record)(const char *op, const char *fmt, va_list ap);
};

/* The reader's functions, as hdf5.h and dataset.h describe them. */
struct sc_hdf5_api {
    int (*open)(const char *spec, int test, struct sc_dataset *out);
    void (*read)(void *source, const struct sc_load_read *req, const int32_t *idx, float *x, int32_t *labels);
    void (*label_shape)(const struct sc_dataset *ds, int *lh, int *lw);
    void (*stats)(const struct sc_dataset *ds, struct sc_data_file_stats *out);
    const char *(*name)(const struct sc_dataset *ds);
    const char *(*h5_error)(char buf[256]);
    void (*close)(struct sc_data_file *f);
};

/* The module's one exported function: 0 and *api filled, or -1 when
 * host->version is not the module's. */
typedef int sc_hdf5_module_init_fn(const struct sc_hdf5_host *host, struct sc_hdf5_api *api);

/* Inside the module, the reader's definitions take module-local names
 * (libstarconv's forwarders own the public ones), and sc_error and
 * sc_fail_record are the module's shims over the host table. */
#ifdef SC_HDF5_IN_MODULE
#define sc_dataset_hdf5             sc_hdf5_open
#define sc_data_file_read           sc_hdf5_read
#define sc_data_file_label_shape    sc_hdf5_label_shape
#define sc_data_file_stats(ds, out) sc_hdf5_stats(ds, out)
#define sc_data_file_name           sc_hdf5_name
#define sc_data_file_h5_error       sc_hdf5_h5_error
#define sc_data_file_close          sc_hdf5_close
#define sc_error                    sc_hdf5_error
#define sc_fail_record              sc_hdf5_fail_record
#endif

#endif
