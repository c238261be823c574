# The shared library exports the public API and nothing else: every
# function declared in the installed headers (base/error.h, src/io/cfg.h,
# src/io/safetensors.h, src/data/dataset.h) is a dynamic symbol of
# libstarconv.so, and every symbol it defines is one of them (the library
# is compiled with -fvisibility=hidden; SC_API marks the exports).
# Skipped (77) without a shared library or without nm.
set -u
: "${TOP_SRCDIR:?run through make check}" "${TOP_BUILDDIR:?run through make check}"
lib=$TOP_BUILDDIR/.libs/libstarconv.so
[ -e "$lib" ] || { echo "SKIP: no $lib (configured with --disable-shared?)"; exit 77; }
command -v nm >/dev/null 2>&1 || { echo "SKIP: no nm"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/exports.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$TOP_SRCDIR" || exit 99
# Declarations: a name followed by "(" at the start of a declaration line.
for h in base/error.h src/io/cfg.h src/io/safetensors.h src/data/dataset.h; do
  sed -n 's/^[a-z][a-z0-9_ ]*[ *]\(sc_[a-z0-9_]*\)(.*/\1/p' "$h"
done | sort -u >"$work/api"
nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/ { print $3 }' |
  grep -v '^_\(init\|fini\|edata\|end\|_bss_start\)$' | sort -u >"$work/exported"
n_api=$(wc -l <"$work/api")
[ "$n_api" -ge 10 ] || { echo "FAIL: only $n_api declarations found in the public headers"; exit 1; }
fail=0
missing=$(comm -23 "$work/api" "$work/exported")
extra=$(comm -13 "$work/api" "$work/exported")
if [ -n "$missing" ]; then
  echo "FAIL: declared in the public headers but not exported:" $missing
  fail=1
fi
if [ -n "$extra" ]; then
  echo "FAIL: exported but not public API ($(echo "$extra" | wc -l)):" $(echo "$extra" | head -20)
  fail=1
fi
[ $fail -eq 0 ] && echo "PASS: libstarconv.so exports exactly the $n_api functions of the public API"
exit $fail
