"""stk_python.py - CUDA calls from named Python functions, for the stack tests.

Loads the fake runtime with ctypes.PyDLL, which keeps the GIL held during
the call (as a C extension calling CUDA with the GIL held does), so cutrace
can read the Python frames of each call: their file (this one), line and
function must be in the trace. One call goes through ctypes.CDLL, which
releases the GIL around the call: cutrace must then record no Python frames
for it (it never takes the GIL), and the program must not notice.

    python3 stk_python.py          prints "ok"
"""
import ctypes

cudart = ctypes.PyDLL("libcudart.so.12")
cudart_nogil = ctypes.CDLL("libcudart.so.12")
kept = []


def check(what, rc):
    if rc != 0:
        raise RuntimeError(f"{what} returned {rc}")


def create_shared_buffer(size):
    buf = ctypes.c_void_p()
    check("cudaMalloc", cudart.cudaMalloc(ctypes.byref(buf), ctypes.c_size_t(size)))  # ALLOC_LINE
    kept.append(buf)
    return buf


def init_custom_all_reduce():
    for _ in range(2):
        create_shared_buffer(8 << 20)


def measure_free():
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    check("cudaMemGetInfo", cudart.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total)))  # MEASURE_LINE
    return free.value


def without_gil():
    buf = ctypes.c_void_p()
    check("cudaMalloc", cudart_nogil.cudaMalloc(ctypes.byref(buf), ctypes.c_size_t(1 << 20)))
    kept.append(buf)


class Model:
    def load_weights(self):
        lam = lambda: create_shared_buffer(32 << 20)  # noqa: E731
        return lam()


def main():
    measure_free()
    init_custom_all_reduce()
    Model().load_weights()
    without_gil()
    measure_free()
    for buf in kept:
        check("cudaFree", cudart.cudaFree(buf))
    print("ok")


if __name__ == "__main__":
    main()
