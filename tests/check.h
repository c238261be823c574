/* The pass/fail tally of the C tests: check() prints one line per check and
 * counts it; a test's main() ends by reporting passes and failures. */
#ifndef SC_TESTS_CHECK_H
#define SC_TESTS_CHECK_H

#include <stdarg.h>
#include <stdio.h>

static int failures, passes;

__attribute__((format(printf, 2, 3))) static void check(int ok, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s - ", ok ? "ok  " : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    if (ok)
        passes++;
    else
        failures++;
}

#endif
