/* cpu_guard.c - runs one compiled model (case.h from tests/firmware/pb2c.py) once and prints
 * what NAME_run returned: 0, or NAME_ERR_CPU (5) when the object needs CPU features this
 * machine lacks (backend/cpucheck.c), in which case no output may have been written.
 * tests/models.sh compiles objects for features this CPU has and has not (/proc/cpuinfo says
 * which) and compares. Exit status: 0 if the outputs match the data set or, after an error,
 * are untouched; 1 otherwise. */
#include <stdio.h>

#include "case.h"

static _Alignas(64) unsigned char arena[case_ARENA_SIZE > 0 ? case_ARENA_SIZE : 1];

int main(void)
{
    int rc = case_RUN(case_inputs, case_outputs, arena);
    printf("run returned %d\n", rc);
    int bad = 0;
    for (int i = 0; i < case_NUM_OUTPUTS; i++) {
        if (rc != 0) {              /* the output buffers start zeroed (static) */
            const unsigned char *o = case_checks[i].out;
            for (size_t j = 0; j < case_checks[i].nbytes; j++)
                bad += o[j] != 0;
        } else {
            size_t nbad;
            tcheck_compare(&case_checks[i], 1e-3, 1e-5, &nbad);
            bad += nbad != 0;
        }
    }
    if (bad)
        printf("outputs wrong or written after an error\n");
    return bad != 0;
}
