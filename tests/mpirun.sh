#!/bin/sh
# mpirun.sh NP PROGRAM [ARGS...] - run PROGRAM on NP MPI ranks on this host,
# as the tests need it: as root in containers, more ranks than cores, no
# InfiniBand, no cross-memory attach (blocked by container seccomp), and a
# time limit so that a deadlock fails the test instead of hanging make check.
#
# Environment:
#   SC_TEST_TIMEOUT  seconds before the run is killed (default 300, 0: none)
#   SC_MPIEXEC       the launcher (default: mpirun)
#   SC_MPIRUN_FLAGS  extra launcher flags, e.g. "--bind-to none"
# Exit status: PROGRAM's (77 = skip), 124 on timeout, 99 on misuse.

if [ $# -lt 2 ]; then
  echo "usage: $0 NP PROGRAM [ARGS...]" >&2
  exit 99
fi
np=$1
shift
case $np in
  ''|*[!0-9]*|0) echo "$0: NP must be a positive integer, not '$np'" >&2; exit 99 ;;
esac

mpiexec=${SC_MPIEXEC:-mpirun}
if ! command -v "$mpiexec" >/dev/null 2>&1; then
  echo "$0: $mpiexec not found (Debian: apt-get install openmpi-bin)" >&2
  exit 99
fi

limit=${SC_TEST_TIMEOUT:-300}
set -- "$mpiexec" --allow-run-as-root --oversubscribe \
  --mca btl '^openib' --mca btl_vader_single_copy_mechanism none \
  --mca btl_base_warn_component_unused 0 \
  ${SC_MPIRUN_FLAGS:-} -np "$np" "$@"

# --foreground: signal mpirun alone; it puts each rank in its own process
# group and kills them on SIGTERM.  Without it, timeout also signals its own
# process group, and Open MPI 4.1.4's mpirun then exited leaving the ranks
# running.
if [ "$limit" != 0 ] && command -v timeout >/dev/null 2>&1; then
  start=$(date +%s)
  timeout --foreground --kill-after=10 "$limit" "$@"
  rc=$?
  # 137 is also a rank killed by SIGKILL: a timeout only when the time is up.
  if { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && [ $(($(date +%s) - start)) -ge "$limit" ]; then
    echo "$0: killed after ${limit}s (SC_TEST_TIMEOUT): $*" >&2
  fi
  exit $rc
fi
exec "$@"
