/* link_two.c - tests/models.sh links the mlp and cnn models, compiled separately by onnxcc, into
 * this one program. That alone shows the two objects and headers coexist (no clashing symbols
 * or type definitions). It then checks each header's contract against the test data
 * (tables from tests/firmware/pb2c.py): model info versus macros, tensor names, ranks, dims and
 * byte sizes, the error codes for a NULL or misaligned arena, and that runs in two different
 * arenas, filled with different garbage and interleaved with the other model, give identical
 * outputs that match the expected ones. Prints "ok ..." or "FAIL ..." per check. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlp.h"
#include "cnn.h"
#include "t_mlp.h"
#include "t_cnn.h"

typedef int (*run_fn)(const void *const *, void *const *, void *);

typedef struct Case {
    const char *name;
    const onnxcc_model_info *info;
    run_fn run;
    size_t arena_size, arena_align;         /* the header's macros */
    const void *const *inputs;
    void *const *outputs;
    const tcheck *ins, *outs;
    int nin, nout;
    unsigned char *arena[2];
    unsigned char *first[4];                /* outputs of the run in arena 0 */
} Case;

static int failures;

static void verdict(const Case *c, int ok, const char *what)
{
    printf("%s %s: %s\n", ok ? "ok  " : "FAIL", c->name, what);
    failures += !ok;
}

static int same_tensor(const onnxcc_tensor_info *t, const tcheck *want)
{
    if (strcmp(t->name, want->name) != 0 || t->rank != want->rank || t->size != want->nbytes)
        return 0;
    for (int d = 0; d < t->rank; d++)
        if (t->dims[d] != want->dims[d])
            return 0;
    return 1;
}

static void check_info(const Case *c)
{
    const onnxcc_model_info *m = c->info;
    verdict(c, m->arena_size == c->arena_size && m->arena_align == c->arena_align &&
                   m->arena_align > 0 && (m->arena_align & (m->arena_align - 1)) == 0,
            "info arena size and alignment match the macros");
    verdict(c, m->run == c->run && m->name && strcmp(m->name, c->name) == 0,
            "info name and run function");
    int io = m->num_inputs == c->nin && m->num_outputs == c->nout;
    for (int i = 0; io && i < c->nin; i++)
        io = same_tensor(&m->inputs[i], &c->ins[i]);
    for (int i = 0; io && i < c->nout; i++)
        io = same_tensor(&m->outputs[i], &c->outs[i]);
    verdict(c, io, "inputs and outputs: count, names, ranks, dims, byte sizes");
}

static void check_bad_arena(const Case *c)
{
    if (c->arena_size > 0)
        verdict(c, c->run(c->inputs, c->outputs, NULL) != 0, "NULL arena is refused");
    if (c->arena_align > 1)
        verdict(c, c->run(c->inputs, c->outputs, c->arena[0] + 1) != 0,
                "misaligned arena is refused");
}

/* The arena needs no initialisation: fill it with garbage before each run. */
static int run_in(Case *c, int k, int garbage)
{
    memset(c->arena[k], garbage, c->arena_size + 1);
    return c->run(c->inputs, c->outputs, c->arena[k]);
}

static void save_outputs(Case *c)
{
    for (int i = 0; i < c->nout; i++) {
        c->first[i] = malloc(c->outs[i].nbytes + 1);
        memcpy(c->first[i], c->outputs[i], c->outs[i].nbytes);
    }
}

static void compare_outputs(Case *c)
{
    int same = 1, close = 1;
    for (int i = 0; i < c->nout; i++) {
        size_t bad;
        same &= memcmp(c->first[i], c->outputs[i], c->outs[i].nbytes) == 0;
        tcheck_compare(&c->outs[i], 1e-3, 1e-5, &bad);
        close &= bad == 0;
    }
    verdict(c, same, "two arenas give bit-identical outputs");
    verdict(c, close, "outputs match the expected ones (rtol 1e-3, atol 1e-5)");
}

static unsigned char *arena_new(size_t size, size_t align)
{
    size_t n = (size + 1 + align) / align * align;  /* +1: room for the misaligned try */
    return aligned_alloc(align, n);
}

int main(void)
{
    Case cases[2] = {
        {"mlp", &mlp_info, mlp_run, mlp_ARENA_SIZE, mlp_ARENA_ALIGN, t_mlp_inputs, t_mlp_outputs,
         t_mlp_ins, t_mlp_checks, t_mlp_NUM_INPUTS, t_mlp_NUM_OUTPUTS, {0}, {0}},
        {"cnn", &cnn_info, cnn_run, cnn_ARENA_SIZE, cnn_ARENA_ALIGN, t_cnn_inputs, t_cnn_outputs,
         t_cnn_ins, t_cnn_checks, t_cnn_NUM_INPUTS, t_cnn_NUM_OUTPUTS, {0}, {0}},
    };
    for (int m = 0; m < 2; m++) {
        Case *c = &cases[m];
        c->arena[0] = arena_new(c->arena_size, c->arena_align);
        c->arena[1] = arena_new(c->arena_size, c->arena_align);
        check_info(c);
        check_bad_arena(c);
    }
    /* mlp in arena 0, cnn in arena 0, mlp in arena 1, cnn in arena 1 */
    for (int round = 0; round < 2; round++) {
        for (int m = 0; m < 2; m++) {
            Case *c = &cases[m];
            int rc = run_in(c, round, round ? 0x5A : 0xFF);
            if (round == 0) {
                verdict(c, rc == 0, "run returns 0");
                save_outputs(c);
            }
        }
    }
    for (int m = 0; m < 2; m++) {
        Case *c = &cases[m];
        compare_outputs(c);
        for (int i = 0; i < c->nout; i++)
            free(c->first[i]);
        free(c->arena[0]);
        free(c->arena[1]);
    }
    return failures != 0;
}
