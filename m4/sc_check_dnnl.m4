# sc_check_dnnl.m4 - oneDNN (DNNL), the CPU convolution/pooling/ReLU kernels.
#
# SC_CHECK_DNNL: header dnnl.h and -ldnnl (Debian ships no .pc file).
# DNNL_CFLAGS / DNNL_LIBS may be set by the user for another install.
# Substitutes DNNL_CFLAGS, DNNL_LIBS; defines HAVE_DNNL.

AC_DEFUN([SC_CHECK_DNNL], [
  AC_REQUIRE([AC_PROG_CC])
  AC_ARG_VAR([DNNL_CFLAGS], [C compiler flags for oneDNN])
  AC_ARG_VAR([DNNL_LIBS], [linker flags for oneDNN (default -ldnnl)])
  AS_IF([test -z "$DNNL_LIBS"], [DNNL_LIBS=-ldnnl])

  sc_save_CPPFLAGS=$CPPFLAGS
  sc_save_LIBS=$LIBS
  CPPFLAGS="$DNNL_CFLAGS $CPPFLAGS"
  LIBS="$DNNL_LIBS $LIBS"
  AC_CHECK_HEADER([dnnl.h], [],
    [AC_MSG_ERROR([oneDNN header dnnl.h not found.
On Debian: apt-get install libdnnl-dev])])
  AC_MSG_CHECKING([for dnnl_version in $DNNL_LIBS])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <dnnl.h>]], [[(void)dnnl_version();]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([cannot link oneDNN with $DNNL_LIBS.
On Debian: apt-get install libdnnl-dev])])

  AC_COMPUTE_INT([sc_dnnl_major], [DNNL_VERSION_MAJOR], [[#include <dnnl_version.h>]], [sc_dnnl_major=])
  AC_COMPUTE_INT([sc_dnnl_minor], [DNNL_VERSION_MINOR], [[#include <dnnl_version.h>]], [sc_dnnl_minor=])
  AC_COMPUTE_INT([sc_dnnl_patch], [DNNL_VERSION_PATCH], [[#include <dnnl_version.h>]], [sc_dnnl_patch=])
  sc_dnnl_version="$sc_dnnl_major.$sc_dnnl_minor.$sc_dnnl_patch"
  AS_IF([test "$sc_dnnl_version" = ".."], [sc_dnnl_version=unknown])

  AC_MSG_CHECKING([oneDNN's CPU threading runtime])
  sc_dnnl_runtime=other
  AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <dnnl_config.h>
#if DNNL_CPU_RUNTIME != DNNL_RUNTIME_OMP
#error not OpenMP
#endif]], [[]])], [sc_dnnl_runtime=OpenMP])
  AS_IF([test "$sc_dnnl_runtime" = other], [
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <dnnl_config.h>
#if DNNL_CPU_RUNTIME != DNNL_RUNTIME_SEQ
#error not sequential
#endif]], [[]])], [sc_dnnl_runtime=sequential])])
  AC_MSG_RESULT([$sc_dnnl_runtime])
  CPPFLAGS=$sc_save_CPPFLAGS
  LIBS=$sc_save_LIBS

  AC_DEFINE([HAVE_DNNL], [1], [Define to 1 when oneDNN is available.])
  AC_SUBST([DNNL_CFLAGS])
  AC_SUBST([DNNL_LIBS])
])
