// ort.js ROOT - onnxruntime-node's outputs for tests/dyn/gen.py's models: for each ROOT/NAME/
// with meta.json it runs model.onnx on every test_data_set_K/input_J.bin and writes the
// outputs as test_data_set_K/output_J.bin, their types and shapes in NAME/out_meta.json
// (gen.py --pb turns them into output_J.pb). Run by tests/dyn.sh through NODE_PATH.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

const TYPES = {float32: Float32Array, int64: BigInt64Array, bool: Uint8Array};

(async () => {
    const root = process.argv[2];
    for (const name of fs.readdirSync(root).sort()) {
        const dir = path.join(root, name);
        if (!fs.existsSync(path.join(dir, 'meta.json'))) continue;
        const meta = JSON.parse(fs.readFileSync(path.join(dir, 'meta.json')));
        const s = await ort.InferenceSession.create(path.join(dir, 'model.onnx'));
        const om = [];
        for (let k = 0; k < meta.sets.length; k++) {
            const sd = path.join(dir, `test_data_set_${k}`), feeds = {};
            meta.sets[k].forEach((m, j) => {
                const b = fs.readFileSync(path.join(sd, `input_${j}.bin`)), c = new Uint8Array(b.length);
                c.set(b);
                feeds[s.inputNames[j]] = new ort.Tensor(m.type, new TYPES[m.type](c.buffer), m.shape);
            });
            const out = await s.run(feeds);
            om.push(s.outputNames.map((n, j) => {
                const t = out[n];
                fs.writeFileSync(path.join(sd, `output_${j}.bin`), Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
                return {type: t.type, shape: t.dims};
            }));
        }
        fs.writeFileSync(path.join(dir, 'out_meta.json'), JSON.stringify(om));
    }
})().catch(e => { console.error(e.message); process.exit(1); });
