#!/bin/sh
# tests/bench.sh - `make bench`: onnxcc-compiled models against onnxruntime, on this CPU, in one run.
#
#   1. onnxruntime-node (npm; its CPU build ships inside the package) is installed into
#      build/bench/node_modules on first use. Without node/npm the bench times onnxcc alone.
#      PyTorch (Debian's python3-torch, python3-torchvision) is installed with apt-get when it
#      is missing and we are root; without it the public architectures are left out.
#   2. tests/bench/gen.py writes the models to build/bench/NAME/ (ResNet-18, MobileNetV2, a
#      transformer encoder layer, an LSTM, a keyword-spotting DS-CNN and an MLP exported from
#      PyTorch with random weights; a 512^3 SGEMM, mlp1024 and "floor" from onnx helpers; the
#      int8 models of tests/int8 as NAME_i8 next to their float originals NAME_f32; the widened
#      set of issue 16: 17 more public architectures, models.py WIDE, marked NAME/wide), one
#      random input set each and each model's multiply-accumulate count (from the ONNX graph).
#      BENCH_MODELS="a b ..." prepares and times only those. PyTorch exports are cached
#      (NAME/export.key), and so are the objects: a model is compiled again only when the
#      compiler, the model or the flags changed (NAME/BUILD/key).
#   3. Each model is compiled by each build of BENCH_BUILDS (default "O2 def v3": -O2 --cpu
#      native, the default flags, --cpu x86-64-v3; O3 is -O3 --cpu native; the widened set only
#      by those of BENCH_WIDE_BUILDS, default "O2") and linked into
#      tests/bench/harness.c with runtime/onnxcc_pool.c; outputs are compared with onnxruntime's
#      before anything is timed (an int8 model's with those of its QDQ groups unfused: ort.js),
#      and each build's outputs at 2 and 3 threads with its own at one, bit for bit.
#   4. Timing at each thread count of BENCH_THREADS (default "1 2"; onnxruntime:
#      intraOpNumThreads=N, interOpNumThreads=1, all graph optimizations; onnxcc: the O2 and def
#      builds through model_run_par on a pool of N threads, the others on one thread):
#      BENCH_ROUNDS rounds (default 5; the widened set takes part in the first BENCH_WIDE_ROUNDS,
#      default 3, its models being milliseconds to a third of a second each); each round measures the FMA peak of one core
#      (tests/bench/peak.c) and runs, for every model, onnxruntime and each onnxcc variant one
#      after the other, in an order that rotates between rounds. Interleaving matters: this
#      machine's speed drifts by +-20%, so timing one side after the other would compare the
#      drift. Each run is its own process that warms up and then times ~0.3 s of single
#      inferences (harness.c and ort.js share the rule); a model's figure is the median over
#      rounds of each run's median, and the min of its mins. The peak is the best round's.
#      As root (where `chrt -f 50` works) every timed run, both sides', is at real-time
#      priority (SCHED_FIFO 50, its threads too), so that no background process preempts a
#      thread mid-run: a preempted thread stalls the other at the next join, and two-thread
#      figures moved by 30-50% with what else ran. BENCH_RT=0 runs them at normal priority.
#      The kernel still leaves 5% of each second to other processes (sched_rt_runtime_us).
# Prints a table per thread count and writes them to build/bench/results.txt (raw times:
# build/bench/times.txt). ratio = onnxruntime median / onnxcc median at the same thread count, so
# > 1 means onnxcc is faster; geomean over the timed models but floor. Then the default flags
# against --cpu native, and each int8 model's speed-up over its float model per build. Per build
# and thread count, the float set (all but floor and the int8 pairs): its geomean, the models
# below 1.0x, the failed ones; then issue 16's criteria at O2, one thread. Speed never fails the
# bench; a model that does not compile or whose outputs differ is reported in the table as FAIL
# (and not timed) and makes the exit status 1, unless BENCH_XFAIL names it (an expected
# failure, counted in the summary). The exit status is also 1 if the bench itself cannot run.
set -u
cd "$(dirname "$0")/.."
# Set in this environment for numpy's OpenBLAS; they must not steer anything we time.
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
ONNXCC=${ONNXCC:-./onnxcc}
PYTHON=${PYTHON:-/usr/bin/python3}
CC=${CC:-cc}
NODE=${NODE:-node}
NPM=${NPM:-npm}
ORT_VERSION=${ORT_VERSION:-1.30.0}
ROUNDS=${BENCH_ROUNDS:-5}
BUILDS=${BENCH_BUILDS:-O2 def v3}
THREADS=${BENCH_THREADS:-1 2}
# the widened set (gen.py marks its models with NAME/wide): builds and rounds
WIDE_BUILDS=${BENCH_WIDE_BUILDS:-O2}
WIDE_ROUNDS=${BENCH_WIDE_ROUNDS:-3}
# models expected to fail (not compile, or differ from onnxruntime): reported as such and
# counted in the summary, but they do not make the exit status 1
XFAIL=${BENCH_XFAIL-}
export BENCH_MODELS=${BENCH_MODELS:-}
RT=""
[ "${BENCH_RT:-1}" != 0 ] && [ "$(id -u)" = 0 ] && chrt -f 50 true 2>/dev/null && RT="chrt -f 50"
OUT=build/bench
NODE_PATH=$(pwd)/$OUT/node_modules
export NODE_PATH

