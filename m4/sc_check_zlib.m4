# sc_check_zlib.m4 - zlib, to read the gzipped IDX data sets.
#
# SC_CHECK_ZLIB: pkg-config zlib, else zlib.h and -lz.
# Substitutes ZLIB_CFLAGS, ZLIB_LIBS; defines HAVE_ZLIB.

AC_DEFUN([SC_CHECK_ZLIB], [
  AC_REQUIRE([PKG_PROG_PKG_CONFIG])
  PKG_CHECK_MODULES([ZLIB], [zlib],
    [sc_zlib="yes (`$PKG_CONFIG --modversion zlib`)"],
    [AC_CHECK_HEADER([zlib.h],
       [AC_CHECK_LIB([z], [gzopen], [ZLIB_LIBS=-lz; sc_zlib="yes (-lz)"], [sc_zlib=no])],
       [sc_zlib=no])])
  AS_IF([test "$sc_zlib" = no],
    [AC_MSG_ERROR([zlib not found.
On Debian: apt-get install zlib1g-dev])])
  AC_DEFINE([HAVE_ZLIB], [1], [Define to 1 when zlib is available.])
  AC_SUBST([ZLIB_CFLAGS])
  AC_SUBST([ZLIB_LIBS])
])
