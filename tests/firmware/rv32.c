/* rv32.c - what the RV32IMAFC test firmware needs besides picolibc, on QEMU's `virt` board:
 * the stack painting that main.c calls and the clock that measure.c counts instructions with
 * (startup.c and icount.c are their Cortex-M4 counterparts). picolibc's semihosting crt0 sets up .data/.bss, enables
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

uint64_t board_ticks(void)
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
__attribute__((naked, noinline)) void board_spin(uint32_t n)
{
    (void)n;
    __asm volatile("1: addi a0, a0, -1\n"
                   "   bnez a0, 1b\n"
                   "   ret\n");
}

/* The cycle CSR runs from reset. */
void board_clock_start(void) {}
