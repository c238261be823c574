# sc_check_hdf5.m4 - HDF5, to read data sets by tile (--data hdf5:FILE).
#
# SC_CHECK_HDF5: optional.  pkg-config hdf5-openmpi, hdf5-mpi or hdf5,
# else the compile line of h5pcc (parallel HDF5's compiler wrapper), else
# hdf5.h and -lhdf5.  The library must link H5Fopen; whether it is parallel
# HDF5 (H5_HAVE_PARALLEL, MPI-IO underneath) is reported.  --without-hdf5
# skips it.  Without it starconv builds all the same and --data hdf5:
# says which package to install.
# Substitutes HDF5_CFLAGS, HDF5_LIBS; AM_CONDITIONAL SC_USE_HDF5 and
# config.h SC_USE_HDF5; sc_hdf5 is the summary's line.

AC_DEFUN([SC_CHECK_HDF5], [
  AC_REQUIRE([PKG_PROG_PKG_CONFIG])
  AC_ARG_WITH([hdf5],
    [AS_HELP_STRING([--without-hdf5], [build without HDF5 data sets (--data hdf5:)])],
    [], [with_hdf5=check])
  sc_hdf5=no
  sc_hdf5_src=
  AS_IF([test "$with_hdf5" = no], [sc_hdf5="no (--without-hdf5)"], [
    AS_IF([test -z "$HDF5_LIBS"], [
      for sc_pc in hdf5-openmpi hdf5-mpi hdf5; do
        PKG_CHECK_EXISTS([$sc_pc], [
          HDF5_CFLAGS=`$PKG_CONFIG --cflags $sc_pc`
          HDF5_LIBS=`$PKG_CONFIG --libs $sc_pc`
          sc_hdf5_src="pkg-config $sc_pc"
          break])
      done
    ], [sc_hdf5_src="HDF5_LIBS"])
    AS_IF([test -z "$HDF5_LIBS"], [
      AC_PATH_PROG([H5PCC], [h5pcc])
      AS_IF([test -n "$H5PCC"], [
        # "mpicc -I... -L... libhdf5.a ... -lz": everything after the compiler.
        sc_h5_show=`$H5PCC -show 2>/dev/null | cut -d' ' -f2-`
        HDF5_CFLAGS=`for w in $sc_h5_show; do case $w in -I*) printf '%s ' "$w";; esac; done`
        HDF5_LIBS=`for w in $sc_h5_show; do case $w in -I*) ;; *) printf '%s ' "$w";; esac; done`
        sc_hdf5_src="h5pcc -show"
      ], [HDF5_LIBS=-lhdf5; sc_hdf5_src="-lhdf5"])
    ])
    sc_save_CPPFLAGS=$CPPFLAGS
    sc_save_LIBS=$LIBS
    CPPFLAGS="$HDF5_CFLAGS $CPPFLAGS"
    LIBS="$HDF5_LIBS $LIBS"
    AC_MSG_CHECKING([for H5Fopen in hdf5.h ($sc_hdf5_src)])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <hdf5.h>]], [[return H5Fopen("x", H5F_ACC_RDONLY, H5P_DEFAULT) < 0;]])],
      [sc_hdf5=yes], [sc_hdf5=no])
    AC_MSG_RESULT([$sc_hdf5])
    AS_IF([test "$sc_hdf5" = yes], [
      AC_MSG_CHECKING([whether HDF5 is parallel (MPI-IO)])
      AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <hdf5.h>
#ifndef H5_HAVE_PARALLEL
#error serial
#endif]], [])], [sc_hdf5_parallel=yes], [sc_hdf5_parallel=no])
      AC_MSG_RESULT([$sc_hdf5_parallel])
      AC_COMPUTE_INT([sc_h5_major], [H5_VERS_MAJOR], [[#include <hdf5.h>]], [sc_h5_major=?])
      AC_COMPUTE_INT([sc_h5_minor], [H5_VERS_MINOR], [[#include <hdf5.h>]], [sc_h5_minor=?])
      AC_COMPUTE_INT([sc_h5_release], [H5_VERS_RELEASE], [[#include <hdf5.h>]], [sc_h5_release=?])
      AS_IF([test "$sc_hdf5_parallel" = yes], [sc_h5_kind="parallel, MPI-IO"], [sc_h5_kind="serial"])
      sc_hdf5="yes ($sc_h5_major.$sc_h5_minor.$sc_h5_release, $sc_h5_kind; $sc_hdf5_src)"
    ], [
      sc_hdf5="no (--data hdf5: needs libhdf5-openmpi-dev)"
      HDF5_CFLAGS=
      HDF5_LIBS=
    ])
    CPPFLAGS=$sc_save_CPPFLAGS
    LIBS=$sc_save_LIBS
    AS_IF([test "$with_hdf5" = yes && test "$sc_hdf5" != "${sc_hdf5#no}"],
      [AC_MSG_ERROR([--with-hdf5: HDF5 not found.
On Debian: apt-get install libhdf5-openmpi-dev])])
  ])
  AS_CASE([$sc_hdf5], [yes*], [sc_use_hdf5=yes
    AC_DEFINE([SC_USE_HDF5], [1], [Define to 1 when HDF5 data sets are built.])], [sc_use_hdf5=no])
  AM_CONDITIONAL([SC_USE_HDF5], [test "$sc_use_hdf5" = yes])
  AC_SUBST([HDF5_CFLAGS])
  AC_SUBST([HDF5_LIBS])
])
