/*
 * device.h - which GPU a call ran on, and what that GPU is.
 *
 * The current device is per thread. It is learned without initializing CUDA:
 * from the program's own cudaSetDevice, or, after one of the program's calls
 * has succeeded (so CUDA is already up), by asking the runtime it used.
 * Identity (UUID, PCI bus id, name, total memory) comes from ABI-stable driver
 * calls made by the writer thread, never from version-dependent structs.
 */
#ifndef CUTRACE_DEVICE_H
#define CUTRACE_DEVICE_H

#include <stdbool.h>

#include "cutrace/store.h"

/* The calling thread's device, -1 when unknown; probes only if cuda_is_up. */
int ct_device_current(bool cuda_is_up);
/* The device of the calling thread's current driver context, -1 if none. */
int ct_device_of_context(void);

/* The program made `device` current on this thread. */
void ct_device_note(int device);
/* Something may have changed the thread's device behind our back. */
void ct_device_forget(void);

/* Writer thread: identity of an ordinal; false if the driver cannot say. */
bool ct_device_describe(int device, struct ct_device_info *out);

#endif
