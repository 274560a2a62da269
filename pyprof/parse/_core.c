/* pyprof.parse._core: the per-row work of the SQLite readers in C (docs/parse.md, "The compiled core").
 *
 * RangeFeed reads an export's push/pop ranges through SQLite's C API, builds the row tuples the sweep keeps
 * (activities.RANGE_ROW) and pushes each on its thread's open-range stack: the same work as
 * correlate.Correlator._push, on the Correlator's own dicts and lists, which the attributions (_attribute.c, or
 * the Python code) then read. What is rare or odd (a text that is not ASCII, a consumer op naming waiting
 * producers) goes back to the Python functions that define it. LineWriter writes the record lines, joined to the
 * sweep's infos (_sweep.c).
 *
 * Every SQLite call's result is checked; an error is raised as _core.Error with SQLite's own message.
 */
#include "_core.h"
#include <limits.h>
#include <string.h>

PyObject *CoreError;
int core_read_ahead = AHEAD_OFF;
/* texts compared with a range's when it is not plain ASCII (made once, at import) */
static PyObject *INPUT_KEY_STR, *SEQ_KEY_STR, *ENGINE_PREFIX_STR, *ONE;

/* ---- SQLite ---------------------------------------------------------------------------------------------- */

/* A column's value as Python's sqlite3 module gives it; text that is not UTF-8 is decoded with replacement
 * characters and *lossy set (sqlrows.Rows.stream reads such a query again leniently, with the same result). */
static PyObject *column_value(Ahead *rows, int i, int *lossy) {
    switch (ahead_type(rows, i)) {
    case SQLITE_INTEGER:
        return PyLong_FromLongLong(ahead_int64(rows, i));
    case SQLITE_FLOAT:
        return PyFloat_FromDouble(ahead_double(rows, i));
    case SQLITE_TEXT: {
        Py_ssize_t n_bytes;
        const char *text = ahead_bytes(rows, i, &n_bytes);
        if (text == NULL) return PyErr_NoMemory();
        PyObject *s = PyUnicode_DecodeUTF8(text, n_bytes, NULL);
        if (s == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear();
            *lossy = 1;
            s = PyUnicode_DecodeUTF8(text, n_bytes, "replace");
        }
        return s;
    }
    case SQLITE_BLOB: {
        Py_ssize_t n_bytes;
        const char *blob = ahead_bytes(rows, i, &n_bytes);
        return PyBytes_FromStringAndSize(blob, n_bytes);
    }
    default:
        Py_RETURN_NONE;
    }
}

/* ---- text tests of correlate._push, on ASCII texts (others go to the Python functions) ------------------- */

static const char ENGINE_PREFIX[] = "autograd::engine::evaluate_function: ";
#define ENGINE_PREFIX_LEN (sizeof(ENGINE_PREFIX) - 1)
static const char SEQ_KEY[] = ", seq = ";
#define SEQ_KEY_LEN (sizeof(SEQ_KEY) - 1)

static Py_ssize_t find_bytes(const char *s, Py_ssize_t n, Py_ssize_t from, const char *needle) {
    Py_ssize_t k = (Py_ssize_t)strlen(needle);
    for (Py_ssize_t i = from; i + k <= n; i++)
        if (s[i] == needle[0] && memcmp(s + i, needle, (size_t)k) == 0) return i;
    return -1;
}

static int starts_with(const char *s, Py_ssize_t n, const char *prefix, Py_ssize_t k) {
    return n >= k && memcmp(s, prefix, (size_t)k) == 0;
}

/* markers.is_backward_text(text, end) for an ASCII text without a newline (where the regex's "$" and "\d" mean
 * what they mean in C). */
static int is_backward_ascii(const char *s, Py_ssize_t n, Py_ssize_t end) {
    if (end < 0) {
        end = find_bytes(s, n, 0, ", ");
        if (end < 0) end = n;
    }
    int has_backward = find_bytes(s, end, 0, "Backward") >= 0;
    int has_autograd = find_bytes(s, end, 0, "autograd::") >= 0;
    int has_cpp_node = find_bytes(s, end, 0, "CppNode<") >= 0;
    if (!has_backward && !has_autograd && !has_cpp_node) return 0;
    if (starts_with(s, n, ENGINE_PREFIX, ENGINE_PREFIX_LEN)) return 1;
    /* _BACKWARD_NAME within text[:end]: "Backward\d*$", "^torch::autograd::", "CppNode<" */
    if (has_cpp_node || starts_with(s, end, "torch::autograd::", 17)) return 1;
    Py_ssize_t i = end;
    while (i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9') i--;
    return i >= 8 && memcmp(s + i - 8, "Backward", 8) == 0;
}

static int plain_ascii(PyObject *text) {
    if (!PyUnicode_IS_ASCII(text)) return 0;
    return memchr(PyUnicode_DATA(text), '\n', (size_t)PyUnicode_GET_LENGTH(text)) == NULL;
}

/* markers.quick_seq(text, backward) for a plain ASCII text: a new reference to the int, Py_None, or NULL on error. */
static PyObject *quick_seq_ascii(PyObject *text, int backward) {
    const char *s = (const char *)PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    Py_ssize_t i = find_bytes(s, n, 0, SEQ_KEY);
    if (i < 0 || (!backward && is_backward_ascii(s, n, i))) Py_RETURN_NONE;
    Py_ssize_t from = i + (Py_ssize_t)SEQ_KEY_LEN;
    Py_ssize_t j = find_bytes(s, n, from, ",");
    if (j < 0) j = n;
    Py_ssize_t k = from;
    long long v = 0;
    while (k < j && k - from < 18 && s[k] >= '0' && s[k] <= '9') v = v * 10 + (s[k++] - '0');
    if (k == j && k > from) return PyLong_FromLongLong(v);
    /* anything but plain digits (spaces, a sign, underscores, a long number): int() decides, as quick_seq does */
    PyObject *part = PyUnicode_Substring(text, from, j);
    if (part == NULL) return NULL;
    PyObject *num = PyLong_FromUnicodeObject(part, 10);
    Py_DECREF(part);
    if (num == NULL && PyErr_ExceptionMatches(PyExc_ValueError)) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    return num;
}

/* ---- RangeFeed ------------------------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    Ahead *rows;          /* the ranges' query, or NULL after its last row */
    int opened;
    PyObject *next_row;   /* the row read and not pushed yet, or NULL at the end */
    int lossy;            /* some text was not UTF-8 */
    /* the Correlator's state (correlate.Correlator.__init__) */
    PyObject *stacks, *state, *fwd, *backward_thread, *wanted, *oddities;
    PyObject *process_of, *take_output_shapes, *name_engine_range, *quick_seq, *is_backward_text;
    PyObject *deep_ranges;  /* the oddity's text */
    PyObject *reader_oddities, *not_utf8;  /* the reader's count of queries read leniently, and its reason */
    Py_ssize_t max_depth;
    PyObject *texts;  /* JSON marker text -> the one string rows share (share_text) */
    Py_ssize_t fwd_max;  /* the forward-op memory's bound (BoundedDict.max_entries) */
    /* for naming engine ranges in C (set by engine_types; else the Correlator's method does it) */
    PyObject *marker_type, *engine_seq_type, *undecoded;
    Py_ssize_t marker_seq_off;
} RangeFeed;

#define SHARED_TEXTS 8192

static int count_oddity(PyObject *oddities, PyObject *reason);

/* A JSON marker text (pyprof's, a registered string) repeats every step, and the forward-op memory keeps the rows of
 * tens of thousands of stacks: the rows share one string per distinct text instead of one each. */
