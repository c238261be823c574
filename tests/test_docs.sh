# The documentation against the programs and the tree:
# - every option that starconv-train, starconv-plan, starconv-report,
#   starconv-data and bench/starconv-bench (each subcommand) print in
#   --help has an entry in that program's section of docs/options.md, and
#   every entry there is an option of the help;
# - README.md has at most 250 lines, and neither it nor the user guide
#   (docs/*.md but the architecture, the comparison with the papers and
#   the results page, which cite commits and machines) has a date, a
#   numbered run ("run 27") or a commit hash;
# - every relative Markdown link of README.md and docs/*.md names a file
#   of the repository, and a #fragment into a Markdown page names one of
#   its headings.
# Needs no MPI run and no data set: only the programs' --help.
set -u
: "${TOP_BUILDDIR:?run through make check}" "${TOP_SRCDIR:?run through make check}"
SRC=$(cd "$TOP_SRCDIR" && pwd -P)
DOC="$SRC/docs/options.md"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/starconv-docs.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
failures=0
ok() { echo "ok $*"; }
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

# Options of a help text (stdin): those that open a line indented by two
# spaces, as every program lists them ("  --model FILE", "  -h, --help").
help_options() {
  sed -n 's/^  \(-[a-zA-Z], \)\{0,1\}\(--[a-z][a-z0-9-]*\).*/\2/p' | sort -u
}

# Options documented in section "## $1" of docs/options.md: the long
# options in the first cell of its table rows.
doc_options() {
  awk -v want="## $1" '
    /^## / { on = ($0 == want); next }
    on && /^\| *`-/ {
      split($0, cell, "|")
      s = cell[2]
      while (match(s, /--[a-z][a-z0-9-]*/)) {
        print substr(s, RSTART, RLENGTH)
        s = substr(s, RSTART + RLENGTH)
      }
    }' "$DOC" | sort -u
}

# compare NAME HELPFILE: the options of the help against section NAME.
compare() {
  help_options <"$2" >"$WORK/help"
  doc_options "$1" >"$WORK/doc"
  if [ ! -s "$WORK/help" ]; then
    fail "$1: no option found in its --help"
    return
  fi
  if [ ! -s "$WORK/doc" ]; then
    fail "$1: no section '## $1' with options in docs/options.md"
    return
  fi
  missing=$(comm -23 "$WORK/help" "$WORK/doc" | tr '\n' ' ')
  extra=$(comm -13 "$WORK/help" "$WORK/doc" | tr '\n' ' ')
  [ -z "$missing" ] || fail "$1: in --help but not in docs/options.md: $missing"
  [ -z "$extra" ] || fail "$1: in docs/options.md but not in --help: $extra"
  [ -n "$missing$extra" ] || ok "$1: the $(wc -l <"$WORK/help") options of --help are those of docs/options.md"
}

for prog in starconv-train starconv-plan starconv-report starconv-data; do
  if "$TOP_BUILDDIR/$prog" --help >"$WORK/$prog.help" 2>&1; then
    compare "$prog" "$WORK/$prog.help"
  else
    fail "$prog --help: exit status $?"
  fi
done
# starconv-bench prints one text for all its subcommands; each
# subcommand's part starts at its usage line ("  starconv-bench sweep ...").
for sub in sweep plot layer peak; do
  if "$SRC/bench/starconv-bench" "$sub" --help >"$WORK/bench.help" 2>&1; then
    awk -v want="$sub" '/^  starconv-bench [a-z]+/ { on = ($2 == want) } on' "$WORK/bench.help" >"$WORK/$sub.help"
    compare "starconv-bench $sub" "$WORK/$sub.help"
  else
    fail "starconv-bench $sub --help: exit status $?"
  fi
done

# README: short, and no experiment log in it or in the user guide.
n=$(wc -l <"$SRC/README.md")
[ "$n" -le 250 ] && ok "README.md: $n lines" || fail "README.md: $n lines, more than 250"
before=$failures
for f in "$SRC/README.md" "$SRC"/docs/*.md; do
  case ${f##*/} in ARCHITECTURE.md | PLANNER-VS-PAPERS.md | results.md) continue ;; esac
  name=${f#"$SRC"/}
  bad=$(grep -n -E '(^|[^0-9])20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]([^0-9]|$)' "$f")
  [ -z "$bad" ] || fail "$name: a date: $(echo "$bad" | head -1)"
  bad=$(grep -n -E '(^|[^A-Za-z])[Rr]un [0-9]+[a-z]?([^A-Za-z0-9]|$)' "$f")
  [ -z "$bad" ] || fail "$name: a numbered run: $(echo "$bad" | head -1)"
  # a commit hash: 7 to 40 hex digits with a letter and a digit among them
  bad=$(grep -n -o -w -E '[0-9a-f]{7,40}' "$f" | grep ':.*[a-f]' | grep ':.*[0-9]')
  [ -z "$bad" ] || fail "$name: a commit hash: $(echo "$bad" | head -1)"
done
[ "$failures" -ne "$before" ] || ok "README.md and the user guide: no date, numbered run or commit hash"

# anchors FILE: the fragments its headings give (GitHub's rule: lower
# case, punctuation dropped, spaces to hyphens).
anchors() {
  sed -n 's/^#\{1,6\} \{1,\}//p' "$1" | tr 'A-Z' 'a-z' | sed 's/[^a-z0-9 _-]//g; s/ /-/g'
}

# Relative links: [text](target) and [label]: target, outside code spans
# and code blocks.
nlinks=0
for f in "$SRC/README.md" "$SRC"/docs/*.md; do
  name=${f#"$SRC"/}
  dir=$(dirname "$f")
  awk '/^```/ { code = !code; next } !code' "$f" | sed 's/`[^`]*`//g' |
    grep -o -E '\]\([^)]*\)|^\[[^]]*\]: *[^ ]+' | sed -E 's/^\]\(//; s/\)$//; s/^\[[^]]*\]: *//; s/ .*//' \
      >"$WORK/links"
  while IFS= read -r target; do
    case $target in '' | http://* | https://* | mailto:*) continue ;; esac
    nlinks=$((nlinks + 1))
    path=${target%%#*}
    frag=
    case $target in *'#'*) frag=${target#*#} ;; esac
    if [ -z "$path" ]; then
      file=$f
    else
      file=$(realpath -m "$dir/$path")
      case $file in
        "$SRC"/*) ;;
        *) fail "$name: link '$target' leaves the repository"; continue ;;
      esac
      if [ ! -e "$file" ]; then
        fail "$name: link '$target': no such file"
        continue
      fi
    fi
    if [ -n "$frag" ] && [ "${file%.md}" != "$file" ]; then
      anchors "$file" | grep -q -x -F -e "$frag" || fail "$name: link '$target': no such heading"
    fi
  done <"$WORK/links"
done
[ "$nlinks" -gt 20 ] && ok "$nlinks relative links checked" || fail "only $nlinks relative links found"

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
exit 0