if [ ! -x "$ONNXCC" ]; then
    echo "bench: $ONNXCC not built (make onnxcc)"
    exit 1
fi
mkdir -p $OUT
# the compiler under test, as it is now (a rebuild meanwhile must not change it mid-run)
cp "$ONNXCC" $OUT/onnxcc.bin
ONNXCC=$OUT/onnxcc.bin

# ---- 1. onnxruntime, PyTorch ----
# --ignore-scripts: the package's install script only fetches the CUDA build from github.com;
# the CPU libraries (bin/napi-v3/linux/x64) are part of the npm package itself.
ort=1
ort_works() { $NODE -e "
    const v = require('onnxruntime-node').env.versions.node;
    if ('$ORT_VERSION' && v !== '$ORT_VERSION') process.exit(1);" >/dev/null 2>&1; }
if ! ort_works; then
    echo "bench: installing onnxruntime-node@$ORT_VERSION into $OUT/node_modules (npm)"
    if ! (cd $OUT && $NPM install --no-save --no-audit --no-fund --ignore-scripts \
            "onnxruntime-node@$ORT_VERSION") >$OUT/npm.log 2>&1 ||
       ! $NODE -e "require('onnxruntime-node')" >>$OUT/npm.log 2>&1; then
        tail -n 5 $OUT/npm.log | sed 's/^/    /'
        echo "bench: onnxruntime-node unavailable (log: $OUT/npm.log); timing onnxcc alone"
        ort=0
    fi
fi
if ! $PYTHON -c "import torch, torchvision" >/dev/null 2>&1 && [ "$(id -u)" = 0 ] &&
   command -v apt-get >/dev/null; then
    echo "bench: installing python3-torch and python3-torchvision (apt-get, first use)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        python3-torch python3-torchvision >$OUT/apt.log 2>&1 ||
        echo "bench: apt-get failed (log: $OUT/apt.log)"
fi

# ---- 2. models, inputs, peak ----
if ! models=$($PYTHON tests/bench/gen.py $OUT 2>$OUT/gen.log); then
    cat $OUT/gen.log
    echo "bench: tests/bench/gen.py failed"
    exit 1
fi
is_wide() { [ -f $OUT/$1/wide ]; }
in_list() { # word list...
    w=$1
    shift
    for x in $*; do [ "$x" = "$w" ] && return 0; done
    return 1
}
builds_of() { # the builds a model is compiled and timed at
    if is_wide $1; then
        for opt in $BUILDS; do in_list $opt $WIDE_BUILDS && printf '%s ' $opt; done
    else
        echo $BUILDS
    fi
}
grep '^gen.py:' $OUT/gen.log | sed 's/^/bench: /'
# a widened-set model that none of BENCH_BUILDS is built for (BENCH_BUILDS=def with the default
# BENCH_WIDE_BUILDS=O2) is left out, said so, rather than compared with no build at all
kept=""
for m in $models; do
    if [ -z "$(builds_of $m)" ]; then
        echo "bench: $m left out: none of BENCH_BUILDS ($BUILDS) is in BENCH_WIDE_BUILDS ($WIDE_BUILDS)"
    else
        kept="$kept $m"
    fi
done
models=$kept
if ! $CC -std=c11 -D_POSIX_C_SOURCE=200809L -O2 -Wall -Wextra -Wpedantic tests/bench/peak.c \
        -o $OUT/peak >$OUT/peak.log 2>&1; then
    cat $OUT/peak.log
    echo "bench: tests/bench/peak.c does not build"
    exit 1
fi

# ---- 3. compile, link, compare outputs ----
# Builds (BENCH_BUILDS, default "O2 def v3"): O2 and O3 are -O2/-O3 --cpu native (this CPU
# alone); def is the default flags, what a user gets from `onnxcc model.onnx -o model.o` (a
# dispatching object, here running its best level); v3 is --cpu x86-64-v3, the level a default
# object runs on a CPU without AVX-512. status_NAME: "ok" if the model is timed, otherwise why
# not; diff_NAME: scaled max diffs.
build_flags() {
    case $1 in
    O2) echo "-O2 --cpu native" ;;
    O3) echo "-O3 --cpu native" ;;
    def) echo "-O2" ;;
    v3) echo "-O2 --cpu x86-64-v3" ;;
    *) echo "bench: unknown build '$1' in BENCH_BUILDS" >&2; exit 1 ;;
    esac
}
# An object is reused when it came from the same compiler, model and flags (NAME/BUILD/key: their
# checksums), so that a second run does not compile ViT-B/16 and VGG-16 again. NAME/BUILD/ctime
# keeps the compile time in seconds, shown in the table.
cc_sum=$(cksum <$ONNXCC)
now_s() { date +%s.%N; }
timed=""
failed=""
for m in $models; do
    d=$OUT/$m
    st=ok
    key_model=$(cksum <$d/model.onnx)
    for opt in $(builds_of $m); do
        mkdir -p $d/$opt
        rm -f $d/$opt/harness $d/onnxcc_${opt}_output_*.bin
        key="$cc_sum $key_model $(build_flags $opt)"
        if [ -f $d/$opt/model.o ] && [ -f $d/$opt/key ] && [ "$(cat $d/$opt/key)" = "$key" ]; then
            echo "(model.o reused: same compiler, model and flags)" >$d/$opt/log
        else
            rm -f $d/$opt/model.o $d/$opt/key $d/$opt/ctime
            t0=$(now_s)
            if $ONNXCC $(build_flags $opt) --name model $d/model.onnx -o $d/$opt/model.o >$d/$opt/log 2>&1 </dev/null; then
                echo "$key" >$d/$opt/key
                awk -v a=$t0 -v b=$(now_s) 'BEGIN { printf "%.1f\n", b - a }' >$d/$opt/ctime
            else
                rm -f $d/$opt/model.o
            fi
        fi
        if [ ! -f $d/$opt/model.o ] ||
           ! $CC -std=c11 -D_POSIX_C_SOURCE=200809L -O2 -Wall -Wextra -Wpedantic -I$d/$opt -Iruntime \
                tests/bench/harness.c runtime/onnxcc_pool.c $d/$opt/model.o -pthread -o $d/$opt/harness >>$d/$opt/log 2>&1 ||
           ! $d/$opt/harness --dump onnxcc_$opt $d >>$d/$opt/log 2>&1; then
            st="$opt build failed: $(grep -m 1 -i -e error -e failed $d/$opt/log || tail -n 1 $d/$opt/log)"
            break
        fi
        # model_run_par at 2 and 3 threads must give model_run's outputs bit for bit
        for th in 2 3; do
            $d/$opt/harness --dump par $d $th >>$d/$opt/log 2>&1 || st="$opt at $th threads failed"
            for f in $d/par_output_*.bin; do
                cmp -s $f $d/onnxcc_${opt}_output_${f##*_output_} || st="$opt: outputs at $th threads differ from one thread's"
            done
        done
        rm -f $d/par_output_*.bin
        [ "$st" = ok ] || break
    done
    dv="-"
    if [ "$st" = ok ] && [ $ort = 1 ]; then
        prefixes=$(for opt in $(builds_of $m); do printf 'onnxcc_%s ' $opt; done)
        # an int8 model (it has a tol) against onnxruntime's unfused QDQ: see ort.js
        copt=all; [ -f $d/tol ] && copt=disabled
        if dv=$(ORT_COMPARE_OPT=$copt $NODE tests/bench/ort.js $d $prefixes 2>$d/ort.log); then
            # outputs that disagree beyond float noise (an int8 model: a few output quanta,
            # gen.py's NAME/tol) would make the timing meaningless
            tol=$(cat $d/tol 2>/dev/null || echo 1e-3)
            bad=$(echo "$dv" | awk -v t=$tol '{ for (i = 1; i <= NF; i++)
                                          if ($i ~ /[^0-9.e+-]/ || $i + 0 > t) print "x" }')
            [ -n "$bad" ] && st="outputs differ from onnxruntime (scaled max diff: $dv)"
            dv=$(echo "$dv" | tr ' ' /)
        else
            st="onnxruntime failed: $(tail -n 1 $d/ort.log)"
            dv="-"
        fi
    fi
    eval "status_$m=\$st diff_$m=\$dv"
    if [ "$st" = ok ]; then
        timed="$timed $m"
    elif in_list $m $XFAIL; then
        echo "bench: $m: expected failure: $st"
    else
        failed="$failed $m"
        echo "bench: FAIL: $m: $st"
    fi
done

# ---- 4. interleaved timing ----
# A variant is SIDE:THREADS, SIDE ort or a build. Every thread count of BENCH_THREADS (default
# "1 2") times onnxruntime (that many intra-op threads) and the O2 and def builds (model_run_par
# on runtime/onnxcc_pool.c's pool); the other builds are timed on one thread.
variants=""
for th in $THREADS; do
    [ $ort = 1 ] && variants="$variants ort:$th"
    for opt in $BUILDS; do
        case $opt in O2|def) variants="$variants $opt:$th" ;; *) [ $th = 1 ] && variants="$variants $opt:1" ;; esac
    done
