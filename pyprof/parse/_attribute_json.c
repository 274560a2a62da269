/* The Attributor's JSON: a forward link (encode.forward_link), an op marker's lean JSON (Marker.lean_json) and the
 * runs of an Attribution's fields on a record's line (encode.attribution, record.LINE_RUNS), byte for byte as the
 * Python functions write them. */
#include "_attribute.h"

#include <string.h>

/* Marker.lean_json(call): the op marker's JSON without its arguments, with its call id last; the common case (the
 * common part encoded already, an int call, a payload without a "call" of its own) here, the rest by the method */
PyObject *lean_json(Attributor *self, PyObject *m, PyObject *call) {
    PyObject *lean = M(self, m, M_LEAN_JSON), *data = M(self, m, M_DATA);
    if (lean != NULL && PyUnicode_CheckExact(lean) && PyUnicode_GET_LENGTH(lean) >= 2 && PyLong_CheckExact(call) &&
        data != NULL && PyDict_CheckExact(data)) {
        int own = PyDict_Contains(data, self->call_key);
        if (own < 0) return NULL;
        if (!own) {
            PyObject *head = PyUnicode_Substring(lean, 0, PyUnicode_GET_LENGTH(lean) - 1);
            if (head == NULL) return NULL;
            PyObject *out = PyUnicode_GET_LENGTH(lean) == 2 ? PyUnicode_FromFormat("{\"call\":%S}", call)
                                                           : PyUnicode_FromFormat("%U,\"call\":%S}", head, call);
            Py_DECREF(head);
            return out;
        }
    }
    return PyObject_CallMethod(m, "lean_json", "O", call);
}

/* a str's JSON as encode.string (json's encode_basestring_ascii): plain ASCII copied, anything else by Python */
static int put_string(Attributor *self, PyObject *s) {
    if (PyUnicode_CheckExact(s) && PyUnicode_IS_ASCII(s)) {
        const unsigned char *d = PyUnicode_DATA(s);
        Py_ssize_t n = PyUnicode_GET_LENGTH(s), k = 0;
        while (k < n && d[k] >= 0x20 && d[k] != '"' && d[k] != '\\' && d[k] != 0x7f) k++;
        if (k == n) return buf_put(&self->buf, "\"", 1) || buf_put(&self->buf, (const char *)d, n) ||
                           buf_put(&self->buf, "\"", 1) ? -1 : 0;
    }
    PyObject *e = PyObject_CallOneArg(self->string_json, s);
    if (e == NULL) return -1;
    int rc = buf_str(&self->buf, e);
    Py_DECREF(e);
    return rc;
}

static int put_int(Attributor *self, PyObject *v) {
    if (PyLong_CheckExact(v)) {
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (!overflow && !(x == -1 && PyErr_Occurred())) return buf_ll(&self->buf, x);
        PyErr_Clear();
    }
    PyObject *text = PyObject_Str(v);
    if (text == NULL) return -1;
    int rc = buf_str(&self->buf, text);
    Py_DECREF(text);
    return rc;
}

/* encode.forward_link: the JSON of a forward op's link, from its Attribution, with the node's seq */
PyObject *link_json(Attributor *self, PyObject *f, PyObject *seq) {
    PyObject *mods = A(self, f, A_MOD), *ops = A(self, f, A_OP), *callsite = A(self, f, A_CALLSITE);
    PyObject *layer = A(self, f, A_LAYER);
    Buffer *b = &self->buf;
    b->size = 0;
    if (buf_put(b, "{\"mod\":", 7) < 0 ||
        put_string(self, PyList_GET_SIZE(mods) ? PyList_GET_ITEM(mods, 0) : self->no_text) < 0 ||
        buf_put(b, ",\"op\":", 6) < 0 ||
        put_string(self, PyList_GET_SIZE(ops) ? PyList_GET_ITEM(ops, 0) : self->no_text) < 0 ||
        buf_put(b, ",\"args\":", 8) < 0 || buf_str(b, A(self, f, A_ARGS)) < 0 ||
        buf_put(b, ",\"callsite\":", 12) < 0 ||
        (callsite == Py_None ? buf_put(b, "null", 4) : put_string(self, callsite)) < 0 ||
        buf_put(b, ",\"layer\":[", 10) < 0)
        return NULL;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(layer); k++)
        if ((k && buf_put(b, ",", 1) < 0) || put_string(self, PyList_GET_ITEM(layer, k)) < 0) return NULL;
    if (buf_put(b, "],\"seq\":", 8) < 0 || (seq == Py_None ? buf_put(b, "null", 4) : put_int(self, seq)) < 0 ||
        buf_put(b, "}", 1) < 0)
        return NULL;
    return PyUnicode_DecodeUTF8(b->data, b->size, "strict");
}

