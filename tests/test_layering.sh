# The layers of the source tree include only downward, in this order
# (lowest first; docs/ARCHITECTURE.md says what each holds):
#   base/  kernels/  codelets/  tasks/
#   src/io/  src/data/  src/runtime/  src/layers/  src/net/  src/planner/
#   src/report/  src/train/  src/programs/
# src/starconv.h, the public API's umbrella header, ranks with the
# programs: the library's own files include the header they need.
# Every #include "..." in those folders is resolved to the folder it names
# (a folder prefix, else the including file's own folder, else a search of
# all) and must not be above the including file's folder; a header of
# another folder is named with its folder ("base/grid.h", "src/net/net.h"),
# so that what a file depends on shows.  Nothing under kernels/ knows
# StarPU (below).
set -u
: "${TOP_SRCDIR:?run through make check}"
cd "$TOP_SRCDIR" || exit 99
failures=0 nchecked=0
found=$(mktemp "${TMPDIR:-/tmp}/layering.XXXXXX")
trap 'rm -f "$found" "$found.fail"' EXIT

LAYERS="base kernels codelets tasks src/io src/data src/runtime src/layers src/net src/planner src/report src/train src/programs"
ORDER=$(echo "$LAYERS" | sed 's/ / < /g')

rank_of() {
  local i=0 l
  [ "$1" = src/starconv.h ] && set -- src/programs
  for l in $LAYERS; do
    [ "$l" = "$1" ] && { echo $i; return; }
    i=$((i + 1))
  done
  echo -1
}

# layer_of PATH: the layer folder PATH (a file or a folder) lies in ("" if none)
layer_of() {
  local l
  [ "$1" = src/starconv.h ] && { echo src/starconv.h; return; }
  for l in $LAYERS; do
    case $1 in "$l"/*) echo "$l"; return ;; esac
  done
}

# target_of FILE INCLUDE: the file an include names, relative to the top
# ("" if none): as the compiler finds it, the including file's folder first,
# then the top (-I$(srcdir)).
target_of() {
  local dir
  dir=$(dirname "$1")
  if [ -e "$dir/$2" ]; then
    realpath -m --relative-to=. "$dir/$2"
  elif [ -e "$2" ]; then
    echo "$2"
  fi
}

files=$(find base kernels codelets tasks src -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | sort)
for file in $files; do
  from=$(layer_of "$file")
  if [ -z "$from" ]; then
    echo "FAIL $file: in no layer folder ($ORDER)"
    echo x >>"$found.fail"
    continue
  fi
  rfrom=$(rank_of "$from")
  grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file" | while IFS= read -r hit; do
    line=${hit%%:*}
    inc=$(printf '%s\n' "$hit" | sed 's/^[^"]*"\([^"]*\)".*/\1/')
    target=$(target_of "$file" "$inc")
    to=$([ -n "$target" ] && layer_of "$target")
    if [ -z "$to" ]; then
      echo "FAIL $file:$line: \"$inc\" is in none of the layer folders"
      echo x >>"$found.fail"
      continue
    fi
    echo "$file -> $inc" >>"$found"
    if [ "$(rank_of "$to")" -gt "$rfrom" ]; then
      echo "FAIL $file:$line: $from/ must not include $to (\"$inc\"): only $ORDER, downward"
      echo x >>"$found.fail"
    elif [ "$to" != "$from" ] && [ "$inc" != "$target" ]; then
      echo "FAIL $file:$line: \"$inc\" is in $to/: include it as \"$target\""
      echo x >>"$found.fail"
    fi
  done
done
# The kernels (kernels/) compute on what a codelet hands them and know
# nothing of the runtime: no StarPU header, none of the codelet headers
# (which bring it; the rank check above also refuses them), and no call,
# macro or type of StarPU's (starpu_*, STARPU_*), comments included.
kfiles=$(find kernels -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | sort)
[ -n "$kfiles" ] || { echo "FAIL: no file under kernels/"; echo x >>"$found.fail"; }
for file in $kfiles; do
  grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]\(starpu[^">]*\|codelets/[^">]*\|cl_common\.h\|codelets[^">/]*\.h\)[">]' "$file" |
    while IFS= read -r hit; do
      echo "FAIL $file:${hit%%:*}: a kernel file includes$(printf %s "${hit#*include}" | tr -s " "): kernels take what they need as arguments"
      echo x >>"$found.fail"
    done
  if grep -qi 'starpu_' "$file"; then
    echo "FAIL $file: a kernel file names StarPU ($(grep -m1 -n -i 'starpu_' "$file" | cut -c1-80))"
    echo x >>"$found.fail"
  fi
done
[ -f "$found.fail" ] && failures=$(wc -l <"$found.fail")
nchecked=$(wc -l <"$found")
echo "$nchecked includes checked, $failures failure(s)"
[ "$failures" -eq 0 ]
