/* sc_error with a va_list (base/error.c), for code that reaches sc_error
 * only through a pointer (the HDF5 module, src/data/hdf5_module.h).  Not
 * part of the public API, so not in error.h. */
#ifndef SC_BASE_ERROR_VA_H
#define SC_BASE_ERROR_VA_H

#include <stdarg.h>

int sc_verror(int err, const char *fmt, va_list ap);

#endif
