// ort_run.js - runs a model in onnxruntime-node for tests/int8/gen.py (calibration and goldens).
//
//   node ort_run.js JOB.json
//
// JOB.json: {"model": PATH, "inputs": [{"name", "type", "shape", "file"}...], "outdir": DIR}.
// Each input file holds one raw little-endian tensor. Runs the model once (one thread, graph
// optimizations off, so that the reference is the plain per-node arithmetic) and writes every
// output as DIR/NAME.bin plus DIR/outputs.json with names, dtypes and shapes.
// onnxruntime-node is found through NODE_PATH.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

const TYPES = { float32: Float32Array, uint8: Uint8Array, int8: Int8Array, int32: Int32Array };

async function main() {
    const job = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
    const opts = { intraOpNumThreads: 1, interOpNumThreads: 1, graphOptimizationLevel: 'disabled' };
    const s = await ort.InferenceSession.create(job.model, opts);
    const feeds = {};
    for (const i of job.inputs) {
        const buf = fs.readFileSync(i.file);
        const copy = new Uint8Array(buf.length);
        copy.set(buf);
        feeds[i.name] = new ort.Tensor(i.type, new TYPES[i.type](copy.buffer), i.shape);
    }
    const out = await s.run(feeds);
    const meta = [];
    for (const name of s.outputNames) {
        const t = out[name];
        const file = path.join(job.outdir, name.replace(/\W/g, '_') + '.bin');
        fs.writeFileSync(file, Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
        meta.push({ name, type: t.type, shape: t.dims, file });
    }
    fs.writeFileSync(path.join(job.outdir, 'outputs.json'), JSON.stringify(meta));
}

main().catch((e) => { console.error(e.message || e); process.exit(1); });
