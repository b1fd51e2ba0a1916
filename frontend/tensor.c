/* tensor.c - ONNX TensorProto -> packed, native-order bytes. Shared by the model reader
 * (initializers and tensor attributes, through tensor.h) and by
 * fe_parse_tensor for the test_data_set_N/{input,output}_K.pb files.
 *
 * ONNX stores the elements either in raw_data (little-endian bytes) or in one of the typed
 * repeated fields, and which field depends on the dtype: the small integer types, bool and
 * float16 all travel widened in int32_data, uint32 in uint64_data. This file is the one place
 * that knows those rules. */
#include <string.h>

#include "tensor.h"

/* protobuf-c allocates through the arena, so a parsed message is freed with the compilation
 * and a failed parse leaks nothing. */
static void *pb_alloc(void *arena, size_t n) { return arena_alloc(arena, n); }
static void pb_free(void *arena, void *p) { (void)arena; (void)p; }

ProtobufCAllocator fe_pb_allocator(Arena *a) {
    ProtobufCAllocator al = {pb_alloc, pb_free, a};
    return al;
}

const char *fe_type_name(int dt) {
    const char *s = dtype_name((DType)dt);
    if (strcmp(s, "undefined") == 0 && dt != 0) return "an unknown data type";
    if (dt == 24) {                 /* README, "Types" */
        static char buf[128];
        snprintf(buf, sizeof buf, "%s (onnxcc has no float8e8m0)", s);
        return buf;
    }
    return s;
}

