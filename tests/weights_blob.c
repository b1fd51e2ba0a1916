/* weights_blob.c - a host program using a model compiled with --emit-weights as an application
 * that loads its weights at run time would (tests/weights.sh builds it): it reads the blob
 * (argv[1]) into memory aligned as the header asks, runs NAME_run_w on the test data set
 * (case.h from tests/firmware/pb2c.py --prefix t; the model's name is "wb") directly, through
 * wb_info and, for a model of one input and one output, through wb_run_typed, and compares the
 * outputs. It then checks the refusals: a NULL or misaligned blob, one whose key byte is
 * changed, and another compilation's blob (argv[2]) return wb_ERR_WEIGHTS and leave the outputs
 * untouched. Prints "ok ..." or "FAIL ..." per check; exit status 1 on any FAIL. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wb.h"
#include "case.h"
#ifdef WB_POOL
#include "onnxcc_pool.h"
#endif

#ifndef RTOL /* weights.sh sets them for the int8 models: one output quantum */
#define RTOL 1e-3
#endif
#ifndef ATOL
#define ATOL 1e-5
#endif

static int failures;

static void verdict(int ok, const char *what)
{
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    failures += !ok;
}

/* The file at path in memory aligned to wb_WEIGHTS_ALIGN, plus `shift` bytes before it. */
static unsigned char *load(const char *path, size_t shift, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f || fseek(f, 0, SEEK_END) != 0)
        return NULL;
    long len = ftell(f);
    rewind(f);
    size_t cap = ((size_t)len + shift + wb_WEIGHTS_ALIGN) / wb_WEIGHTS_ALIGN * wb_WEIGHTS_ALIGN;
    unsigned char *mem = aligned_alloc(wb_WEIGHTS_ALIGN, cap);
    if (!mem || fread(mem + shift, 1, (size_t)len, f) != (size_t)len) {
        fclose(f);
        return NULL;
    }
    fclose(f);
    *n = (size_t)len;
    return mem;
}

static int outputs_match(void)
{
    int bad = 0;
    for (int i = 0; i < t_NUM_OUTPUTS; i++) {
        size_t nbad;
        tcheck_compare(&t_checks[i], RTOL, ATOL, &nbad);
        bad += nbad != 0;
    }
    return !bad;
}

/* run_w with `weights` must refuse and write no output. */
static void refused(const void *weights, const char *what)
{
    char msg[160];
    for (int i = 0; i < t_NUM_OUTPUTS; i++)
        memset(t_checks[i].out, 0x5a, t_checks[i].nbytes);
    static _Alignas(wb_ARENA_ALIGN) unsigned char arena[wb_ARENA_SIZE + 1];
    int rc = wb_run_w(t_inputs, t_outputs, arena, weights);
    int kept = 1;
    for (int i = 0; i < t_NUM_OUTPUTS; i++)
        for (size_t j = 0; j < t_checks[i].nbytes; j++)
            kept &= ((unsigned char *)t_checks[i].out)[j] == 0x5a;
    snprintf(msg, sizeof msg, "%s: run_w returned %d (wb_ERR_WEIGHTS %d), outputs %s", what, rc,
             wb_ERR_WEIGHTS, kept ? "untouched" : "written");
    verdict(rc == wb_ERR_WEIGHTS && kept, msg);
}

int main(int argc, char **argv)
{
    size_t n = 0, n2 = 0;
    unsigned char *w = argc == 3 ? load(argv[1], 0, &n) : NULL;
    if (!w) {
        printf("FAIL usage: weights_blob BLOB OTHER_BLOB (cannot read the blob)\n");
        return 1;
    }
    verdict(n == wb_WEIGHTS_SIZE && wb_info.weights_size == wb_WEIGHTS_SIZE,
            "blob size = wb_WEIGHTS_SIZE = wb_info.weights_size");
    verdict(wb_info.run == NULL && wb_info.run_w == wb_run_w, "wb_info: run NULL, run_w wb_run_w");

    static _Alignas(wb_ARENA_ALIGN) unsigned char arena[wb_ARENA_SIZE + 1];
    int rc = wb_run_w(t_inputs, t_outputs, arena, w);
    verdict(rc == 0 && outputs_match(), "run_w with the blob: outputs match the data set");
    /* the same through the model info and the typed wrapper, the outputs cleared before each */
    for (int i = 0; i < t_NUM_OUTPUTS; i++)
        memset(t_checks[i].out, 0, t_checks[i].nbytes);
    rc = wb_info.run_w(t_inputs, t_outputs, arena, w);
    verdict(rc == 0 && outputs_match(), "wb_info.run_w: outputs match the data set");
#if t_NUM_INPUTS == 1 && t_NUM_OUTPUTS == 1
    for (int i = 0; i < t_NUM_OUTPUTS; i++)
        memset(t_checks[i].out, 0, t_checks[i].nbytes);
    rc = wb_run_typed(t_in0, t_out0, arena, w);
    verdict(rc == 0 && outputs_match(), "wb_run_typed: outputs match the data set");
#endif

#ifdef WB_POOL
    /* wb_run_w_par on 1 and 2 threads (the object built with --split-all, so that kernels do
     * run as tasks): bitwise wb_run_w's outputs */
    {
        unsigned char *want[t_NUM_OUTPUTS];
        for (int i = 0; i < t_NUM_OUTPUTS; i++) {
            want[i] = malloc(t_checks[i].nbytes ? t_checks[i].nbytes : 1);
            memcpy(want[i], t_checks[i].out, t_checks[i].nbytes);
        }
        for (int th = 1; th <= 2; th++) {
            onnxcc_pool *pool = onnxcc_pool_new(th);
            for (int i = 0; i < t_NUM_OUTPUTS; i++)
                memset(t_checks[i].out, 0, t_checks[i].nbytes);
            rc = wb_run_w_par(t_inputs, t_outputs, arena, w, onnxcc_pool_parallel_for, pool);
            int same = rc == 0;
            for (int i = 0; i < t_NUM_OUTPUTS; i++)
                same &= memcmp(want[i], t_checks[i].out, t_checks[i].nbytes) == 0;
            char msg[80];
            snprintf(msg, sizeof msg, "run_w_par on %d thread%s: bitwise run_w's outputs", th, th > 1 ? "s" : "");
            verdict(same, msg);
            onnxcc_pool_free(pool);
        }
        for (int i = 0; i < t_NUM_OUTPUTS; i++)
            free(want[i]);
    }
#endif

    refused(NULL, "NULL weights");
    unsigned char *shifted = load(argv[1], 8, &n);
    if (shifted)
        refused(shifted + 8, "weights at an address 8 bytes off the alignment");
    free(shifted);
    w[24] ^= 1;                     /* the key, as the README's layout says */
    refused(w, "a blob whose key differs");
    w[24] ^= 1;
    w[0] = 'X';
    refused(w, "a blob whose magic differs");
    w[0] = 'O';
    unsigned char *other = load(argv[2], 0, &n2);
    if (other)
        refused(other, "another compilation's blob");
    else
        verdict(0, "read the other blob");
    free(other);
    rc = wb_run_w(t_inputs, t_outputs, arena, w);
    verdict(rc == 0 && outputs_match(), "run_w with the blob restored: outputs match again");
    free(w);
    return failures != 0;
}
