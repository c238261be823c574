# sc_check_cuda.m4 - the CUDA path: nvcc, cuDNN, cuBLAS, NCCL.
#
# SC_CHECK_CUDA: needs SC_CHECK_STARPU first (sc_starpu_cuda).
# --with-cuda[=DIR] (DIR default /usr/local/cuda) builds the CUDA codelets;
# without the option, /usr/local/cuda is only looked at and reported (and
# its nvcc used by make cuda-compile-check), so the default build stays the
# CPU build; --without-cuda skips it all.  The CUDA codelets are only built
# (AM_CONDITIONAL SC_USE_CUDA, config.h SC_USE_CUDA) when StarPU itself was
# built with CUDA AND cudart, cuBLAS and cuDNN are found: a CUDA toolkit
# beside a CPU-only StarPU (Debian's) is of no use.
# Substitutes NVCC, NVCC_ARCHFLAGS, CUDA_CPPFLAGS, CUDA_LIBS (empty unless
# SC_USE_CUDA); AM_CONDITIONAL SC_USE_NCCL.

AC_DEFUN([SC_CHECK_CUDA], [
  AC_REQUIRE([SC_CHECK_STARPU])
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@],
      [build the CUDA codelets with CUDA, cuDNN, cuBLAS (and NCCL) under DIR (default /usr/local/cuda); needs a StarPU built with CUDA.  Without this option the toolkit is only reported; --without-cuda skips it])],
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
    # -isystem: StarPU's headers pull in cusparse.h, whose deprecation
    # warnings would bury ours (it also overrides the -I that StarPU's
    # pkg-config gives for the same folder).
    sc_cuda_cppflags="-isystem $sc_cuda_dir/include"
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
    ], [test "$with_cuda" = check], [
      sc_cuda_why="not requested (./configure --with-cuda)"
      AS_IF([test "$sc_starpu_cuda" != yes],
        [sc_cuda_why="$sc_cuda_why; StarPU $sc_starpu_version has no CUDA either (docs/gpu.md)"])
    ], [test "$sc_starpu_cuda" != yes], [
      sc_cuda_why="StarPU $sc_starpu_version was built without CUDA (see docs/gpu.md)"
      AS_IF([test "$with_cuda" != check],
        [AC_MSG_WARN([--with-cuda: CUDA found, but $sc_cuda_why: the CUDA codelets stay off])])
    ], [
      sc_use_cuda=yes
      CUDA_CPPFLAGS=$sc_cuda_cppflags
      # nvcc's objects are C++ (function-local statics in launch stubs).
      CUDA_LIBS="$sc_cuda_ldflags -lcudnn -lcublas -lcudart -lstdc++"
      AS_IF([test "$sc_cuda_nccl" = yes], [
        sc_use_nccl=yes
        CUDA_LIBS="-lnccl $CUDA_LIBS"
      ])
    ])
  ])

  AS_IF([test "$sc_use_cuda" = yes],
    [AC_DEFINE([SC_USE_CUDA], [1], [Define to 1 to build the CUDA codelets (StarPU with CUDA, cuDNN, cuBLAS).])])
  AS_IF([test "$sc_use_nccl" = yes],
    [AC_DEFINE([SC_USE_NCCL], [1], [Define to 1 when NCCL is used by the CUDA codelets.])])
  AM_CONDITIONAL([SC_USE_CUDA], [test "$sc_use_cuda" = yes])
  AM_CONDITIONAL([SC_USE_NCCL], [test "$sc_use_nccl" = yes])
  AC_ARG_VAR([NVCC], [CUDA compiler])
  AC_ARG_VAR([NVCC_ARCHFLAGS], [nvcc's target architectures (default: sm_90 code and compute_80 PTX, which any GPU from sm_80 on can JIT)])
  AS_IF([test -z "$NVCC_ARCHFLAGS"],
    [NVCC_ARCHFLAGS="-gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=compute_80"])
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
