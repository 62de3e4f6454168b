/*
 * tessera_numpy's source of Python frames for memory history: the calling
 * thread's Python stack (file, line, function), which _handler.c registers
 * with tsr_memory_set_host_frames when the module is imported.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>

#include "tessera.h"
#include "_frames.h"

/* The UTF-8 of a str (cached in it, valid while it lives), or NULL. */
static const char *utf8_or_null(PyObject *s) {
    if (s == NULL || !PyUnicode_Check(s)) {
        return NULL;
    }
    const char *u = PyUnicode_AsUTF8(s);
    if (u == NULL) {
        PyErr_Clear(); /* e.g. a lone surrogate: the name stays unknown */
    }
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
        out[n].file = utf8_or_null(code->co_filename);
#if PY_VERSION_HEX >= 0x030B0000
        out[n].function = utf8_or_null(code->co_qualname);
#else
        out[n].function = utf8_or_null(code->co_name);
#endif
        out[n].line = PyFrame_GetLineNumber(f);
        Py_DECREF(code); /* the running frame keeps its code */
        n++;
        PyFrameObject *back = PyFrame_GetBack(f);
        Py_DECREF(f);
        f = back;
    }
    Py_XDECREF(f);
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(raised);
#else
    PyErr_Restore(type, value, tb);
#endif
    return n;
}
