// ort.js ROOT - the numpy references of tests/opsets/gen.py against onnxruntime-node: for
// each ROOT/NAME/ it loads model.onnx into onnxruntime (CPU), feeds NAME/input_K.bin (raw,
// names, dtypes and shapes from NAME/meta.json) and compares its outputs with
// NAME/output_K.bin, printing "ok NAME", "DIFF NAME" (largest difference, relative to
// max(1, |reference|), over 1e-4) or "ERR NAME" (onnxruntime refused the model). Run by
// `sh tests/opsets.sh --ort`, which finds onnxruntime-node through NODE_PATH. ORT_OPT sets
// onnxruntime's graphOptimizationLevel (default all; tests/types.sh uses disabled: its
// DequantizeLinear -> MatMul fusion to MatMulNBits quantizes the activations to int8).
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

const TYPES = {float32: Float32Array, float64: Float64Array, int32: Int32Array, int64: BigInt64Array,
               uint8: Uint8Array, int8: Int8Array, bool: Uint8Array, int16: Int16Array,
               uint16: Uint16Array, uint32: Uint32Array, uint64: BigUint64Array, float16: Uint16Array};

function half(u) {          // float16 bits -> number
    const s = u >> 15, e = (u >> 10) & 31, f = u & 1023;
    const v = e === 0 ? f * 2 ** -24 : e === 31 ? (f ? NaN : Infinity) : (1 + f / 1024) * 2 ** (e - 15);
    return s ? -v : v;
}

function read(file, type) {
    const b = fs.readFileSync(file), c = new Uint8Array(b.length);
    c.set(b);               // aligned
    return new TYPES[type](c.buffer);
}

async function check(dir, name) {
    const meta = JSON.parse(fs.readFileSync(path.join(dir, 'meta.json')));
    const s = await ort.InferenceSession.create(path.join(dir, 'model.onnx'), {graphOptimizationLevel: process.env.ORT_OPT || 'all'});
    const feeds = {};
    meta.inputs.forEach((m, k) => {
        feeds[m.name] = m.type === 'string' ? new ort.Tensor('string', m.values, m.shape)
            : new ort.Tensor(m.type, read(path.join(dir, `input_${k}.bin`), m.type), m.shape);
    });
    const out = await s.run(feeds);
    let max = 0;
    meta.outputs.forEach((m, k) => {
        const want = read(path.join(dir, `output_${k}.bin`), m.type), got = out[m.name].data;
        for (let i = 0; i < want.length; i++) {
            if (typeof want[i] === 'bigint') {     // 64-bit integers: exactly
                if (BigInt(got[i]) !== want[i]) max = Infinity;
                continue;
            }
            let a = Number(got[i]), b = Number(want[i]);
            if (m.type === 'float16') { a = half(a); b = half(b); }
            // equal values (infinities too) differ by 0; a NaN on one side only by Infinity
            const d = a === b || (Number.isNaN(a) && Number.isNaN(b)) ? 0
                : Number.isNaN(a - b) ? Infinity : Math.abs(a - b) / Math.max(1, Math.abs(b));
            if (d > max) max = d;
        }
    });
    return max;
}

(async () => {
    const root = process.argv[2];
    for (const name of fs.readdirSync(root).sort()) {
        const dir = path.join(root, name);
        if (!fs.existsSync(path.join(dir, 'meta.json'))) continue;
        try {
            const max = await check(dir, name);
            console.log(`${max <= 1e-4 ? 'ok' : 'DIFF'} ${name} ${max.toExponential(2)}`);
        } catch (e) {
            console.log(`ERR ${name} ${String(e.message).split('\n')[0].slice(0, 200)}`);
        }
    }
})();
