/* external.c - tensors whose bytes live in a file beside the model (TensorProto.data_location
 * = EXTERNAL, as exporters write weights over 2 GB). The model is untrusted, and so is the
 * file name it gives: it is resolved inside the model's directory only. Absolute paths and ".."
 * components are refused, and so is a path that symlinks lead out of the directory (checked
 * on the resolved path, realpath). Offset and length are checked against the file's size and
 * the tensor's, then exactly those bytes are read. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tensor.h"

/* A non-negative decimal number (external_data values are strings); -1 if malformed. */
static int64_t number(const char *s) {
    int64_t v = 0;
    if (!s || !*s) return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > (INT64_MAX - 9) / 10) return -1;
        v = v * 10 + (*s - '0');
    }
    return v;
}

static bool has_dotdot(const char *s) {
    for (const char *p = s; *p;) {
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.') return true;
        p += n;
        while (*p == '/') p++;
    }
    return false;
}

/* The model's directory, resolved ("." for a model named without a slash). */
static char *model_dir(Arena *a, const char *model_path) {
    const char *slash = strrchr(model_path, '/');
    const char *dir = !slash ? "." : slash == model_path ? "/"
                    : arena_printf(a, "%.*s", (int)(slash - model_path), model_path);
    char buf[PATH_MAX];
    return realpath(dir, buf) ? arena_strdup(a, buf) : NULL;
}

bool fe_external_data(Arena *a, const Onnx__TensorProto *tp, const char *model_path,
                      const char *where, const char *what, Tensor *t) {
    const char *loc = NULL, *off_s = NULL, *len_s = NULL;
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = tp->external_data[i];
        if (!e->key) continue;
        if (!strcmp(e->key, "location")) loc = e->value;
        else if (!strcmp(e->key, "offset")) off_s = e->value;
        else if (!strcmp(e->key, "length")) len_s = e->value;
    }
    if (!model_path) {
        error(where, "%s refers to an external data file, which only a model may do", what);
        return false;
    }
    if (!loc || !*loc) {
        error(where, "%s is stored externally but names no file (no 'location' entry)", what);
        return false;
    }
    if (loc[0] == '/') {
        error(where, "%s: external data file '%s' is an absolute path; it must be relative to "
              "the model's directory", what, loc);
        return false;
    }
    if (has_dotdot(loc)) {
        error(where, "%s: external data file '%s' has a '..' component; it must stay in the "
              "model's directory", what, loc);
        return false;
    }
    int64_t off = off_s ? number(off_s) : 0, len = len_s ? number(len_s) : -2;
    if (off < 0 || len == -1) {
        error(where, "%s: external data %s '%s' is not a non-negative number", what,
              off < 0 ? "offset" : "length", off < 0 ? off_s : len_s);
        return false;
    }
    char *dir = model_dir(a, model_path), real[PATH_MAX];
    const char *path = arena_printf(a, "%s/%s", dir ? dir : ".", loc);
    if (!dir || !realpath(path, real)) {
        error(where, "%s: external data file '%s': %s", what, loc, strerror(errno));
        return false;
    }
    size_t dl = strlen(dir);
    if (strncmp(real, dir, dl) != 0 || (real[dl] != '/' && strcmp(dir, "/") != 0)) {
        error(where, "%s: external data file '%s' leads out of the model's directory through a "
              "symlink", what, loc);
        return false;
    }
    int fd = open(real, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        error(where, "%s: external data file '%s': %s", what, loc,
              fd < 0 ? strerror(errno) : "not a regular file");
        if (fd >= 0) close(fd);
        return false;
    }
    int64_t size = st.st_size;
    if (len == -2) len = off <= size ? size - off : 0;   /* no length: to the end of the file */
    bool ok = false;
    if (off > size)
        error(where, "%s: external data offset %lld is past the end of '%s' (%lld bytes)", what,
              (long long)off, loc, (long long)size);
    else if (len > size - off)
        error(where, "%s: external data length %lld from offset %lld is past the end of '%s' "
              "(%lld bytes)", what, (long long)len, (long long)off, loc, (long long)size);
    else if ((uint64_t)len != t->nbytes)
        error(where, "%s: external data holds %lld bytes, its shape needs %zu", what,
              (long long)len, t->nbytes);
    else
        ok = true;
    if (ok) {
        uint8_t *p = arena_alloc(a, t->nbytes ? t->nbytes : 1);
        for (size_t got = 0; got < t->nbytes;) {
            ssize_t r = pread(fd, p + got, t->nbytes - got, (off_t)off + (off_t)got);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) {
                error(where, "%s: external data file '%s': read error", what, loc);
                ok = false;
                break;
            }
            got += (size_t)r;
        }
        t->data = p;
    }
    close(fd);
    return ok;
}
