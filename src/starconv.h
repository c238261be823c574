/* starconv public API: errors and logging (base/error.h), configuration
 * files, data sets, checkpoint files.  Every function returns 0 or a
 * negative SC_ERR_*; on error a one-line message saying what and where is
 * kept per thread and returned by sc_last_error().  The library never calls
 * exit(). */
#ifndef STARCONV_H
#define STARCONV_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "src/io/cfg.h"
#include "src/io/safetensors.h"
#include "src/data/dataset.h"

#endif
