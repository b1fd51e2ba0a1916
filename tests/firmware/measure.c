/* measure.c - the instruction counting that main.c calls, the same on every board: the board's
 * file (icount.c on the Cortex-M4, rv32.c on RV32) provides a free-running clock that QEMU's
 * `-icount` advances in step with the instructions executed (board_ticks), a loop of known
 * length (board_spin: n iterations of two instructions) and board_clock_start. The ratio of
 * ticks to instructions is measured on that loop rather than assumed, so run.sh may choose
 * any `-icount` shift. */
#include <stdint.h>

void board_clock_start(void);
uint64_t board_ticks(void);
void board_spin(uint32_t n);

static double ticks_per_insn;
static uint64_t t_start;

/* Start the clock and calibrate it against board_spin. */
void icount_init(void)
{
    board_clock_start();
    uint64_t t0 = board_ticks();
    board_spin(100000);
    uint64_t t1 = board_ticks();
    board_spin(200000);
    uint64_t t2 = board_ticks();
    /* the difference of two spins cancels the cost of the calls and reads */
    ticks_per_insn = (double)((t2 - t1) - (t1 - t0)) / 200000.0;
}

void icount_start(void) { t_start = board_ticks(); }

/* The raw clock, cheap to read: the clock of a --profile build (main.c), whose counts
 * icount_insns turns into instructions afterwards. */
uint64_t icount_ticks(void) { return board_ticks(); }
unsigned long icount_insns(uint64_t t) { return ticks_per_insn > 0 ? (unsigned long)((double)t / ticks_per_insn + 0.5) : 0; }

/* The end of a measurement: two reads and nothing else, so that the stack below main's frame
 * still shows what the measured call used (main.c reads the painted stack after this). */
static uint64_t t_end, t_end2;
void icount_stop(void)
{
    t_end = board_ticks();
    t_end2 = board_ticks();         /* one empty measurement: what the reads cost */
}

/* Instructions between icount_start and icount_stop, less the cost of the reads. */
unsigned long icount_result(void)
{
    double n = ((double)(t_end - t_start) - (double)(t_end2 - t_end)) / ticks_per_insn;
    return ticks_per_insn > 0 && n > 0 ? (unsigned long)(n + 0.5) : 0;
}
