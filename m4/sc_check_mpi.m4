# sc_check_mpi.m4 - MPI (Open MPI) for starconv.
#
# SC_PROG_MPICC: before AC_PROG_CC.  When the user did not choose CC, use the
#   MPI compiler wrapper, so that mpi.h and libmpi come with the compiler.
# SC_CHECK_MPI: after AC_PROG_CC.  Makes sure MPI programs compile and link,
#   falling back to pkg-config ompi-c when CC is a plain compiler.  Sets and
#   substitutes MPI_CFLAGS, MPI_LIBS and MPIEXEC.

AC_DEFUN([SC_PROG_MPICC], [
  AC_BEFORE([$0], [AC_PROG_CC])
  AC_ARG_VAR([MPICC], [MPI C compiler wrapper used as CC when CC is not set])
  sc_mpi_via=
  AS_IF([test -z "$CC"], [
    AC_CHECK_PROGS([MPICC], [mpicc mpicc.openmpi])
    AS_IF([test -n "$MPICC"], [CC="$MPICC"; sc_mpi_via="$MPICC"])
  ])
])

AC_DEFUN([SC_CHECK_MPI], [
  AC_REQUIRE([AC_PROG_CC])
  AC_REQUIRE([PKG_PROG_PKG_CONFIG])
  AC_ARG_VAR([MPI_CFLAGS], [C compiler flags for MPI, overriding pkg-config])
  AC_ARG_VAR([MPI_LIBS], [linker flags for MPI, overriding pkg-config])

  sc_mpi_ok=no
  sc_save_CPPFLAGS=$CPPFLAGS
  sc_save_LIBS=$LIBS
  CPPFLAGS="$MPI_CFLAGS $CPPFLAGS"
  LIBS="$MPI_LIBS $LIBS"
  AC_MSG_CHECKING([whether $CC compiles and links MPI programs])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]],
                                  [[MPI_Init(0, 0); MPI_Finalize();]])],
                 [sc_mpi_ok=yes])
  AC_MSG_RESULT([$sc_mpi_ok])
  CPPFLAGS=$sc_save_CPPFLAGS
  LIBS=$sc_save_LIBS

  AS_IF([test "$sc_mpi_ok" = no], [
    PKG_CHECK_MODULES([MPI], [ompi-c], [
      sc_save_CPPFLAGS=$CPPFLAGS
      sc_save_LIBS=$LIBS
      CPPFLAGS="$MPI_CFLAGS $CPPFLAGS"
      LIBS="$MPI_LIBS $LIBS"
      AC_MSG_CHECKING([whether MPI programs link with pkg-config ompi-c])
      AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]],
                                      [[MPI_Init(0, 0); MPI_Finalize();]])],
                     [sc_mpi_ok=yes; sc_mpi_via="pkg-config ompi-c"])
      AC_MSG_RESULT([$sc_mpi_ok])
      CPPFLAGS=$sc_save_CPPFLAGS
      LIBS=$sc_save_LIBS
    ], [:])
  ], [
    AS_IF([test -z "$sc_mpi_via"], [sc_mpi_via="$CC"])
  ])
  AS_IF([test "$sc_mpi_ok" = no], [
    AC_MSG_ERROR([MPI not found: neither mpicc nor pkg-config ompi-c works.
On Debian: apt-get install libopenmpi-dev openmpi-bin])
  ])

  AC_PATH_PROGS([MPIEXEC], [mpirun mpiexec mpirun.openmpi])
  AS_IF([test -z "$MPIEXEC"], [
    AC_MSG_WARN([mpirun not found: the MPI tests and ./quickstart train need it (Debian package openmpi-bin)])
    sc_mpi_exec_version="not found (openmpi-bin)"
  ], [
    sc_mpi_exec_version=`$MPIEXEC --version 2>/dev/null | sed -n 1p`
    AS_IF([test -z "$sc_mpi_exec_version"], [sc_mpi_exec_version=$MPIEXEC])
  ])
  AC_SUBST([MPI_CFLAGS])
  AC_SUBST([MPI_LIBS])
  AC_SUBST([MPIEXEC])
])
