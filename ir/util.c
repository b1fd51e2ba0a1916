/* util.c - the compilation arena and error reporting (see util.h). */
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- arena: a list of big chunks, bump-allocated ---- */
typedef struct Chunk {
    struct Chunk *next;
    size_t used, size;
    _Alignas(16) unsigned char mem[];
} Chunk;
struct Arena { Chunk *head; };

Arena *arena_new(void) {
    Arena *a = calloc(1, sizeof *a);
    if (!a) die("out of memory");
    return a;
}

void arena_free(Arena *a) {
    if (!a) return;
    for (Chunk *c = a->head, *n; c; c = n) { n = c->next; free(c); }
    free(a);
}

void *arena_alloc(Arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    Chunk *c = a->head;
    if (!c || c->size - c->used < n) {
        size_t sz = n > (1u << 20) ? n : (1u << 20);
        /* a block of its own (packed weights: tens of MB) comes zeroed from calloc, which
         * maps fresh pages instead of writing them: no memset below */
        bool own = sz == n;
        c = own ? calloc(1, sizeof(Chunk) + sz) : malloc(sizeof(Chunk) + sz);
        if (!c) die("out of memory (%zu bytes)", n);
        c->size = sz;
        c->used = n;
        /* A huge one-off block goes behind the current chunk so that chunk stays in use. */
        if (a->head && n > (1u << 19)) { c->next = a->head->next; a->head->next = c; }
        else { c->next = a->head; a->head = c; }
        if (own) return c->mem;
        c->used = 0;
    }
    void *p = c->mem + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

char *arena_strdup(Arena *a, const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    return memcpy(arena_alloc(a, n), s, n);
}

char *arena_printf(Arena *a, const char *fmt, ...) {
    va_list ap, aq;
    va_start(ap, fmt);
    va_copy(aq, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = arena_alloc(a, (size_t)n + 1);
    vsnprintf(s, (size_t)n + 1, fmt, aq);
    va_end(aq);
    return s;
}

void *arena_grow(Arena *a, void *p, int n, int *cap, int need, size_t elsz) {
    if (need <= *cap) return p;
    int nc = *cap ? *cap * 2 : 8;
    while (nc < need) nc *= 2;
    void *q = arena_alloc(a, elsz * (size_t)nc);
    if (n) memcpy(q, p, elsz * (size_t)n);
    *cap = nc;
    return q;
}

/* ---- saturating size arithmetic ---- */
int64_t sz_mul(int64_t a, int64_t b) {
    int64_t r;
    if (!__builtin_mul_overflow(a, b, &r)) return r;
    return (a < 0) != (b < 0) ? INT64_MIN : INT64_MAX;
}

int64_t sz_add(int64_t a, int64_t b) {
    int64_t r;
    if (!__builtin_add_overflow(a, b, &r)) return r;
    return a < 0 ? INT64_MIN : INT64_MAX;
}

int64_t sat_i64(double x) {
    if (x != x) return 0;
    if (x >= 9223372036854775807.0) return INT64_MAX;
    if (x <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)x;
}

/* ---- errors ---- */
int error_count;
int verbose_level;
static char **outs;
static int nouts;

static void vreport(const char *kind, const char *where, const char *fmt, va_list ap) {
    fprintf(stderr, "onnxcc: %s: ", kind);
    if (where && *where) fprintf(stderr, "%s: ", where);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void error(const char *where, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vreport("error", where, fmt, ap);
    va_end(ap);
    error_count++;
}

void warn(const char *where, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vreport("warning", where, fmt, ap);
    va_end(ap);
}

void (*error_exit)(int status) = exit;

_Noreturn void fatal(const char *where, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vreport("error", where, fmt, ap);
    va_end(ap);
    out_remove_all();
    error_exit(1);
    abort();
}

void exit_if_errors(void) {
    if (error_count) { out_remove_all(); error_exit(1); }
}

bool out_is_special(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && !S_ISREG(st.st_mode);
}

/* The file an output path names: a symbolic link is written through, so that the output
 * replaces its target and the link stays (as with `cc -o`); the target is resolved because the
 * temporary file must be renamed over it, in its directory. A link to nothing is refused rather
 * than guessed at. Returns a malloc'd path. */
static char *out_target(const char *path) {
    struct stat st;
    char *p;
    if (lstat(path, &st) != 0 || !S_ISLNK(st.st_mode)) p = strdup(path);
    else if (!(p = realpath(path, NULL)))
        fatal(path, "cannot write through this symbolic link: %s", strerror(errno));
    if (!p) die("out of memory");
    return p;
}

void out_register(const char *path) {
    if (out_is_special(path)) return;
    char *target = out_target(path);
    outs = realloc(outs, sizeof *outs * (size_t)(nouts + 1));
    if (!outs) die("out of memory");
    outs[nouts++] = target;
}

void out_commit(void) {
    for (int i = 0; i < nouts; i++) free(outs[i]);
    nouts = 0;
}

void out_remove_all(void) {
    for (int i = 0; i < nouts; i++) { unlink(outs[i]); free(outs[i]); }
    nouts = 0;
}

bool write_all(int fd, const void *data, size_t n) {
    const char *p = data;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

char *out_temp(const char *name, int *fd) {
    char *path = out_target(name);
    if (out_is_special(path)) {
        *fd = open(path, O_WRONLY | O_TRUNC);
        int err = errno;
        free(path);
        if (*fd < 0) fatal(name, "cannot write: %s", strerror(err));
        return NULL;
    }
    size_t len = strlen(path) + 8;
    char *tmp = malloc(len);
    if (!tmp) die("out of memory");
    snprintf(tmp, len, "%s.XXXXXX", path);
    free(path);
    *fd = mkstemp(tmp);
    int err = errno;
    mode_t mask = umask(0);             /* mkstemp makes 0600; outputs get 0666 & ~umask */
    umask(mask);
    if (*fd >= 0 && fchmod(*fd, 0666 & ~mask) != 0) {
        err = errno;
        close(*fd);
        unlink(tmp);
        *fd = -1;
    }
    if (*fd < 0) {
        free(tmp);
        fatal(name, "cannot write: %s", strerror(err));
    }
    return tmp;
}

void out_finish(const char *name, char *tmp, bool ok, int err) {
    if (!tmp) {                         /* a special file, written in place */
        if (!ok) fatal(name, "cannot write: %s", strerror(err));
        return;
    }
    char *path = out_target(name);
    if (ok && rename(tmp, path) != 0) { ok = false; err = errno; }
    free(path);
    if (!ok) {
        unlink(tmp);
        free(tmp);
        fatal(name, "cannot write: %s", strerror(err));
    }
    free(tmp);
}

void out_write(const char *name, const void *data, size_t n) {
    int fd;
    char *tmp = out_temp(name, &fd);
    bool ok = write_all(fd, data, n);
    int err = errno;
    if (close(fd) != 0 && ok) { ok = false; err = errno; }
    out_finish(name, tmp, ok, err);
}

_Noreturn void die_(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "onnxcc: internal error at %s:%d: ", file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    out_remove_all();
    abort();
}

void progress(const char *fmt, ...) {
    if (!verbose_level) return;
    va_list ap;
    va_start(ap, fmt);
    fputs("onnxcc: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}
