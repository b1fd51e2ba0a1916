#!/bin/sh
# tests/report.sh - onnxcc --report: the pages of a float CNN (at -O2 and at -O0, where the
# arena has in-place pairs), a ResNet-style network (tests/bench/gen.py's convnet), a quantized
# model for the host and for a Cortex-M4, two control-flow models, and `check` and `bench`
# pages, each checked by tests/report.py against the header, -v's memory report,
# --print-after=bufferize's arena plan and the ONNX model's nodes; a page with one rectangle
# moved must fail that check. --report-counts is tried on a Cortex-M4 run of tests/firmware
# (under QEMU; skipped without the toolchain). Then, with Debian's chromium, bench's page is
# opened headless: the script must have run without an error and filtered the tables by the
# search in the address, the DOM must hold a box per kernel and a rectangle per temporary, and
# the screenshot must not be blank. Without chromium that is skipped, and counted so.
# Work files: build/report/. Last line: "report: N passed, N failed[, N skipped]".
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
OUT=build/report
rm -rf $OUT
mkdir -p $OUT

# page NAME MODEL [OPTIONS...]: compiles with --report, checks the page
# --print-after's dump of the first ISA level only: a default host object's page shows its
# baseline level (x86-64-v3), and the dump has a section per level
first_level() { awk '/^; --- after / && seen++ { exit } { print }'; }

page() {
    name=$1 model=$2
    shift 2
    if ! $ONNXCC "$model" "$@" -o $OUT/$name.o --report $OUT/$name.html -v >$OUT/$name.log 2>&1; then
        fail "compile $name with --report" $OUT/$name.log
        return
    fi
    $ONNXCC "$model" "$@" -o /dev/null --print-after=bufferize 2>&1 | first_level >$OUT/$name.kir
    if $PYTHON tests/report.py $OUT/$name.html "$model" $OUT/$name.kir $OUT/$name.h $OUT/$name.log \
        >$OUT/$name.check 2>&1; then
        ok "report $name ($(grep -c '^ok' $OUT/$name.check) checks)"
    else
        fail "report $name" $OUT/$name.check
    fi
}

if ! $PYTHON -c "import sys; sys.path.insert(0, 'tests/bench'); import gen; from onnx import save; \
save(gen.convnet(), '$OUT/convnet.onnx')" >$OUT/gen.log 2>&1; then
    fail "tests/bench/gen.py convnet" $OUT/gen.log
fi

page cnn models/cnn/model.onnx
page cnn_O0 models/cnn/model.onnx -O0
page example models/example/model.onnx
page convnet $OUT/convnet.onnx
page kws_int8 tests/int8/kws/model.onnx
page kws_int8_m4 tests/int8/kws/model.onnx --target thumbv7em-none-eabihf --cpu cortex-m4
page if_branch models/if_branch/model.onnx
page loop_while models/loop_while/model.onnx

# check and bench: the page of their (first) compilation; bench adds a time per kernel
m=models/cnn/model.onnx
$ONNXCC $m -o /dev/null --print-after=bufferize 2>&1 | first_level >$OUT/cnn_run.kir
$ONNXCC $m -o /dev/null --cpu native --print-after=bufferize >$OUT/cnn_native.kir 2>&1   # bench's
if $ONNXCC check $m --report $OUT/check.html -v >$OUT/check.log 2>&1 &&
    $PYTHON tests/report.py $OUT/check.html $m $OUT/cnn_run.kir - $OUT/check.log >$OUT/check.check 2>&1; then
    ok "check --report"
else
    fail "check --report" $OUT/check.log
    cat $OUT/check.check 2>/dev/null
fi
if $ONNXCC bench --seconds 0.1 $m --report $OUT/bench.html -v >$OUT/bench.log 2>&1 &&
    $PYTHON tests/report.py $OUT/bench.html $m $OUT/cnn_native.kir - $OUT/bench.log >$OUT/bench.check 2>&1; then
    # a row per computing kernel in the time table, each named as bench's own table names it
    rows=$(sed -n '/id="times"/,/<\/table>/p' $OUT/bench.html | grep -c 'class="s bar-row"')
    kernels=$(grep -c '^kernel ' $OUT/cnn_native.kir)
    missing=$(grep '^_' $OUT/bench.log | awk '{print $1}' | while read -r k; do
        grep -q "data-name=\"$k\" data-value" $OUT/bench.html || echo "$k"; done)
    if [ "$rows" = "$kernels" ] && [ -z "$missing" ]; then ok "bench --report: $rows kernel times"
    else fail "bench --report" "$rows time rows for $kernels kernels; missing: $missing"; fi
else
    fail "bench --report" $OUT/bench.log
    cat $OUT/bench.check 2>/dev/null
fi

