#!/bin/sh
# nvcc compiles every CUDA source (kernels/cuda/*.cu) to an object, on any
# machine with nvcc, GPU or not, CUDA codelets configured or not (the
# kernels need only the CUDA runtime headers).  Warnings are errors.
# Skipped (77) without nvcc.  make cuda-compile-check runs it too.
# NVCC, SC_NVCCFLAGS: from make; TOP_SRCDIR: the source tree.
top=${TOP_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
# NVCC set but empty (make, after a configure that found none or
# --without-cuda): skip; unset (run by hand): look on PATH and in
# /usr/local/cuda.
if [ "${NVCC+set}" = set ]; then
    nvcc=$NVCC
else
    nvcc=$(command -v nvcc 2>/dev/null)
    [ -n "$nvcc" ] || { [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc; }
fi
if [ -z "$nvcc" ]; then
    echo "skipped: no nvcc"
    exit 77
fi
flags=${SC_NVCCFLAGS:-"-std=c++17 -O2 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=compute_80 -Xcompiler -fPIC,-Wall,-Wextra -I$top/kernels/cuda"}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sc-nvcc.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

set -- "$top"/kernels/cuda/*.cu
[ -f "$1" ] || { echo "FAIL: no .cu file under $top/kernels/cuda"; exit 1; }
# In parallel: nvcc spends most of its time in one process per file.
for f in "$@"; do
    b=$(basename "$f" .cu)
    # shellcheck disable=SC2086
    ( "$nvcc" $flags -Werror all-warnings -Xcompiler -Werror -c "$f" -o "$tmp/$b.o" > "$tmp/$b.log" 2>&1;
      echo $? > "$tmp/$b.rc" ) &
done
wait
fail=0
for f in "$@"; do
    b=$(basename "$f" .cu)
    if [ "$(cat "$tmp/$b.rc")" = 0 ] && [ -s "$tmp/$b.o" ]; then
        echo "ok: $b.cu"
    else
        echo "FAIL: $b.cu:"
        cat "$tmp/$b.log"
        fail=1
    fi
done
echo "$($nvcc --version | sed -n 's/.*release \([0-9.]*\).*/nvcc \1/p'): $# files, flags: $flags"
exit $fail
