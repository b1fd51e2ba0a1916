/* read.c - getting bytes off the disk for the frontend: whole files, gunzipped transparently
 * when they start with the gzip magic (so `model.onnx.gz` or a renamed one both work), and the
 * members of model-zoo tar archives (a folder with model.onnx and test_data_set_N/ files).
 *
 * Everything lands in the compilation arena. A file we cannot read or decompress is the
 * user's mistake: one error line naming the file, then exit 1 (or false for tensors, whose
 * caller may go on). The tar reader is our own: 512-byte headers are simple enough, and it
 * spares a dependency. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "frontend.h"

enum { TAR_BLOCK = 512 };

uint64_t fe_max_model_size;

static void too_large(const char *path, const char *what, uint64_t limit) {
    error(path, "%s more than %llu bytes (raise the limit with --max-model-size)", what,
          (unsigned long long)limit);
}

/* The file as it is on disk, or NULL after an error(). */
static uint8_t *read_raw(Arena *a, const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) { error(path, "%s", strerror(errno)); return NULL; }
    struct stat st;
    bool ok = fstat(fileno(f), &st) == 0;
    if (!ok || !S_ISREG(st.st_mode)) {
        error(path, "%s", !ok ? strerror(errno) : S_ISDIR(st.st_mode) ? strerror(EISDIR)
                                                                   : "not a regular file");
        fclose(f);
        return NULL;
    }
    size_t n = (size_t)st.st_size;
    uint64_t limit = fe_max_model_size ? fe_max_model_size : FE_MAX_MODEL_SIZE;
    if ((uint64_t)n > limit) {
        /* a gzip file is bounded by what it expands to, below */
        uint8_t magic[2] = {0, 0};
        if (fread(magic, 1, 2, f) != 2 || magic[0] != 0x1f || magic[1] != 0x8b) {
            too_large(path, "the file holds", limit);
            fclose(f);
            return NULL;
        }
        rewind(f);
    }
    uint8_t *buf = arena_alloc(a, n + 1);
    size_t got = fread(buf, 1, n, f);
    int err = ferror(f);
    fclose(f);
    if (err || got != n) { error(path, "read error"); return NULL; }
    *size = n;
    return buf;
}

/* Inflate a gzip stream (any number of concatenated members) into the arena, at most
 * `limit` bytes (frontend.h). The trailer's ISIZE (size mod 2^32 of the last member) is a
 * first guess of the output size, believed only up to the limit; if it is wrong the buffer
 * grows, abandoning the old one to the arena. */
