"""stk_budget.py - an SGLang-like start-up in Python, for `cutrace budget`.

The function names are SGLang's: init_torch_distributed measures free
memory after making its (custom all-reduce) buffers, load_model allocates
the weights, profile_max_num_token measures again. CUDA is reached with
ctypes.PyDLL (the GIL stays held, so the Python frames are recorded), and
`cutrace budget` must say that its pre and post measurements ran in those
two functions.

    python3 stk_budget.py [--progress-log]     prints "ok"
"""
import ctypes
import sys

cudart = ctypes.PyDLL("libcudart.so.12")
kept = []


def check(what, rc):
    if rc != 0:
        raise RuntimeError(f"{what} returned {rc}")


def malloc(size):
    buf = ctypes.c_void_p()
    check("cudaMalloc", cudart.cudaMalloc(ctypes.byref(buf), ctypes.c_size_t(size)))
    kept.append(buf)


def get_available_gpu_memory():
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    check("cudaMemGetInfo", cudart.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total)))
    return free.value


class ModelRunner:
    def init_torch_distributed(self):
        for _ in range(2):
            malloc(8 << 20)
        return get_available_gpu_memory()

    def load_model(self, progress_log):
        for i in range(48):
            malloc(64 << 20)
            if progress_log and i == 27:
                # a progress log that also measures: the largest stretch
                # between two measurements is now before it, and only the
                # function names tell pre and post apart from it
                get_available_gpu_memory()

    def profile_max_num_token(self):
        return get_available_gpu_memory()


def main():
    runner = ModelRunner()
    runner.init_torch_distributed()
    runner.load_model("--progress-log" in sys.argv)
    runner.profile_max_num_token()
    for buf in kept:
        check("cudaFree", cudart.cudaFree(buf))
    print("ok")


if __name__ == "__main__":
    main()
