#!/bin/sh
# tests/bench.sh - `make bench`: onnxcc-compiled models against onnxruntime, on this CPU, in one run.
#
#   1. onnxruntime-node (npm; its CPU build ships inside the package) is installed into
#      build/bench/node_modules on first use. Without node/npm the bench times onnxcc alone.
#   2. tests/bench/gen.py copies models/*/model.onnx to build/bench/NAME/, adds two larger
#      random-weight models (convnet: 256x256x3 ResNet-ish; mlp1024: three 1024-wide layers)
#      and "floor" (one Relu of one float: each side's fixed cost per call, which for
#      onnxruntime-node is mostly JavaScript and N-API, so small models say little about
#      onnxruntime itself), and writes one random input set per model.
#   3. Each model is compiled with onnxcc -O3 and -O2 and linked into tests/bench/harness.c;
#      both outputs are compared with onnxruntime's (max abs diff) before anything is timed.
#   4. Timing, all single-threaded (onnxruntime: intraOpNumThreads=interOpNumThreads=1, all
#      graph optimizations): BENCH_ROUNDS rounds (default 5); each round runs, for every model,
#      onnxruntime, onnxcc -O3 and onnxcc -O2 one after the other, in an order that rotates
#      between rounds. Interleaving matters: this machine's speed drifts by +-20%, so timing one
#      side after the other would compare the drift. Each run is its own process that warms up
#      and then times ~0.3 s of single inferences (harness.c and ort.js share the rule); a
#      model's figure is the median over rounds of each run's median, and the min of its mins.
# Prints the table and writes it to build/bench/results.txt (raw times: build/bench/times.txt).
# ratio = onnxcc median / onnxruntime median, so > 1 means onnxcc is slower. Speed never fails
# the bench; a model that does not compile or whose outputs differ is reported in the table
# (and not timed), and the exit status is 1 only if the bench itself cannot run.
set -u
cd "$(dirname "$0")/.."
# Set in this environment for numpy's OpenBLAS; they must not steer anything we time.
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
ONNXCC=${ONNXCC:-./onnxcc}
PYTHON=${PYTHON:-/usr/bin/python3}
CC=${CC:-cc}
NODE=${NODE:-node}
NPM=${NPM:-npm}
ORT_VERSION=${ORT_VERSION:-1.20}
ROUNDS=${BENCH_ROUNDS:-5}
OUT=build/bench
NODE_PATH=$(pwd)/$OUT/node_modules
export NODE_PATH

if [ ! -x "$ONNXCC" ]; then
    echo "bench: $ONNXCC not built (make onnxcc)"
    exit 1
fi
mkdir -p $OUT

# ---- 1. onnxruntime ----
# --ignore-scripts: the package's install script only fetches the CUDA build from github.com;
# the CPU libraries (bin/napi-v3/linux/x64) are part of the npm package itself.
ort=1
if ! $NODE -e "require('onnxruntime-node')" >/dev/null 2>&1; then
    echo "bench: installing onnxruntime-node@$ORT_VERSION into $OUT/node_modules (first use, npm)"
    if ! (cd $OUT && $NPM install --no-save --no-audit --no-fund --ignore-scripts \
            "onnxruntime-node@$ORT_VERSION") >$OUT/npm.log 2>&1 ||
       ! $NODE -e "require('onnxruntime-node')" >>$OUT/npm.log 2>&1; then
        tail -n 5 $OUT/npm.log | sed 's/^/    /'
        echo "bench: onnxruntime-node unavailable (log: $OUT/npm.log); timing onnxcc alone"
        ort=0
    fi
fi
[ $ort = 1 ] && echo "bench: onnxruntime-node $($NODE -p "require('onnxruntime-node').env.versions.node" 2>/dev/null)"

