# Sourced by the shell tests: paths, a scratch directory, and helpers.
set -u
: "${TOP_BUILDDIR:?run through make check}" "${TOP_SRCDIR:?run through make check}"
TRAIN="$TOP_BUILDDIR/starconv-train"
COMPARE="$TOP_BUILDDIR/tests/ckpt_compare"
MODELS="$TOP_SRCDIR/models"
MPIRUN="$TOP_SRCDIR/tests/mpirun.sh"
DATA=${SC_TEST_DATA:-/usr/share/datasets/fashion-mnist}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/starconv-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
failures=0

if [ ! -d "$DATA" ]; then
  echo "SKIP: $DATA missing (Debian package dataset-fashion-mnist)"
  exit 77
fi

# run NP NCPU ARGS...: starconv-train on NP ranks with NCPU workers each.
run() {
  np=$1 ncpu=$2
  shift 2
  STARPU_NCPU=$ncpu "$MPIRUN" "$np" "$TRAIN" --data "$DATA" "$@"
}

ok() { echo "ok $*"; }
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

finish() {
  if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed"
    exit 1
  fi
  exit 0
}
