/*
 * pylines.h - CPython line tables decoded offline: the source line of a
 * Python frame's current instruction, from the byte offset the tracer
 * recorded (CT_PYFRAME_INSTR) and the copy of its code object's
 * co_linetable (CT_AUX_PYLINES).
 *
 * Reading a line through the interpreter would mean calling into it from
 * inside an intercepted CUDA call; the tracer copies the table once per code
 * object instead, and the trace writer and the analyzer decode it here, the
 * way CPython's PyCode_Addr2Line() does. The tables come from traces read
 * from anywhere, so any bytes are safe input: nothing outside the table is
 * read, the walk ends, nothing is allocated.
 */
#ifndef CUTRACE_PYLINES_H
#define CUTRACE_PYLINES_H

#include <stddef.h>
#include <stdint.h>

/* The source line of the instruction at byte offset `offset` in the bytecode of a code object
 * whose line table is table[0, len) in format `format` (CT_PYLINES_310 or CT_PYLINES_311 of
 * include/cutrace/format.h) and whose co_firstlineno is first_line. Returns what CPython's
 * PyCode_Addr2Line(code, offset) returns for that code object, except that "no line" (-1) is 0.
 * offset == CT_PYFRAME_VALUE_MASK (format.h) means "not started yet" (3.10's f_lasti = -1):
 * first_line. A table cut short (len smaller than the interpreter's) gives the right line for
 * every offset the prefix covers and 0 beyond it: never a wrong line. Unknown format: 0. */
int64_t ct_pylines_line(unsigned format, int64_t first_line, const uint8_t *table, size_t len,
                        uint64_t offset);

#endif
