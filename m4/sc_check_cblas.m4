# sc_check_cblas.m4 - CBLAS (OpenBLAS preferred) for the fully connected layers.
#
# SC_CHECK_CBLAS: pkg-config openblas, else cblas, else blas, else plain
# -lopenblas / -lcblas / -lblas.  The result must provide cblas.h and
# cblas_sgemm.  Substitutes CBLAS_CFLAGS, CBLAS_LIBS; defines HAVE_CBLAS and,
# with OpenBLAS, HAVE_OPENBLAS (openblas_set_num_threads).

AC_DEFUN([SC_CHECK_CBLAS], [
  AC_REQUIRE([PKG_PROG_PKG_CONFIG])
  sc_cblas_pc=
  AS_IF([test -z "$CBLAS_LIBS"], [
    PKG_CHECK_EXISTS([openblas], [sc_cblas_pc=openblas],
      [PKG_CHECK_EXISTS([cblas], [sc_cblas_pc=cblas],
        [PKG_CHECK_EXISTS([blas], [sc_cblas_pc=blas])])])
  ])
  AS_IF([test -n "$sc_cblas_pc"], [PKG_CHECK_MODULES([CBLAS], [$sc_cblas_pc])])

  sc_cblas=no
  sc_save_CPPFLAGS=$CPPFLAGS
  sc_save_LIBS=$LIBS
  for sc_lib in "$CBLAS_LIBS" -lopenblas -lcblas "-lcblas -lblas" -lblas; do
    AS_IF([test -z "$sc_lib"], [continue])
    CPPFLAGS="$CBLAS_CFLAGS $sc_save_CPPFLAGS"
    LIBS="$sc_lib $sc_save_LIBS"
    AC_MSG_CHECKING([for cblas_sgemm in cblas.h with $sc_lib])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <cblas.h>]],
        [[float a = 1, b = 1, c = 0;
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 1, 1, 1, 1.0f, &a, 1, &b, 1, 0.0f, &c, 1);]])],
      [sc_cblas=yes])
    AC_MSG_RESULT([$sc_cblas])
    AS_IF([test "$sc_cblas" = yes], [CBLAS_LIBS=$sc_lib; break])
  done
  AS_IF([test "$sc_cblas" = yes], [
    AC_CHECK_FUNC([openblas_set_num_threads],
      [AC_DEFINE([HAVE_OPENBLAS], [1], [Define to 1 when the CBLAS is OpenBLAS.])
       sc_cblas_name=OpenBLAS], [sc_cblas_name=CBLAS])
  ])
  CPPFLAGS=$sc_save_CPPFLAGS
  LIBS=$sc_save_LIBS
  AS_IF([test "$sc_cblas" = no],
    [AC_MSG_ERROR([no CBLAS found (cblas.h and cblas_sgemm).
On Debian: apt-get install libopenblas-dev])])
  AS_IF([test -n "$sc_cblas_pc"],
    [sc_cblas_desc="$sc_cblas_name `$PKG_CONFIG --modversion $sc_cblas_pc` (pkg-config $sc_cblas_pc)"],
    [sc_cblas_desc="$sc_cblas_name ($CBLAS_LIBS)"])
  AC_DEFINE([HAVE_CBLAS], [1], [Define to 1 when CBLAS is available.])
  AC_SUBST([CBLAS_CFLAGS])
  AC_SUBST([CBLAS_LIBS])
])
