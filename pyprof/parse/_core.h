/* What the files of pyprof.parse._core share: the module's error, a growing byte buffer, the bounded dict. */
#ifndef PYPROF_PARSE_CORE_H
#define PYPROF_PARSE_CORE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

extern PyObject *CoreError;

/* A growing byte buffer for one line or one part of it. */
typedef struct {
    char *data;
    Py_ssize_t size, cap;
} Buffer;

int buf_grow(Buffer *b, Py_ssize_t more);
int buf_put(Buffer *b, const char *s, Py_ssize_t n);
int buf_str(Buffer *b, PyObject *s);
int buf_ll(Buffer *b, long long v);

/* common.BoundedDict.add on a dict: past max_entries, the oldest half goes at once */
int bounded_add(PyObject *d, PyObject *key, PyObject *value, Py_ssize_t max_entries);

/* _attribute.c: adds the Attributor type to the module */
int core_add_attributor(PyObject *module);

#endif
