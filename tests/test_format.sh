# The C files a change touches follow the project's .clang-format: the
# lines changed since SC_FORMAT_BASE (default HEAD~1, the last commit; the
# uncommitted changes count too) are as `git clang-format` would leave
# them.  Skipped (77) where clang-format or git-clang-format is missing or
# the tree is not a git checkout with a parent commit.
set -u
: "${TOP_SRCDIR:?run through make check}"
cd "$TOP_SRCDIR" || exit 99
gcf=$(command -v git-clang-format || command -v git-clang-format-14 || true)
[ -n "$gcf" ] && command -v clang-format >/dev/null 2>&1 ||
  { echo "SKIP: clang-format or git-clang-format not installed (Debian: clang-format)"; exit 77; }
git rev-parse --is-inside-work-tree >/dev/null 2>&1 || { echo "SKIP: not a git checkout"; exit 77; }
base=${SC_FORMAT_BASE:-HEAD~1}
git rev-parse --verify -q "$base^{commit}" >/dev/null || { echo "SKIP: no commit $base to compare with"; exit 77; }
out=$("$gcf" --binary "$(command -v clang-format)" --style file --extensions c,h,cu,cuh --diff "$base" -- \
  base kernels codelets tasks src tests fuzz bench 2>&1)
case $out in
  "" | *"no modified files to format"* | *"did not modify any files"*)
    echo "PASS: the C lines changed since $base are formatted"
    exit 0 ;;
esac
echo "FAIL: lines changed since $base are not as .clang-format formats them; run: git clang-format $base"
printf '%s\n' "$out" | head -40
exit 1
