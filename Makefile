# onnxcc - plain Makefile. `make` builds ./onnxcc; `make run` compiles and runs the example;
# `make test` runs every test; `make install` (PREFIX, DESTDIR) installs the compiler, its man page
# and the CMake module; `make fuzz` fuzzes the importer and the pipeline; `make bench` times models
# against onnxruntime; `make check-detector` checks a torchvision detector against it (neither is
# part of `make test`). Missing Debian packages are installed first (tools/install-deps.sh).
# Variables: LLVM_CONFIG, CC, SANITIZE=1 (ASan+UBSan build), DEBUG=1 (no optimisation).
# `make SANITIZE=1 test` builds onnxcc and the unit tests with ASan+UBSan into build-san/ (the
# binary: build-san/onnxcc, so that objects of the two variants never mix) and runs every test;
# any sanitizer report fails the run (tests/run-all.sh sets ASAN_OPTIONS and UBSAN_OPTIONS).

LLVM_CONFIG ?= llvm-config-19
PROTOC_C ?= protoc-c
ONNX_PROTO ?= /usr/include/onnx/onnx.proto
CC ?= cc
# A sanitized build lives apart: its objects must never be linked with plain ones.
B := $(if $(SANITIZE),build-san,build)
BIN := $(if $(SANITIZE),$(B)/onnxcc,onnxcc)
comma := ,

WARN := -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wno-unused-parameter
OPT := $(if $(DEBUG),-O0,-O2)
SAN := $(if $(SANITIZE),-fsanitize=address$(comma)undefined -fno-omit-frame-pointer)
LLVM_CFLAGS = -isystem $(shell $(LLVM_CONFIG) --includedir)
LLVM_LIBS = $(shell $(LLVM_CONFIG) --ldflags) $(shell $(LLVM_CONFIG) --libs)
CFLAGS += -std=c11 -D_DEFAULT_SOURCE -D_POSIX_C_SOURCE=200809L -g $(OPT) $(WARN) $(SAN) \
          -I$(B)/gen $(LLVM_CFLAGS) -MMD -MP
LDLIBS += $(LLVM_LIBS) -lprotobuf-c -lz -lm -lpthread
LDFLAGS += $(SAN)

SRCS := $(wildcard cli/*.c frontend/*.c ir/*.c passes/*.c passes/ops/*.c backend/*.c) runtime/onnxcc_pool.c
OBJS := $(SRCS:%.c=$(B)/%.o) $(B)/gen/onnx.pb-c.o $(B)/gen/header_template.o
DEPS_STAMP := $(B)/.deps

# `make install`: the compiler, its manual page, the CMake module (tools/cmake/onnxcc.cmake) and
# the thread pool's sources for NAME_run_par (runtime/onnxcc_pool.[ch])
PREFIX ?= /usr/local
DESTDIR ?=
BINDIR = $(PREFIX)/bin
MANDIR = $(PREFIX)/share/man/man1
CMAKEDIR = $(PREFIX)/share/onnxcc/cmake
RUNTIMEDIR = $(PREFIX)/share/onnxcc/runtime

.PHONY: all run test bench check-detector fuzz fuzz-types fuzz-attrs clean deps install uninstall report-screenshot
all: $(BIN)

deps: $(DEPS_STAMP)
$(DEPS_STAMP): tools/install-deps.sh
	@mkdir -p $(B)
	@sh tools/install-deps.sh
	@touch $@

# The schema comes with libonnx-dev: on a fresh machine it appears once the packages are in.
$(ONNX_PROTO): | $(DEPS_STAMP)

# The protobuf-c code is generated from Debian's schema at build time, never vendored.
$(B)/gen/onnx.pb-c.c $(B)/gen/onnx.pb-c.h: $(ONNX_PROTO) | $(DEPS_STAMP)
	@mkdir -p $(B)/gen
	$(PROTOC_C) --proto_path=$(dir $(ONNX_PROTO)) --c_out=$(B)/gen $(ONNX_PROTO)

$(B)/gen/onnx.pb-c.o: $(B)/gen/onnx.pb-c.c
	$(CC) -std=c11 -O2 -g $(SAN) -I$(B)/gen -c $< -o $@

# The header template is embedded into onnxcc as a byte array (backend/header.c fills it in).
$(B)/gen/header_template.c: runtime/model.h.in
	@mkdir -p $(B)/gen
	{ echo '/* generated from runtime/model.h.in by the Makefile */'; \
	  echo 'const char be_header_template[] = {'; \
	  od -An -v -tx1 $< | sed 's/\([0-9a-f][0-9a-f]\)/0x\1,/g'; echo '0};'; } > $@

$(B)/gen/header_template.o: $(B)/gen/header_template.c
	$(CC) -std=c11 -O2 -g $(SAN) -c $< -o $@

$(B)/%.o: %.c $(B)/gen/onnx.pb-c.h | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BIN): $(OBJS)
	$(CC) $(LDFLAGS) $(OBJS) -o $@ $(LDLIBS)

