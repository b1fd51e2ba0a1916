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

/* ---- user errors ---- */
extern int error_count;          /* errors reported so far by error() */
/* Report one user error and go on (to report every unsupported op of a model at once). */
void error(const char *where, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Report one user error and exit(1) after removing registered outputs. */
_Noreturn void fatal(const char *where, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Exit(1) if any error() was reported. */
void exit_if_errors(void);
void warn(const char *where, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Output files to delete if the compilation fails (paths are copied). */
void out_register(const char *path);
void out_commit(void);           /* success: forget the registered paths */
void out_remove_all(void);

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
