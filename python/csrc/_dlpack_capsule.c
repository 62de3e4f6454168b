/*
 * tessera._dlpack_capsule: the PyCapsule of a DLPack managed tensor that
 * tessera exported (tsr_tensor_to_dlpack or _legacy), for
 * tessera.Tensor.__dlpack__. In C for its destructor: when no consumer
 * took the tensor (the capsule kept its name), the destructor calls the
 * managed tensor's deleter, keeping the exception being raised, if any
 * (a consumer refusing the tensor drops the capsule while raising; a
 * destructor in Python would lose that exception). Limited API: one
 * build for every CPython >= 3.10. It calls no tessera function.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "tessera.h"

static const char VERSIONED[] = "dltensor_versioned";
static const char LEGACY[] = "dltensor";

static void capsule_destructor(PyObject *capsule) {
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    if (PyCapsule_IsValid(capsule, VERSIONED)) {
        DLManagedTensorVersioned *m = PyCapsule_GetPointer(capsule, VERSIONED);
        if (m != NULL && m->deleter != NULL) {
            m->deleter(m);
        }
    } else if (PyCapsule_IsValid(capsule, LEGACY)) {
        DLManagedTensor *m = PyCapsule_GetPointer(capsule, LEGACY);
        if (m != NULL && m->deleter != NULL) {
            m->deleter(m);
        }
    }
    PyErr_Restore(type, value, traceback);
}

/* capsule(address, versioned) -> a "dltensor_versioned" (versioned) or
 * "dltensor" capsule owning the managed tensor at `address`. */
static PyObject *mod_capsule(PyObject *self, PyObject *args) {
    unsigned long long address = 0;
    int versioned = 0;
    if (!PyArg_ParseTuple(args, "Kp:capsule", &address, &versioned)) {
        return NULL;
    }
    if (address == 0) {
        PyErr_SetString(PyExc_ValueError, "tessera._dlpack_capsule.capsule: address 0");
        return NULL;
    }
    return PyCapsule_New((void *)(uintptr_t)address, versioned ? VERSIONED : LEGACY,
                         capsule_destructor);
}

static PyMethodDef methods[] = {
    {"capsule", mod_capsule, METH_VARARGS,
     "capsule(address, versioned) -> the DLPack capsule owning a managed tensor"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "tessera._dlpack_capsule", NULL, -1, methods,
};

PyMODINIT_FUNC PyInit__dlpack_capsule(void) { return PyModule_Create(&moduledef); }