static uint8_t *gunzip(Arena *a, const char *path, const uint8_t *in, size_t insize, size_t *size) {
    uint64_t limit = fe_max_model_size ? fe_max_model_size
                                       : MIN(FE_MAX_MODEL_SIZE, (uint64_t)insize * FE_GZIP_RATIO);
    size_t cap = 1 << 16;
    if (insize >= 18) {
        const uint8_t *t = in + insize - 4;
        size_t guess = (size_t)t[0] | (size_t)t[1] << 8 | (size_t)t[2] << 16 | (size_t)t[3] << 24;
        if (guess > cap) cap = guess;
    }
    if (cap > limit) cap = (size_t)limit + 1;  /* one byte more tells "too large" */
    uint8_t *out = arena_alloc(a, cap + 1);
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) die("inflateInit2 failed");
    z.next_in = (Bytef *)in;
    size_t used = 0, inleft = insize;
    int rc = Z_OK;
    for (;;) {
        if ((uint64_t)used > limit) {
            inflateEnd(&z);
            too_large(path, "the gzip data expands to", limit);
            return NULL;
        }
        if (used == cap) {
            size_t bigger_cap = (size_t)MIN((uint64_t)cap * 2, limit + 1);
            uint8_t *bigger = arena_alloc(a, bigger_cap + 1);
            memcpy(bigger, out, used);
            out = bigger;
            cap = bigger_cap;
        }
        /* zlib counts in uInt; feed and drain at most 1 GiB per call */
        uInt inchunk = (uInt)MIN(inleft, (size_t)1 << 30);
        uInt outchunk = (uInt)MIN(cap - used, (size_t)1 << 30);
        z.avail_in = inchunk;
        z.next_out = out + used;
        z.avail_out = outchunk;
        rc = inflate(&z, Z_NO_FLUSH);
        inleft -= inchunk - z.avail_in;
        used += outchunk - z.avail_out;
        if (rc == Z_STREAM_END) {
            /* another gzip member may follow (as `cat a.gz b.gz` makes); anything else
             * after the end is padding, ignored as gzip(1) does */
            if (inleft < 2 || z.next_in[0] != 0x1f || z.next_in[1] != 0x8b) break;
            if (inflateReset(&z) != Z_OK) break;
            continue;
        }
        if (rc == Z_BUF_ERROR && z.avail_out == 0) continue;
        if (rc != Z_OK) break;
        if (inleft == 0 && z.avail_out != 0) { rc = Z_DATA_ERROR; break; }
    }
    inflateEnd(&z);
    if ((uint64_t)used > limit) {
        too_large(path, "the gzip data expands to", limit);
        return NULL;
    }
    if (rc != Z_STREAM_END) {
        error(path, "corrupt or truncated gzip data");
        return NULL;
    }
    *size = used;
    return out;
}

/* fe_read_file without the exit: NULL after an error(). */
static uint8_t *read_any(Arena *a, const char *path, size_t *size) {
    size_t n = 0;
    uint8_t *buf = read_raw(a, path, &n);
    if (!buf) return NULL;
    if (n >= 2 && buf[0] == 0x1f && buf[1] == 0x8b) return gunzip(a, path, buf, n, size);
    *size = n;
    return buf;
}

uint8_t *fe_read_file(Arena *a, const char *path, size_t *size) {
    uint8_t *buf = read_any(a, path, size);
    if (!buf) exit_if_errors();
    return buf;
}

Graph *fe_load_model(Arena *a, const char *path) {
    size_t n = 0;
    uint8_t *buf = fe_read_file(a, path, &n);
    return fe_parse_model(a, buf, n, path);
}

bool fe_load_tensor(Arena *a, const char *path, Tensor *t) {
    size_t n = 0;
    uint8_t *buf = read_any(a, path, &n);
    return buf && fe_parse_tensor(a, buf, n, path, t);
}

/* ---- tar ---- */

/* A numeric header field: octal text, or GNU base-256 (high bit of the first byte set) for
 * sizes over 8 GiB. Returns -1 if malformed. */
static int64_t tar_number(const uint8_t *p, int len) {
    if (p[0] & 0x80) {
        int64_t v = p[0] & 0x7f;
        for (int i = 1; i < len; i++) {
            if (v > (INT64_MAX >> 8)) return -1;
            v = v << 8 | p[i];
        }
        return v;
    }
    int i = 0;
    while (i < len && p[i] == ' ') i++;
    int64_t v = 0;
    bool any = false;
    for (; i < len && p[i] >= '0' && p[i] <= '7'; i++) {
        if (v > (INT64_MAX >> 3)) return -1;
        v = v * 8 + (p[i] - '0');
        any = true;
    }
    if (i < len && p[i] != ' ' && p[i] != 0) return -1;
    return any ? v : 0;
}

/* The header checksum sums its bytes with the checksum field read as spaces; it is what
 * tells a tar archive from anything else. */
static bool tar_checksum_ok(const uint8_t *h) {
    int64_t want = tar_number(h + 148, 8);
    int64_t sum = 0;
    for (int i = 0; i < TAR_BLOCK; i++) sum += (i >= 148 && i < 156) ? ' ' : h[i];
    return want == sum;
}

static bool all_zero(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i]) return false;
    return true;
}

