# State Threads' make interface, for projects that build ST with it (SRS
# does: make linux-debug, then copies LINUX_$(uname -r)_DBG/*). st builds
# with Meson; this file only hands the target to tools/make/st_make.sh,
# which runs the Meson build and fills the directory ST's Makefile would.
# The variables (CC AR LD RANLIB RANDLIB STRIP STATIC_ONLY EXTRA_CFLAGS
# DRY_RUN) reach it in the environment, where make puts those given on its
# command line. See docs/building.md, "Building with State Threads' make
# interface".

ST_MAKE := $(dir $(abspath $(lastword $(MAKEFILE_LIST))))tools/make/st_make.sh
TARGETS := linux-debug linux-optimized darwin-debug darwin-optimized cygwin64-debug

# One Meson build at a time: they share the obj link.
.NOTPARALLEL:
.PHONY: help clean $(TARGETS)

help:
	@bash '$(ST_MAKE)' help

$(TARGETS):
	@bash '$(ST_MAKE)' $@

clean:
	@bash '$(ST_MAKE)' clean
