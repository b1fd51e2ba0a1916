# gen.py OUTDIR - string models beyond the ONNX test data (passes/ops/text.c), each with a
# reference computed here in Python from the ONNX spec: Cast float32 -> string on values where
# numpy's shortest float32 text changes form (1e-4 and 1e16 borders, subnormals, carries to a
# new digit, -0.0, nan, inf), Cast string -> float32/float64 on well- and ill-formed text,
# StringNormalizer with case-insensitive stopwords, no stopwords and an empty result, and
# TfIdfVectorizer (IDF, TFIDF with weights, int64 and string tokens, unigrams to trigrams with
# skips).
import onnx, numpy as np, os, sys
from onnx import helper as h, TensorProto as T, numpy_helper as nh

out = sys.argv[1]
rng = np.random.default_rng(7)


def save(name, node, inputs, outputs, feeds, wants, opset=13):
    g = h.make_graph([node], name, inputs, outputs)
    m = h.make_model(g, opset_imports=[h.make_opsetid('', opset)])
    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, 'test_data_set_0'), exist_ok=True)
    onnx.save(m, os.path.join(d, 'model.onnx'))
    for kind, arrs in (('input', feeds), ('output', wants)):
        for i, a in enumerate(arrs):
            t = nh.from_array(a)
            with open(os.path.join(d, 'test_data_set_0', '%s_%d.pb' % (kind, i)), 'wb') as f:
                f.write(t.SerializeToString())


def strs(a):
    return np.array(a, dtype=object)


# ---- Cast float32 -> string: numpy's str() of each float32
edge = [1e-5, 1.5e-5, 9.9999997e-5, 1e-4, 1.0001e-4, 0.0001234, 1e16, 9.999999e15, 1.2345678e16,
        123456789.0, 100.0, 0.0, -0.0, 1.0, -2.5, 0.1, 1 / 3, 16777216.0, 3.4028235e38, -3.4028235e38,
        1e-45, -1.17549435e-38, 7e-39, 9.5, 99.99999, 0.99999994, 5e-5, 1e38, 2.0 ** -20]
vals = np.array(edge + [np.nan, np.inf, -np.inf], np.float32)
rand = (rng.standard_normal(64) * 10.0 ** rng.integers(-30, 30, 64)).astype(np.float32)
x = np.concatenate([vals, rand]).reshape(4, -1)
save('cast_f2s', h.make_node('Cast', ['x'], ['y'], to=T.STRING),
     [h.make_tensor_value_info('x', T.FLOAT, x.shape)], [h.make_tensor_value_info('y', T.STRING, x.shape)],
     [x], [strs([[str(v) for v in row] for row in x])])


# ---- Cast string -> float32 / float64; text that is not a number reads as NaN (README)
def parse(s):
    try:
        if s.strip() != s or '_' in s:
            raise ValueError
        return float(s)
    except ValueError:
        return float('nan')


texts = ['0', '-0', '+1.5', '.5', '5.', '1e5', '1E-5', '-2.5e+3', '123456789012345678901234', '0.000000000000000000001234',
         '3.4028235e38', '1e39', '-1e39', '1e-46', 'nan', 'NaN', '-nan', 'inf', '-INF', '+Infinity', 'infinity',
         'abc', '', '1.2.3', '1e', '--1', ' 1', '1 ', 'e5', '.', '+', '0.1', '7', '1e+400', '1e-400', '42.0']
texts += ['%r' % float(v) for v in rng.standard_normal(12) * 10.0 ** rng.integers(-20, 20, 12)]
s = strs(texts).reshape(4, -1)
for name, t, dt in (('cast_s2f', T.FLOAT, np.float32), ('cast_s2d', T.DOUBLE, np.float64)):
    with np.errstate(over='ignore'):             # 1e39 is inf in float32, as intended
        want = np.array([[parse(v) for v in row] for row in s]).astype(dt)
    save(name, h.make_node('Cast', ['x'], ['y'], to=t),
         [h.make_tensor_value_info('x', T.STRING, s.shape)], [h.make_tensor_value_info('y', t, s.shape)],
         [s], [want])


# ---- StringNormalizer
def normalize(x, action, sensitive, stop):
    fold = (lambda w: w) if sensitive else (lambda w: w.upper())
    stopset = {fold(w) for w in stop}
    kept = [w for w in x.reshape(-1) if fold(w) not in stopset]
    change = {'LOWER': str.lower, 'UPPER': str.upper}.get(action, lambda w: w)
    kept = [change(w) for w in kept] or ['']
    return strs(kept).reshape((1, -1) if x.ndim == 2 else (-1,))


