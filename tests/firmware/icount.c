/* icount.c - the Cortex-M4's clock for counting the instructions a call executes under QEMU
 * (measure.c does the counting), for the firmware tests' figures (instructions per inference,
 * per multiply-add).
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

uint64_t board_ticks(void)
{
    uint32_t w, v;
    do {                            /* a wrap between the two reads: read again */
        w = wraps;
        v = SYST_CVR;
    } while (w != wraps);
    return (uint64_t)w * (SYST_MAX + 1) + (SYST_MAX - v);
}

/* n iterations of two instructions (subs, bne), then return. */
__attribute__((naked, noinline)) void board_spin(uint32_t n)
{
    (void)n;
    __asm volatile("1: subs r0, r0, #1\n"
                   "   bne 1b\n"
                   "   bx lr\n");
}

/* SysTick on the processor clock, interrupting on each wrap. */
void board_clock_start(void)
{
    SYST_RVR = SYST_MAX;
    SYST_CVR = 0;
    wraps = 0;
    SYST_CSR = 7;                   /* ENABLE | TICKINT | CLKSOURCE=processor */
}
