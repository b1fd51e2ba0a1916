/* nesting.c - a pre-scan of a ModelProto's wire format that bounds how deeply it nests before
 * protobuf-c unpacks it. protobuf-c's unpacker recurses once per nested message, so a file of
 * a few hundred KB whose If nodes nest thousands of subgraphs deep would exhaust the stack:
 * the depth must not be the file's choice.
 *
 * Only the messages through which ONNX's schema recurses are followed: graphs inside node
 * attributes (Graph -> Node -> Attribute -> Graph) and types inside types (sequence, map and
 * optional element types). Their depth is bounded by FE_MAX_NESTING; everything else is
 * skipped by its length. A wire format that does not parse is left to protobuf-c to reject. */
#include "tensor.h"

typedef enum Msg {
    M_NONE, M_MODEL, M_GRAPH, M_NODE, M_ATTR, M_VALUEINFO, M_TYPE, M_TYPE_INNER, M_TRAINING,
    M_FUNCTION,
} Msg;

/* The message kind of field `f` of a message of kind `m` (onnx.proto's field numbers), if the
 * schema recurses through it. */
static Msg child(Msg m, uint64_t f) {
    switch (m) {
    case M_MODEL: return f == 7 ? M_GRAPH : f == 20 ? M_TRAINING : f == 25 ? M_FUNCTION : M_NONE;
    case M_TRAINING: return f == 1 || f == 2 ? M_GRAPH : M_NONE;
    case M_FUNCTION: return f == 7 ? M_NODE : M_NONE;
    case M_GRAPH: return f == 1 ? M_NODE : f == 11 || f == 12 || f == 13 ? M_VALUEINFO : M_NONE;
    case M_NODE: return f == 5 ? M_ATTR : M_NONE;
    case M_ATTR: return f == 6 || f == 11 ? M_GRAPH : f == 14 || f == 15 ? M_TYPE : M_NONE;
    case M_VALUEINFO: return f == 2 ? M_TYPE : M_NONE;
    case M_TYPE: return f == 4 || f == 5 || f == 9 ? M_TYPE_INNER : M_NONE;
    case M_TYPE_INNER: return f == 1 || f == 2 ? M_TYPE : M_NONE;  /* Map: value_type = 2 */
    default: return M_NONE;
    }
}

static bool varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
    *v = 0;
    for (int shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return true;
    }
    return false;
}

/* Whether a message of kind m, `level` graphs or types deep, nests no deeper than the limit.
 * The recursion stops as soon as the limit is passed: at most a few frames per level. */
static bool shallow(const uint8_t *p, const uint8_t *end, Msg m, int level) {
    if (level > FE_MAX_NESTING) return false;
    while (p < end) {
        uint64_t key, len;
        if (!varint(&p, end, &key)) return true;
        switch (key & 7) {
        case 0: if (!varint(&p, end, &len)) return true; continue;
        case 1: p += MIN((size_t)(end - p), 8); continue;
        case 5: p += MIN((size_t)(end - p), 4); continue;
        case 2: break;
        default: return true;           /* groups or garbage: protobuf-c will say */
        }
        if (!varint(&p, end, &len) || len > (uint64_t)(end - p)) return true;
        Msg c = child(m, key >> 3);
        /* a graph inside an attribute, or a type inside a type, is one level deeper */
        int step = (m == M_ATTR && c == M_GRAPH) || m == M_TYPE_INNER;
        if (c != M_NONE && !shallow(p, p + len, c, level + step)) return false;
        p += len;
    }
    return true;
}

bool fe_check_nesting(const uint8_t *buf, size_t size, const char *path) {
    if (shallow(buf, buf + size, M_MODEL, 0)) return true;
    error(path, "subgraphs or types nest more than %d levels deep", FE_MAX_NESTING);
    return false;
}