norm_cases = [
    ('strnorm_insensitive_lower', ['Monday', 'tuesday', 'MONDAY', 'The', 'the', 'Zebra', 'a@[Z`{'], 'LOWER', 0, ['monday', 'THE'], 1),
    ('strnorm_sensitive_upper_2d', ['Monday', 'monday', 'mixed Case', 'x'], 'UPPER', 1, ['monday', 'x'], 2),
    ('strnorm_nostop_lower', ['ABC', 'Def', 'gh1!'], 'LOWER', 1, [], 1),
    ('strnorm_all_removed_2d', ['a', 'A', 'a'], 'NONE', 0, ['a'], 2),
    ('strnorm_long_stopword', ['x' * 31, 'y' * 32, 'short'], 'UPPER', 1, ['y' * 32, 'z' * 40], 1),
]
for name, words, action, sens, stop, rank in norm_cases:
    x = strs(words).reshape((1, -1) if rank == 2 else (-1,))
    want = normalize(x, action, sens, stop)
    attrs = dict(case_change_action=action, is_case_sensitive=sens)
    if stop:
        attrs['stopwords'] = stop
    save(name, h.make_node('StringNormalizer', ['x'], ['y'], **attrs),
         [h.make_tensor_value_info('x', T.STRING, x.shape)], [h.make_tensor_value_info('y', T.STRING, None)],
         [x], [want], opset=10)


# ---- TfIdfVectorizer on integers
def tfidf(x, mode, lo, hi, skip, counts, indexes, pool, weights):
    grams = []                                  # (tokens, output column, weight) in pool order
    g = 0
    for level, start in enumerate(counts):
        end = counts[level + 1] if level + 1 < len(counts) else len(pool)
        n = level + 1
        for q in range(start, end, n):
            grams.append((tuple(pool[q:q + n]), indexes[g], weights[g] if weights else 1.0))
            g += 1
    width = max(indexes) + 1
    rows = x.reshape(-1, x.shape[-1])
    y = np.zeros((rows.shape[0], width))
    for r, row in enumerate(rows):
        for toks, col, w in grams:
            n = len(toks)
            if n < lo or n > hi:
                continue
            c = 0
            for s in range(skip + 1 if n > 1 else 1):
                for i in range(len(row)):
                    pos = [i + j * (s + 1) for j in range(n)]
                    if pos[-1] < len(row) and tuple(row[pos]) == toks:
                        c += 1
            y[r, col] += {'TF': c, 'IDF': w if c else 0, 'TFIDF': c * w}[mode]
    return y.reshape(x.shape[:-1] + (width,)).astype(np.float32)


pool = [1, 2, 3, 4, 1, 2, 2, 3, 3, 1, 1, 2, 3]      # unigrams 1..4, bigrams (1,2) (2,3) (3,1), trigram (1,2,3)
counts = [0, 4, 10]
indexes = [7, 0, 1, 2, 3, 4, 5, 6]
weights = [0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0]
xi = rng.integers(1, 5, (3, 11)).astype(np.int64)
xi[0, :4] = [1, 2, 3, 1]
tf_cases = [('tfidf_idf_w', 'IDF', 1, 3, 2, weights), ('tfidf_tfidf_w', 'TFIDF', 1, 3, 3, weights),
            ('tfidf_tf_tri', 'TF', 3, 3, 1, None), ('tfidf_idf_noweights', 'IDF', 2, 2, 0, None)]
for name, mode, lo, hi, skip, w in tf_cases:
    attrs = dict(mode=mode, min_gram_length=lo, max_gram_length=hi, max_skip_count=skip,
                 ngram_counts=counts, ngram_indexes=indexes, pool_int64s=pool)
    if w:
        attrs['weights'] = w
    want = tfidf(xi, mode, lo, hi, skip, counts, indexes, pool, w)
    save(name, h.make_node('TfIdfVectorizer', ['x'], ['y'], **attrs),
         [h.make_tensor_value_info('x', T.INT64, xi.shape)], [h.make_tensor_value_info('y', T.FLOAT, want.shape)],
         [xi], [want], opset=9)

# ---- TfIdfVectorizer on strings: a pool string of the whole capacity, one longer (never met)
long32, long40 = 'w' * 32, 'v' * 40
spool = ['cat', 'dog', long32, long40, 'cat', 'dog', 'dog', 'cat', long32, 'cat']
scounts = [0, 4]
sindexes = [0, 1, 2, 3, 4, 5, 6]
words = np.array([['cat', 'dog', 'cat', long32, 'cat', 'Dog', 'dog', 'cat'],
                  ['dog', 'dog', 'cat', 'bird', 'cat', long32, 'cat', '']], dtype=object)
for name, mode, lo, hi, skip, w in (('tfidf_str_tf', 'TF', 1, 2, 1, None),
                                    ('tfidf_str_tfidf', 'TFIDF', 1, 2, 2, [1, 2, 3, 4, 5, 6, 7])):
    attrs = dict(mode=mode, min_gram_length=lo, max_gram_length=hi, max_skip_count=skip,
                 ngram_counts=scounts, ngram_indexes=sindexes, pool_strings=spool)
    if w:
        attrs['weights'] = [float(v) for v in w]
    want = tfidf(words, mode, lo, hi, skip, scounts, sindexes, spool, w)
    save(name, h.make_node('TfIdfVectorizer', ['x'], ['y'], **attrs),
         [h.make_tensor_value_info('x', T.STRING, words.shape)], [h.make_tensor_value_info('y', T.FLOAT, want.shape)],
         [words], [want], opset=9)
