"""layout_check.py - the in-process half of `make python-layout-check`.

Run by each interpreter under test as `python3.X layout_check.py LIB`,
where LIB is liblayout_check.so (layout_check.c with preload/core/pylayout.c):

  - 3.13 and later: the offsets this interpreter publishes in
    _PyRuntime.debug_offsets, read by ct_py_layout_from_debug_offsets, must
    be accepted and equal the built-in table;
  - every version: a walk of this thread's frames with the table alone
    must find the functions sys._getframe() finds, at the same f_lasti, and
    the eval-loop entry marks where a C function (map) re-entered the
    interpreter.

Prints one "ok"/"FAIL" line per part; exits non-zero on any failure.
"""

import ctypes
import faulthandler
import sys

# A table wrong enough to make the walk fault still says where.
faulthandler.enable()

VERSION = "%d.%d" % sys.version_info[:2]
HEX = (sys.version_info[0] << 8) | sys.version_info[1]
failures = 0


def fail(msg):
    global failures
    failures += 1
    print("FAIL %s %s" % (VERSION, msg))


# PyDLL: the calls keep the GIL, so the frames being read cannot move.
lib = ctypes.PyDLL(sys.argv[1])
lib.ct_layout_check_debug.restype = ctypes.c_int
lib.ct_layout_check_debug.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_char_p, ctypes.c_size_t]
lib.ct_layout_check_walk.restype = ctypes.c_int
lib.ct_layout_check_walk.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_char_p, ctypes.c_size_t]
ctypes.pythonapi.PyThreadState_Get.restype = ctypes.c_void_p
ctypes.pythonapi.PyThreadState_Get.argtypes = []


def check_debug_offsets():
    if sys.version_info < (3, 13):
        return
    runtime = ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi, "_PyRuntime"))
    report = ctypes.create_string_buffer(8192)
    differ = lib.ct_layout_check_debug(runtime, HEX, report, len(report))
    text = report.value.decode()
    published = [line for line in text.splitlines() if line.startswith("published ")]
    detail = [line for line in text.splitlines() if not line.startswith("published ")]
    for line in detail:
        fail("debug offsets: " + line)
    if differ == 0 and not detail:
        count = published[0].split()[1] if published else "?"
        print("ok %s: %s offsets published in _PyRuntime.debug_offsets equal the table"
              % (VERSION, count))
    elif not detail:
        fail("debug offsets: %d differ" % differ)


walked = []


def leaf():
    buf = ctypes.create_string_buffer(1 << 16)
    n = lib.ct_layout_check_walk(ctypes.pythonapi.PyThreadState_Get(), HEX, buf, len(buf))
    # The callers' f_lasti, read now: they sit at their calls until leaf returns.
    callers = []
    f = sys._getframe(1)
    while f is not None:
        callers.append((f.f_code.co_name, f.f_lasti))
        f = f.f_back
    walked.append((n, buf.value.decode(), callers))


def mid(_):
    leaf()
    return 0


def outer():
    # map() calls mid from C: a second eval-loop invocation starts there.
    list(map(mid, [0]))


def check_walk():
    walk_failures_before = failures
    outer()
    n, text, callers = walked[0]
    lines = [line.split() for line in text.splitlines()]
    if n != len(lines):
        fail("walk: %d lines returned, %d written" % (n, len(lines)))
        return
    got = [line for line in lines if line[0] != "<shim>"]
    # What the API sees: leaf (whose own f_lasti has moved on since the
    # walk, so only its name is compared), then its callers.
    want = [("leaf", None)] + callers
    names_got = [line[0] for line in got]
    names_want = [name for name, _ in want]
    if names_got != names_want:
        fail("walk: frames %s, the API sees %s" % (names_got, names_want))
        return
    for line, (name, lasti) in zip(got, want):
        if lasti is not None and int(line[1]) != lasti:
            fail("walk: %s at byte %s, f_lasti %d" % (name, line[1], lasti))
    # The eval-loop entry marks: map re-entered the interpreter at mid.
    names = [line[0] for line in lines]
    mid_at = names.index("mid")
    if HEX >= 0x030C:
        shims = names.count("<shim>")
        if mid_at + 1 >= len(names) or names[mid_at + 1] != "<shim>" or names[-1] != "<shim>":
            fail("walk: no entry shim below mid and at the bottom: %s" % names)
    elif HEX == 0x030B:
        entries = [line[0] for line in got if len(line) > 2 and line[2] == "entry"]
        shims = len(entries)
        if "mid" not in entries or entries[-1] != got[-1][0]:
            fail("walk: is_entry not on mid and on the outermost frame: %s" % entries)
    else:
        shims = 0
    if failures == walk_failures_before:
        print("ok %s: %d frames walked with the table, %d entry marks, names and f_lasti "
              "as the API's" % (VERSION, len(got), shims))


check_debug_offsets()
check_walk()
sys.exit(1 if failures else 0)
