# sc_check_starpu.m4 - StarPU and StarPU-MPI for starconv.
#
# SC_CHECK_STARPU: needs SC_CHECK_MPI first (starpu_mpi.h includes mpi.h).
# Prefers StarPU 1.4, else 1.3, always with its MPI layer.  Sets and
# substitutes STARPU_CFLAGS, STARPU_LIBS; sc_starpu_cuda=yes|no tells whether
# this StarPU was built with CUDA (STARPU_USE_CUDA in starpu_config.h).

AC_DEFUN([SC_CHECK_STARPU], [
  AC_REQUIRE([PKG_PROG_PKG_CONFIG])
  AC_REQUIRE([SC_CHECK_MPI])

  sc_starpu_pc=
  sc_starpu_version=
  AC_MSG_CHECKING([for StarPU with StarPU-MPI])
  PKG_CHECK_EXISTS([starpu-1.4 starpumpi-1.4],
    [sc_starpu_pc="starpu-1.4 starpumpi-1.4"; sc_starpu_version=`$PKG_CONFIG --modversion starpu-1.4`],
    [PKG_CHECK_EXISTS([starpu-1.3 starpumpi-1.3],
      [sc_starpu_pc="starpu-1.3 starpumpi-1.3"; sc_starpu_version=`$PKG_CONFIG --modversion starpu-1.3`])])
  AS_IF([test -n "$sc_starpu_pc"],
    [AC_MSG_RESULT([$sc_starpu_version ($sc_starpu_pc)])],
    [AC_MSG_RESULT([no])
     AS_IF([test -z "$STARPU_LIBS"],
       [AC_MSG_ERROR([StarPU 1.3 or 1.4 with StarPU-MPI not found by pkg-config (starpu-1.3, starpumpi-1.3).
On Debian: apt-get install libstarpu-dev starpu-tools
(or set STARPU_CFLAGS and STARPU_LIBS)])])
     sc_starpu_version="(version unknown)"])
  AS_IF([test -n "$sc_starpu_pc"],
    [PKG_CHECK_MODULES([STARPU], [$sc_starpu_pc])
     sc_starpu_src="pkg-config $sc_starpu_pc"
     # A StarPU built here (gpu/build-starpu PREFIX, for CUDA or more CPU
     # workers) lives outside the linker's default path: let the programs
     # find it.
     sc_starpu_libdir=`$PKG_CONFIG --variable=libdir ${sc_starpu_pc%% *} 2>/dev/null`
     AS_CASE([$sc_starpu_libdir],
       [""|/usr/lib|/usr/lib64|/usr/lib/*-linux-gnu], [],
       [STARPU_LIBS="$STARPU_LIBS -Wl,-rpath,$sc_starpu_libdir"])],
    [sc_starpu_src="STARPU_CFLAGS, STARPU_LIBS"])

  sc_save_CPPFLAGS=$CPPFLAGS
  sc_save_LIBS=$LIBS
  CPPFLAGS="$STARPU_CFLAGS $MPI_CFLAGS $CPPFLAGS"
  LIBS="$STARPU_LIBS $MPI_LIBS $LIBS"

  AC_MSG_CHECKING([whether StarPU-MPI programs compile and link])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <starpu.h>
#include <starpu_mpi.h>]],
      [[int argc = 0; char **argv = 0;
        (void)starpu_mpi_init_conf(&argc, &argv, 1, MPI_COMM_WORLD, 0);
        starpu_mpi_shutdown();]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([cannot build a StarPU-MPI program with STARPU_CFLAGS="$STARPU_CFLAGS" STARPU_LIBS="$STARPU_LIBS" (see config.log).
On Debian: apt-get install libstarpu-dev libopenmpi-dev])])

  AC_MSG_CHECKING([whether StarPU was built with MPI])
  AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <starpu_config.h>
#ifndef STARPU_USE_MPI
#error no STARPU_USE_MPI
#endif]], [[]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([this StarPU has no MPI support (STARPU_USE_MPI undefined); starconv needs StarPU-MPI])])

  AC_MSG_CHECKING([whether StarPU was built with CUDA])
  AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <starpu_config.h>
#ifndef STARPU_USE_CUDA
#error no STARPU_USE_CUDA
#endif]], [[]])],
    [sc_starpu_cuda=yes], [sc_starpu_cuda=no])
  AC_MSG_RESULT([$sc_starpu_cuda])

  AC_MSG_CHECKING([for StarPU's maximum number of CPU workers])
  AC_COMPUTE_INT([sc_starpu_maxcpus], [STARPU_MAXCPUS], [[#include <starpu_config.h>]],
                 [sc_starpu_maxcpus=unknown])
  AC_MSG_RESULT([$sc_starpu_maxcpus])

  CPPFLAGS=$sc_save_CPPFLAGS
  LIBS=$sc_save_LIBS

  AC_SUBST([STARPU_CFLAGS])
  AC_SUBST([STARPU_LIBS])
])