# --report-counts: a Cortex-M4 firmware run of a --profile build under QEMU (tests/firmware),
# its instructions per kernel on the page, and its MACs per kernel (the profiled object's
# NAME_profile_macs) equal to the page's (kir_kernel_cost of the report's own compilation)
if command -v arm-none-eabi-gcc >/dev/null && command -v qemu-system-arm >/dev/null; then
    counts=build/fw/m4/prof/cnn.out
    sh tests/firmware/run.sh "m4 cnn" >$OUT/fw.log 2>&1
    if [ ! -s $counts ] || ! grep -q '^kernel ' $counts; then
        fail "firmware counts for --report-counts" $OUT/fw.log
    elif ! $ONNXCC models/cnn/model.onnx --target thumbv7em-none-eabihf --cpu cortex-m4 -o $OUT/m4.o \
        --report $OUT/m4.html --report-counts $counts >$OUT/m4.log 2>&1; then
        fail "--report-counts" $OUT/m4.log
    else
        bad=$(sed -n 's/^kernel \([^:]*\): \([0-9]*\) instructions, \([0-9]*\) MACs$/\1 \2 \3/p' $counts |
            while read -r k insns macs; do
                grep -q "<tr class=\"s bar-row\" data-name=\"$k\" data-value=\"$insns\">" $OUT/m4.html || echo "$k:insns"
                grep -q "<tr class=\"s kernel\" data-name=\"$k\" data-macs=$macs>" $OUT/m4.html || echo "$k:macs"
            done)
        n=$(grep -c '^kernel ' $counts)
        if [ -z "$bad" ]; then ok "--report-counts: $n kernels' instructions, MACs as the firmware counted them"
        else fail "--report-counts" "not on the page or other: $bad"; fi
    fi
else
    echo "skip --report-counts: no arm-none-eabi-gcc or qemu-system-arm"
    skipped=$((${skipped:-0} + 1))
fi

# the checker must catch a plan whose rectangles overlap: move cnn's second one onto the first
sed '0,/class=temp.*data-offset=[0-9]*/! s/\(class=temp [^>]*data-offset=\)[0-9]*/\10/' $OUT/cnn.html >$OUT/moved.html
if ! grep -q 'class=temp.*data-offset=[1-9]' $OUT/cnn.html 2>/dev/null; then
    fail "a moved rectangle" "no rectangle left off offset 0 to move"
elif $PYTHON tests/report.py $OUT/moved.html models/cnn/model.onnx $OUT/cnn.kir >$OUT/moved.check 2>&1; then
    fail "a moved rectangle" "tests/report.py accepted overlapping temporaries"
else
    ok "a moved rectangle is caught"
fi

# in a browser
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$CHROMIUM" ]; then
    echo "skip chromium: not installed (apt-get install chromium): the page is not rendered"
    skipped=$((${skipped:-0} + 1))
else
    for name in bench; do       # one page: each start of chromium takes seconds
        dom=$OUT/$name.dom png=$OUT/$name.png
        flags="--headless --no-sandbox --disable-gpu --disable-background-networking --hide-scrollbars"
        # with a search for "conv2" in the address (#q=): the script filters the tables
        timeout 60 $CHROMIUM $flags --dump-dom "file://$PWD/$OUT/$name.html#q=conv2" >$dom 2>$OUT/$name.chromium.log
        timeout 60 $CHROMIUM $flags --window-size=1240,1800 --screenshot=$png file://$PWD/$OUT/$name.html \
            >>$OUT/$name.chromium.log 2>&1
        if $PYTHON - $OUT/$name.html $dom $png >$OUT/$name.browser 2>&1 <<'EOF'
import re, struct, sys, zlib
page, dom, png = (open(sys.argv[1]).read(), open(sys.argv[2]).read(), open(sys.argv[3], "rb").read())
m = re.search(r"<html[^>]*data-script=\"([^\"]*)\"", dom)
assert m and m.group(1) == "ran", "the script did not run to its end: %s" % (m and m.group(1))
for cls in ("kbox", "temp"):
    want = len(re.findall(r"<rect class=%s " % cls, page))
    got = len(re.findall(r"<rect class=\"%s\"" % cls, dom))
    assert want and got == want, "%d rect.%s in the browser's DOM, %d in the page" % (got, cls, want)
rows = re.findall(r"<tr class=\"s (?:kernel|onnx)( hide)?\"[^>]*>(.*?)</tr>", dom, re.S)
shown = [t for h, t in rows if not h]
assert shown and len(shown) < len(rows), "the search for conv2 shows %d of %d rows" % (len(shown), len(rows))
assert all("conv2" in re.sub(r"<[^>]*>", "", t).lower() for t in shown), "a row without conv2 is shown"
# the screenshot: decode the PNG's rows; blank means (nearly) one colour
assert png[:8] == b"\x89PNG\r\n\x1a\n", "no PNG"
w, h = struct.unpack(">II", png[16:24])
data, i = b"", 8
while i < len(png):
    n, kind = struct.unpack(">I4s", png[i:i + 8])
    if kind == b"IDAT":
        data += png[i + 8:i + 8 + n]
    i += 12 + n
raw = zlib.decompress(data)
distinct = len(set(raw[::97]))
assert w >= 1000 and h >= 1000 and distinct > 20, "a blank screenshot? %dx%d, %d byte values" % (w, h, distinct)
ms = re.search(r"<html[^>]*data-load-ms=\"(\d+)\"", dom)
print("%dx%d, %d byte values, loaded in %s ms, search: %d of %d rows" % (w, h, distinct, ms.group(1) if ms else "?",
                                                                       len(shown), len(rows)))
EOF
        then
            ok "chromium renders $name ($(cat $OUT/$name.browser))"
        else
            fail "chromium renders $name" $OUT/$name.browser
        fi
    done
fi
summary report