ifneq ($(BIN),onnxcc)
.PHONY: onnxcc
onnxcc: $(BIN)
endif

# ---- the example: compile models/example, link the demo, run it ----
run: $(BIN)
	@ONNXCC=./$(BIN) sh models/run-example.sh

# ---- tests ----
test: $(BIN)
	@B=$(B) BIN=./$(BIN) SANITIZE=$(SANITIZE) sh tests/run-all.sh

# The README's picture of a --report page (needs Debian's chromium).
report-screenshot: $(BIN)
	@mkdir -p $(B)/report
	./$(BIN) models/example/model.onnx -o $(B)/report/example.o --report $(B)/report/example.html
	chromium --headless --no-sandbox --disable-gpu --disable-background-networking --hide-scrollbars \
	    --window-size=1100,1800 --screenshot=$(CURDIR)/docs/report.png file://$(CURDIR)/$(B)/report/example.html

bench: $(BIN)
	@ONNXCC=./$(BIN) sh tests/bench.sh

# torchvision's SSDlite320-MobileNetV3 with its post-process against onnxruntime (tests/detector.sh)
check-detector: $(BIN)
	@ONNXCC=./$(BIN) sh tests/detector.sh

install: $(BIN)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR) $(DESTDIR)$(CMAKEDIR) $(DESTDIR)$(RUNTIMEDIR)
	install -m 755 $(BIN) $(DESTDIR)$(BINDIR)/onnxcc
	install -m 644 docs/onnxcc.1 $(DESTDIR)$(MANDIR)/onnxcc.1
	install -m 644 tools/cmake/onnxcc.cmake $(DESTDIR)$(CMAKEDIR)/onnxcc.cmake
	install -m 644 runtime/onnxcc_pool.c runtime/onnxcc_pool.h $(DESTDIR)$(RUNTIMEDIR)

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/onnxcc $(DESTDIR)$(MANDIR)/onnxcc.1 $(DESTDIR)$(CMAKEDIR)/onnxcc.cmake
	rm -f $(DESTDIR)$(RUNTIMEDIR)/onnxcc_pool.c $(DESTDIR)$(RUNTIMEDIR)/onnxcc_pool.h
	-rmdir $(DESTDIR)$(CMAKEDIR) $(DESTDIR)$(RUNTIMEDIR) $(DESTDIR)$(PREFIX)/share/onnxcc 2>/dev/null

# libFuzzer on the importer and the pipeline (tests/fuzz/run.sh; FUZZ_SECONDS=300 by default).
fuzz: $(B)/gen/onnx.pb-c.c $(B)/gen/header_template.c | $(DEPS_STAMP)
	@GEN=$(B)/gen sh tests/fuzz/run.sh

fuzz-types: $(BIN)
	@/usr/bin/python3 tests/fuzz/optypes.py ./$(BIN) build-fuzz/types

# every attribute of every op at its boundary values (tests/fuzz/attrs.py)
fuzz-attrs: $(BIN)
	@/usr/bin/python3 tests/fuzz/attrs.py ./$(BIN) build-fuzz/attrs

clean:
	rm -rf $(B) $(BIN) build-fuzz

-include $(OBJS:.o=.d)
