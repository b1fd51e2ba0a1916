/* host_stack.c - the header's stack bound (NAME_STACK_SIZE, backend/facts.c) measured on the
 * host: one compiled model (case.h from tests/firmware/pb2c.py) runs on a thread whose stack
 * is painted with a pattern below the caller's stack pointer; the lowest word that changed
 * gives the bytes the call used, which must not exceed the bound. The outputs are compared with
 * the data set too, so that the run measured is a real one. tests/models.sh builds and runs it.
 * Prints "stack N bytes (bound B)" and PASS or FAIL; exit status 0 on PASS. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "case.h"

#define PATTERN 0xA5C3A5C3u
#define STACK_BYTES (1u << 20)

static _Alignas(64) unsigned char stack_mem[STACK_BYTES];
static _Alignas(64) unsigned char arena[case_ARENA_SIZE > 0 ? case_ARENA_SIZE : 1];
static unsigned long used;
static int rc;

static uintptr_t stack_pointer(void) __attribute__((always_inline));
static inline uintptr_t stack_pointer(void)
{
    uintptr_t sp;
#if defined(__x86_64__)
    __asm__ volatile("mov %%rsp, %0" : "=r"(sp));
#elif defined(__aarch64__)
    __asm__ volatile("mov %0, sp" : "=r"(sp));
#else
    sp = (uintptr_t)__builtin_frame_address(0);     /* a little more than the call's own use */
#endif
    return sp;
}

static void *body(void *arg)
{
    (void)arg;
    uintptr_t sp = stack_pointer();
    /* volatile: a memset here would write over its own return address */
    for (volatile uint32_t *p = (uint32_t *)stack_mem; (uintptr_t)p < sp; p++)
        *p = PATTERN;
    rc = case_RUN(case_inputs, case_outputs, arena);
    const uint32_t *p = (const uint32_t *)stack_mem;
    while ((uintptr_t)p < sp && *p == PATTERN)
        p++;
    used = (unsigned long)(sp - (uintptr_t)p);
    return NULL;
}

int main(void)
{
    pthread_attr_t attr;
    pthread_t th;
    if (pthread_attr_init(&attr) || pthread_attr_setstack(&attr, stack_mem, sizeof stack_mem) ||
        pthread_create(&th, &attr, body, NULL) || pthread_join(th, NULL)) {
        printf("cannot run a thread on the painted stack\nFAIL\n");
        return 1;
    }
    int bad = rc != 0;
    for (int i = 0; i < case_NUM_OUTPUTS; i++) {
        size_t nbad;
        tcheck_compare(&case_checks[i], 1e-3, 1e-5, &nbad);
        bad += nbad != 0;
    }
    printf("run returned %d; stack %lu bytes (bound %lu)\n", rc, used, (unsigned long)case_STACK_SIZE);
    if (used > case_STACK_SIZE)
        printf("stack: more than the header's bound\n"), bad++;
    printf("%s\n", bad ? "FAIL" : "PASS");
    return bad != 0;
}
