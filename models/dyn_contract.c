/* dyn_contract.c - tests/models.sh links models/detect (NonMaxSuppression and NonZero, outputs
 * of data-dependent shape) into this program and checks the header's contract for them as a
 * user's program sees it: the info struct's dims_output, the dims outputs after the tensors,
 * the reported dims and the valid data (tables from tests/firmware/pb2c.py, numpy's results),
 * and the zeroed rest of each buffer, which is filled with garbage before the run.
 * Prints "ok ..." or "FAIL ..." per check. */
#include <stdio.h>
#include <string.h>

#include "detect.h"
#include "t_detect.h"

static int failures;

static void verdict(int ok, const char *what)
{
    printf("%s detect: %s\n", ok ? "ok  " : "FAIL", what);
    failures += !ok;
}

int main(void)
{
    static _Alignas(detect_ARENA_ALIGN) unsigned char arena[detect_ARENA_SIZE + 1];
    static _Alignas(16) unsigned char sel[detect_OUTPUT_0_SIZE], where[detect_OUTPUT_1_SIZE];
    int64_t sel_dims[2], where_dims[2];
    const onnxcc_model_info *m = &detect_info;
    verdict(m->num_outputs == 4 && detect_NUM_OUTPUTS == 4 && m->outputs[0].dims_output == 2 &&
                m->outputs[1].dims_output == 3 && m->outputs[2].dims_output == -1 &&
                m->outputs[3].dims_output == -1,
            "info: the two tensors report their dims in outputs 2 and 3");
    verdict(m->outputs[2].dtype == 7 && m->outputs[2].rank == 1 && m->outputs[2].dims[0] == 2 &&
                m->outputs[2].size == sizeof sel_dims,
            "info: a dims output is int64[rank]");
    verdict(m->outputs[0].dims[0] == 24 && m->outputs[0].dims[1] == 3 &&
                m->outputs[1].dims[0] == 3 && m->outputs[1].dims[1] == 72,
            "info: the capacities are the most the ops can produce");
    memset(sel, 0xab, sizeof sel);
    memset(where, 0xab, sizeof where);
    void *const outputs[] = {sel, where, sel_dims, where_dims};
    int rc = detect_run(t_detect_inputs, outputs, arena);
    verdict(rc == 0, "run returns 0");
    const tcheck *want[2] = {&t_detect_checks[0], &t_detect_checks[1]};
    const int64_t *got_dims[2] = {sel_dims, where_dims};
    const unsigned char *got[2] = {sel, where};
    size_t cap[2] = {sizeof sel, sizeof where};
    for (int i = 0; i < 2; i++) {
        int same = want[i]->rank == 2 && got_dims[i][0] == want[i]->dims[0] && got_dims[i][1] == want[i]->dims[1];
        verdict(same, i ? "NonZero's reported dims" : "NonMaxSuppression's reported dims");
        tcheck c = *want[i];
        size_t bad = 1;
        c.out = (void *)got[i];
        if (same) tcheck_compare(&c, 0, 0, &bad);
        int data = bad == 0;
        verdict(data, i ? "NonZero's data, packed at the start" : "NonMaxSuppression's data, packed at the start");
        int zero = 1;
        for (size_t j = want[i]->nbytes; j < cap[i]; j++) zero &= got[i][j] == 0;
        verdict(zero, i ? "NonZero: the rest of the buffer is zero" : "NonMaxSuppression: the rest of the buffer is zero");
    }
    return failures != 0;
}
