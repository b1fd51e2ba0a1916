// ort.js - the onnxruntime side of `make bench` (tests/bench.sh), the twin of harness.c.
//
//   node ort.js DIR [THREADS]       time the model
//   node ort.js DIR PREFIX...       compare outputs with DIR/PREFIX_output_K.bin
//
// Loads DIR/model.onnx into onnxruntime-node (CPU, THREADS intra-op threads, default 1, and one
// inter-op thread, all graph optimizations) and reads its inputs from DIR/input_K.bin (raw packed tensors written by
// tests/bench/gen.py; names, dtypes and shapes from DIR/inputs.json). Given PREFIXes, it runs the
// model once and prints, per PREFIX, the largest difference between onnxruntime's outputs and the
// ones harness.c wrote, scaled as maxDiff says (Infinity where one side has a NaN the other lacks).
// Otherwise it times single runs after a warm-up and prints "median_us min_us iterations", with
// the same warm-up and iteration rule as harness.c. onnxruntime-node is found through NODE_PATH
// (bench.sh points it at build/bench/node_modules). ORT_COMPARE_OPT sets the graph optimization
// level of the comparing run only (bench.sh: "disabled" for the int8 models, whose QDQ groups then
// run as the standard defines them; with them fused, onnxruntime's AVX2 kernels without VNNI add
// pairs of u8 x s8 products in 16 bits with saturation, and its outputs move by several quanta).
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

const WARMUP_S = 0.05, BUDGET_S = 0.3, MIN_ITERS = 5, MAX_ITERS = 2000;   // as in harness.c

// onnxruntime's dtype name (as in inputs.json) -> TypedArray
const TYPES = {
    float32: Float32Array, float64: Float64Array, int32: Int32Array, int64: BigInt64Array,
    uint8: Uint8Array, int8: Int8Array, bool: Uint8Array,
};

function now() { return Number(process.hrtime.bigint()) / 1e9; }

function input(dir, k, meta) {
    const buf = fs.readFileSync(path.join(dir, `input_${k}.bin`));
    const Arr = TYPES[meta.type];
    if (!Arr)
        throw new Error(`${dir}: input ${meta.name}: unsupported dtype ${meta.type}`);
    const copy = new Uint8Array(buf.length);
    copy.set(buf);   // a fresh, aligned buffer: Node may pool small file reads unaligned
    return new ort.Tensor(meta.type, new Arr(copy.buffer), meta.shape);
}

// max |got - want| / max(1, max |want|): an absolute difference for outputs of magnitude up to 1,
// relative to the largest output otherwise (a random-weight ResNet's logits run into the tens, and
// float sums in another order differ in proportion)
function maxDiff(dir, prefix, want) {
    let max = 0, scale = 1;
    want.forEach((w, k) => {
        const file = path.join(dir, `${prefix}_output_${k}.bin`);
        const buf = fs.readFileSync(file);
        if (buf.length !== w.byteLength)
            throw new Error(`${file}: ${buf.length} bytes, onnxruntime's output has ${w.byteLength}`);
        const copy = new Uint8Array(buf.length);
        copy.set(buf);
        const got = new w.constructor(copy.buffer);
        for (let i = 0; i < w.length; i++) {
            const a = Number(got[i]), b = Number(w[i]);
            const d = Number.isNaN(a) || Number.isNaN(b)
                ? (Number.isNaN(a) && Number.isNaN(b) ? 0 : Infinity) : Math.abs(a - b);
            if (d > max) max = d;
            if (Math.abs(b) > scale) scale = Math.abs(b);
        }
    });
    return (max / scale).toExponential(2);
}

async function main() {
    let [dir, ...prefixes] = process.argv.slice(2);
    let threads = 1;
    if (prefixes.length === 1 && /^[0-9]+$/.test(prefixes[0])) threads = Number(prefixes.pop());
    if (!dir) {
        console.error('usage: node ort.js DIR [THREADS | PREFIX...]');
        process.exit(2);
    }
    const session = await ort.InferenceSession.create(path.join(dir, 'model.onnx'), {
        executionProviders: ['cpu'], intraOpNumThreads: threads, interOpNumThreads: 1,
        graphOptimizationLevel: prefixes.length ? process.env.ORT_COMPARE_OPT || 'all' : 'all',
        executionMode: 'sequential',
    });
    const metas = JSON.parse(fs.readFileSync(path.join(dir, 'inputs.json'), 'utf8'));
    if (metas.length !== session.inputNames.length)
        throw new Error(`${dir}: inputs.json does not match the model's inputs`);
    const feeds = {};
    metas.forEach((meta, k) => { feeds[meta.name] = input(dir, k, meta); });

    if (prefixes.length) {
        const r = await session.run(feeds);
        console.log(prefixes.map((p) => maxDiff(dir, p, session.outputNames.map((n) => r[n].data)))
            .join(' '));
        return;
    }

    let warm = 0;
    let t0 = now(), t;
    do {
        await session.run(feeds);
        warm++;
    } while ((t = now()) - t0 < WARMUP_S || warm < 3);
    const est = (t - t0) / warm;
    const iters = Math.min(MAX_ITERS, Math.max(MIN_ITERS, Math.floor(BUDGET_S / est)));
    const us = new Float64Array(iters);
    for (let i = 0; i < iters; i++) {
        t0 = now();
        await session.run(feeds);
        us[i] = (now() - t0) * 1e6;
    }
    us.sort();
    const median = iters % 2 ? us[iters >> 1] : (us[iters / 2 - 1] + us[iters / 2]) / 2;
    console.log(`${median.toFixed(2)} ${us[0].toFixed(2)} ${iters}`);
}

main().catch((e) => { console.error(`ort.js: ${e.message || e}`); process.exit(1); });