/* one field's JSON (encode.ENCODERS[field.json]) into the buffer */
static int put_field(Attributor *self, FieldSpec *f, PyObject *v) {
    Buffer *b = &self->buf;
    switch (f->encoder) {
    case E_STRINGS:
    case E_JSON_ITEMS:
    case E_INTS:
        if (PyList_CheckExact(v)) {
            Py_ssize_t n = PyList_GET_SIZE(v);
            if (buf_put(b, "[", 1) < 0) return -1;
            for (Py_ssize_t k = 0; k < n; k++) {
                PyObject *x = PyList_GET_ITEM(v, k);
                if (k && buf_put(b, ",", 1) < 0) return -1;
                int rc = f->encoder == E_STRINGS ? put_string(self, x)
                         : f->encoder == E_INTS  ? (x == Py_None ? buf_put(b, "null", 4) : put_int(self, x))
                                                 : buf_str(b, x);
                if (rc < 0) return -1;
            }
            return buf_put(b, "]", 1);
        }
        break;
    case E_STR:
        if (PyUnicode_Check(v)) return put_string(self, v);
        break;
    case E_STR_OPT:
        if (v == Py_None) return buf_put(b, "null", 4);
        if (PyUnicode_Check(v)) return put_string(self, v);
        break;
    case E_INT_OPT:
        if (v == Py_None) return buf_put(b, "null", 4);
        if (PyLong_CheckExact(v)) return put_int(self, v);
        break;
    case E_BOOL: {
        int t = PyObject_IsTrue(v);
        return t < 0 ? -1 : t ? buf_put(b, "true", 4) : buf_put(b, "false", 5);
    }
    case E_JSON:
        if (v == Py_None) return buf_put(b, "null", 4);
        if (PyUnicode_Check(v)) return buf_str(b, v);
        break;
    case E_NESTED:
        if (v == Py_None) return buf_put(b, "null", 4);
        if (PyList_CheckExact(v) && PyList_GET_SIZE(v) == 0) return buf_put(b, "[]", 2);
        break;
    }
    PyObject *text = PyObject_CallOneArg(f->fallback, v);
    if (text == NULL) return -1;
    int rc = buf_str(b, text);
    Py_DECREF(text);
    return rc;
}

/* one run of attribution fields (encode.part with first=False) */
PyObject *run_json(Attributor *self, PyObject *a, int run) {
    Buffer *b = &self->buf;
    b->size = 0;
    for (int k = 0; k < self->n_fields[run]; k++) {
        FieldSpec *f = &self->fields[run][k];
        PyObject *v = SLOT(a, f->slot);
        if (v == NULL) {
            PyErr_SetString(PyExc_AttributeError, "an Attribution field is unset");
            return NULL;
        }
        if (f->slot == self->a_off[A_SEQ_MARKER] && !self->raw_markers) v = NULL;  /* written only when asked */
        Py_ssize_t at = b->size;
        if (buf_put(b, ",", 1) < 0 || buf_str(b, f->key) < 0) return NULL;
        Py_ssize_t value_at = b->size;
        if (v == NULL ? buf_put(b, "[]", 2) : put_field(self, f, v) < 0) return NULL;
        if (!f->always) {
            Py_ssize_t n;
            const char *d = PyUnicode_AsUTF8AndSize(f->default_json, &n);
            if (d == NULL) return NULL;
            if (b->size - value_at == n && memcmp(b->data + value_at, d, (size_t)n) == 0) b->size = at;
        }
    }
    return PyUnicode_DecodeUTF8(b->data, b->size, "strict");
}
