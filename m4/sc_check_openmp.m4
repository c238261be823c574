# sc_check_openmp.m4 - OpenMP runtime for starconv.
#
# SC_CHECK_OPENMP: Debian's oneDNN runs on GNU OpenMP, and starconv calls
# omp_set_num_threads() to keep oneDNN to one thread per StarPU worker, so
# the OpenMP runtime is mandatory even where the compiler flag is off.
# Substitutes OPENMP_CFLAGS (compile and link flag) and OPENMP_LIBS.

AC_DEFUN([SC_CHECK_OPENMP], [
  AC_REQUIRE([AC_PROG_CC])
  AC_OPENMP
  OPENMP_LIBS=
  sc_save_CFLAGS=$CFLAGS
  sc_save_LIBS=$LIBS
  CFLAGS="$CFLAGS $OPENMP_CFLAGS"
  AC_MSG_CHECKING([whether omp_set_num_threads links with "$OPENMP_CFLAGS"])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <omp.h>]], [[omp_set_num_threads(1);]])],
    [sc_openmp="yes ($OPENMP_CFLAGS)"],
    [sc_openmp=no])
  AC_MSG_RESULT([$sc_openmp])
  AS_IF([test "$sc_openmp" = no], [
    LIBS="-lgomp $LIBS"
    AC_MSG_CHECKING([whether omp_set_num_threads links with -lgomp])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <omp.h>]], [[omp_set_num_threads(1);]])],
      [sc_openmp="yes (-lgomp)"; OPENMP_LIBS=-lgomp],
      [AC_MSG_RESULT([no])
       AC_MSG_ERROR([no OpenMP runtime (omp.h, omp_set_num_threads): oneDNN needs it.
On Debian: apt-get install build-essential (gcc ships libgomp)])])
    AC_MSG_RESULT([yes])
  ])
  CFLAGS=$sc_save_CFLAGS
  LIBS=$sc_save_LIBS
  AC_SUBST([OPENMP_CFLAGS])
  AC_SUBST([OPENMP_LIBS])
])
