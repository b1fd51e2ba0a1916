/* startup.c - bare-metal start of the Cortex-M4 test firmware on QEMU's mps2-an386 board.
 * The vector table's reset handler turns the FPU on before any compiled C runs (the generated
 * model code and newlib both use VFP instructions, which trap while CP10/CP11 are off), then
 * sets up .data/.bss, opens newlib's semihosting stdio (rdimon) and exits with main's status,
 * which semihosting hands to QEMU as its own exit code. Memory layout: mps2.ld. */
#include <stdint.h>
#include <stdlib.h>

extern uint32_t __data_load, __data_start, __data_end, __bss_start__, __bss_end__;
extern uint32_t __stack_top, __stack_limit;
extern void initialise_monitor_handles(void);
extern int main(void);
extern void SysTick_Handler(void);   /* icount.c */

/* Stack depth of a call: fill the unused stack with a pattern first, then look for the lowest
 * word that changed. Tells how much stack a model's run function needs on the target. */
#define STACK_PATTERN 0xA5C3A5C3u
static uint32_t *paint_top;

void stack_paint(void)
{
    uint32_t *sp;
    __asm volatile("mov %0, sp" : "=r"(sp));
    paint_top = sp;                 /* a leaf without a frame at -O2: the caller's SP */
    for (uint32_t *p = &__stack_limit; p < paint_top; p++)
        *p = STACK_PATTERN;
}

unsigned stack_used(void)
{
    uint32_t *p = &__stack_limit;
    while (p < paint_top && *p == STACK_PATTERN)
        p++;
    return (unsigned)((char *)paint_top - (char *)p);
}

/* Any fault ends the run: semihosting SYS_EXIT with a reason other than ApplicationExit makes
 * QEMU exit with status 1, so a crash can never look like a pass. */
static void fault_handler(void)
{
    __asm volatile("movs r0, #0x18\n"
                   "ldr r1, =0x20023\n"
                   "bkpt 0xab\n");
    for (;;) {
    }
}

__attribute__((noreturn, used)) static void start_c(void)
{
    uint32_t *src = &__data_load, *dst = &__data_start;
    while (dst < &__data_end)
        *dst++ = *src++;
    for (dst = &__bss_start__; dst < &__bss_end__; dst++)
        *dst = 0;
    initialise_monitor_handles();
    exit(main());
}

/* Naked: the compiler must not emit anything (possibly VFP code) before CPACR is written. */
__attribute__((naked, noreturn)) void Reset_Handler(void)
{
    __asm volatile("ldr r0, =0xE000ED88\n"          /* SCB->CPACR */
                   "ldr r1, [r0]\n"
                   "orr r1, r1, #(0xF << 20)\n"      /* CP10 and CP11: full access */
                   "str r1, [r0]\n"
                   "dsb\n"
                   "isb\n"
                   "b start_c\n");
}

typedef void (*vector)(void);
__attribute__((section(".isr_vector"), used)) static const vector vector_table[16] = {
    (vector)&__stack_top, Reset_Handler,
    fault_handler,                  /* NMI */
    fault_handler,                  /* HardFault */
    fault_handler,                  /* MemManage */
    fault_handler,                  /* BusFault */
    fault_handler,                  /* UsageFault */
    0, 0, 0, 0,
    fault_handler,                  /* SVCall */
    fault_handler,                  /* DebugMonitor */
    0,
    fault_handler,                  /* PendSV */
    SysTick_Handler,                /* SysTick: counts timer wraps (icount.c) */
};