static int share_text(RangeFeed *self, PyObject *row) {
    PyObject *text = PyTuple_GET_ITEM(row, 3);
    if (!PyUnicode_Check(text) || PyUnicode_GET_LENGTH(text) == 0 || PyUnicode_READ_CHAR(text, 0) != '{') return 0;
    PyObject *known = PyDict_GetItemWithError(self->texts, text);
    if (known == NULL) return PyErr_Occurred() ? -1 : bounded_add(self->texts, text, text, SHARED_TEXTS);
    PyTuple_SET_ITEM(row, 3, Py_NewRef(known));
    Py_DECREF(text);
    return 0;
}

static int read_row(RangeFeed *self) {
    Py_CLEAR(self->next_row);
    if (self->rows == NULL) return 0;
    int rc = ahead_step(self->rows);
    if (rc <= 0) {
        ahead_close(self->rows);
        self->rows = NULL;
        return rc;
    }
    int n = ahead_columns(self->rows);
    PyObject *row = PyTuple_New(n);
    if (row == NULL) return -1;
    int was_lossy = self->lossy;
    for (int i = 0; i < n; i++) {
        PyObject *v = column_value(self->rows, i, &self->lossy);
        if (v == NULL) {
            Py_DECREF(row);
            return -1;
        }
        PyTuple_SET_ITEM(row, i, v);
    }
    self->next_row = row;
    if (self->lossy && !was_lossy && count_oddity(self->reader_oddities, self->not_utf8) < 0) return -1;
    return n > 3 ? share_text(self, row) : 0;
}

static int row_int(PyObject *row, Py_ssize_t i, long long *out) {
    *out = PyLong_AsLongLong(PyTuple_GET_ITEM(row, i));
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* state.pop(id(row), None) */
static int forget(RangeFeed *self, PyObject *row) {
    if (PyDict_GET_SIZE(self->state) == 0) return 0;
    PyObject *key = PyLong_FromVoidPtr(row);
    if (key == NULL) return -1;
    int found = PyDict_Contains(self->state, key);
    int rc = found > 0 ? PyDict_DelItem(self->state, key) : found;
    Py_DECREF(key);
    return rc;
}

/* oddities[reason] = oddities.get(reason, 0) + 1 */
static int count_oddity(PyObject *oddities, PyObject *reason) {
    PyObject *n = PyDict_GetItemWithError(oddities, reason);
    if (n == NULL && PyErr_Occurred()) return -1;
    PyObject *more = n ? PyNumber_Add(n, ONE) : Py_NewRef(ONE);
    if (more == NULL) return -1;
    int rc = PyDict_SetItem(oddities, reason, more);
    Py_DECREF(more);
    return rc;
}

/* correlate.Correlator._name_engine_range in C for plain ASCII texts (the Python method for others): the engine's
 * ``evaluate_function: XBackward0`` range just outside a node's range takes the node's seq. */
static int name_engine_range(RangeFeed *self, PyObject *st, PyObject *row) {
    PyObject *node = PyTuple_GET_ITEM(row, 3);
    if (self->marker_type == NULL || !PyUnicode_Check(node) || !plain_ascii(node)) goto python;
    Py_ssize_t i = PySequence_Index(st, row);
    if (i < 0) return -1;
    if (i == 0) return 0;
    PyObject *parent = PyList_GET_ITEM(st, i - 1), *text = PyTuple_GET_ITEM(parent, 3);
    if (!PyUnicode_Check(text) || PyUnicode_GET_LENGTH(text) == 0) return 0;
    if (!plain_ascii(text)) goto python;
    const char *t = PyUnicode_DATA(text), *s = PyUnicode_DATA(node);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), m = PyUnicode_GET_LENGTH(node);
    if (!starts_with(t, n, ENGINE_PREFIX, ENGINE_PREFIX_LEN)) return 0;
    Py_ssize_t cut = find_bytes(s, m, 0, ", "), name_len = cut >= 0 ? cut : m;
    Py_ssize_t after = (Py_ssize_t)ENGINE_PREFIX_LEN + name_len;
    if (n < after || memcmp(t + ENGINE_PREFIX_LEN, s, (size_t)name_len) != 0) return 0;
    if (!(n == after || (n >= after + 2 && t[after] == ',' && t[after + 1] == ' '))) return 0;
    PyObject *seq = quick_seq_ascii(node, 1);
    if (seq == NULL) return -1;
    int rc = -1;
    PyObject *key = NULL;
    if (seq == Py_None) {
        rc = 0;
        goto done;
    }
    if ((key = PyLong_FromVoidPtr(parent)) == NULL) goto done;
    PyObject *state = PyDict_GetItemWithError(self->state, key);
    if (state == NULL && (PyErr_Occurred() || (state = new_range_state(self->state, key, self->undecoded)) == NULL))
        goto done;
    if (!PyList_CheckExact(state) || PyList_GET_SIZE(state) != 3) {
        PyErr_SetString(PyExc_TypeError, "a range's state is [marker, attribution, call]");
        goto done;
    }
    PyObject *marker = PyList_GET_ITEM(state, 0);
    int is_marker = PyObject_IsInstance(marker, self->marker_type);
    if (is_marker < 0) goto done;
    if (is_marker) {
        PyObject **slot = (PyObject **)((char *)marker + self->marker_seq_off);
        Py_XSETREF(*slot, Py_NewRef(seq));
    } else {
        PyObject *later = PyObject_CallOneArg(self->engine_seq_type, seq);  /* applied when a launch decodes it */
        if (later == NULL) goto done;
        PyList_SetItem(state, 0, later);
    }
    PyList_SetItem(state, 1, Py_NewRef(Py_None));  /* a launch seen before the node's range had no seq */
    rc = 0;
done:
    Py_XDECREF(key);
    Py_DECREF(seq);
    return rc;
python: {
    PyObject *r = PyObject_CallFunctionObjArgs(self->name_engine_range, st, row, NULL);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}
}

/* The seq a forward range is remembered under (a new reference, or Py_None): correlate._push's text tests. */
static PyObject *range_seq(RangeFeed *self, PyObject *thread, PyObject *st, PyObject *row) {
    PyObject *text = PyTuple_GET_ITEM(row, 3);
    if (!PyUnicode_Check(text) || PyUnicode_GET_LENGTH(text) == 0) Py_RETURN_NONE;
    int ascii = plain_ascii(text);
    if (PyDict_GET_SIZE(self->wanted) > 0) {
        int has = ascii ? find_bytes(PyUnicode_DATA(text), PyUnicode_GET_LENGTH(text), 0, ", input_op_ids = ") >= 0
                        : PyUnicode_Find(text, INPUT_KEY_STR, 0, PY_SSIZE_T_MAX, 1) >= 0;
        if (PyErr_Occurred()) return NULL;
        if (has) {
            PyObject *r = PyObject_CallOneArg(self->take_output_shapes, row);
            if (r == NULL) return NULL;
            Py_DECREF(r);
        }
    }
    PyObject *seq;
    int backward;
    if (ascii) {
        if (find_bytes(PyUnicode_DATA(text), PyUnicode_GET_LENGTH(text), 0, SEQ_KEY) < 0) Py_RETURN_NONE;
        seq = quick_seq_ascii(text, 0);
        if (seq == NULL) return NULL;
        backward = seq == Py_None && is_backward_ascii(PyUnicode_DATA(text), PyUnicode_GET_LENGTH(text), -1);
    } else {
        Py_ssize_t at = PyUnicode_Find(text, SEQ_KEY_STR, 0, PY_SSIZE_T_MAX, 1);
        if (at == -2) return NULL;
        if (at < 0) Py_RETURN_NONE;
        seq = PyObject_CallOneArg(self->quick_seq, text);
        if (seq == NULL) return NULL;
        backward = 0;
        if (seq == Py_None) {
            PyObject *b = PyObject_CallOneArg(self->is_backward_text, text);
            if (b == NULL) {
                Py_DECREF(seq);
                return NULL;
            }
            backward = PyObject_IsTrue(b);
            Py_DECREF(b);
            if (backward < 0) {
                Py_DECREF(seq);
                return NULL;
            }
        }
    }
    if (backward) {
        /* self._backward_thread.setdefault(thread, True); self._name_engine_range(st, row) */
        if (PyDict_SetDefault(self->backward_thread, thread, Py_True) == NULL) goto fail;
        if (name_engine_range(self, st, row) < 0) goto fail;
    } else if (seq != Py_None) {
        int known = PyDict_Contains(self->backward_thread, thread);
        if (known < 0 || (!known && PyDict_SetItem(self->backward_thread, thread, Py_False) < 0)) goto fail;
    }
    return seq;
fail:
    Py_DECREF(seq);
    return NULL;
}

