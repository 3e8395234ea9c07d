/*
 * cutrace_nogil.c - a CPython C extension for the pyframes integration
 * suite (tests/integration/test_pyframes.c, tests/python/roads.py): it
 * calls the CUDA runtime the way PyTorch's bindings do, with the GIL
 * released around each call, so that the tracer must read the calling
 * thread's Python frames without it.
 *
 *   malloc(size) -> int        cudaMalloc, the device pointer as an int
 *   free(ptr)                  cudaFree
 *   mem_get_info() -> (free, total)
 *   in_c_thread(callable)      callable() on a pthread that is not a Python
 *                              thread: PyGILState_Ensure/Release around the
 *                              call, joined with the GIL released; returns
 *                              its result or raises its exception
 *   in_subinterpreter(code)    code run by PyRun_SimpleString in a new
 *                              interpreter (Py_NewInterpreter), ended
 *                              before returning; returns its status (0 ok)
 *
 * Built at test time only, once per installed interpreter, against that
 * interpreter's own headers and linked with the fake runtime
 * (tests/python/pyframes.mk); it is never part of the product.
 */
#include <Python.h>

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>

PyMODINIT_FUNC PyInit_cutrace_nogil(void);

static PyObject *cuda_error(const char *what, cudaError_t rc)
{
    return PyErr_Format(PyExc_RuntimeError, "%s returned %d", what, (int)rc);
}

/*
 * Each CUDA call runs between PyEval_SaveThread and PyEval_RestoreThread,
 * which is what Py_BEGIN_ALLOW_THREADS / Py_END_ALLOW_THREADS expand to
 * (written out so that clang-format keeps the blocks readable): the
 * tracer's hook runs while this thread holds no GIL, as under PyTorch.
 */
static PyObject *nogil_malloc(PyObject *self, PyObject *arg)
{
    (void)self;
    size_t size = PyLong_AsSize_t(arg);
    if (size == (size_t)-1 && PyErr_Occurred())
        return NULL;
    void *ptr = NULL;
    cudaError_t rc;
    PyThreadState *save = PyEval_SaveThread();
    rc = cudaMalloc(&ptr, size);
    PyEval_RestoreThread(save);
    if (rc != cudaSuccess)
        return cuda_error("cudaMalloc", rc);
    return PyLong_FromVoidPtr(ptr);
}

static PyObject *nogil_free(PyObject *self, PyObject *arg)
{
    (void)self;
    void *ptr = PyLong_AsVoidPtr(arg);
    if (!ptr && PyErr_Occurred())
        return NULL;
    cudaError_t rc;
    PyThreadState *save = PyEval_SaveThread();
    rc = cudaFree(ptr);
    PyEval_RestoreThread(save);
    if (rc != cudaSuccess)
        return cuda_error("cudaFree", rc);
    Py_RETURN_NONE;
}

static PyObject *nogil_mem_get_info(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    size_t free_bytes = 0, total_bytes = 0;
    cudaError_t rc;
    PyThreadState *save = PyEval_SaveThread();
    rc = cudaMemGetInfo(&free_bytes, &total_bytes);
    PyEval_RestoreThread(save);
    if (rc != cudaSuccess)
        return cuda_error("cudaMemGetInfo", rc);
    return Py_BuildValue("(nn)", (Py_ssize_t)free_bytes, (Py_ssize_t)total_bytes);
}

/* What the C thread hands back: a result, or the exception it raised. */
struct c_thread_job {
    PyObject *callable;
    PyObject *result;
#if PY_VERSION_HEX >= 0x030c0000
    PyObject *exc;
#else
    PyObject *exc_type, *exc_value, *exc_tb;
#endif
};

/* A thread Python never started: its thread state comes from
 * PyGILState_Ensure, as in a C library's callback thread. */
static void *cutrace_nogil_thread_main(void *arg)
{
    struct c_thread_job *job = arg;
    PyGILState_STATE g = PyGILState_Ensure();
    job->result = PyObject_CallObject(job->callable, NULL);
    if (!job->result) {
#if PY_VERSION_HEX >= 0x030c0000
        job->exc = PyErr_GetRaisedException();
#else
        PyErr_Fetch(&job->exc_type, &job->exc_value, &job->exc_tb);
#endif
    }
    PyGILState_Release(g);
    return NULL;
}

static PyObject *nogil_in_c_thread(PyObject *self, PyObject *callable)
{
    (void)self;
    if (!PyCallable_Check(callable)) {
        PyErr_SetString(PyExc_TypeError, "in_c_thread() needs a callable");
        return NULL;
    }
    struct c_thread_job job = {.callable = callable};
    pthread_t t;
    int rc;
    Py_INCREF(callable);
    /* The GIL is released for the whole life of the thread, which needs it. */
    PyThreadState *save = PyEval_SaveThread();
    rc = pthread_create(&t, NULL, cutrace_nogil_thread_main, &job);
    if (rc == 0)
        pthread_join(t, NULL);
    PyEval_RestoreThread(save);
    Py_DECREF(callable);
    if (rc != 0)
        return PyErr_Format(PyExc_OSError, "pthread_create failed: %d", rc);
    if (!job.result) {
#if PY_VERSION_HEX >= 0x030c0000
        PyErr_SetRaisedException(job.exc);
#else
        PyErr_Restore(job.exc_type, job.exc_value, job.exc_tb);
#endif
        return NULL;
    }
    return job.result;
}

static PyObject *nogil_in_subinterpreter(PyObject *self, PyObject *arg)
{
    (void)self;
    const char *code = PyUnicode_AsUTF8(arg);
    if (!code)
        return NULL;
    PyThreadState *main_state = PyThreadState_Get();
    PyThreadState *sub = Py_NewInterpreter();
    if (!sub) {
        PyThreadState_Swap(main_state);
        PyErr_SetString(PyExc_RuntimeError, "Py_NewInterpreter failed");
        return NULL;
    }
    int status = PyRun_SimpleString(code);
    Py_EndInterpreter(sub);
    PyThreadState_Swap(main_state);
    return PyLong_FromLong(status);
}

static PyMethodDef methods[] = {
    {"malloc", nogil_malloc, METH_O, "cudaMalloc(size) with the GIL released; the pointer"},
    {"free", nogil_free, METH_O, "cudaFree(ptr) with the GIL released"},
    {"mem_get_info", nogil_mem_get_info, METH_NOARGS,
     "cudaMemGetInfo with the GIL released: (free, total)"},
    {"in_c_thread", nogil_in_c_thread, METH_O,
     "callable() on a C thread (PyGILState_Ensure), joined without the GIL"},
    {"in_subinterpreter", nogil_in_subinterpreter, METH_O,
     "PyRun_SimpleString(code) in a new interpreter; its status"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "cutrace_nogil",
    "CUDA calls with the GIL released (cutrace tests)",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit_cutrace_nogil(void)
{
    return PyModule_Create(&module);
}
