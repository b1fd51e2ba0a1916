/* trip_bound.c - tests/models.sh links models/loop_while compiled with `--max-trip loop=3` (as
 * lw3) into this program and checks NAME_ERR_TRIP: runs that need at most 3 iterations (an
 * early exit after 3, a trip count of 3, a trip count of 0) return 0 with numpy's outputs
 * (tables from tests/firmware/pb2c.py, data sets 0-2), and the run whose trip count 20 and
 * unreachable limit need 20 iterations (data set 3) returns lw3_ERR_TRIP, 4.
 * Prints "ok ..." or "FAIL ..." per check. */
#include <stdio.h>

#include "lw3.h"
#include "t_set0.h"
#include "t_set1.h"
#include "t_set2.h"
#include "t_set3.h"

static int failures;

static void verdict(int ok, const char *what, int set)
{
    if (set < 0)
        printf("%s loop_while --max-trip loop=3: %s\n", ok ? "ok  " : "FAIL", what);
    else
        printf("%s loop_while --max-trip loop=3, data set %d: %s\n", ok ? "ok  " : "FAIL", set, what);
    failures += !ok;
}

/* Runs one data set; with want 0 its outputs must match exactly (the same float operations in
 * the same order as numpy's reference). */
static void run_set(int set, const void *const *inputs, void *const *outputs,
                    const tcheck *checks, int want)
{
    static _Alignas(lw3_ARENA_ALIGN) unsigned char arena[lw3_ARENA_SIZE + 1];
    int rc = lw3_run(inputs, outputs, arena);
    char what[64];
    snprintf(what, sizeof what, "run returns %d (got %d)", want, rc);
    verdict(rc == want, what, set);
    if (want != 0)
        return;
    size_t bad = 0, b;
    for (int i = 0; i < lw3_NUM_OUTPUTS; i++) {
        tcheck_compare(&checks[i], 1e-6, 0, &b);
        bad += b;
    }
    verdict(bad == 0, "outputs match numpy's", set);
}

int main(void)
{
    verdict(lw3_ERR_TRIP == 4, "lw3_ERR_TRIP is 4", -1);
    run_set(0, t_set0_inputs, t_set0_outputs, t_set0_checks, 0);
    run_set(1, t_set1_inputs, t_set1_outputs, t_set1_checks, 0);
    run_set(2, t_set2_inputs, t_set2_outputs, t_set2_checks, 0);
    run_set(3, t_set3_inputs, t_set3_outputs, t_set3_checks, lw3_ERR_TRIP);
    return failures != 0;
}
