/* util.h - what every part of onnxcc shares: the compilation arena and the two kinds of errors.
 *
 * Memory: one arena per compilation (arena_*), freed at once at the end. Nothing in the IRs is
 * freed on its own, so passes may drop nodes and expressions freely.
 *
 * Errors: a user's mistake (bad model, unsupported op, bad flag) goes through error()/fatal(),
 * which print "onnxcc: error: WHERE: MESSAGE" and make the process exit 1 without leaving any
 * half-written output (outputs are registered with out_register() and removed on failure).
 * A bug of ours goes through die()/assert() and aborts with file and line. */
#ifndef ONNXCC_UTIL_H
#define ONNXCC_UTIL_H
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- arena ---- */
typedef struct Arena Arena;
Arena *arena_new(void);
void arena_free(Arena *a);
void *arena_alloc(Arena *a, size_t n);               /* zeroed, 16-byte aligned */
char *arena_strdup(Arena *a, const char *s);
char *arena_printf(Arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Grow an arena-held array of elements of size `elsz` from `n` to at least `need` (old
 * storage is abandoned to the arena). Returns the new pointer; *cap is updated. */
void *arena_grow(Arena *a, void *p, int n, int *cap, int need, size_t elsz);
#define ARENA_NEW(a, T) ((T *)arena_alloc((a), sizeof(T)))
#define ARENA_ARRAY(a, T, n) ((T *)arena_alloc((a), sizeof(T) * (size_t)(n)))

/* ---- counts that saturate at INT64_MAX (work estimates over a model's dims, which may be
 * huge: "very many", not an overflow) ---- */
static inline int64_t sat_add(int64_t a, int64_t b) {
    int64_t r;
    return __builtin_add_overflow(a, b, &r) ? (b > 0 ? INT64_MAX : INT64_MIN) : r;
}
static inline int64_t sat_mul(int64_t a, int64_t b) {
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? ((a < 0) != (b < 0) ? INT64_MIN : INT64_MAX) : r;
}

/* ---- user errors ---- */
extern int error_count;          /* errors reported so far by error() */
/* Report one user error and go on (to report every unsupported op of a model at once). */
void error(const char *where, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Report one user error and exit(1) after removing registered outputs. */
_Noreturn void fatal(const char *where, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Exit(1) if any error() was reported. */
void exit_if_errors(void);
/* How fatal() and exit_if_errors() end the process: exit, unless the fuzzer (tests/fuzz/)
 * makes it jump back to its loop. It must not return. */
extern void (*error_exit)(int status);
void warn(const char *where, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Output files to delete if the compilation fails (paths are copied). Only regular files (or
 * paths that do not exist yet) are registered: /dev/null must survive a failed compilation. */
void out_register(const char *path);
/* Whether `path` names something that exists and is not a regular file (/dev/null, a FIFO). */
bool out_is_special(const char *path);
/* Write an output as a compiler should: a regular file (or a new one) through a temporary file
 * next to it, renamed over it once complete, so that no reader ever sees half an output; a
 * special file (out_is_special) directly, never replaced; a symbolic link is written through
 * (its target is the output; a link to nothing is an error). fatal() on failure. */
void out_write(const char *path, const void *data, size_t n);
/* out_write in two halves, for a writer that streams (elf.c's join) or takes a path (LLVM's
 * object writer): out_temp makes the temporary file next to the output's target (*fd open on
 * it, with the output's mode) and returns its path, or for a special file opens that in
 * place and returns NULL; the caller writes and closes *fd; out_finish renames the temporary
 * over the target if ok, else removes it and fails with err (a special file: fails if not ok).
 * A writer that takes a path needs a temporary: call it for regular files only. */
char *out_temp(const char *path, int *fd);
void out_finish(const char *path, char *tmp, bool ok, int err);
/* write(2) until all n bytes are written (EINTR retried); false on an error (errno). */
bool write_all(int fd, const void *data, size_t n);
void out_commit(void);           /* success: forget the registered paths */
void out_remove_all(void);

/* ---- sizes computed from a model ----
 * A model's numbers are untrusted: every element count, byte size, stride or offset computed
 * from them goes through these, which saturate at INT64_MAX (INT64_MIN) instead of
 * overflowing. A saturated result is far above any size limit (ir.h: Graph.max_bytes), so
 * the check that follows the computation reports it as a user error. */
int64_t sz_mul(int64_t a, int64_t b);
int64_t sz_add(int64_t a, int64_t b);
/* A double as int64_t without C's undefined behaviour: NaN is 0, values beyond the range
 * saturate (the interpreter's casts, kernel constants). */
int64_t sat_i64(double x);

/* ---- internal bugs ---- */
_Noreturn void die_(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define die(...) die_(__FILE__, __LINE__, __VA_ARGS__)

/* ---- small helpers ---- */
extern int verbose_level;               /* -v: progress messages on stderr */
void progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define COUNTOF(x) ((int)(sizeof(x) / sizeof((x)[0])))

#endif
