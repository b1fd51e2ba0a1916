/* icount.c - counting the instructions a call executes on QEMU's Cortex-M4, for the firmware
 * tests' figures (instructions per inference, per multiply-add).
 *
 * QEMU is not cycle-accurate, but with `-icount shift=N` its virtual clock advances by exactly
 * 2^N ns per executed instruction, and the SysTick timer (clocked from the board's 25 MHz system
 * clock) counts that virtual time. So SysTick ticks are proportional to instructions. The ratio
 * is measured in the same run on a loop of known length (spin: two instructions an iteration),
 * so run.sh may pick any shift; 6 gives 1.6 ticks an instruction. SysTick is 24 bits wide: its
 * interrupt counts the wraps. On real hardware the same code measures cycles, not instructions. */
#include <stdint.h>

#define SYST_CSR (*(volatile uint32_t *)0xE000E010)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018)
#define SYST_MAX 0xFFFFFFu

static volatile uint32_t wraps;

void SysTick_Handler(void) { wraps++; }

static uint64_t ticks(void)
{
    uint32_t w, v;
    do {                            /* a wrap between the two reads: read again */
        w = wraps;
        v = SYST_CVR;
    } while (w != wraps);
    return (uint64_t)w * (SYST_MAX + 1) + (SYST_MAX - v);
}

/* n iterations of two instructions (subs, bne), then return. */
__attribute__((naked, noinline)) static void spin(uint32_t n)
{
    (void)n;
    __asm volatile("1: subs r0, r0, #1\n"
                   "   bne 1b\n"
                   "   bx lr\n");
}

static double ticks_per_insn;
static uint64_t t_start;

/* Start SysTick (processor clock, interrupt on wrap) and calibrate against spin(). */
void icount_init(void)
{
    SYST_RVR = SYST_MAX;
    SYST_CVR = 0;
    wraps = 0;
    SYST_CSR = 7;                   /* ENABLE | TICKINT | CLKSOURCE=processor */
    uint64_t t0 = ticks();
    spin(100000);
    uint64_t t1 = ticks();
    spin(200000);
    uint64_t t2 = ticks();
    /* the difference of two spins cancels the cost of the calls and reads */
    ticks_per_insn = (double)((t2 - t1) - (t1 - t0)) / 200000.0;
}

void icount_start(void) { t_start = ticks(); }

/* The raw SysTick count, cheap to read: the clock of a --profile build (main.c), whose counts
 * icount_insns turns into instructions afterwards. */
uint64_t icount_ticks(void) { return ticks(); }
unsigned long icount_insns(uint64_t t) { return ticks_per_insn > 0 ? (unsigned long)((double)t / ticks_per_insn + 0.5) : 0; }

/* Instructions since icount_start, less the cost of the two reads themselves. */
/* The end of a measurement: two reads and nothing else, so that the stack below main's frame
 * still shows what the measured call used (main.c reads the painted stack after this). */
static uint64_t t_end, t_end2;
void icount_stop(void)
{
    t_end = ticks();
    t_end2 = ticks();               /* one empty measurement: what the reads cost */
}

/* Instructions between icount_start and icount_stop, less the cost of the reads. */
unsigned long icount_result(void)
{
    double n = ((double)(t_end - t_start) - (double)(t_end2 - t_end)) / ticks_per_insn;
    return ticks_per_insn > 0 && n > 0 ? (unsigned long)(n + 0.5) : 0;
}
