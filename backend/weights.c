/* weights.c - --emit-weights: the model's constant tensors (its weights) leave the object for a
 * blob of their own, which the application loads at run time and passes to NAME_run_w().
 * be_weights_layout runs before the module is built (emit.c addresses each constant as the
 * weights pointer plus its offset); be_write_weights writes the blob after it. The layout is
 * documented in the README and in the generated header; in short, all integers little-endian:
 *   0   8 bytes  magic "ONNXCCW\0"
 *   8   uint32   format version (WEIGHTS_VERSION)
 *   12  uint32   bytes of this header (WEIGHTS_HEADER): where the first tensor may start
 *   16  uint64   size of the whole blob
 *   24  uint64   key: a hash of the layout and the bytes, which NAME_run_w compares with its own
 *   32  zeros up to WEIGHTS_HEADER
 * then each constant tensor, packed row-major, at an offset that is a multiple of WEIGHTS_ALIGN,
 * zeros between them. The key makes a blob from another model or another compilation an error
 * (NAME_ERR_WEIGHTS) rather than wrong outputs. */
#include <stdlib.h>
#include <string.h>

#include "backend.h"

const void *be_const_bytes(Program *p, const Buf *b, size_t *n) {
    if (!b->nibbles) {
        *n = kir_nbytes(b);
        return b->data;
    }
    size_t numel = kir_numel(b), packed = kir_io_nbytes(b);
    uint8_t *d = arena_alloc(p->arena, packed + NIBBLE_PAD);
    memset(d, 0, packed + NIBBLE_PAD);
    if (b->data) kir_nibbles_pack(d, b->data, numel, kir_pack_bits(b));
    *n = packed + NIBBLE_PAD;
    return d;
}

static size_t stored_bytes(Program *p, const Buf *b) {
    size_t n;
    if (!b->nibbles) return kir_nbytes(b);
    be_const_bytes(p, b, &n);
    return n;
}

static void add(Program *p, Buf *b) {
    if (!b) return;
    Buf *r = kir_root(b);
    if (r->kind != B_CONST || p->weight_offset[r->id] >= 0) return;
    int64_t at = (p->weights_size + WEIGHTS_ALIGN - 1) / WEIGHTS_ALIGN * WEIGHTS_ALIGN;
    p->weight_offset[r->id] = at;
    p->weights[p->nweights++] = r;
    p->weights_size = at + (int64_t)stored_bytes(p, r);
}

static uint64_t fnv(uint64_t h, const void *data, size_t n) {
    const unsigned char *s = data;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t fnv_u64(uint64_t h, uint64_t v) {
    unsigned char b[8];
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
    return fnv(h, b, 8);
}

void be_weights_layout(Program *p) {
    p->weight_offset = ARENA_ARRAY(p->arena, int64_t, p->nbufs + 1);
    for (int i = 0; i < p->nbufs; i++) p->weight_offset[i] = -1;
    p->weights = ARENA_ARRAY(p->arena, Buf *, p->nbufs + 1);
    p->nweights = 0;
    p->weights_size = WEIGHTS_HEADER;
    /* in the order run() first uses them: the same model gives the same blob */
    for (int i = 0; i < p->nkernels; i++) {
        Kernel *k = p->kernels[i];
        for (int j = 0; j < k->nparams; j++) add(p, k->params[j]);
        add(p, k->trip);
        add(p, k->cond);
    }
    uint64_t h = fnv_u64(0xcbf29ce484222325ull, (uint64_t)p->weights_size);
    for (int i = 0; i < p->nweights; i++) {
        Buf *b = p->weights[i];
        h = fnv_u64(h, (uint64_t)p->weight_offset[b->id]);
        size_t n;
        const void *d = be_const_bytes(p, b, &n);
        h = fnv_u64(h, n);
        if (n) h = fnv(h, d, n);
    }
    p->weights_key = h;
}

static void put_u64(unsigned char *at, uint64_t v) {
    for (int i = 0; i < 8; i++) at[i] = (unsigned char)(v >> (8 * i));
}

void be_write_weights(Program *p, const char *path) {
    if (!p->weights_external || !p->weight_offset) die("be_write_weights without a layout");
    unsigned char *blob = calloc(1, (size_t)p->weights_size);
    if (!blob) die("out of memory for a %lld-byte weights blob", (long long)p->weights_size);
    memcpy(blob, WEIGHTS_MAGIC, 8);
    put_u64(blob + 8, (uint64_t)WEIGHTS_VERSION | (uint64_t)WEIGHTS_HEADER << 32);
    put_u64(blob + 16, (uint64_t)p->weights_size);
    put_u64(blob + 24, p->weights_key);
    for (int i = 0; i < p->nweights; i++) {
        Buf *b = p->weights[i];
        size_t n;
        const void *d = be_const_bytes(p, b, &n);
        if (n && !b->data) die("constant buffer %s has no data", b->name);
        if (n) memcpy(blob + p->weight_offset[b->id], d, n);
    }
    out_write(path, blob, (size_t)p->weights_size);
    free(blob);
}
