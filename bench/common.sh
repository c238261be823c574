# Sourced by the bench/ scripts: what their tables are made of.

# the last "<number> images/s" of a log, or "fail"
rate_of() {
    local r
    r=$(grep -oE '[0-9.]+ images/s' "$1" | tail -n 1 | cut -d' ' -f1)
    case $r in '' | *[!0-9.]* | *.*.*) echo fail ;; *) echo "$r" ;; esac
}
# median of the numbers among the arguments ("fail" ignored), or "n/a"
median() {
    printf '%s\n' "$@" | grep -E '^[0-9.]+$' | sort -g |
        awk '{ v[NR] = $1 } END { if (NR == 0) print "n/a";
              else if (NR % 2) printf "%.1f\n", v[(NR + 1) / 2];
              else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
# a / b with 2 decimals, or "n/a"
ratio_of() {
    awk -v a="$1" -v b="$2" 'BEGIN {
        if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b > 0) printf "%.2f", a / b; else print "n/a" }'
}
# failed PROG WHAT STATUS LOG: a failed run on stderr with the end of its log
failed() {
    echo "$1: $2 failed (exit $3); last lines of its output:" >&2
    tail -n 15 "$4" | sed 's/^/    /' >&2
}
