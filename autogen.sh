#!/bin/sh
# Regenerates configure and Makefile.in from a clean clone.
set -e
cd "$(dirname "$0")"
exec autoreconf -fi "$@"