static bool host_is_little_endian(void) {
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

static void swap_elements(uint8_t *p, size_t nbytes, size_t elsz) {
    for (size_t i = 0; i + elsz <= nbytes; i += elsz)
        for (size_t j = 0; j < elsz / 2; j++) {
            uint8_t t = p[i + j];
            p[i + j] = p[i + elsz - 1 - j];
            p[i + elsz - 1 - j] = t;
        }
}

/* raw_data: little-endian, exactly nbytes. protobuf-c copied it into the (16-byte aligned)
 * arena already, so the bytes are used in place rather than copied again. */
static bool from_raw(Arena *a, const Onnx__TensorProto *tp, const char *where, const char *what,
                     Tensor *t) {
    if (tp->raw_data.len != t->nbytes) {
        error(where, "%s: raw_data holds %zu bytes, its shape needs %zu", what, tp->raw_data.len,
              t->nbytes);
        return false;
    }
    uint8_t *p = tp->raw_data.data;
    size_t elsz = dtype_size(t->dtype);
    if (!p || (uintptr_t)p % elsz != 0) {
        p = arena_alloc(a, t->nbytes ? t->nbytes : 1);
        if (t->nbytes) memcpy(p, tp->raw_data.data, t->nbytes);
    }
    if (!host_is_little_endian()) swap_elements(p, t->nbytes, elsz);
    t->data = p;
    return true;
}

/* How many elements the typed field for this dtype holds. */
static size_t typed_count(const Onnx__TensorProto *tp, DType dt) {
    switch (dt) {
    case DT_FLOAT: return tp->n_float_data;
    case DT_DOUBLE: return tp->n_double_data;
    case DT_INT64: return tp->n_int64_data;
    case DT_UINT32: case DT_UINT64: return tp->n_uint64_data;
    default: return tp->n_int32_data;
    }
}

/* Narrow or copy the typed field into packed elements of t->dtype. */
static void from_typed(const Onnx__TensorProto *tp, Tensor *t, size_t n) {
    void *d = t->data;
    for (size_t i = 0; i < n; i++) {
        switch (t->dtype) {
        case DT_FLOAT: ((float *)d)[i] = tp->float_data[i]; break;
        case DT_DOUBLE: ((double *)d)[i] = tp->double_data[i]; break;
        case DT_INT64: ((int64_t *)d)[i] = tp->int64_data[i]; break;
        case DT_UINT64: ((uint64_t *)d)[i] = tp->uint64_data[i]; break;
        case DT_UINT32: ((uint32_t *)d)[i] = (uint32_t)tp->uint64_data[i]; break;
        case DT_INT32: ((int32_t *)d)[i] = tp->int32_data[i]; break;
        case DT_INT16: ((int16_t *)d)[i] = (int16_t)tp->int32_data[i]; break;
        case DT_INT8: ((int8_t *)d)[i] = (int8_t)tp->int32_data[i]; break;
        case DT_BOOL: ((uint8_t *)d)[i] = tp->int32_data[i] != 0; break;
        case DT_UINT8: ((uint8_t *)d)[i] = (uint8_t)tp->int32_data[i]; break;
        /* float16 and bfloat16 travel as their bit patterns in the low 16 bits */
        /* the float8 types as their bit patterns in the low 8 bits */
        case DT_FLOAT8E4M3FN: case DT_FLOAT8E4M3FNUZ: case DT_FLOAT8E5M2: case DT_FLOAT8E5M2FNUZ:
        case DT_FLOAT8E8M0:
            ((uint8_t *)d)[i] = (uint8_t)tp->int32_data[i];
            break;
        case DT_UINT16: case DT_FLOAT16: case DT_BFLOAT16:
            ((uint16_t *)d)[i] = (uint16_t)tp->int32_data[i];
            break;
        default: die("from_typed: %s", dtype_name(t->dtype));
        }
    }
}

/* string_data: each element NUL-padded into its char[ir_strlen] (ir.h); a longer one is an
 * error, not truncated, so that a constant or a test value never silently changes. */
static bool from_strings(Arena *a, const Onnx__TensorProto *tp, const char *where, const char *what,
                         Tensor *t, size_t n) {
    if (tp->n_string_data != n) {
        error(where, "%s holds %zu strings, its shape needs %zu", what, tp->n_string_data, n);
        return false;
    }
    uint8_t *d = arena_alloc(a, t->nbytes ? t->nbytes : 1);
    memset(d, 0, t->nbytes);
    for (size_t i = 0; i < n; i++) {
        const ProtobufCBinaryData *s = &tp->string_data[i];
        if (s->len > ir_strlen) {
            error(where, "%s: string %zu is %zu bytes long, more than the string capacity %zu "
                  "(raise it with --max-strlen)", what, i, s->len, ir_strlen);
            return false;
        }
        if (s->len) memcpy(d + i * ir_strlen, s->data, s->len);
    }
    t->data = d;
    return true;
}

/* Shape and byte count, refusing what cannot be held in memory. */
static bool read_shape(const Onnx__TensorProto *tp, const char *where, const char *what,
                       Tensor *t) {
    if (tp->n_dims > MAX_RANK) {
        error(where, "%s has rank %zu; onnxcc supports at most %d", what, tp->n_dims, MAX_RANK);
        return false;
    }
    t->rank = (int)tp->n_dims;
    size_t elsz = dtype_size(t->dtype), numel = 1;
    for (int d = 0; d < t->rank; d++) {
        int64_t n = tp->dims[d];
        if (n < 0) {
            error(where, "%s has a negative dimension (%lld)", what, (long long)n);
            return false;
        }
        if (n > 0 && numel > ((size_t)1 << 48) / elsz / (uint64_t)n) {
            error(where, "%s is too large", what);
            return false;
        }
        numel *= (size_t)n;
        t->dims[d] = n;
    }
    t->nbytes = numel * elsz;
    return true;
}

/* int4, uint4 and float4e2m1 (ONNX 21 to 23, which Debian's onnx.proto predates: data_type is a plain
 * int32 there, so the numbers arrive all the same) travel two values a byte, the first in the
 * low nibble, in raw_data, in external data, or one packed byte per int32_data element. They
 * become int8/uint8 tensors of one value a byte, sign- or zero-extended (float4e2m1 tensors
 * of one code a byte), marked `nibbles`: every pass computes on them as 8-bit integers (or
 * as float8 codes), and the backend stores them two a byte again (ir.h, Value.nibbles).
 * int2 and uint2 (25, 26) the same way, four values a byte, the first in the lowest two bits
 * (`crumbs` too). */
static bool nibbles_from_proto(Arena *a, const Onnx__TensorProto *tp, const char *model_path,
                               const char *where, const char *what, Tensor *t) {
    bool sign = tp->data_type == DT_INT4 || tp->data_type == DT_INT2;
    int bits = dtype_pack_bits(tp->data_type), per = 8 / bits;
    t->dtype = dtype_nibbles(tp->data_type);    /* int8, uint8, or float4e2m1's codes */
    t->nibbles = true;
    t->crumbs = bits == 2;
    if (tp->segment) {
        error(where, "%s is a segment of a larger tensor, which onnxcc does not support", what);
        return false;
    }
    if (!read_shape(tp, where, what, t)) return false;
    size_t numel = t->nbytes, packed = (numel + (size_t)per - 1) / (size_t)per;
    const uint8_t *src;
    if (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        t->nbytes = packed;
        if (!fe_external_data(a, tp, model_path, where, what, t)) return false;
        t->nbytes = numel;
        src = t->data;
    } else if (tp->has_raw_data && (tp->raw_data.len > 0 || tp->n_int32_data == 0)) {
        if (tp->raw_data.len != packed) {
            error(where, "%s: raw_data holds %zu bytes, its %zu %d-bit values need %zu", what,
                  tp->raw_data.len, numel, bits, packed);
            return false;
        }
        src = tp->raw_data.data;
    } else {
        if (tp->n_int32_data != packed) {
            error(where, "%s holds %zu packed bytes, its %zu %d-bit values need %zu", what,
                  tp->n_int32_data, numel, bits, packed);
            return false;
        }
        uint8_t *b = arena_alloc(a, packed ? packed : 1);
        for (size_t i = 0; i < packed; i++) b[i] = (uint8_t)tp->int32_data[i];
        src = b;
    }
    uint8_t *d = arena_alloc(a, numel ? numel : 1);
    unsigned mask = (1u << bits) - 1, half = 1u << (bits - 1);
    for (size_t i = 0; i < numel; i++) {
        unsigned v = (src[i / (size_t)per] >> (bits * (int)(i % (size_t)per))) & mask;
        d[i] = (uint8_t)(sign && v >= half ? v + (0x100 - (1u << bits)) : v);
    }
    t->data = d;
    return true;
}

bool fe_tensor_from_proto(Arena *a, const Onnx__TensorProto *tp, const char *model_path,
                          const char *where, const char *what, Tensor *t) {
    memset(t, 0, sizeof *t);
    t->name = arena_strdup(a, tp->name ? tp->name : "");
    t->dtype = tp->has_data_type ? (DType)tp->data_type : DT_UNDEF;
    if (tp->has_data_type && dtype_nibbles(tp->data_type) != DT_UNDEF)
        return nibbles_from_proto(a, tp, model_path, where, what, t);
    if (!tp->has_data_type || dtype_size(t->dtype) == 0) {
        error(where, "%s has unsupported element type %s", what, fe_type_name(tp->data_type));
        return false;
    }
    if (tp->segment) {
        error(where, "%s is a segment of a larger tensor, which onnxcc does not support", what);
        return false;
    }
    if (!read_shape(tp, where, what, t)) return false;
    if (t->dtype == DT_STRING) return from_strings(a, tp, where, what, t, t->nbytes / ir_strlen);
    if (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        if (!fe_external_data(a, tp, model_path, where, what, t)) return false;
        if (!host_is_little_endian()) swap_elements(t->data, t->nbytes, dtype_size(t->dtype));
        return true;
    }
    size_t numel = t->nbytes / dtype_size(t->dtype);
    size_t have = typed_count(tp, t->dtype);
    /* raw_data wins when present; an empty raw_data next to typed values is a writer's quirk */
    if (tp->has_raw_data && (tp->raw_data.len > 0 || have == 0))
        return from_raw(a, tp, where, what, t);
    if (have != numel) {
        error(where, "%s holds %zu values, its shape needs %zu", what, have, numel);
        return false;
    }
    t->data = arena_alloc(a, t->nbytes ? t->nbytes : 1);
    from_typed(tp, t, numel);
    return true;
}

bool fe_parse_tensor(Arena *a, const uint8_t *buf, size_t size, const char *path, Tensor *t) {
    ProtobufCAllocator al = fe_pb_allocator(a);
    Onnx__TensorProto *tp = onnx__tensor_proto__unpack(&al, size, buf);
    if (!tp) {
        error(path, "not a valid ONNX tensor (protobuf parse failed)");
        return false;
    }
    const char *what = tp->name && *tp->name ? arena_printf(a, "tensor '%s'", tp->name) : "tensor";
    return fe_tensor_from_proto(a, tp, NULL, path, what, t);
}

/* ---- sequences and optionals (test data) ----
 * SequenceProto and OptionalProto (onnx-data.proto, which protobuf-c is not built from) share
 * their field numbers: 3 a tensor, 5 a sequence, 7 an optional; 1 and 2 (name, elem_type) and
 * the rest (sparse tensors, maps) are skipped. Read here straight from the wire format. */

static bool varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
    *v = 0;
    for (int s = 0; *p < end && s < 64; s += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << s;
        if (!(b & 0x80)) return true;
    }
    return false;
}