/* A bounded header field as a C string. */
static char *tar_field(Arena *a, const uint8_t *p, int len) {
    int n = 0;
    while (n < len && p[n]) n++;
    char *s = arena_alloc(a, (size_t)n + 1);
    memcpy(s, p, (size_t)n);
    return s;
}

/* The entry name: ustar prefix + "/" + name, with any leading "./" dropped. */
static char *tar_name(Arena *a, const uint8_t *h) {
    char *name = tar_field(a, h, 100);
    if (memcmp(h + 257, "ustar", 5) == 0 && h[345]) {
        char *prefix = tar_field(a, h + 345, 155);
        name = arena_printf(a, "%s/%s", prefix, name);
    }
    return name;
}

static char *strip_dot_slash(char *s) {
    while (s[0] == '.' && s[1] == '/') {
        s += 2;
        while (*s == '/') s++;
    }
    return s;
}

/* The "path" record of a pax extended header ("LEN path=VALUE\n" records), or NULL. */
static char *pax_path(Arena *a, const uint8_t *p, size_t n) {
    size_t i = 0;
    while (i < n) {
        size_t len = 0, j = i;
        while (j < n && p[j] >= '0' && p[j] <= '9') len = len * 10 + (size_t)(p[j++] - '0');
        if (len == 0 || i + len > n || j >= n || p[j] != ' ') return NULL;
        const uint8_t *kv = p + j + 1;
        size_t kvlen = i + len - (j + 1);
        if (kvlen > 5 && memcmp(kv, "path=", 5) == 0) {
            size_t vlen = kvlen - 5 - (kv[kvlen - 1] == '\n');
            char *s = arena_alloc(a, vlen + 1);
            memcpy(s, kv + 5, vlen);
            return s;
        }
        i += len;
    }
    return NULL;
}

int fe_read_tar(Arena *a, const char *path, TarEntry **entries) {
    size_t size = 0;
    const uint8_t *buf = fe_read_file(a, path, &size);
    TarEntry *es = NULL;
    int n = 0, cap = 0;
    char *long_name = NULL;         /* from a GNU 'L' or pax 'x' entry, for the next one */
    size_t off = 0;
    bool ended = false;
    while (off + TAR_BLOCK <= size) {
        const uint8_t *h = buf + off;
        if (all_zero(h, TAR_BLOCK)) { ended = true; break; }    /* end-of-archive marker */
        if (!tar_checksum_ok(h))
            fatal(path, off == 0 ? "not a tar archive" : "corrupt tar header at offset %zu", off);
        int64_t len = tar_number(h + 124, 12);
        size_t data = off + TAR_BLOCK;
        if (len < 0 || (uint64_t)len > size - data)
            fatal(path, "truncated tar archive (entry at offset %zu)", off);
        const uint8_t *body = buf + data;
        char type = (char)h[156];
        if (type == 'L') {
            long_name = tar_field(a, body, (int)MIN(len, INT32_MAX));
        } else if (type == 'x') {
            char *p = pax_path(a, body, (size_t)len);
            if (p) long_name = p;
        } else if (type == '0' || type == '\0' || type == '7') {
            es = arena_grow(a, es, n, &cap, n + 1, sizeof(TarEntry));
            es[n].name = strip_dot_slash(long_name ? long_name : tar_name(a, h));
            es[n].data = (uint8_t *)body;
            es[n].size = (size_t)len;
            n++;
            long_name = NULL;
        } else if (type != 'g' && type != 'K') {
            long_name = NULL;           /* directory, link, device...: skipped */
        }
        off = data + (((size_t)len + TAR_BLOCK - 1) / TAR_BLOCK) * TAR_BLOCK;
    }
    if (size > 0 && off == 0 && size < TAR_BLOCK) fatal(path, "not a tar archive");
    /* some writers omit the end marker, but a partial header means the file was cut short */
    if (!ended && off < size) fatal(path, "truncated tar archive");
    *entries = es;
    return n;
}
