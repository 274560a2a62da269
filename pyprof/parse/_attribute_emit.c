/* The Attributor's decoding of emit_nvtx texts: markers._decode_emit_nvtx's common case, "name[, seq = N][, op_id =
 * M][, sizes = S[, input_op_ids = I]]" with a seq or an op_id, made the Marker that function makes; any other text
 * goes to markers.decode. */
#include "_attribute.h"

#include <string.h>

static int is_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

/* text[from:to].strip() (str.strip's ASCII whitespace) */
static PyObject *stripped(PyObject *text, Py_ssize_t from, Py_ssize_t to) {
    const unsigned char *d = PyUnicode_DATA(text);
    while (from < to && is_space(d[from])) from++;
    while (to > from && is_space(d[to - 1])) to--;
    return PyUnicode_Substring(text, from, to);
}

static Py_ssize_t find_in(const char *s, Py_ssize_t from, Py_ssize_t to, const char *needle, Py_ssize_t k) {
    for (Py_ssize_t i = from; i + k <= to; i++)
        if (s[i] == needle[0] && memcmp(s + i, needle, (size_t)k) == 0) return i;
    return -1;
}

/* ", KEY = <digits>" at *at: the number (at most 18 digits), *at moved past it; -1 when not there */
static long long number_field(const char *s, Py_ssize_t n, Py_ssize_t *at, const char *key, Py_ssize_t k) {
    if (*at + k > n || memcmp(s + *at, key, (size_t)k) != 0) return -1;
    Py_ssize_t i = *at + k, from = i;
    long long v = 0;
    while (i < n && s[i] >= '0' && s[i] <= '9' && i - from < 18) v = v * 10 + (s[i++] - '0');
    if (i == from || (i < n && s[i] >= '0' && s[i] <= '9')) return -1;
    *at = i;
    return v;
}

#define KEY(s) s, (Py_ssize_t)(sizeof(s) - 1)

/* A Marker of the common emit_nvtx text, "name[, seq = N][, op_id = M][, sizes = S[, input_op_ids = I]]" with a seq
 * or an op_id, built as markers._decode_emit_nvtx builds it; Py_None (a new reference) where that function's common
 * case does not apply, and markers.decode is asked. */
