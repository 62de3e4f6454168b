/*
 * tessera.numpy_allocator's source of Python frames for memory history: the calling
 * thread's Python stack (file, line, function), which _handler.c registers
 * with tsr_memory_set_host_frames when the module is imported.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "tessera.h"
#include "_frames.h"

/* Exported by every CPython since 3.4 but outside the limited API's
 * headers (the only such call here): whether this thread holds the GIL. */
#if defined(Py_LIMITED_API)
PyAPI_FUNC(int) PyGILState_Check(void);
#endif

/* The UTF-8 of a str (cached in it, valid while it lives), or NULL. */
static const char *utf8_or_null(PyObject *s) {
    if (s == NULL || !PyUnicode_Check(s)) {
        return NULL;
    }
    const char *u = PyUnicode_AsUTF8AndSize(s, NULL);
    if (u == NULL) {
        PyErr_Clear(); /* e.g. a lone surrogate: the name stays unknown */
    }
    return u;
}

/* A str attribute of a code object (co_filename, co_qualname) as UTF-8,
 * or NULL. The code object keeps the str (its attributes are fixed), so
 * the UTF-8 stays valid after the new reference is dropped. Attribute
 * access rather than the struct's fields: the module is built for the
 * limited API (one abi3 build for every CPython >= 3.10). */
static const char *code_str(PyCodeObject *code, const char *attr) {
    PyObject *s = PyObject_GetAttrString((PyObject *)code, attr);
    if (s == NULL) {
        PyErr_Clear();
        return NULL;
    }
    const char *u = utf8_or_null(s);
    Py_DECREF(s);
    return u;
}

/* tessera's TsrHostFramesFn: the calling thread's Python stack, innermost
 * first. Only a thread holding the GIL has one to report (NumPy may
 * allocate without it). The strings belong to the code objects of frames
 * that are running, which outlive the allocation; an exception being
 * raised or handled is kept as it was. Materializing frame objects can
 * allocate Python objects (not NumPy data), as sys._getframe() does. */
size_t tsr_numpy_python_frames(void *user, TsrHostFrame *out, size_t capacity) {
    (void)user;
    if (!Py_IsInitialized() || !PyGILState_Check()) {
        return 0;
    }
    PyThreadState *ts = PyGILState_GetThisThreadState();
    if (ts == NULL) {
        return 0;
    }
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *raised = PyErr_GetRaisedException();
#else
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
#endif
    size_t n = 0;
    PyFrameObject *f = PyThreadState_GetFrame(ts);
    while (f != NULL && n < capacity) {
        PyCodeObject *code = PyFrame_GetCode(f);
        out[n].file = code_str(code, "co_filename");
#if PY_VERSION_HEX >= 0x030B0000
        out[n].function = code_str(code, "co_qualname");
#else
        out[n].function = code_str(code, "co_name");
#endif
        out[n].line = PyFrame_GetLineNumber(f);
        Py_DECREF(code); /* the running frame keeps its code */
        n++;
        /* f_back: PyFrame_GetBack is not in the limited API. */
        PyObject *back = PyObject_GetAttrString((PyObject *)f, "f_back");
        Py_DECREF(f);
        if (back == NULL || back == Py_None) {
            PyErr_Clear();
            Py_XDECREF(back);
            back = NULL;
        }
        f = (PyFrameObject *)back;
    }
    Py_XDECREF(f);
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(raised);
#else
    PyErr_Restore(type, value, tb);
#endif
    return n;
}
