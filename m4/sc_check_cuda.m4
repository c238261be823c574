# sc_check_cuda.m4 - the CUDA path: nvcc, cuDNN, cuBLAS, NCCL.
#
# SC_CHECK_CUDA: needs SC_CHECK_STARPU first (sc_starpu_cuda).
# --with-cuda[=DIR] (default: look in /usr/local/cuda when it exists),
# --without-cuda to skip.  Every piece found is reported; the CUDA codelets
# are only built (AM_CONDITIONAL SC_USE_CUDA, config.h SC_USE_CUDA) when
# StarPU itself was built with CUDA AND cudart, cuBLAS and cuDNN are found:
# a CUDA toolkit beside a CPU-only StarPU (Debian's) is of no use.
# Substitutes NVCC, CUDA_CPPFLAGS, CUDA_LIBS (empty unless SC_USE_CUDA);
# AM_CONDITIONAL SC_USE_NCCL, SC_HAVE_NVCC.

AC_DEFUN([SC_CHECK_CUDA], [
  AC_REQUIRE([SC_CHECK_STARPU])
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@],
      [look for CUDA, cuDNN, cuBLAS and NCCL under DIR (default: /usr/local/cuda when it exists; --without-cuda to skip)])],
    [], [with_cuda=check])

  sc_cuda_dir=
  sc_cuda_nvcc=no
  sc_cuda_rt=no
  sc_cuda_cublas=no
  sc_cuda_cudnn=no
  sc_cuda_nccl=no
  sc_use_cuda=no
  sc_use_nccl=no
  sc_cuda_why=
  CUDA_CPPFLAGS=
  CUDA_LIBS=

  AS_CASE([$with_cuda],
    [no], [sc_cuda_why="--without-cuda"],
    [yes|check], [sc_cuda_dir=/usr/local/cuda],
    [sc_cuda_dir=$with_cuda])

  AS_IF([test -n "$sc_cuda_dir" && test "$with_cuda" = check && test ! -d "$sc_cuda_dir"], [
    sc_cuda_why="no CUDA toolkit in $sc_cuda_dir (use --with-cuda=DIR)"
    sc_cuda_dir=
  ])

  AS_IF([test -n "$sc_cuda_dir"], [
    AC_MSG_NOTICE([looking for the CUDA toolkit in $sc_cuda_dir])
    AC_PATH_PROG([NVCC], [nvcc], [], [$sc_cuda_dir/bin$PATH_SEPARATOR$PATH])
    AS_IF([test -n "$NVCC"], [
      sc_cuda_nvcc=`$NVCC --version 2>/dev/null | sed -n 's/.*release \([[0-9.]]*\).*/\1/p'`
      AS_IF([test -z "$sc_cuda_nvcc"], [sc_cuda_nvcc=yes])
    ])

    sc_cuda_libdir=
    for sc_d in "$sc_cuda_dir/lib64" "$sc_cuda_dir/lib" "$sc_cuda_dir/targets/x86_64-linux/lib"; do
      AS_IF([test -d "$sc_d"], [sc_cuda_libdir=$sc_d; break])
    done
    sc_cuda_cppflags="-I$sc_cuda_dir/include"
    sc_cuda_ldflags=
    AS_IF([test -n "$sc_cuda_libdir"],
      [sc_cuda_ldflags="-L$sc_cuda_libdir -Wl,-rpath,$sc_cuda_libdir"])

    sc_save_CPPFLAGS=$CPPFLAGS
    sc_save_LDFLAGS=$LDFLAGS
    sc_save_LIBS=$LIBS
    CPPFLAGS="$sc_cuda_cppflags $CPPFLAGS"
    LDFLAGS="$sc_cuda_ldflags $LDFLAGS"

    # Not cached, so that a second configure with another DIR looks again.
    _SC_CUDA_PIECE([sc_cuda_rt], [cuda_runtime_api.h], [cudart], [cudaGetDeviceCount(0)])
    _SC_CUDA_PIECE([sc_cuda_cublas], [cublas_v2.h], [cublas], [cublasCreate(0)])
    _SC_CUDA_PIECE([sc_cuda_cudnn], [cudnn.h], [cudnn], [cudnnCreate(0)])
    _SC_CUDA_PIECE([sc_cuda_nccl], [nccl.h], [nccl], [ncclGetVersion(0)])

    CPPFLAGS=$sc_save_CPPFLAGS
    LDFLAGS=$sc_save_LDFLAGS
    LIBS=$sc_save_LIBS

    AS_IF([test "$sc_cuda_rt" = no || test "$sc_cuda_cublas" = no || test "$sc_cuda_cudnn" = no], [
      sc_cuda_why="CUDA runtime, cuBLAS or cuDNN missing in $sc_cuda_dir"
      AS_IF([test "$with_cuda" != check],
        [AC_MSG_ERROR([--with-cuda: $sc_cuda_why (cudart $sc_cuda_rt, cuBLAS $sc_cuda_cublas, cuDNN $sc_cuda_cudnn); see config.log])])
    ], [test "$sc_starpu_cuda" != yes], [
      sc_cuda_why="StarPU $sc_starpu_version was built without CUDA (see README, GPU)"
      AS_IF([test "$with_cuda" != check],
        [AC_MSG_WARN([--with-cuda: CUDA found, but $sc_cuda_why: the CUDA codelets stay off])])
    ], [
      sc_use_cuda=yes
      CUDA_CPPFLAGS=$sc_cuda_cppflags
      CUDA_LIBS="$sc_cuda_ldflags -lcudnn -lcublas -lcudart"
      AS_IF([test "$sc_cuda_nccl" = yes], [
        sc_use_nccl=yes
        CUDA_LIBS="$sc_cuda_ldflags -lnccl -lcudnn -lcublas -lcudart"
      ])
    ])
  ])

  AS_IF([test "$sc_use_cuda" = yes],
    [AC_DEFINE([SC_USE_CUDA], [1], [Define to 1 to build the CUDA codelets (StarPU with CUDA, cuDNN, cuBLAS).])])
  AS_IF([test "$sc_use_nccl" = yes],
    [AC_DEFINE([SC_USE_NCCL], [1], [Define to 1 when NCCL is used by the CUDA codelets.])])
  AM_CONDITIONAL([SC_USE_CUDA], [test "$sc_use_cuda" = yes])
  AM_CONDITIONAL([SC_USE_NCCL], [test "$sc_use_nccl" = yes])
  AM_CONDITIONAL([SC_HAVE_NVCC], [test "$sc_cuda_nvcc" != no])
  AC_ARG_VAR([NVCC], [CUDA compiler])
  AC_SUBST([CUDA_CPPFLAGS])
  AC_SUBST([CUDA_LIBS])
])

# _SC_CUDA_PIECE(VAR, HEADER, LIB, CALL): VAR=yes when HEADER compiles and
# CALL links with -lLIB (CPPFLAGS/LDFLAGS already point into the toolkit).
AC_DEFUN([_SC_CUDA_PIECE], [
  AC_MSG_CHECKING([for $2 and -l$3])
  LIBS="-l$3 $sc_save_LIBS"
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <$2>]], [[(void)$4;]])],
    [$1=yes], [$1=no])
  AC_MSG_RESULT([$$1])
])