# ---- 2. models and inputs ----
if ! models=$($PYTHON tests/bench/gen.py $OUT models/*/model.onnx 2>$OUT/gen.log); then
    cat $OUT/gen.log
    echo "bench: tests/bench/gen.py failed"
    exit 1
fi

# ---- 3. compile, link, compare outputs ----
# status_NAME: "ok" if the model is timed, otherwise why not; diff_NAME: max abs diffs.
timed=""
for m in $models; do
    d=$OUT/$m
    st=ok
    for opt in O3 O2; do
        mkdir -p $d/$opt
        rm -f $d/$opt/model.o $d/$opt/harness $d/onnxcc_${opt}_output_*.bin
        if ! $ONNXCC -$opt --name model $d/model.onnx -o $d/$opt/model.o >$d/$opt/log 2>&1 </dev/null ||
           ! $CC -std=c11 -D_POSIX_C_SOURCE=200809L -O2 -Wall -Wextra -Wpedantic -I$d/$opt \
                tests/bench/harness.c $d/$opt/model.o -o $d/$opt/harness >>$d/$opt/log 2>&1 ||
           ! $d/$opt/harness --dump onnxcc_$opt $d >>$d/$opt/log 2>&1; then
            st="-$opt failed: $(grep -m 1 -i -e error -e failed $d/$opt/log || tail -n 1 $d/$opt/log)"
            break
        fi
    done
    dv="-"
    if [ "$st" = ok ] && [ $ort = 1 ]; then
        if dv=$($NODE tests/bench/ort.js $d onnxcc_O3 onnxcc_O2 2>$d/ort.log); then
            # outputs that disagree beyond float noise would make the timing meaningless
            bad=$(echo "$dv" | awk '{ for (i = 1; i <= NF; i++)
                                          if ($i ~ /[^0-9.e+-]/ || $i + 0 > 1e-3) print "x" }')
            [ -n "$bad" ] && st="outputs differ from onnxruntime (max abs diff -O3 -O2: $dv)"
            dv=$(echo "$dv" | tr ' ' /)
        else
            st="onnxruntime failed: $(tail -n 1 $d/ort.log)"
            dv="-"
        fi
    fi
    eval "status_$m=\$st diff_$m=\$dv"
    if [ "$st" = ok ]; then
        timed="$timed $m"
    else
        echo "bench: $m: $st"
    fi
done

# ---- 4. interleaved timing ----
variants="ort O3 O2"
[ $ort = 1 ] || variants="O3 O2"
: >$OUT/times.txt
r=1
while [ $r -le "$ROUNDS" ]; do
    echo "bench: round $r/$ROUNDS:$timed"
    for m in $timed; do
        for v in $variants; do
            if [ $v = ort ]; then
                t=$(timeout 120 $NODE tests/bench/ort.js $OUT/$m 2>>$OUT/$m/ort.log)
            else
                t=$(timeout 120 $OUT/$m/$v/harness $OUT/$m 2>>$OUT/$m/$v/log)
            fi
            [ -n "$t" ] && echo "$m $v $r $t" >>$OUT/times.txt
        done
    done
    # rotate the order, so that no side always runs first (warmest or coldest) in a round
    variants="${variants#* } ${variants%% *}"
    r=$((r + 1))
done

# ---- 5. the table ----
# times.txt lines: model variant round median_us min_us iterations. Per model and variant:
# median of the round medians, min of the mins.
summary=$(sort -k1,1 -k2,2 -k4,4g $OUT/times.txt | awk '
    function us(t) { return sprintf(t < 100 ? "%.2f" : "%.0f", t) }
    function flush() { if (n) printf "%s %s %s %s %d\n", key1, key2,
                           us(n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2), us(lo), n }
    $1 " " $2 != key1 " " key2 { flush(); key1 = $1; key2 = $2; n = 0; lo = $5 }
    { a[++n] = $4; if ($5 < lo) lo = $5 }
    END { flush() }')
get() { # model variant field(3 median, 4 min, 5 rounds)
    echo "$summary" | awk -v m=$1 -v v=$2 -v f=$3 '$1 == m && $2 == v { print $f }'
}
ratio() { [ -n "$1" ] && [ -n "$2" ] && awk -v a=$1 -v b=$2 'BEGIN { printf "%.2f", a / b }' || echo -; }
{
    if [ $ort = 1 ]; then
        what="onnxcc vs onnxruntime $($NODE -p "require('onnxruntime-node').env.versions.node")"
    else
        what="onnxcc (onnxruntime unavailable, outputs not compared)"
    fi
    echo "$what on $(grep -m 1 'model name' /proc/cpuinfo | sed 's/.*: //'), single thread," \
         "$ROUNDS interleaved rounds, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "times in microseconds per inference: median of round medians (min); ratio = onnxcc/ort"
    echo "(floor = one Relu of one float: each side's fixed cost per call, mostly JS/N-API for ort)"
    printf '%-11s %-20s %-20s %-20s %-6s %-6s %s\n' model "onnxcc -O3" "onnxcc -O2" \
           onnxruntime O3/ort O2/ort "max abs diff O3/O2"
    for m in $models; do
        eval "st=\$status_$m dv=\$diff_$m"
        if [ "$st" != ok ]; then
            printf '%-11s %s\n' $m "not timed: $st"
            continue
        fi
        row=$m
        for v in O3 O2 ort; do
            med=$(get $m $v 3)
            if [ -n "$med" ]; then
                row="$row|$med ($(get $m $v 4))"
            else
                row="$row|-"
            fi
        done
        o3=$(get $m O3 3) o2=$(get $m O2 3) rt=$(get $m ort 3)
        echo "$row|$(ratio "$o3" "$rt")|$(ratio "$o2" "$rt")|$dv" |
            awk -F'|' '{ printf "%-11s %-20s %-20s %-20s %-6s %-6s %s\n", $1, $2, $3, $4, $5, $6, $7 }'
    done
} >$OUT/results.txt
cat $OUT/results.txt
echo "bench: results in $OUT/results.txt, raw times in $OUT/times.txt"
