# sc_check_hwloc.m4 - hwloc (topology and CPU binding) for starconv.
#
# SC_CHECK_HWLOC: hwloc through pkg-config, mandatory: src/runtime/cpubind.c reads
# each rank's binding and places the CPU workers with it (StarPU links it
# too).  Sets and substitutes HWLOC_CFLAGS, HWLOC_LIBS and sc_hwloc (the
# version, for the summary).

AC_DEFUN([SC_CHECK_HWLOC], [
  AC_REQUIRE([PKG_PROG_PKG_CONFIG])
  PKG_CHECK_MODULES([HWLOC], [hwloc >= 2.0],
    [sc_hwloc="`$PKG_CONFIG --modversion hwloc`"],
    [AC_MSG_ERROR([hwloc 2 not found by pkg-config (it places the CPU workers).
On Debian: apt-get install libhwloc-dev])])
  AC_SUBST([HWLOC_CFLAGS])
  AC_SUBST([HWLOC_LIBS])
])
