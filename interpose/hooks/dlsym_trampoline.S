// The exported dlsym (see dlsym_hook.cpp). glibc's dlsym takes the caller from its own return address:
// RTLD_NEXT searches the objects after the caller's, RTLD_DEFAULT the caller's scope. For those two
// handles this jumps to the real dlsym without a frame of its own, so the program's return address is
// the one glibc reads. Every other handle goes to gpuleak_dlsym_hook(handle, name).
#if defined(__x86_64__)
    .text
    .globl dlsym
    .type dlsym, @function
    .hidden gpuleak_dlsym_hook
    .hidden gpuleak_real_dlsym
    .hidden gpuleak_resolve_real_dlsym
    .p2align 4
dlsym:
    .cfi_startproc
    cmpq $-1, %rdi                  // RTLD_NEXT
    je 1f
    testq %rdi, %rdi                // RTLD_DEFAULT
    jne gpuleak_dlsym_hook
1:
    movq gpuleak_real_dlsym(%rip), %rax
    testq %rax, %rax
    jz 2f
    jmp *%rax
2:
    // First use: find the real dlsym, keeping the arguments and the ABI's 16-byte stack alignment.
    pushq %rdi
    .cfi_adjust_cfa_offset 8
    pushq %rsi
    .cfi_adjust_cfa_offset 8
    subq $8, %rsp
    .cfi_adjust_cfa_offset 8
    call gpuleak_resolve_real_dlsym
    addq $8, %rsp
    .cfi_adjust_cfa_offset -8
    popq %rsi
    .cfi_adjust_cfa_offset -8
    popq %rdi
    .cfi_adjust_cfa_offset -8
    testq %rax, %rax
    jz 3f
    jmp *%rax
3:
    // No dlsym in the process to forward to: a failed lookup (rax is 0).
    ret
    .cfi_endproc
    .size dlsym, .-dlsym
#endif
    .section .note.GNU-stack,"",@progbits
