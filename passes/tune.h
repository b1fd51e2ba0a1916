/* tune.h - tuning files (--tune-file, written by --autotune): which candidate of its schedule
 * space each kernel takes, keyed by target and kernel signature (passes/tune.c). The schedule
 * pass (passes/schedule.c) reads a Tuning from Program.tuning. */
#ifndef ONNXCC_TUNE_H
#define ONNXCC_TUNE_H

#include <stdio.h>

#include "../ir/kir.h"

enum { TUNE_VERSION = 1, TUNE_CANDIDATES = 4 };

/* A candidate of a kernel's space (Kernel.tune_kind, tune_a, tune_b): the cost model's
 * choice, a register tile of a rows by b vectors (block_factor), or rows of a pixels of a
 * blocked conv (conv_pixel_tile). */
typedef enum TuneKind { TUNE_NONE, TUNE_DEFAULT, TUNE_TILE, TUNE_PIXELS } TuneKind;

typedef struct TuneEntry {
    const char *target;             /* "TRIPLE:ISA" (tune_target) */
    const char *ops, *out;          /* Kernel.ops and its first output ("f32[1,64,56,56]"): shown, checked */
    uint64_t sig;                   /* tune_signature */
    TuneKind kind;
    int a, b;
    int line;                       /* in the file, for messages */
} TuneEntry;

typedef struct Tuning {
    const char *path;               /* the file, for messages ("" when made by --autotune) */
    TuneEntry *e;
    int n, cap;
    /* --autotune's builds: a kernel without an entry takes the variant-th candidate of its
     * space (0: the cost model's; fewer candidates: the cost model's) */
    int variant;
} Tuning;

/* Reads a tuning file's text into t (entries appended; t->path names it in messages). Each
 * malformed line is an error() at "path:line" (every one of them is reported); returns
 * whether there was none. Never reads beyond text[len); the text need not end in a NUL. */
bool tune_parse(Arena *a, const char *text, size_t len, Tuning *t);
/* The entry for kernel k on target `target`, or NULL. */
const TuneEntry *tune_find(const Tuning *t, const char *target, const Kernel *k);
/* A hash of what kernel k computes, before the schedule: its class, its params' modes, types,
 * kinds and shapes, and its loop nest and expressions (buffers by param position, no names). */
uint64_t tune_signature(const Kernel *k);
/* The target part of a key: "TRIPLE:ISA" with blanks made '_'. */
const char *tune_target(Arena *a, const char *triple, const char *isa);
/* k's first output as "f32[1,64,56,56]" (a key's shown shape). */
const char *tune_out(Arena *a, const Kernel *k);
/* "default", "tile 6x2", "pixels 5". */
const char *tune_choice_text(Arena *a, TuneKind kind, int x, int y);
/* The file's first line ("onnxcc-tune 1") and one line per entry. */
void tune_write_header(FILE *f);
void tune_write_entry(FILE *f, Arena *a, const TuneEntry *e, const char *comment);

#endif
