"""torch.version of the fake torch: the CUDA version it was "built" with is the
fake runtime's (libcudart.so.12, cudaRuntimeGetVersion 12080)."""
__version__ = "2.11.0+cutrace.fake"
cuda = "12.8"
git_version = "cutrace-fake"
debug = False
hip = None
