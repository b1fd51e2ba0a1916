// tests/detector/ort.js DIR - onnxruntime-node's outputs for tests/detector/gen.py's export:
// runs DIR/model.onnx (one intra-op thread) on DIR/input_K.bin as DIR/inputs.json describes
// them, writes each output as raw DIR/output_K.bin and their names, types and dims as
// DIR/outs.json (gen.py --pb turns them into the test data's output_K.pb).
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

const TYPES = {float32: Float32Array, int64: BigInt64Array};

(async () => {
    const dir = process.argv[2];
    const meta = JSON.parse(fs.readFileSync(path.join(dir, 'inputs.json')));
    const feeds = {};
    meta.forEach((m, k) => {
        // a copy: the file's Buffer need not be aligned for the typed array
        const b = fs.readFileSync(path.join(dir, `input_${k}.bin`)), c = new Uint8Array(b.length);
        c.set(b);
        feeds[m.name] = new ort.Tensor(m.type, new TYPES[m.type](c.buffer), m.shape);
    });
    const s = await ort.InferenceSession.create(path.join(dir, 'model.onnx'), {intraOpNumThreads: 1});
    const r = await s.run(feeds);
    fs.writeFileSync(path.join(dir, 'outs.json'), JSON.stringify(s.outputNames.map((n, k) => {
        const t = r[n];
        fs.writeFileSync(path.join(dir, `output_${k}.bin`), Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
        return {name: n, type: t.type, dims: t.dims};
    })));
})().catch(e => { console.error(e.message); process.exit(1); });
