# The layers of the source tree include only downward (and the kernel
# files of codelets/ include no StarPU, below):
#   base/ (errors, boxes, grids, layouts, rng)  <  codelets/  <  tasks/  <  src/
# Every #include "..." in those folders is resolved to the folder it names
# (a folder prefix, else the including file's own folder, else a search of
# the four) and must not be above the including file's folder; a header of
# another folder is named with its folder ("base/grid.h",
# "codelets/codelets.h"), so that what a file depends on shows.
set -u
: "${TOP_SRCDIR:?run through make check}"
cd "$TOP_SRCDIR" || exit 99
failures=0 nchecked=0
found=$(mktemp "${TMPDIR:-/tmp}/layering.XXXXXX")
trap 'rm -f "$found" "$found.fail"' EXIT

rank_of() {
  case $1 in
    base) echo 0 ;; codelets) echo 1 ;; tasks) echo 2 ;; src) echo 3 ;; *) echo -1 ;;
  esac
}

# folder_of FILE INCLUDE: the top folder the include resolves to ("" if none)
folder_of() {
  local inc=$2 dir f
  case $inc in
    base/* | codelets/* | tasks/* | src/*) echo "${inc%%/*}"; return ;;
  esac
  dir=$(dirname "$1")
  if [ -e "$dir/$inc" ]; then
    echo "${dir%%/*}"
    return
  fi
  for f in src codelets tasks base; do
    if [ -e "$f/$inc" ]; then
      echo "$f"
      return
    fi
  done
}

for file in $(find base codelets tasks src -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | sort); do
  from=${file%%/*}
  rfrom=$(rank_of "$from")
  grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file" | while IFS= read -r hit; do
    line=${hit%%:*}
    inc=$(printf '%s\n' "$hit" | sed 's/^[^"]*"\([^"]*\)".*/\1/')
    to=$(folder_of "$file" "$inc")
    if [ -z "$to" ]; then
      echo "FAIL $file:$line: \"$inc\" is in none of base/ codelets/ tasks/ src/"
      echo x >>"$found.fail"
      continue
    fi
    echo "$file -> $inc" >>"$found"
    if [ "$(rank_of "$to")" -gt "$rfrom" ]; then
      echo "FAIL $file:$line: $from/ must not include $to/ (\"$inc\"): only base/ < codelets/ < tasks/ < src/, downward"
      echo x >>"$found.fail"
    elif [ "$to" != "$from" ] && [ "${inc%%/*}" != "$to" ]; then
      echo "FAIL $file:$line: \"$inc\" is in $to/: include it as \"$to/$inc\""
      echo x >>"$found.fail"
    fi
  done
done
# The kernel files (codelets/kernel*) run a library on what a codelet
# hands them and know nothing of the runtime: no StarPU, and none of the
# codelet headers that bring it.
for file in codelets/kernel*.c codelets/kernel*.h; do
  [ -e "$file" ] || continue
  grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]\(starpu[^">]*\|codelets\.h\|cl_common\.h\|codelets/codelets\.h\|codelets/cl_common\.h\)[">]' "$file" |
    while IFS= read -r hit; do
      echo "FAIL $file:${hit%%:*}: a kernel file includes$(printf %s "${hit#*include}" | tr -s " "): kernels take what they need as arguments"
      echo x >>"$found.fail"
    done
  if grep -q 'starpu_' "$file"; then
    echo "FAIL $file: a kernel file calls StarPU ($(grep -m1 -n 'starpu_' "$file" | cut -c1-80))"
    echo x >>"$found.fail"
  fi
done
[ -f "$found.fail" ] && failures=$(wc -l <"$found.fail")
nchecked=$(wc -l <"$found")
echo "$nchecked includes checked, $failures failure(s)"
[ "$failures" -eq 0 ]