done
variants=${variants# }
: >$OUT/times.txt
: >$OUT/peak.txt
r=1
while [ $r -le "$ROUNDS" ]; do
    echo "bench: round $r/$ROUNDS:$timed"
    $RT $OUT/peak >>$OUT/peak.txt
    for m in $timed; do
        # the widened set: its own builds, and its rounds only
        is_wide $m && [ $r -gt "$WIDE_ROUNDS" ] && continue
        mb=$(builds_of $m)
        for v in $variants; do
            side=${v%:*} th=${v#*:}
            [ $side = ort ] || in_list $side $mb || continue
            if [ $side = ort ]; then
                t=$(timeout 300 $RT $NODE tests/bench/ort.js $OUT/$m $th 2>>$OUT/$m/ort.log)
            else
                t=$(timeout 300 $RT $OUT/$m/$side/harness $OUT/$m $th 2>>$OUT/$m/$side/log)
            fi
            [ -n "$t" ] && echo "$m $v $r $t" >>$OUT/times.txt
        done
    done
    # rotate the order, so that no side always runs first (warmest or coldest) in a round
    variants="${variants#* } ${variants%% *}"
    r=$((r + 1))
done

# ---- 5. the tables ----
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
peak=$(sort -g -r $OUT/peak.txt | head -n 1 | awk '{ print $1 }')
bits=$(head -n 1 $OUT/peak.txt | awk '{ print $2 }')
# GFLOP/s and % of peak of a median time: "gflops pct", or "- -" without work or time
rate() { # macs us
    [ -n "$2" ] && [ "$1" != 0 ] && awk -v m=$1 -v t=$2 -v p=$peak \
        'BEGIN { g = 2 * m / t / 1e3; printf "%.1f %.0f%%", g, 100 * g / p }' || echo "- -"
}
geomean() { # label, then lines of ratios on stdin
    awk -v l="$1" '$1 + 0 > 0 { s += log($1); n++ } END { if (n) printf "geomean %s over %d models (floor excluded): %.2f\n", l, n, exp(s / n) }'
}
{
    if [ $ort = 1 ]; then
        what="onnxcc vs onnxruntime-node $($NODE -p "require('onnxruntime-node').env.versions.node")"
    else
        what="onnxcc (onnxruntime unavailable, outputs not compared)"
    fi
    echo "$what on $(grep -m 1 'model name' /proc/cpuinfo | sed 's/.*: //') ($(nproc) cores)," \
         "$ROUNDS interleaved rounds, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "FMA peak of one core (tests/bench/peak.c, $bits-bit vectors, best round): $peak GFLOP/s"
    echo "builds: O2, O3 = -O2/-O3 --cpu native; def = default flags (ISA dispatch); v3 = --cpu x86-64-v3"
    echo "priority: ${RT:-normal (not root, or BENCH_RT=0)}${RT:+ (real-time, both sides' runs and their threads)}"
    echo "times: microseconds per inference, median of round medians (min of mins);" \
         "ratio = ort/onnxcc at the same thread count, > 1: onnxcc faster"
    for th in $THREADS; do
        echo
        echo "== $th thread$([ $th = 1 ] || echo s) (onnxruntime: $th intra-op thread$([ $th = 1 ] || echo s))"
        cols=""
        for v in $variants; do [ ${v#*:} = $th ] && [ ${v%:*} != ort ] && cols="$cols ${v%:*}"; done
        printf '%-12s %8s %-20s' model GFLOP onnxruntime
        for opt in $cols; do printf ' %-20s %-6s' "onnxcc $opt" "ratio"; done
        printf ' %-12s' "ort GFLOP/s"
        for opt in $cols; do printf ' %-12s' "$opt GFLOP/s"; done
        [ $th = 1 ] && printf ' %-26s %s' "diff" "compile s"
        [ $th != 1 ] && printf ' %s' "speedup vs 1 thread: ort, O2"
        printf '\n'
        for m in $models; do
            eval "st=\$status_$m dv=\$diff_$m"
            macs=$(cat $OUT/$m/macs 2>/dev/null || echo 0)
            gflop=$(awk -v m=$macs 'BEGIN { printf(m ? "%.3g" : "-", 2 * m / 1e9) }')
            if [ "$st" != ok ]; then
                in_list $m $XFAIL && x="expected failure" || x=FAIL
                printf '%-12s %8s %s\n' $m $gflop "$x, not timed: $st"
                continue
            fi
            rt=$(get $m ort:$th 3)
            line=$(printf '%-12s %8s %-20s' $m $gflop "${rt:--} ${rt:+($(get $m ort:$th 4))}")
            rates=$(rate $macs "$rt" | awk '{ printf "%-12s", $1 " " $2 }')
            for opt in $cols; do
                t=$(get $m $opt:$th 3)
                line="$line $(printf '%-20s %-6s' "${t:--} ${t:+($(get $m $opt:$th 4))}" "$(ratio "$rt" "$t")")"
                rates="$rates $(rate $macs "$t" | awk '{ printf "%-12s", $1 " " $2 }')"
            done
            if [ $th = 1 ]; then
                ct=$(for opt in $BUILDS; do cat $OUT/$m/$opt/ctime 2>/dev/null || echo -; done | paste -sd /)
                echo "$line $rates $(printf '%-26s' "$dv") $ct"
            else
                echo "$line $rates $(ratio "$(get $m ort:1 3)" "$rt") $(ratio "$(get $m O2:1 3)" "$(get $m O2:$th 3)")"
            fi
        done
        for opt in $cols; do
            for m in $timed; do
                [ $m = floor ] && continue
                ratio "$(get $m ort:$th 3)" "$(get $m $opt:$th 3)"
                echo
            done | geomean "ratio ort/onnxcc $opt, $th thread$([ $th = 1 ] || echo s),"
        done
        # the float set (all but floor and the int8 pairs): geomean, and who is below 1.0x
        for opt in $cols; do
            for m in $models; do
                case $m in floor|*_i8|*_f32) continue ;; esac
                eval "st=\$status_$m"
                if [ "$st" != ok ]; then
                    echo "$m failed"
                    continue
                fi
                in_list $opt $(builds_of $m) || continue
                echo "$m $(ratio "$(get $m ort:$th 3)" "$(get $m $opt:$th 3)")"
            done | awk -v l="$opt, $th thread$([ $th = 1 ] || echo s)" '
                $2 == "failed" { nf++; f = f " " $1; next }
                $2 + 0 > 0 { s += log($2); n++; if ($2 + 0 < 1) { nb++; b = b " " $1 "(" $2 ")" } }
                END { if (n + nf) printf "float set, %s: geomean ort/onnxcc %s over %d models; below 1.0x: %d%s%s; failed: %d%s\n",
                             l, n ? sprintf("%.2f", exp(s / n)) : "-", n, nb, nb ? ":" : "", b, nf, f
                      if (l == "O2, 1 thread")
                          printf "issue 16 criteria (--cpu native, 1 thread, float set): every model >= 1.0x: %s; geomean >= 1.5x: %s\n",
                                 (nb + nf ? "no" : n ? "yes" : "none timed"), ((n && exp(s / n) >= 1.5) ? "yes" : "no") }'
        done
    done
    echo
    # the default flags against this CPU's own build, and int8 against float per build
    for m in $timed; do
        [ $m = floor ] && continue
        d=$(ratio "$(get $m O2:1 3)" "$(get $m def:1 3)")
        [ "$d" != - ] && echo "default flags vs --cpu native, $m: $d (> 0.9: within 10%)"
    done
    for m in $timed; do
        case $m in *_i8) ;; *) continue ;; esac
        f=${m%_i8}_f32
        for opt in def v3 O2; do
            x=$(ratio "$(get $f $opt:1 3)" "$(get $m $opt:1 3)")
            [ "$x" != - ] && echo "int8 speed-up over float, $m, $opt: $x"
        done
    done
    echo "GFLOP/s: 2 x multiply-accumulates of Conv/Gemm/MatMul/LSTM (tests/bench/gen.py) / median;" \
         "% of one core's FMA peak above"
    xf=""
    for m in $models; do
        eval "st=\$status_$m"
        [ "$st" != ok ] && in_list $m $XFAIL && xf="$xf $m"
    done
    n=$(echo $models | wc -w)
    echo "correctness: $(echo $timed | wc -w) of $n models built and match onnxruntime;" \
         "FAIL: $(echo $failed | wc -w)${failed:+ (}${failed# }${failed:+)}; expected failures (BENCH_XFAIL): $(echo $xf | wc -w)${xf:+ (}${xf# }${xf:+)}"
} >$OUT/results.txt
cat $OUT/results.txt
echo "bench: results in $OUT/results.txt, raw times in $OUT/times.txt"
# a wrong result (or a build that fails) is a failure of the bench; slowness is not
[ -z "$failed" ]