static bool container(Arena *a, const uint8_t *p, const uint8_t *end, const char *path, bool opt,
                      Tensor **out, int *n, int *cap, int64_t *len) {
    int64_t elems = 0, olen = -1;   /* olen: what an optional holds, as *len */
    while (p < end) {
        uint64_t key, l;
        if (!varint(&p, end, &key)) goto bad;
        switch (key & 7) {
        case 0: if (!varint(&p, end, &l)) goto bad; continue;
        case 1: p += 8; continue;
        case 5: p += 4; continue;
        case 2: break;
        default: goto bad;
        }
        if (!varint(&p, end, &l) || l > (uint64_t)(end - p)) goto bad;
        uint64_t field = key >> 3;
        if (field == 3) {
            *out = arena_grow(a, *out, *n, cap, *n + 1, sizeof(Tensor));
            if (!fe_parse_tensor(a, p, (size_t)l, path, &(*out)[(*n)++])) return false;
            elems++;
            olen = 1;
        } else if (field == 5 || field == 7) {
            if (!container(a, p, p + l, path, field == 7, out, n, cap, &olen)) return false;
            elems++;
        }
        p += l;
    }
    if (p != end) goto bad;
    *len = opt ? olen : elems;
    return true;
bad:
    error(path, "not a valid ONNX sequence or optional (protobuf parse failed)");
    return false;
}

int fe_parse_container(Arena *a, const uint8_t *buf, size_t size, const char *path, bool opt,
                       Tensor **out, int64_t *len) {
    int n = 0, cap = 0;
    *out = NULL;
    return container(a, buf, buf + size, path, opt, out, &n, &cap, len) ? n : -1;
}