/* correlate._push's forward-op memory: (process, seq, on the engine's side) -> the stack down to this range. */
static int remember_forward(RangeFeed *self, PyObject *thread, PyObject *st, Py_ssize_t depth, PyObject *row,
                            PyObject *seq) {
    PyObject *process = PyObject_CallOneArg(self->process_of, thread);
    if (process == NULL) return -1;
    PyObject *side = PyDict_GetItemWithError(self->backward_thread, thread);
    if (side == NULL && PyErr_Occurred()) {
        Py_DECREF(process);
        return -1;
    }
    PyObject *key = PyTuple_Pack(3, process, seq, side == Py_True ? Py_True : Py_False);
    Py_DECREF(process);
    if (key == NULL) return -1;
    int rc = -1;
    PyObject *prev = PyDict_GetItemWithError(self->fwd, key);
    if (prev == NULL && PyErr_Occurred()) goto done;
    int replace = 0;
    if (prev != NULL && Py_IS_TYPE(prev, &PyList_Type) && PyList_GET_SIZE(prev) > 0) {
        /* kept when this range is nested in the holder (on this thread, within its span) */
        PyObject *holder = PyList_GET_ITEM(prev, PyList_GET_SIZE(prev) - 1);
        long long h_start, h_end, start, end;
        int same = PyObject_RichCompareBool(PyTuple_GET_ITEM(holder, 0), thread, Py_EQ);
        if (same < 0 || row_int(holder, 1, &h_start) || row_int(holder, 2, &h_end) || row_int(row, 1, &start) ||
            row_int(row, 2, &end))
            goto done;
        replace = !(same && h_start <= start && h_end >= end);
        if (replace && PyDict_DelItem(self->fwd, key) < 0) goto done;
    }
    if (prev == NULL || replace) {
        PyObject *snapshot = PyList_GetSlice(st, 0, depth);
        if (snapshot == NULL) goto done;
        int added = bounded_add(self->fwd, key, snapshot, self->fwd_max);
        Py_DECREF(snapshot);
        if (added < 0) goto done;
    }
    rc = 0;
done:
    Py_DECREF(key);
    return rc;
}

static int push(RangeFeed *self, PyObject *row) {
    if (PyTuple_GET_SIZE(row) < 5) {
        PyErr_SetString(PyExc_ValueError, "a range row has (thread, start, end, text, payload)");
        return -1;
    }
    PyObject *thread = PyTuple_GET_ITEM(row, 0);
    long long start, end;
    if (row_int(row, 1, &start) || row_int(row, 2, &end)) return -1;
    PyObject *st = PyDict_GetItemWithError(self->stacks, thread);
    if (st == NULL) {
        if (PyErr_Occurred()) return -1;
        st = PyList_New(0);
        if (st == NULL || PyDict_SetItem(self->stacks, thread, st) < 0) {
            Py_XDECREF(st);
            return -1;
        }
        Py_DECREF(st);  /* the dict holds it */
    }
    Py_ssize_t n = PyList_GET_SIZE(st);
    while (n > 0) {
        long long top_end;
        PyObject *top = PyList_GET_ITEM(st, n - 1);
        if (row_int(top, 2, &top_end)) return -1;
        if (top_end > start) break;
        Py_INCREF(top);
        int rc = PyList_SetSlice(st, n - 1, n, NULL);
        if (rc == 0) rc = forget(self, top);
        Py_DECREF(top);
        if (rc < 0) return -1;
        n--;
    }
    if (n >= self->max_depth) return count_oddity(self->oddities, self->deep_ranges);
    Py_ssize_t depth;
    long long top_start = 0, top_end = 0;
    if (n > 0 && (row_int(PyList_GET_ITEM(st, n - 1), 1, &top_start) ||
                  row_int(PyList_GET_ITEM(st, n - 1), 2, &top_end)))
        return -1;
    if (n > 0 && top_start == start && top_end < end) {
        /* equal starts: the later end encloses (correlate._push's bisection) */
        Py_ssize_t lo = 0, hi = n - 1;
        while (lo < hi) {
            Py_ssize_t mid = (lo + hi) / 2;
            long long m_start, m_end;
            if (row_int(PyList_GET_ITEM(st, mid), 1, &m_start) || row_int(PyList_GET_ITEM(st, mid), 2, &m_end))
                return -1;
            if (m_start == start && m_end < end)
                hi = mid;
            else
                lo = mid + 1;
        }
        if (PyList_Insert(st, lo, row) < 0) return -1;
        depth = lo + 1;
    } else {
        if (PyList_Append(st, row) < 0) return -1;
        depth = n + 1;
    }
    PyObject *seq = range_seq(self, thread, st, row);
    if (seq == NULL) return -1;
    if (seq != Py_None && depth > 1) {
        PyObject *parent = PyTuple_GET_ITEM(PyList_GET_ITEM(st, depth - 2), 3);
        if (PyUnicode_Check(parent) && PyUnicode_GET_LENGTH(parent) > 0) {
            Py_ssize_t engine = PyUnicode_Tailmatch(parent, ENGINE_PREFIX_STR, 0, PY_SSIZE_T_MAX, -1);
            if (engine < 0) {
                Py_DECREF(seq);
                return -1;
            }
            if (engine) {
                Py_DECREF(seq);
                seq = Py_NewRef(Py_None);
            }
        }
    }
    int rc = seq == Py_None ? 0 : remember_forward(self, thread, st, depth, row, seq);
    Py_DECREF(seq);
    return rc;
}

int feed_push_until(PyObject *feed, long long until) {
    RangeFeed *self = (RangeFeed *)feed;
    while (self->next_row != NULL) {
        long long start;
        if (row_int(self->next_row, 1, &start)) return -1;
        if (start > until) break;
        PyObject *row = Py_NewRef(self->next_row);
        int rc = push(self, row);
        Py_DECREF(row);
        if (rc < 0 || read_row(self) < 0) return -1;
    }
    return 0;
}

int feed_push_one(PyObject *feed) {
    RangeFeed *self = (RangeFeed *)feed;
    if (self->next_row == NULL) return 0;
    PyObject *row = Py_NewRef(self->next_row);
    int rc = push(self, row);
    Py_DECREF(row);
    return rc < 0 ? -1 : read_row(self);
}

int feed_next_start(PyObject *feed, long long *start) {
    RangeFeed *self = (RangeFeed *)feed;
    if (self->next_row == NULL) return 0;
    return row_int(self->next_row, 1, start) < 0 ? -1 : 1;
}

