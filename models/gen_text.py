#!/usr/bin/python3
"""gen_text.py - writes models/text: string tensors through the header contract
(runtime/model.h.in, "Strings"), which models/str_contract.c checks from C.

  text  words [6] string -> StringNormalizer (stopwords "the", "a", case-insensitive, LOWER)
        -> kept [K] string (data-dependent: K <= 6, reported in kept.dims)
        numbers [2,2] string -> Cast to float32 -> values [2,2]

The expected outputs come from the Python reference below, written from the ONNX
definitions (stopwords compared case-insensitively, the kept words lower-cased; an empty
result is one empty string).

Run: /usr/bin/python3 models/gen_text.py   (needs python3-onnx, python3-numpy)
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
STOP = ['the', 'a']

g = helper.make_graph(
    [helper.make_node('StringNormalizer', ['words'], ['kept'], name='norm', case_change_action='LOWER',
                      is_case_sensitive=0, stopwords=STOP),
     helper.make_node('Cast', ['numbers'], ['values'], name='cast', to=TensorProto.FLOAT)],
    'text',
    [helper.make_tensor_value_info('words', TensorProto.STRING, [6]),
     helper.make_tensor_value_info('numbers', TensorProto.STRING, [2, 2])],
    [helper.make_tensor_value_info('kept', TensorProto.STRING, ['K']),
     helper.make_tensor_value_info('values', TensorProto.FLOAT, [2, 2])])
model = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])
onnx.checker.check_model(model)
d = os.path.join(HERE, 'text')
os.makedirs(d, exist_ok=True)
onnx.save(model, os.path.join(d, 'model.onnx'))

sets = [(['The', 'Quick', 'BROWN', 'a', 'fox', 'THE'], ['1.5', '-2e3', '0.125', 'inf']),
        (['the', 'A', 'a', 'The', 'tHe', 'a'], ['7', '-0.5', '1e-3', '42'])]
for k, (words, numbers) in enumerate(sets):
    kept = [w.lower() for w in words if w.lower() not in STOP] or ['']
    values = np.array([float(s) for s in numbers], np.float32).reshape(2, 2)
    sd = os.path.join(d, 'test_data_set_%d' % k)
    os.makedirs(sd, exist_ok=True)
    arrays = {'input_0': np.array(words, dtype=object), 'input_1': np.array(numbers, dtype=object).reshape(2, 2),
              'output_0': np.array(kept, dtype=object), 'output_1': values}
    for name, a in arrays.items():
        with open(os.path.join(sd, name + '.pb'), 'wb') as f:
            f.write(numpy_helper.from_array(a).SerializeToString())
