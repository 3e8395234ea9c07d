/*
 * hook_dlsym.S - the entry of libcutrace.so's dlsym override.
 *
 * glibc resolves dlsym(RTLD_NEXT, ...) relative to the code that called it,
 * found from the return address. A C wrapper that forwarded such a call
 * would make every other shim's RTLD_NEXT lookup start after libcutrace.so
 * instead of after the shim. So this entry handles the two pseudo-handles
 * (RTLD_DEFAULT = 0, RTLD_NEXT = -1) with a tail jump into the C library's
 * dlsym, which then sees the original caller, untouched registers and stack;
 * only a lookup on a real library handle (ctypes, the CUDA runtime finding
 * its driver) goes to ct_dlsym_handle (hook_lookup.c), which may hand back a
 * hook in place of a traced function.
 *
 * Before libcutrace.so's constructors have run, the real dlsym is found by
 * ct_dlsym_init(); the argument registers are saved around that call.
 */
#if defined(__x86_64__)

        .text
        .globl  dlsym
        .type   dlsym, @function
dlsym:
        testq   %rdi, %rdi
        je      1f
        cmpq    $-1, %rdi
        je      1f
        jmp     ct_dlsym_handle
1:      movq    ct_real_dlsym(%rip), %rax
        testq   %rax, %rax
        je      2f
        jmp     *%rax
2:      pushq   %rdi
        pushq   %rsi
        subq    $8, %rsp                /* 16-byte stack alignment at the call */
        call    ct_dlsym_init
        addq    $8, %rsp
        popq    %rsi
        popq    %rdi
        movq    ct_real_dlsym(%rip), %rax
        testq   %rax, %rax
        je      3f
        jmp     *%rax
3:      xorl    %eax, %eax              /* no dlsym to be found: what can we do */
        ret
        .size   dlsym, .-dlsym

#elif defined(__aarch64__)

        .text
        .globl  dlsym
        .type   dlsym, %function
dlsym:
        cbz     x0, 1f
        cmn     x0, #1
        b.eq    1f
        b       ct_dlsym_handle
1:      adrp    x16, ct_real_dlsym
        ldr     x16, [x16, :lo12:ct_real_dlsym]
        cbz     x16, 2f
        br      x16
2:      stp     x29, x30, [sp, #-32]!
        mov     x29, sp
        stp     x0, x1, [sp, #16]
        bl      ct_dlsym_init
        ldp     x0, x1, [sp, #16]
        ldp     x29, x30, [sp], #32
        adrp    x16, ct_real_dlsym
        ldr     x16, [x16, :lo12:ct_real_dlsym]
        cbz     x16, 3f
        br      x16
3:      mov     x0, #0
        ret
        .size   dlsym, .-dlsym

#else
#error "libcutrace.so's dlsym entry is written for x86-64 and aarch64 only"
#endif

        .section .note.GNU-stack, "", %progbits