static PyObject *emit_marker(Attributor *self, PyObject *text) {
    if (!PyUnicode_IS_ASCII(text)) Py_RETURN_NONE;
    const char *s = (const char *)PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    if (n == 0 || s[0] == '{' || memchr(s, '\n', (size_t)n) != NULL || memchr(s, '=', (size_t)n) == NULL ||
        (n >= 6 && memcmp(s, "layer:", 6) == 0))
        Py_RETURN_NONE;
    const char *comma = memchr(s, ',', (size_t)n);
    Py_ssize_t at = comma ? comma - s : n, name_end = at;
    long long seq = number_field(s, n, &at, KEY(", seq = "));
    long long op_id = number_field(s, n, &at, KEY(", op_id = "));
    Py_ssize_t sizes_from = -1, sizes_to = -1, inputs_from = -1;
    if (at + 10 <= n && memcmp(s + at, ", sizes = ", 10) == 0) {
        sizes_from = at + 10;
        Py_ssize_t in = find_in(s, sizes_from, n, KEY(", input_op_ids = "));
        sizes_to = in < 0 ? n : in;
        inputs_from = in < 0 ? -1 : in + 17;
        at = n;
    } else if (at + 17 <= n && memcmp(s + at, ", input_op_ids = ", 17) == 0) {
        at = n;  /* inputs without sizes: matched, and not kept (the Python case keeps inputs only after sizes) */
    }
    if (at != n || (seq < 0 && op_id < 0)) Py_RETURN_NONE;
    if (sizes_from >= 0 && (find_in(s, sizes_from, sizes_to, KEY(" = ")) >= 0 ||
                            (inputs_from >= 0 && find_in(s, inputs_from, n, KEY(" = ")) >= 0)))
        Py_RETURN_NONE;
    PyTypeObject *type = (PyTypeObject *)self->marker_type;
    PyObject *m = type->tp_alloc(type, 0);
    if (m == NULL) return NULL;
    for (Py_ssize_t k = 0; k < self->n_marker_slots; k++) SLOT(m, self->marker_slots[k]) = Py_NewRef(Py_None);
    set_slot(m, self->m_off[M_KIND], self->kinds[K_SEQ]);
    set_slot(m, self->m_off[M_BACKWARD], Py_False);
    set_slot(m, self->m_off[M_CONTAINER], Py_False);
    PyObject *name = PyUnicode_Substring(text, 0, name_end), *v = NULL, *parts = NULL;
    if (name == NULL) goto fail;
    if (seq >= 0) {
        if ((v = PyLong_FromLongLong(seq)) == NULL) goto fail;
        set_slot(m, self->m_off[M_SEQ], v);
        Py_CLEAR(v);
    }
    if (op_id >= 0) {
        if ((v = PyLong_FromLongLong(op_id)) == NULL) goto fail;
        set_slot(m, self->m_off[M_OP_ID], v);
        Py_CLEAR(v);
    }
    if (sizes_from >= 0) {
        if ((v = stripped(text, sizes_from, sizes_to)) == NULL) goto fail;
        set_slot(m, self->m_off[M_RAW_SIZES], v);
        Py_CLEAR(v);
        if (inputs_from >= 0) {
            if ((v = stripped(text, inputs_from, n)) == NULL) goto fail;
            set_slot(m, self->raw_inputs_off, v);
            Py_CLEAR(v);
        }
    }
    /* markers._name_op: the name's parts, split once per distinct name */
    parts = PyDict_GetItemWithError(self->names, name);
    if (parts != NULL) {
        Py_INCREF(parts);
    } else {
        if (PyErr_Occurred() || (parts = PyObject_CallOneArg(self->split_name, name)) == NULL) goto fail;
        if (bounded_add(self->names, name, parts, self->names_max) < 0) goto fail;
    }
    if (!PyTuple_Check(parts) || PyTuple_GET_SIZE(parts) != 5) {
        PyErr_SetString(PyExc_TypeError, "a name's parts are (name, mod, op, backward, container)");
        goto fail;
    }
    static const int order[] = {M_NAME, M_MOD, M_OP, M_BACKWARD, M_CONTAINER};
    for (int k = 0; k < 5; k++) set_slot(m, self->m_off[order[k]], PyTuple_GET_ITEM(parts, k));
    /* markers._unnumbered */
    if (seq < 0) {
        int has_mod = PyObject_IsTrue(M(self, m, M_MOD)), backward = PyObject_IsTrue(M(self, m, M_BACKWARD));
        if (has_mod < 0 || backward < 0) goto fail;
        if (!has_mod && !backward) set_slot(m, self->m_off[M_CONTAINER], Py_True);
    }
    Py_DECREF(parts);
    Py_DECREF(name);
    return m;
fail:
    Py_XDECREF(parts);
    Py_XDECREF(name);
    Py_DECREF(m);
    return NULL;
}

#define PLAIN_TEXTS 4096  /* texts remembered as plain (decode_text): steps' ranges, a library's few names */

/* markers.decode(text), its emit_nvtx common case, its cached JSON markers and the texts it found plain in C */
PyObject *decode_text(Attributor *self, PyObject *text) {
    if (PyUnicode_Check(text) && PyUnicode_GET_LENGTH(text) > 0 && PyUnicode_READ_CHAR(text, 0) == '{') {
        /* a JSON marker: markers.decode's cache by text, which holds it after its first decoding */
        PyObject *known = PyDict_GetItemWithError(self->decoded, text);
        if (known != NULL) return Py_NewRef(known);
        if (PyErr_Occurred()) return NULL;
        return PyObject_CallOneArg(self->decode, text);
    }
    PyObject *m = emit_marker(self, text);
    if (m != Py_None) return m;
    Py_DECREF(m);
    /* A plain range (a step's "ProfilerStep#12", a library's "cub::DeviceRadixSort") has no marker: a forward op's
     * link decodes its stack's ranges again, and the step's range is in every stack of the step (10k calls into
     * Python on a 50k-kernel pyprof.init() export). None is no object a caller changes: it is remembered. */
    int known = PyDict_Contains(self->plain, text);
    if (known != 0) return known < 0 ? NULL : Py_NewRef(Py_None);
    m = PyObject_CallOneArg(self->decode, text);
    if (m == Py_None && bounded_add(self->plain, text, Py_None, PLAIN_TEXTS) < 0) Py_CLEAR(m);
    return m;
}