static PyObject *RangeFeed_push_until(RangeFeed *self, PyObject *arg) {
    long long until = PyLong_AsLongLong(arg);
    if (until == -1 && PyErr_Occurred()) return NULL;
    if (feed_push_until((PyObject *)self, until) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *RangeFeed_push_one(RangeFeed *self, PyObject *Py_UNUSED(ignored)) {
    if (feed_push_one((PyObject *)self) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *RangeFeed_next_start(RangeFeed *self, PyObject *Py_UNUSED(ignored)) {
    if (self->next_row == NULL) Py_RETURN_NONE;
    return Py_NewRef(PyTuple_GET_ITEM(self->next_row, 1));
}

static void close_db(RangeFeed *self) {
    ahead_close(self->rows);
    self->rows = NULL;
}

void feed_close(PyObject *feed) {
    close_db((RangeFeed *)feed);
    Py_CLEAR(((RangeFeed *)feed)->next_row);
}

static PyObject *RangeFeed_close(RangeFeed *self, PyObject *Py_UNUSED(ignored)) {
    feed_close((PyObject *)self);
    Py_RETURN_NONE;
}

static int RangeFeed_traverse(RangeFeed *self, visitproc visit, void *arg) {
    Py_VISIT(self->next_row);
    Py_VISIT(self->stacks);
    Py_VISIT(self->state);
    Py_VISIT(self->fwd);
    Py_VISIT(self->marker_type);
    Py_VISIT(self->engine_seq_type);
    Py_VISIT(self->undecoded);
    Py_VISIT(self->backward_thread);
    Py_VISIT(self->wanted);
    Py_VISIT(self->oddities);
    Py_VISIT(self->process_of);
    Py_VISIT(self->take_output_shapes);
    Py_VISIT(self->name_engine_range);
    Py_VISIT(self->quick_seq);
    Py_VISIT(self->is_backward_text);
    Py_VISIT(self->deep_ranges);
    Py_VISIT(self->reader_oddities);
    Py_VISIT(self->not_utf8);
    Py_VISIT(self->texts);
    return 0;
}

static int RangeFeed_clear(RangeFeed *self) {
    Py_CLEAR(self->next_row);
    Py_CLEAR(self->stacks);
    Py_CLEAR(self->state);
    Py_CLEAR(self->fwd);
    Py_CLEAR(self->marker_type);
    Py_CLEAR(self->engine_seq_type);
    Py_CLEAR(self->undecoded);
    Py_CLEAR(self->backward_thread);
    Py_CLEAR(self->wanted);
    Py_CLEAR(self->oddities);
    Py_CLEAR(self->process_of);
    Py_CLEAR(self->take_output_shapes);
    Py_CLEAR(self->name_engine_range);
    Py_CLEAR(self->quick_seq);
    Py_CLEAR(self->is_backward_text);
    Py_CLEAR(self->deep_ranges);
    Py_CLEAR(self->reader_oddities);
    Py_CLEAR(self->not_utf8);
    Py_CLEAR(self->texts);
    return 0;
}

static void RangeFeed_dealloc(RangeFeed *self) {
    PyObject_GC_UnTrack(self);
    close_db(self);
    RangeFeed_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* RangeFeed(path, sql, stacks, state, fwd, backward_thread, wanted, oddities, process_of, take_output_shapes,
 *           name_engine_range, quick_seq, is_backward_text, deep_ranges, max_depth, reader_oddities, not_utf8) */
static int RangeFeed_init(RangeFeed *self, PyObject *args, PyObject *kwds) {
    const char *path, *sql;
    PyObject *o[14];
    Py_ssize_t max_depth;
    if (!PyArg_ParseTuple(args, "ssO!O!OO!O!O!OOOOOUnO!U", &path, &sql, &PyDict_Type, &o[0], &PyDict_Type, &o[1],
                          &o[2], &PyDict_Type, &o[3], &PyDict_Type, &o[4], &PyDict_Type, &o[5], &o[6], &o[7], &o[8],
                          &o[9], &o[10], &o[11], &max_depth, &PyDict_Type, &o[12], &o[13]))
        return -1;
    if (self->opened) {
        PyErr_SetString(PyExc_RuntimeError, "RangeFeed initialised twice");
        return -1;
    }
    PyObject **fields[] = {&self->stacks, &self->state, &self->fwd, &self->backward_thread, &self->wanted,
                           &self->oddities, &self->process_of, &self->take_output_shapes, &self->name_engine_range,
                           &self->quick_seq, &self->is_backward_text, &self->deep_ranges, &self->reader_oddities,
                           &self->not_utf8};
    for (int i = 0; i < 14; i++) *fields[i] = Py_NewRef(o[i]);
    PyObject *max_entries = PyObject_GetAttrString(self->fwd, "max_entries");
    if (max_entries == NULL) return -1;
    self->fwd_max = PyLong_AsSsize_t(max_entries);
    Py_DECREF(max_entries);
    if (self->fwd_max == -1 && PyErr_Occurred()) return -1;
    self->max_depth = max_depth;
    self->opened = 1;
    if ((self->texts = PyDict_New()) == NULL || ahead_open(path, sql, core_read_ahead, CoreError, &self->rows) < 0)
        return -1;
    return read_row(self);
}

/* engine_types(Marker, EngineSeq, UNDECODED): name engine ranges in C from now on */
static PyObject *RangeFeed_engine_types(RangeFeed *self, PyObject *args) {
    PyObject *marker_type, *engine_seq_type, *undecoded;
    if (!PyArg_ParseTuple(args, "O!O!O", &PyType_Type, &marker_type, &PyType_Type, &engine_seq_type, &undecoded))
        return NULL;
    const char *seq = "seq";
    Py_ssize_t off;
    if (slot_offsets(marker_type, &seq, 1, &off) < 0) return NULL;
    Py_XSETREF(self->marker_type, Py_NewRef(marker_type));
    Py_XSETREF(self->engine_seq_type, Py_NewRef(engine_seq_type));
    Py_XSETREF(self->undecoded, Py_NewRef(undecoded));
    self->marker_seq_off = off;
    Py_RETURN_NONE;
}

static PyMethodDef RangeFeed_methods[] = {
    {"engine_types", (PyCFunction)RangeFeed_engine_types, METH_VARARGS,
     "Name the autograd engine's ranges in C (markers.Marker, correlate._EngineSeq, correlate._UNDECODED)."},
    {"push_until", (PyCFunction)RangeFeed_push_until, METH_O,
     "Push every range that starts at or before the given ns on its thread's stack."},
    {"push_one", (PyCFunction)RangeFeed_push_one, METH_NOARGS, "Push the next range."},
    {"next_start", (PyCFunction)RangeFeed_next_start, METH_NOARGS,
     "The start of the next range not pushed yet, or None at the end."},
    {"close", (PyCFunction)RangeFeed_close, METH_NOARGS, "Close the database."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject RangeFeedType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pyprof.parse._core.RangeFeed",
    .tp_basicsize = sizeof(RangeFeed),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "An export's push/pop ranges, read and pushed on a Correlator's stacks.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)RangeFeed_init,
    .tp_dealloc = (destructor)RangeFeed_dealloc,
    .tp_traverse = (traverseproc)RangeFeed_traverse,
    .tp_clear = (inquiry)RangeFeed_clear,
    .tp_methods = RangeFeed_methods,
};

/* ---- LineWriter ------------------------------------------------------------------------------------------ */

int buf_grow(Buffer *b, Py_ssize_t more) {
    if (more > PY_SSIZE_T_MAX / 2 - b->size) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t want = b->size + more;
    if (want <= b->cap) return 0;
    Py_ssize_t cap = b->cap ? b->cap : 4096;
    while (cap < want) cap *= 2;
    char *data = PyMem_Realloc(b->data, (size_t)cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

int buf_put(Buffer *b, const char *s, Py_ssize_t n) {
    if (buf_grow(b, n) < 0) return -1;
    memcpy(b->data + b->size, s, (size_t)n);
    b->size += n;
    return 0;
}

int buf_str(Buffer *b, PyObject *s) {
    Py_ssize_t n;
    const char *u = PyUnicode_AsUTF8AndSize(s, &n);
    return u == NULL ? -1 : buf_put(b, u, n);
}

/* encode.integer: "null" or the decimal integer */
static int buf_int_or_null(Buffer *b, Ahead *rows, int col) {
    if (ahead_type(rows, col) == SQLITE_NULL) return buf_put(b, "null", 4);
    char text[32];
    int n = snprintf(text, sizeof text, "%lld", ahead_int64(rows, col));
    return buf_put(b, text, n);
}

int buf_ll(Buffer *b, long long v) {
    char text[32];
    int n = snprintf(text, sizeof text, "%lld", v);
    return buf_put(b, text, n);
}

/* end - start in decimal, exact where it passes 64 bits (Python's integers do not overflow) */
static int buf_difference(Buffer *b, long long end, long long start) {
    long long d;
    if (!__builtin_sub_overflow(end, start, &d)) return buf_ll(b, d);
    PyObject *e = PyLong_FromLongLong(end), *s = PyLong_FromLongLong(start);
    PyObject *diff = (e && s) ? PyNumber_Subtract(e, s) : NULL;
    PyObject *text = diff ? PyObject_Str(diff) : NULL;
    int rc = text ? buf_str(b, text) : -1;
    Py_XDECREF(e);
    Py_XDECREF(s);
    Py_XDECREF(diff);
    Py_XDECREF(text);
    return rc;
}

PyObject *new_range_state(PyObject *state, PyObject *key, PyObject *first) {
    PyObject *fresh = PyList_New(3);
    if (fresh == NULL) return NULL;
    PyList_SET_ITEM(fresh, 0, Py_NewRef(first));
    PyList_SET_ITEM(fresh, 1, Py_NewRef(Py_None));
    PyList_SET_ITEM(fresh, 2, Py_NewRef(Py_None));
    int rc = PyDict_SetItem(state, key, fresh);
    Py_DECREF(fresh);  /* the dict holds it */
    return rc < 0 ? NULL : fresh;
}

int bounded_add(PyObject *d, PyObject *key, PyObject *value, Py_ssize_t max_entries) {
    if (PyDict_SetItem(d, key, value) < 0) return -1;
    if (PyDict_GET_SIZE(d) <= max_entries) return 0;
    Py_ssize_t drop = max_entries / 2 > 1 ? max_entries / 2 : 1;
    PyObject *old = PyList_New(0);
    if (old == NULL) return -1;
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyList_GET_SIZE(old) < drop && PyDict_Next(d, &pos, &k, &v))
        if (PyList_Append(old, k) < 0) goto fail;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(old); i++)
        if (PyDict_DelItem(d, PyList_GET_ITEM(old, i)) < 0) goto fail;
    Py_DECREF(old);
    return 0;
fail:
    Py_DECREF(old);
    return -1;
}

static PyObject *column_object(Ahead *rows, int col) {
    if (ahead_type(rows, col) == SQLITE_NULL) Py_RETURN_NONE;
    return PyLong_FromLongLong(ahead_int64(rows, col));
}

enum { KERNELS, MEMCPYS, MEMSETS, N_TABLES };
/* the columns of the activity queries (native.py) */
enum { A_START, A_END, A_DEVICE, A_STREAM, A_CORR, A_GPID };
enum { K_LONG = 6, K_SHORT, K_GX, K_GY, K_GZ, K_BX, K_BY, K_BZ, K_REGS, K_STATIC, K_DYNAMIC, K_NODE, K_COLUMNS };
enum { C_BYTES = 6, C_KIND, C_NODE, C_COLUMNS };  /* the node columns: NULL (graph exports take Python) */
/* the launch query: start, end, globalTid, correlationId, nameId */
enum { L_START, L_END, L_GTID, L_CORR, L_NAME, L_COLUMNS };
#define N_SEGMENTS 14
/* LAUNCH_INFO flags (correlate.HAS_OP ...) */
enum { HAS_OP = 1, BPROP = 2, HAS_FWD = 4, NUMBERED = 8, RECOMPUTE = 16 };
enum { S_RECORDS, S_KERNELS, S_WITH_OP, S_BPROP, S_NUMBERED, S_WITH_FWD, S_RECOMPUTE, S_NO_LAUNCH, N_STATS };
static const char *STAT_NAMES[N_STATS] = {"records", "kernels", "kernels_with_op", "bprop_kernels",
                                          "bprop_numbered", "bprop_with_fwd", "recompute_kernels", "no_launch"};

typedef struct {
    PyObject_HEAD
    Ahead *acts[N_TABLES];  /* each positioned on its next row, or NULL at its end */
    Ahead *launches;        /* positioned on the next launch not yet taken, or NULL */
    PyObject *infos;  /* the sweep's ((number, (head, tail)) or None, call, flags) per launch, in launch order */
    PyObject *next_info;           /* the info of the launch the launch statement is on */
    PyObject *segments[N_SEGMENTS];
    PyObject *parts;               /* native.Parts: the JSON of a distinct name, place, shape, API, attribution */
    PyObject *names, *places, *shapes, *apis;  /* caches of the parts' JSON */
    LaunchMap pending, recent;     /* as writer._merge_lines' (_launches.c) */
    PyObject *counts;              /* subSeqId counters by op call, as writer._merge_lines' */
    PyObject *no_call, *empty_head, *empty_tail, *api_end_key;
    PyObject *stats;
    long long clock_skew_ns;
    Py_ssize_t recent_max, window_max;
    long long counters[N_STATS];
    Buffer line;
} LineWriter;

/* the query's next row, or its end (*rows closed and NULL); -1 where it failed */
static int step(Ahead **rows) {
    int rc = ahead_step(*rows);
    if (rc == 1) return 0;
    ahead_close(*rows);
    *rows = NULL;
    return rc;
}

/* The part's JSON from cache, or made by native.Parts' method ``name`` with the key's items as arguments. */
static PyObject *cached_part(LineWriter *self, PyObject *cache, PyObject *key, const char *name) {
    PyObject *hit = PyDict_GetItemWithError(cache, key);
    if (hit != NULL) return Py_NewRef(hit);
    if (PyErr_Occurred()) return NULL;
    PyObject *method = PyObject_GetAttrString(self->parts, name);
    if (method == NULL) return NULL;
    PyObject *made = PyObject_Call(method, key, NULL);
    Py_DECREF(method);
    if (made == NULL) return NULL;
    if (bounded_add(cache, key, made, self->window_max * 8) < 0) {
        Py_DECREF(made);
        return NULL;
    }
    return made;
}

/* The sweep's info of the launch the launch statement is on, taken one launch ahead as writer._merge_lines takes
 * it (so that the sweep has read as far when the lines end, and counted the same oddities). */
static int next_info(LineWriter *self) {
    if (self->launches == NULL) return 0;
    self->next_info = PyIter_Next(self->infos);
    if (self->next_info != NULL) return 0;
    if (!PyErr_Occurred())
        PyErr_SetString(PyExc_RuntimeError, "the sweep gave fewer launch infos than there are launch calls");
    return -1;
}

/* The key that joins an activity to its launch call: (globalPid, correlationId), each possibly NULL (a null flag and
 * 8 bytes each). */
static void launch_key(char *key, int has_pid, long long gpid, int has_corr, long long corr) {
    memset(key, 0, LAUNCH_KEY_BYTES);
    key[0] = (char)has_pid;
    key[9] = (char)has_corr;
    if (has_pid) memcpy(key + 1, &gpid, 8);
    if (has_corr) memcpy(key + 10, &corr, 8);
}

/* Take the launch the launch statement is on, with the sweep's info for it, into ``pending`` (a key there already
 * takes the newer launch, as a dict does). */
static int take_launch(LineWriter *self) {
    Ahead *st = self->launches;
    PyObject *info = self->next_info;
    self->next_info = NULL;
    int rc = -1;
    PyObject *name_key = NULL, *api = NULL;
    if (!PyTuple_Check(info) || PyTuple_GET_SIZE(info) != 3) {
        PyErr_SetString(PyExc_TypeError, "a launch info is (attribution, call, flags)");
        goto done;
    }
    PyObject *att = PyTuple_GET_ITEM(info, 0), *parts = NULL;
    if (att != Py_None && (!PyTuple_Check(att) || PyTuple_GET_SIZE(att) != 2 ||
                           !PyTuple_Check(parts = PyTuple_GET_ITEM(att, 1)) || PyTuple_GET_SIZE(parts) != 2)) {
        PyErr_SetString(PyExc_TypeError, "an attribution is (number, (head, tail))");
        goto done;
    }
    long flags = PyLong_AsLong(PyTuple_GET_ITEM(info, 2));
    if (flags == -1 && PyErr_Occurred()) goto done;
    name_key = Py_BuildValue("(N)", column_object(st, L_NAME));
    if (name_key == NULL || (api = cached_part(self, self->apis, name_key, "api")) == NULL) goto done;
    long long gtid = ahead_int64(st, L_GTID);
    char key[LAUNCH_KEY_BYTES];
    launch_key(key, 1, gtid & ~(long long)0xFFFFFF, ahead_type(st, L_CORR) != SQLITE_NULL, ahead_int64(st, L_CORR));
    Launch *e = launches_put(&self->pending, key);
    if (e == NULL) goto done;
    /* the launch part's pieces: the API name's JSON, api_start_ns, api_end_ns (written into the line as
     * writer._merge_lines' call_json); the attribution's parts, its op call and flags */
    Py_XSETREF(e->api, Py_NewRef(api));
    Py_XSETREF(e->head, Py_NewRef(parts ? PyTuple_GET_ITEM(parts, 0) : self->empty_head));
    Py_XSETREF(e->tail, Py_NewRef(parts ? PyTuple_GET_ITEM(parts, 1) : self->empty_tail));
    Py_XSETREF(e->call, Py_NewRef(PyTuple_GET_ITEM(info, 1)));
    e->start_ns = ahead_int64(st, L_START);
    e->end_ns = ahead_int64(st, L_END);
    e->thread = gtid;
    e->flags = flags;
    rc = step(&self->launches) < 0 ? -1 : next_info(self);
done:
    Py_XDECREF(api);
    Py_XDECREF(name_key);
    Py_DECREF(info);
    return rc;
}

/* The launch of the activity ``st`` is on (writer._merge_lines' ``info``): the pending one of its key, moved to
 * ``recent`` for the activities after it; else the recent one; else NULL. -1 with an error set. */
static int launch_of(LineWriter *self, Ahead *st, Launch **out) {
    char key[LAUNCH_KEY_BYTES];
    launch_key(key, ahead_type(st, A_GPID) != SQLITE_NULL, ahead_int64(st, A_GPID),
               ahead_type(st, A_CORR) != SQLITE_NULL, ahead_int64(st, A_CORR));
    Launch *pending = launches_find(&self->pending, key);
    if (pending == NULL) {
        *out = launches_find(&self->recent, key);
        return 0;
    }
    Launch *r = launches_put(&self->recent, key);
    if (r == NULL) return -1;
    PyObject *objects[] = {r->api, r->head, r->tail, r->call};  /* a key recent already holds: replaced */
    r->api = pending->api;  /* the references move */
    r->head = pending->head;
    r->tail = pending->tail;
    r->call = pending->call;
    pending->api = pending->head = pending->tail = pending->call = NULL;
    for (int k = 0; k < 4; k++) Py_XDECREF(objects[k]);
    r->start_ns = pending->start_ns;
    r->end_ns = pending->end_ns;
    r->thread = pending->thread;
    r->flags = pending->flags;
    launches_drop(&self->pending, pending);
    *out = r;
    return 0;
}

/* The activity statement whose row starts first (the first table on a tie, as heapq.merge), or -1 at the end. */
static int first_activity(LineWriter *self) {
    int best = -1;
    long long best_start = 0;
    for (int t = 0; t < N_TABLES; t++) {
        if (self->acts[t] == NULL) continue;
        long long start = ahead_int64(self->acts[t], A_START);
        if (best < 0 || start < best_start) {
            best = t;
            best_start = start;
        }
    }
    return best;
}

static void count_flags(LineWriter *self, long flags) {
    if (!flags) return;
    self->counters[S_WITH_OP] += flags & HAS_OP;
    if (flags & BPROP) {
        self->counters[S_BPROP]++;
        if (flags & NUMBERED) {
            self->counters[S_NUMBERED]++;
            if (flags & HAS_FWD) self->counters[S_WITH_FWD]++;
        }
    } else if (flags & RECOMPUTE) {
        self->counters[S_RECOMPUTE]++;
    }
}

/* subSeqId: the kernels of the op call so far (writer._merge_lines' ``counts``); a new reference, or None */
static PyObject *sub_seq(LineWriter *self, PyObject *call) {
    if (call == Py_None) Py_RETURN_NONE;
    PyObject *sub = PyDict_GetItemWithError(self->counts, call);
    if (sub == NULL && PyErr_Occurred()) return NULL;
    sub = sub ? Py_NewRef(sub) : PyLong_FromLong(0);
    if (sub == NULL) return NULL;
    PyObject *next = PyNumber_Add(sub, ONE);
    if (next == NULL || bounded_add(self->counts, call, next, self->recent_max) < 0) {
        Py_XDECREF(next);
        Py_DECREF(sub);
        return NULL;
    }
    Py_DECREF(next);
    return sub;
}

/* The name, place and shape parts of the activity ``t`` is on (new references in out[0..2]). */
/* The arguments of native.Parts' name, place and shape methods for the activity ``st`` is on (table ``t``). */
static PyObject *name_args(Ahead *st, int t) {
    return t == KERNELS ? Py_BuildValue("(iNN)", t, column_object(st, K_SHORT), column_object(st, K_LONG))
           : t == MEMCPYS ? Py_BuildValue("(iN)", t, column_object(st, C_KIND))
                          : Py_BuildValue("(i)", t);
}

static PyObject *place_args(Ahead *st, int t) {
    return Py_BuildValue("(NN)", column_object(st, A_DEVICE), column_object(st, A_STREAM));
}

static PyObject *shape_args(Ahead *st, int t) {
    if (t == KERNELS)
        return Py_BuildValue("(iNNNNNNNNNNOO)", t, column_object(st, K_GX), column_object(st, K_GY),
                             column_object(st, K_GZ), column_object(st, K_BX), column_object(st, K_BY),
                             column_object(st, K_BZ), column_object(st, K_REGS), column_object(st, K_STATIC),
                             column_object(st, K_DYNAMIC), column_object(st, A_DEVICE), Py_None, Py_None);
    return Py_BuildValue("(iOOOOOOOOONNN)", t, Py_None, Py_None, Py_None, Py_None, Py_None, Py_None, Py_None,
                         Py_None, Py_None, column_object(st, A_DEVICE), column_object(st, C_BYTES),
                         t == MEMCPYS ? column_object(st, C_KIND) : Py_NewRef(Py_None));
}

/* the columns each part's arguments come from, by table (-1 ends a list) */
static const int NAME_COLS[N_TABLES][3] = {{K_SHORT, K_LONG, -1}, {C_KIND, -1}, {-1}};
static const int PLACE_COLS[N_TABLES][3] = {{A_DEVICE, A_STREAM, -1}, {A_DEVICE, A_STREAM, -1}, {A_DEVICE, A_STREAM, -1}};
static const int SHAPE_COLS[N_TABLES][11] = {
    {K_GX, K_GY, K_GZ, K_BX, K_BY, K_BZ, K_REGS, K_STATIC, K_DYNAMIC, A_DEVICE, -1},
    {A_DEVICE, C_BYTES, C_KIND, -1},
    {A_DEVICE, C_BYTES, -1}};

/* A part's cache key: the table and its columns' values packed in one bytes object (a null flag and 8 bytes each),
 * one allocation per lookup where a tuple of ints took several; the columns hold integers or NULL (native_queries). */
static PyObject *packed_key(Ahead *st, int t, const int *cols) {
    char key[1 + 12 * 9];
    Py_ssize_t k = 0;
    key[k++] = (char)t;
    for (; *cols >= 0; cols++) {
        if (ahead_type(st, *cols) == SQLITE_NULL) {
            key[k++] = 0;
            continue;
        }
        sqlite3_int64 v = ahead_int64(st, *cols);
        key[k++] = 1;
        memcpy(key + k, &v, sizeof v);
        k += (Py_ssize_t)sizeof v;
    }
    return PyBytes_FromStringAndSize(key, k);
}

/* The part's JSON from cache, or made by native.Parts' method ``name`` from the activity's columns. */
static PyObject *activity_part(LineWriter *self, PyObject *cache, Ahead *st, int t, const int *cols,
                               PyObject *(*args_of)(Ahead *, int), const char *name) {
    PyObject *key = packed_key(st, t, cols);
    if (key == NULL) return NULL;
    PyObject *hit = PyDict_GetItemWithError(cache, key);
    if (hit != NULL || PyErr_Occurred()) {
        Py_DECREF(key);
        return Py_XNewRef(hit);
    }
    PyObject *args = args_of(st, t), *method = args ? PyObject_GetAttrString(self->parts, name) : NULL;
    PyObject *made = method ? PyObject_Call(method, args, NULL) : NULL;
    Py_XDECREF(method);
    Py_XDECREF(args);
    if (made != NULL && bounded_add(cache, key, made, self->window_max * 8) < 0) Py_CLEAR(made);
    Py_DECREF(key);
    return made;
}

/* The name, place and shape parts of the activity ``t`` is on (new references in out[0..2]). */
static int activity_parts(LineWriter *self, int t, PyObject **name, PyObject **place, PyObject **shape) {
    Ahead *st = self->acts[t];
    *name = activity_part(self, self->names, st, t, NAME_COLS[t], name_args, "name");
    *place = *name ? activity_part(self, self->places, st, t, PLACE_COLS[t], place_args, "place") : NULL;
    *shape = *place ? activity_part(self, self->shapes, st, t, SHAPE_COLS[t], shape_args, "shape") : NULL;
    if (*shape != NULL) return 0;
    Py_CLEAR(*name);
    Py_CLEAR(*place);
    return -1;
}

/* the activity's own process (nsys.os_pid of its globalPid), where no launch call gives its thread */
static int put_pid(Buffer *b, Ahead *st) {
    if (ahead_type(st, A_GPID) == SQLITE_NULL) return buf_put(b, "null", 4);
    return buf_ll(b, (ahead_int64(st, A_GPID) >> 24) & 0xFFFFFF);  /* nsys.os_pid */
}

/* One record's line (writer._merge_lines, for the activity statement ``t`` is on). */
static PyObject *activity_line(LineWriter *self, int t) {
    Ahead *st = self->acts[t];
    PyObject *name = NULL, *place = NULL, *shape = NULL, *sub = NULL, *line = NULL;
    long long start = ahead_int64(st, A_START), end = ahead_int64(st, A_END);
    /* the horizon start + skew, saturated: past 64 bits every launch start is before it, as in Python */
    long long horizon;
    if (__builtin_add_overflow(start, self->clock_skew_ns, &horizon)) horizon = start < 0 ? LLONG_MIN : LLONG_MAX;
    while (self->launches != NULL && ahead_int64(self->launches, L_START) <= horizon)
        if (take_launch(self) < 0) return NULL;
    Launch *record;
    if (launch_of(self, st, &record) < 0) return NULL;
    self->counters[S_RECORDS]++;
    if (record == NULL) self->counters[S_NO_LAUNCH]++;
    /* the launch's objects, referenced for the line: Python code (the parts' makers) runs before they are written */
    PyObject *call = Py_NewRef(record ? record->call : Py_None);
    PyObject *api = Py_XNewRef(record ? record->api : NULL);
    PyObject *head = Py_NewRef(record ? record->head : self->empty_head);
    PyObject *tail = Py_NewRef(record ? record->tail : self->empty_tail);
    long long thread = record ? record->thread : 0, api_start = record ? record->start_ns : 0;
    long long api_end = record ? record->end_ns : 0;
    if (t == KERNELS) {
        self->counters[S_KERNELS]++;
        if (record != NULL) count_flags(self, record->flags);
        sub = sub_seq(self, call);
    } else {
        sub = Py_NewRef(Py_None);
    }
    if (sub == NULL || activity_parts(self, t, &name, &place, &shape) < 0) goto done;
    if (!PyTuple_Check(shape) || PyTuple_GET_SIZE(shape) != 2) {
        PyErr_SetString(PyExc_TypeError, "a shape's parts are (config, copy)");
        goto done;
    }
    Buffer *b = &self->line;
    b->size = 0;
    PyObject **seg = self->segments;
    if (buf_str(b, seg[0]) || buf_str(b, name) || buf_str(b, seg[1]) || buf_difference(b, end, start) ||
        buf_str(b, seg[2]) || buf_ll(b, start) || buf_str(b, seg[3]) ||
        (api ? buf_ll(b, (thread >> 24) & 0xFFFFFF) : put_pid(b, st)) || buf_str(b, seg[4]))
        goto done;
    if (api ? buf_ll(b, thread & 0xFFFFFF) : buf_put(b, "null", 4)) goto done;
    if (buf_str(b, seg[5]) || buf_str(b, place) || buf_str(b, seg[6]) || buf_int_or_null(b, st, A_CORR) ||
        buf_str(b, seg[7]) || buf_str(b, PyTuple_GET_ITEM(shape, 0)) || buf_str(b, seg[8]))
        goto done;
    if (api ? buf_str(b, api) || buf_ll(b, api_start) || buf_str(b, self->api_end_key) || buf_ll(b, api_end)
            : buf_str(b, self->no_call))
        goto done;
    if (buf_str(b, seg[9]) || buf_str(b, PyTuple_GET_ITEM(shape, 1)) || buf_str(b, seg[10]) || buf_str(b, head) ||
        buf_str(b, seg[11]))
        goto done;
    if (sub == Py_None ? buf_put(b, "null", 4) : buf_ll(b, PyLong_AsLongLong(sub))) goto done;
    if (buf_str(b, seg[12]) || buf_str(b, tail) || buf_str(b, seg[13])) goto done;
    if (PyErr_Occurred()) goto done;
    line = PyUnicode_DecodeUTF8(b->data, b->size, "strict");
done:
    Py_DECREF(call);
    Py_XDECREF(api);
    Py_DECREF(head);
    Py_DECREF(tail);
    Py_XDECREF(sub);
    Py_XDECREF(name);
    Py_XDECREF(place);
    Py_XDECREF(shape);
    return line;
}

static int store_stats(LineWriter *self) {
    for (int i = 0; i < N_STATS; i++) {
        if (self->counters[i] == 0) continue;
        PyObject *have = PyObject_GetAttrString(self->stats, STAT_NAMES[i]);
        if (have == NULL) return -1;
        PyObject *add = PyLong_FromLongLong(self->counters[i]);
        PyObject *sum = add ? PyNumber_Add(have, add) : NULL;
        Py_DECREF(have);
        Py_XDECREF(add);
        if (sum == NULL) return -1;
        int rc = PyObject_SetAttrString(self->stats, STAT_NAMES[i], sum);
        Py_DECREF(sum);
        if (rc < 0) return -1;
        self->counters[i] = 0;
    }
    return 0;
}

static PyObject *LineWriter_next(LineWriter *self) {
    int t = first_activity(self);
    if (t < 0) {
        store_stats(self);
        return NULL;  /* StopIteration, or the error store_stats set */
    }
    PyObject *line = activity_line(self, t);
    if (line == NULL || step(&self->acts[t]) < 0) {
        Py_XDECREF(line);
        return NULL;
    }
    return line;
}

static void writer_close_db(LineWriter *self) {
    for (int t = 0; t < N_TABLES; t++) {
        ahead_close(self->acts[t]);
        self->acts[t] = NULL;
    }
    ahead_close(self->launches);
    self->launches = NULL;
}

#define WRITER_OBJECTS(X) X(infos) X(next_info) X(parts) X(names) X(places) X(shapes) X(apis) \
    X(counts) X(no_call) X(empty_head) X(empty_tail) X(api_end_key) X(stats)

static int LineWriter_traverse(LineWriter *self, visitproc visit, void *arg) {
#define VISIT(f) Py_VISIT(self->f);
    WRITER_OBJECTS(VISIT)
    for (int i = 0; i < N_SEGMENTS; i++) Py_VISIT(self->segments[i]);
    return 0;
}

static int LineWriter_clear(LineWriter *self) {
#define CLEAR(f) Py_CLEAR(self->f);
    WRITER_OBJECTS(CLEAR)
    for (int i = 0; i < N_SEGMENTS; i++) Py_CLEAR(self->segments[i]);
    return 0;
}

static void LineWriter_dealloc(LineWriter *self) {
    PyObject_GC_UnTrack(self);
    writer_close_db(self);
    LineWriter_clear(self);
    launches_free(&self->pending);  /* str, int and None only: no part of a cycle, so not the collector's */
    launches_free(&self->recent);
    PyMem_Free(self->line.data);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *LineWriter_close(LineWriter *self, PyObject *Py_UNUSED(ignored)) {
    writer_close_db(self);
    Py_RETURN_NONE;
}

static int prepare(const char *path, PyObject *sql, Ahead **stmt, int columns) {
    if (sql == Py_None) return 0;
    const char *text = PyUnicode_AsUTF8(sql);
    if (text == NULL || ahead_open(path, text, core_read_ahead, CoreError, stmt) < 0) return -1;
    if (ahead_columns(*stmt) != columns) {
        PyErr_SetString(PyExc_ValueError, "a query of the line writer has the wrong number of columns");
        return -1;
    }
    return step(stmt);
}

/* LineWriter(path, (kernel sql, memcpy sql, memset sql), launch sql, infos, segments, parts, no_call,
 *            (empty head, empty tail), api_end_key, stats, clock_skew_ns, recent_max, window_max)
 * A query is None where its table is absent. */
static int LineWriter_init(LineWriter *self, PyObject *args, PyObject *kwds) {
    const char *path;
    PyObject *sqls, *launch_sql, *infos, *segments, *parts, *no_call, *empty, *api_end_key, *stats;
    long long skew;
    Py_ssize_t recent_max, window_max;
    if (!PyArg_ParseTuple(args, "sO!OOO!OUO!UOLnn", &path, &PyTuple_Type, &sqls, &launch_sql, &infos, &PyTuple_Type,
                          &segments, &parts, &no_call, &PyTuple_Type, &empty, &api_end_key, &stats, &skew,
                          &recent_max, &window_max))
        return -1;
    if (self->parts != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "LineWriter initialised twice");
        return -1;
    }
    if (PyTuple_GET_SIZE(sqls) != N_TABLES || PyTuple_GET_SIZE(segments) != N_SEGMENTS ||
        PyTuple_GET_SIZE(empty) != 2) {
        PyErr_SetString(PyExc_ValueError, "LineWriter: 3 queries, 14 line segments and 2 empty parts");
        return -1;
    }
    for (int i = 0; i < N_SEGMENTS; i++) {
        if (!PyUnicode_Check(PyTuple_GET_ITEM(segments, i))) {
            PyErr_SetString(PyExc_TypeError, "LineWriter: line segments are str");
            return -1;
        }
        self->segments[i] = Py_NewRef(PyTuple_GET_ITEM(segments, i));
    }
    self->infos = PyObject_GetIter(infos);
    if (self->infos == NULL) return -1;
    self->parts = Py_NewRef(parts);
    self->no_call = Py_NewRef(no_call);
    self->empty_head = Py_NewRef(PyTuple_GET_ITEM(empty, 0));
    self->empty_tail = Py_NewRef(PyTuple_GET_ITEM(empty, 1));
    self->api_end_key = Py_NewRef(api_end_key);
    self->stats = Py_NewRef(stats);
    self->clock_skew_ns = skew;
    self->recent_max = recent_max;
    self->window_max = window_max;
    self->recent.max_entries = recent_max;
    PyObject **caches[] = {&self->names, &self->places, &self->shapes, &self->apis, &self->counts};
    for (int i = 0; i < 5; i++)
        if ((*caches[i] = PyDict_New()) == NULL) return -1;
    int columns[N_TABLES] = {K_COLUMNS, C_COLUMNS, C_COLUMNS};
    for (int t = 0; t < N_TABLES; t++)
        if (prepare(path, PyTuple_GET_ITEM(sqls, t), &self->acts[t], columns[t]) < 0) return -1;
    if (prepare(path, launch_sql, &self->launches, L_COLUMNS) < 0) return -1;
    return next_info(self);
}

static PyMethodDef LineWriter_methods[] = {
    {"close", (PyCFunction)LineWriter_close, METH_NOARGS, "Close the database."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject LineWriterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pyprof.parse._core.LineWriter",
    .tp_basicsize = sizeof(LineWriter),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "An nsys export's record lines, in activity start order, joined to the sweep's launch infos.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)LineWriter_init,
    .tp_dealloc = (destructor)LineWriter_dealloc,
    .tp_traverse = (traverseproc)LineWriter_traverse,
    .tp_clear = (inquiry)LineWriter_clear,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)LineWriter_next,
    .tp_methods = LineWriter_methods,
};

static PyObject *set_read_ahead(PyObject *module, PyObject *on) {
    int flag = PyObject_IsTrue(on);
    if (flag < 0) return NULL;
    core_read_ahead = flag ? AHEAD_ON : AHEAD_OFF;
    Py_RETURN_NONE;
}

static PyMethodDef core_functions[] = {
    {"read_ahead", set_read_ahead, METH_O,
     "read_ahead(on): whether the queries of RangeFeeds, Sweeps and LineWriters made from now on are stepped by "
     "threads of their own (_ahead.c)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT, "pyprof.parse._core", "The per-row work of parse's SQLite readers, in C.", -1,
    core_functions,
};

int feed_check(PyObject *o) { return Py_IS_TYPE(o, &RangeFeedType); }

PyMODINIT_FUNC PyInit__core(void) {
    if (PyType_Ready(&RangeFeedType) < 0 || PyType_Ready(&LineWriterType) < 0) return NULL;
    INPUT_KEY_STR = PyUnicode_InternFromString(", input_op_ids = ");
    SEQ_KEY_STR = PyUnicode_InternFromString(SEQ_KEY);
    ENGINE_PREFIX_STR = PyUnicode_InternFromString(ENGINE_PREFIX);
    ONE = PyLong_FromLong(1);
    if (!INPUT_KEY_STR || !SEQ_KEY_STR || !ENGINE_PREFIX_STR || !ONE) return NULL;
    PyObject *m = PyModule_Create(&core_module);
    if (m == NULL) return NULL;
    CoreError = PyErr_NewException("pyprof.parse._core.Error", NULL, NULL);
    if (CoreError == NULL || PyModule_AddObjectRef(m, "Error", CoreError) < 0 ||
        PyModule_AddObjectRef(m, "RangeFeed", (PyObject *)&RangeFeedType) < 0 ||
        PyModule_AddObjectRef(m, "LineWriter", (PyObject *)&LineWriterType) < 0 || core_add_attributor(m) < 0 ||
        core_add_sweep(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
