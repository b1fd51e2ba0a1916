/* rv32.c - what the RV32IMAFC test firmware needs besides picolibc, on QEMU's `virt` board:
 * the stack painting and the instruction counting that main.c calls (startup.c and icount.c
 * are their Cortex-M4 counterparts). picolibc's semihosting crt0 sets up .data/.bss, enables
 * the FPU, calls main and hands its status to QEMU as the exit code.
 *
 * Instructions: with `-icount shift=0`, QEMU's RISC-V `instret`/`cycle` counters read the virtual
 * clock, which advances 1 ns per executed instruction. As on the M4, the ratio is measured
 * against a loop of known length rather than assumed, so run.sh may pick another shift. */
#include <stdint.h>

/* picolibc.ld: the stack is the top __stack_size bytes of RAM, __heap_end its lowest address. */
extern uint32_t __stack[], __heap_end[];

#define STACK_PATTERN 0xA5C3A5C3u
static uint32_t *paint_top;

/* Fill the unused stack below the caller's frame with a pattern; stack_used() then finds the
 * lowest word that changed. Not inlined, so that its own frame is gone when the model runs. */
__attribute__((noinline)) void stack_paint(void)
{
    uint32_t *sp;
    __asm volatile("mv %0, sp" : "=r"(sp));
    paint_top = sp;
    for (uint32_t *p = __heap_end; p < paint_top; p++)
        *p = STACK_PATTERN;
}

unsigned stack_used(void)
{
    uint32_t *p = __heap_end;
    while (p < paint_top && *p == STACK_PATTERN)
        p++;
    return (unsigned)((char *)paint_top - (char *)p);
}

static uint64_t ticks(void)
{
    uint32_t hi, lo, hi2;
    do {                            /* the high half changed between the reads: read again */
        __asm volatile("rdcycleh %0" : "=r"(hi));
        __asm volatile("rdcycle %0" : "=r"(lo));
        __asm volatile("rdcycleh %0" : "=r"(hi2));
    } while (hi != hi2);
    return (uint64_t)hi << 32 | lo;
}

/* n iterations of two instructions (addi, bnez), then return. */
__attribute__((naked, noinline)) static void spin(uint32_t n)
{
    (void)n;
    __asm volatile("1: addi a0, a0, -1\n"
                   "   bnez a0, 1b\n"
                   "   ret\n");
}

static double ticks_per_insn;
static uint64_t t_start;

void icount_init(void)
{
    uint64_t t0 = ticks();
    spin(100000);
    uint64_t t1 = ticks();
    spin(200000);
    uint64_t t2 = ticks();
    /* the difference of two spins cancels the cost of the calls and reads */
    ticks_per_insn = (double)((t2 - t1) - (t1 - t0)) / 200000.0;
}

void icount_start(void) { t_start = ticks(); }
uint64_t icount_ticks(void) { return ticks(); }
unsigned long icount_insns(uint64_t t) { return ticks_per_insn > 0 ? (unsigned long)((double)t / ticks_per_insn + 0.5) : 0; }

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
