# sc_check_hwloc.m4 - hwloc (topology) for starconv.
#
# SC_CHECK_HWLOC: --with-hwloc (default: use it when found).  Sets and
# substitutes HWLOC_CFLAGS, HWLOC_LIBS; defines HAVE_HWLOC;
# AM_CONDITIONAL SC_HAVE_HWLOC.  StarPU itself already links hwloc, so only
# code that calls hwloc directly needs this.

AC_DEFUN([SC_CHECK_HWLOC], [
  AC_REQUIRE([PKG_PROG_PKG_CONFIG])
  AC_ARG_WITH([hwloc],
    [AS_HELP_STRING([--without-hwloc], [do not use hwloc directly (default: use it when found)])],
    [], [with_hwloc=check])
  sc_hwloc=no
  AS_IF([test "x$with_hwloc" != xno], [
    PKG_CHECK_MODULES([HWLOC], [hwloc],
      [sc_hwloc="yes (`$PKG_CONFIG --modversion hwloc`)"],
      [AS_IF([test "x$with_hwloc" = xyes],
         [AC_MSG_ERROR([hwloc not found by pkg-config.
On Debian: apt-get install libhwloc-dev])],
         [AC_MSG_WARN([hwloc not found (Debian package libhwloc-dev): building without it])
          sc_hwloc="no (not found: libhwloc-dev)"])])
  ], [sc_hwloc="no (--without-hwloc)"])
  sc_hwloc_use=no
  AS_CASE([$sc_hwloc], [yes*], [sc_hwloc_use=yes
    AC_DEFINE([HAVE_HWLOC], [1], [Define to 1 when hwloc is used directly.])])
  AM_CONDITIONAL([SC_HAVE_HWLOC], [test "$sc_hwloc_use" = yes])
  AC_SUBST([HWLOC_CFLAGS])
  AC_SUBST([HWLOC_LIBS])
])
