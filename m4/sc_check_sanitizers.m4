# sc_check_sanitizers.m4 - --enable-sanitizers (ASan + UBSan).
#
# SC_CHECK_SANITIZERS: substitutes SC_SANITIZER_CFLAGS and
# SC_SANITIZER_LDFLAGS (empty unless enabled).
#
# -fno-sanitize-recover=undefined: a UBSan finding aborts the program (exit
# status non-zero) instead of printing a line and going on, so that a test
# that "passes" under --enable-sanitizers has no UB finding, whether run by
# make check or by hand.  ASan errors abort anyway.  Only starconv's own
# code is instrumented; Open MPI, StarPU, hwloc, oneDNN and OpenBLAS are the
# distribution's uninstrumented shared libraries.  The run-time options the
# tests use (ASAN_OPTIONS, UBSAN_OPTIONS, LSAN_OPTIONS) and the leak
# suppressions are set, and documented, in Makefile.am (AM_TESTS_ENVIRONMENT)
# and tests/sanitizers/lsan.supp.

AC_DEFUN([SC_CHECK_SANITIZERS], [
  AC_REQUIRE([AC_PROG_CC])
  AC_ARG_ENABLE([sanitizers],
    [AS_HELP_STRING([--enable-sanitizers],
      [build with -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer (default: no)])],
    [], [enable_sanitizers=no])
  SC_SANITIZER_CFLAGS=
  SC_SANITIZER_LDFLAGS=
  AS_IF([test "x$enable_sanitizers" = xyes], [
    SC_SANITIZER_CFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
    SC_SANITIZER_LDFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
    sc_save_CFLAGS=$CFLAGS
    sc_save_LDFLAGS=$LDFLAGS
    CFLAGS="$CFLAGS $SC_SANITIZER_CFLAGS"
    LDFLAGS="$LDFLAGS $SC_SANITIZER_LDFLAGS"
    AC_MSG_CHECKING([whether $CC supports $SC_SANITIZER_CFLAGS])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([], [])], [AC_MSG_RESULT([yes])],
      [AC_MSG_RESULT([no])
       AC_MSG_ERROR([$CC cannot build with $SC_SANITIZER_CFLAGS (Debian: gcc ships libasan and libubsan)])])
    CFLAGS=$sc_save_CFLAGS
    LDFLAGS=$sc_save_LDFLAGS
  ])
  AC_SUBST([SC_SANITIZER_CFLAGS])
  AC_SUBST([SC_SANITIZER_LDFLAGS])
])
