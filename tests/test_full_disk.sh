# Nothing lost on a full disk: a checkpoint or trace write that fails with
# ENOSPC, on a small tmpfs mounted in a private mount namespace, ends the
# run with exit status 1 and one line naming the file and the error, and
# leaves the previous file byte for byte as it was, readable, with no
# temporary file beside it: a periodic save (--save-every) on 2 ranks, the
# final save, and a trace.  Skipped (77) where private mounts are not
# allowed (not root, or no unshare).
. "$TOP_SRCDIR/tests/common.sh"

common="--model $MODELS/lenet.cfg --batch 32 --lr 0.05 --momentum 0.9 --shuffle on --seed 7 --test off"
DISK="$WORK/disk"
mkdir -p "$DISK"
command -v unshare >/dev/null && [ "$(id -u)" = 0 ] &&
  unshare -m --propagation private sh -c 'mount -t tmpfs -o size=64k tmpfs "$1"' sh "$DISK" 2>/dev/null ||
  { echo "SKIP: no private mount namespace here (needs root and unshare -m)"; exit 77; }

# on_disk KIB SETUP ARGS...: SETUP (shell, $DISK the disk) then
# starconv-train ARGS on 2 ranks with a tmpfs of KIB KiB at $DISK, in a
# private mount namespace; the disk's files are copied to $WORK/after/
# before it goes.  Sets rc; output in $WORK/out.
on_disk() {
  kib=$1 setup=$2
  shift 2
  rm -rf "$WORK/after"
  mkdir -p "$WORK/after"
  STARPU_NCPU=1 unshare -m --propagation private sh -c '
    disk=$1 kib=$2 setup=$3 after=$4
    shift 4
    mount -t tmpfs -o size=${kib}k tmpfs "$disk" || exit 99
    DISK=$disk
    eval "$setup"
    "$@"
    rc=$?
    cp -a "$disk"/. "$after"/
    exit $rc' sh "$DISK" "$kib" "$setup" "$WORK/after" "$MPIRUN" 2 "$TRAIN" --data "$DATA" $common "$@" \
    >"$WORK/out" 2>&1
  rc=$?
}

# one_line PATTERN: exactly one error line, which matches.
one_line() {
  line=$(grep '^starconv-train: ' "$WORK/out")
  [ "$(printf '%s\n' "$line" | grep -c .)" -eq 1 ] && printf '%s\n' "$line" | grep -q -- "$1"
}

# The checkpoint of iteration 2, written where there is room.
run 2 1 $common --iters 2 --save "$WORK/ref2.st" >/dev/null 2>&1 || fail "reference run"
bytes=$(wc -c <"$WORK/ref2.st")
kib=$((bytes * 3 / 2 / 1024)) # room for one checkpoint, not for a second beside it

# 1. --save-every 2: the save at iteration 2 fits, the one at iteration 4
#    (a temporary beside it) does not.
on_disk "$kib" : --iters 6 --save-every 2 --save "$DISK/ck.st"
if [ $rc -eq 1 ] && one_line "ck.st: No space left on device (file left unchanged); training stopped at iteration 4; .*ck.st keeps the checkpoint of iteration 2" &&
  cmp -s "$WORK/after/ck.st" "$WORK/ref2.st" && [ "$(ls "$WORK/after")" = ck.st ] &&
  "$COMPARE" --show "$WORK/after/ck.st" >/dev/null; then
  ok "periodic save on a full disk: exit 1, the checkpoint of iteration 2 intact: $line"
else
  tail -5 "$WORK/out"
  fail "periodic save on a full disk: exit $rc, files: $(ls "$WORK/after" | tr '\n' ' ')"
fi

# 2. The final save, over a checkpoint that is already there.
on_disk "$kib" 'cp "$after/../ref2.st" "$DISK/ck.st"' --iters 3 --save "$DISK/ck.st"
if [ $rc -eq 1 ] && one_line "ck.st: No space left on device (file left unchanged); training stopped at iteration 3; .*ck.st keeps what it held before the run" &&
  cmp -s "$WORK/after/ck.st" "$WORK/ref2.st" && [ "$(ls "$WORK/after")" = ck.st ]; then
  ok "final save on a full disk: exit 1, the previous file intact: $line"
else
  tail -5 "$WORK/out"
  fail "final save on a full disk: exit $rc, files: $(ls "$WORK/after" | tr '\n' ' ')"
fi

# 3. A trace over a previous one, on a disk with room for neither.
on_disk 16 'echo previous >"$DISK/t.json"' --iters 3 --trace-iters 1:2 --trace "$DISK/t.json"
if [ $rc -eq 1 ] && one_line "t.json: No space left on device (file left unchanged); training stopped at iteration 2" &&
  [ "$(cat "$WORK/after/t.json")" = previous ] && [ "$(ls "$WORK/after")" = t.json ]; then
  ok "trace on a full disk: exit 1, the previous file intact: $line"
else
  tail -5 "$WORK/out"
  fail "trace on a full disk: exit $rc, files: $(ls "$WORK/after" | tr '\n' ' ')"
fi
finish
