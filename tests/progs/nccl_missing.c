/*
 * nccl_missing.c - a program that finds an NCCL function at run time (as
 * ctypes does) in a process where the NCCL that would define it is absent.
 *
 * No libnccl is loaded here. Untraced, the lookup finds nothing; traced, it
 * finds the preload's hook, which must not crash: it answers
 * ncclInvalidUsage (5) and records the call.
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>

typedef int (*window_register_fn)(void *, void *, size_t, void **, int);

int main(void)
{
    window_register_fn fn = (window_register_fn)dlsym(RTLD_DEFAULT, "ncclCommWindowRegister");
    if (!fn) {
        printf("ncclCommWindowRegister absent\n");
        return 0;
    }
    void *win = NULL;
    int rc = fn(NULL, NULL, 0, &win, 0);
    printf("ncclCommWindowRegister returned %d\n", rc);
    return 0;
}
