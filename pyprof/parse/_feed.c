/* pyprof.parse._core.RangeFeed: an export's push/pop ranges read through SQLite's C API and pushed on their threads'
 * open-range stacks, the work of correlate.Correlator._push (the reference), on the Correlator's own state (its
 * per-range state, forward-op memory, backward threads), which the attributions (_attribute.c, or the Python code)
 * then read. The stacks are kept in C, each range's row tuple made only when something reads it (Range, below); the
 * Correlator's lists of them are brought up to date before each attribution (feed_ready). What is rare or odd (a
 * text that is not ASCII, a consumer op naming waiting producers) goes back to the Python functions that define it.
 */
#include "_core.h"

#include <string.h>

/* texts compared with a range's when it is not plain ASCII, and 1 (made once, at import) */
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
    if (num == NULL) return NULL;
    /* one a record cannot hold (beyond 64 bits) is no number either, as markers._number says */
    int overflow = 0;
    (void)PyLong_AsLongLongAndOverflow(num, &overflow);
    if (overflow) {
        Py_DECREF(num);
        Py_RETURN_NONE;
    }
    return num;
}

/* ---- the ranges on their stacks ----------------------------------------------------------------------------- */

/* A range on its thread's open-range stack. Its row tuple (activities.RANGE_ROW), which attributions, the forward-op
 * memory and the per-range state (keyed by the row's id) read, is made when one of them asks: on the emit_nvtx and
 * pyprof.init() exports two ranges in three never do (they enclose no launch and no forward op's range), and making
 * their tuples and ints cost a tenth of the parse (-10% on both 50k exports without them). */
typedef struct {
    long long start_ns, end_ns;
    PyObject *text, *payload;  /* owned */
    PyObject *row;             /* owned once made, else NULL */
} Range;

/* One thread's open ranges, outermost first, and the Correlator's list of their rows (``_stacks[thread]``), which
 * holds the rows of the first ``synced`` ranges: feed_ready brings it up to date before an attribution reads it. */
typedef struct {
    long long thread_ll;
    PyObject *thread;  /* owned: the stacks' key and each row's first item */
    PyObject *process; /* owned: process_of(thread), made at the thread's first forward op */
    PyObject *list;    /* owned */
    Range *r;
    Py_ssize_t n, cap, synced;
} Stack;

typedef struct {
    PyObject_HEAD
    Ahead *rows;          /* the ranges' query, or NULL after its last row */
    int opened;
    Range next;           /* the range read and not pushed yet, if has_next (its row is never made) */
    long long next_thread;
    int has_next;
    int lossy;            /* some text was not UTF-8 */
    Stack **table;        /* the stacks by thread: open addressing, a power of two of slots */
    size_t table_cap, n_stacks;
    /* the Correlator's state (correlate.Correlator.__init__) */
    PyObject *stacks, *state, *fwd, *backward_thread, *wanted, *oddities;
    PyObject *process_of, *take_output_shapes, *name_engine_range, *quick_seq, *is_backward_text;
    PyObject *deep_ranges;  /* the oddity's text */
    PyObject *reader_oddities, *not_utf8;  /* the reader's count of queries read leniently, and its reason */
    Py_ssize_t max_depth;
    PyObject *texts;  /* JSON marker text -> the one string ranges share (share_text) */
    Py_ssize_t fwd_max;  /* the forward-op memory's bound (BoundedDict.max_entries) */
    /* for naming engine ranges in C (set by engine_types; else the Correlator's method does it) */
    PyObject *marker_type, *engine_seq_type, *undecoded;
    Py_ssize_t marker_seq_off;
} RangeFeed;

#define SHARED_TEXTS 8192

static void range_clear(Range *r) {
    Py_CLEAR(r->text);
    Py_CLEAR(r->payload);
    Py_CLEAR(r->row);
}

/* the range's row tuple, made once: (thread, start, end, text, payload); borrowed */
static PyObject *row_of(Stack *s, Range *r) {
    if (r->row != NULL) return r->row;
    PyObject *start = PyLong_FromLongLong(r->start_ns), *end = start ? PyLong_FromLongLong(r->end_ns) : NULL;
    PyObject *row = end ? PyTuple_New(5) : NULL;
    if (row == NULL) {
        Py_XDECREF(start);
        Py_XDECREF(end);
        return NULL;
    }
    PyTuple_SET_ITEM(row, 0, Py_NewRef(s->thread));
    PyTuple_SET_ITEM(row, 1, start);
    PyTuple_SET_ITEM(row, 2, end);
    PyTuple_SET_ITEM(row, 3, Py_NewRef(r->text));
    PyTuple_SET_ITEM(row, 4, Py_NewRef(r->payload));
    return r->row = row;
}

/* the Correlator's list of ``s``'s rows, brought up to date */
static int sync_list(Stack *s) {
    Py_ssize_t len = PyList_GET_SIZE(s->list);
    if (len < s->synced) {
        PyErr_SetString(PyExc_RuntimeError, "a range stack's list was changed outside its RangeFeed");
        return -1;
    }
    if (len > s->synced && PyList_SetSlice(s->list, s->synced, len, NULL) < 0) return -1;
    for (Py_ssize_t k = s->synced; k < s->n; k++) {
        PyObject *row = row_of(s, &s->r[k]);
        if (row == NULL || PyList_Append(s->list, row) < 0) return -1;
        s->synced = k + 1;
    }
    return 0;
}

static size_t slot_of_thread(long long thread, size_t cap) {
    unsigned long long h = (unsigned long long)thread * 0x9E3779B97F4A7C15ULL;
    return (size_t)(h >> 32) & (cap - 1);
}

/* the stack of ``thread``, or NULL (no error) where none was made */
static Stack *find_stack(RangeFeed *self, long long thread) {
    if (self->table_cap == 0) return NULL;
    for (size_t i = slot_of_thread(thread, self->table_cap);; i = (i + 1) & (self->table_cap - 1)) {
        Stack *s = self->table[i];
        if (s == NULL || s->thread_ll == thread) return s;
    }
}

static void table_put(Stack **table, size_t cap, Stack *s) {
    size_t i = slot_of_thread(s->thread_ll, cap);
    while (table[i] != NULL) i = (i + 1) & (cap - 1);
    table[i] = s;
}

/* the stack of ``thread``, made (with its list in the Correlator's stacks) on the thread's first range */
static Stack *stack_of(RangeFeed *self, long long thread) {
    Stack *s = find_stack(self, thread);
    if (s != NULL) return s;
    if (2 * (self->n_stacks + 1) > self->table_cap) {
        size_t cap = self->table_cap ? 2 * self->table_cap : 16;
        Stack **table = PyMem_Calloc(cap, sizeof(Stack *));
        if (table == NULL) return (Stack *)PyErr_NoMemory();
        for (size_t i = 0; i < self->table_cap; i++)
            if (self->table[i] != NULL) table_put(table, cap, self->table[i]);
        PyMem_Free(self->table);
        self->table = table;
        self->table_cap = cap;
    }
    s = PyMem_Calloc(1, sizeof(Stack));
    if (s == NULL) return (Stack *)PyErr_NoMemory();
    s->thread_ll = thread;
    if ((s->thread = PyLong_FromLongLong(thread)) == NULL || (s->list = PyList_New(0)) == NULL ||
        PyDict_SetItem(self->stacks, s->thread, s->list) < 0) {
        Py_XDECREF(s->thread);
        Py_XDECREF(s->list);
        PyMem_Free(s);
        return NULL;
    }
    table_put(self->table, self->table_cap, s);
    self->n_stacks++;
    return s;
}

static void free_stacks(RangeFeed *self) {
    for (size_t i = 0; i < self->table_cap; i++) {
        Stack *s = self->table[i];
        if (s == NULL) continue;
        for (Py_ssize_t k = 0; k < s->n; k++) range_clear(&s->r[k]);
        PyMem_Free(s->r);
        Py_XDECREF(s->thread);
        Py_XDECREF(s->process);
        Py_XDECREF(s->list);
        PyMem_Free(s);
    }
    PyMem_Free(self->table);
    self->table = NULL;
    self->table_cap = self->n_stacks = 0;
}

static int count_oddity(PyObject *oddities, PyObject *reason);

/* A JSON marker text (pyprof's, a registered string) repeats every step, and the forward-op memory keeps the rows of
 * tens of thousands of stacks: the ranges share one string per distinct text instead of one each. */
static int share_text(RangeFeed *self, Range *r) {
    PyObject *text = r->text;
    if (!PyUnicode_Check(text) || PyUnicode_GET_LENGTH(text) == 0 || PyUnicode_READ_CHAR(text, 0) != '{') return 0;
    PyObject *known = PyDict_GetItemWithError(self->texts, text);
    if (known == NULL) return PyErr_Occurred() ? -1 : bounded_add(self->texts, text, text, SHARED_TEXTS);
    Py_SETREF(r->text, Py_NewRef(known));
    return 0;
}

/* the next range of the query into self->next (has_next 0 after the last) */
static int read_next(RangeFeed *self) {
    range_clear(&self->next);
    self->has_next = 0;
    if (self->rows == NULL) return 0;
    int rc = ahead_step(self->rows);
    if (rc <= 0) {
        ahead_close(self->rows);
        self->rows = NULL;
        return rc;
    }
    Ahead *rows = self->rows;
    if (ahead_type(rows, 0) != SQLITE_INTEGER || ahead_type(rows, 1) != SQLITE_INTEGER ||
        ahead_type(rows, 2) != SQLITE_INTEGER) {
        PyErr_SetString(PyExc_ValueError, "a range row's thread, start and end are integers");
        return -1;
    }
    int was_lossy = self->lossy;
    self->next_thread = ahead_int64(rows, 0);
    self->next.start_ns = ahead_int64(rows, 1);
    self->next.end_ns = ahead_int64(rows, 2);
    if ((self->next.text = column_value(rows, 3, &self->lossy)) == NULL ||
        (self->next.payload = column_value(rows, 4, &self->lossy)) == NULL)
        return -1;
    self->has_next = 1;
    if (self->lossy && !was_lossy && count_oddity(self->reader_oddities, self->not_utf8) < 0) return -1;
    return share_text(self, &self->next);
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

/* the top range popped; only a range whose row was made can have state (it is keyed by the row's id) */
static int pop_top(RangeFeed *self, Stack *s) {
    Range *top = &s->r[--s->n];
    int rc = top->row != NULL ? forget(self, top->row) : 0;
    range_clear(top);
    if (s->synced > s->n) s->synced = s->n;
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

/* st.index(row) of the Python code: the first range equal to range i (its row's items equal: the same thread,
 * times, text and payload), which may be an identical range below it */
static Py_ssize_t first_equal(Stack *s, Py_ssize_t i) {
    Range *r = &s->r[i];
    for (Py_ssize_t k = 0; k < i; k++) {
        Range *q = &s->r[k];
        if (q->start_ns != r->start_ns || q->end_ns != r->end_ns) continue;
        int eq = PyObject_RichCompareBool(q->text, r->text, Py_EQ);
        if (eq > 0) eq = PyObject_RichCompareBool(q->payload, r->payload, Py_EQ);
        if (eq != 0) return eq < 0 ? -1 : k;
    }
    return i;
}

/* correlate.Correlator._name_engine_range in C for plain ASCII texts (the Python method for others): the engine's
 * ``evaluate_function: XBackward0`` range just outside a node's range (range i) takes the node's seq. */
static int name_engine_range(RangeFeed *self, Stack *s, Py_ssize_t i) {
    PyObject *node = s->r[i].text;
    if (self->marker_type == NULL || !PyUnicode_Check(node) || !plain_ascii(node)) goto python;
    i = first_equal(s, i);
    if (i < 0) return -1;
    if (i == 0) return 0;
    Range *parent = &s->r[i - 1];
    PyObject *text = parent->text;
    if (!PyUnicode_Check(text) || PyUnicode_GET_LENGTH(text) == 0) return 0;
    if (!plain_ascii(text)) goto python;
    const char *t = PyUnicode_DATA(text), *c = PyUnicode_DATA(node);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), m = PyUnicode_GET_LENGTH(node);
    if (!starts_with(t, n, ENGINE_PREFIX, ENGINE_PREFIX_LEN)) return 0;
    Py_ssize_t cut = find_bytes(c, m, 0, ", "), name_len = cut >= 0 ? cut : m;
    Py_ssize_t after = (Py_ssize_t)ENGINE_PREFIX_LEN + name_len;
    if (n < after || memcmp(t + ENGINE_PREFIX_LEN, c, (size_t)name_len) != 0) return 0;
    if (!(n == after || (n >= after + 2 && t[after] == ',' && t[after + 1] == ' '))) return 0;
    PyObject *seq = quick_seq_ascii(node, 1);
    if (seq == NULL) return -1;
    int rc = -1;
    PyObject *key = NULL;
    if (seq == Py_None) {
        rc = 0;
        goto done;
    }
    PyObject *parent_row = row_of(s, parent);
    if (parent_row == NULL || (key = PyLong_FromVoidPtr(parent_row)) == NULL) goto done;
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
    /* the Python method reads the stack's list and the row: both made first */
    PyObject *row = row_of(s, &s->r[i]);
    if (row == NULL || sync_list(s) < 0) return -1;
    PyObject *r = PyObject_CallFunctionObjArgs(self->name_engine_range, s->list, row, NULL);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}
}

/* The seq range i is remembered under as a forward op (a new reference, or Py_None): correlate._push's text tests. */
static PyObject *range_seq(RangeFeed *self, Stack *s, Py_ssize_t i) {
    PyObject *text = s->r[i].text;
    if (!PyUnicode_Check(text) || PyUnicode_GET_LENGTH(text) == 0) Py_RETURN_NONE;
    int ascii = plain_ascii(text);
    if (PyDict_GET_SIZE(self->wanted) > 0) {
        int has = ascii ? find_bytes(PyUnicode_DATA(text), PyUnicode_GET_LENGTH(text), 0, ", input_op_ids = ") >= 0
                        : PyUnicode_Find(text, INPUT_KEY_STR, 0, PY_SSIZE_T_MAX, 1) >= 0;
        if (PyErr_Occurred()) return NULL;
        if (has) {
            PyObject *row = row_of(s, &s->r[i]);
            PyObject *r = row ? PyObject_CallOneArg(self->take_output_shapes, row) : NULL;
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
        if (PyDict_SetDefault(self->backward_thread, s->thread, Py_True) == NULL) goto fail;
        if (name_engine_range(self, s, i) < 0) goto fail;
    } else if (seq != Py_None) {
        int known = PyDict_Contains(self->backward_thread, s->thread);
        if (known < 0 || (!known && PyDict_SetItem(self->backward_thread, s->thread, Py_False) < 0)) goto fail;
    }
    return seq;
fail:
    Py_DECREF(seq);
    return NULL;
}

/* correlate._push's forward-op memory: (process, seq, on the engine's side) -> the stack down to range depth - 1. */
static int remember_forward(RangeFeed *self, Stack *s, Py_ssize_t depth, PyObject *seq) {
    if (s->process == NULL && (s->process = PyObject_CallOneArg(self->process_of, s->thread)) == NULL) return -1;
    PyObject *side = PyDict_GetItemWithError(self->backward_thread, s->thread);
    if (side == NULL && PyErr_Occurred()) return -1;
    PyObject *key = PyTuple_Pack(3, s->process, seq, side == Py_True ? Py_True : Py_False);
    if (key == NULL) return -1;
    int rc = -1;
    PyObject *prev = PyDict_GetItemWithError(self->fwd, key);
    if (prev == NULL && PyErr_Occurred()) goto done;
    int replace = 0;
    if (prev != NULL && Py_IS_TYPE(prev, &PyList_Type) && PyList_GET_SIZE(prev) > 0) {
        /* kept when this range is nested in the holder (on this thread, within its span) */
        PyObject *holder = PyList_GET_ITEM(prev, PyList_GET_SIZE(prev) - 1);
        Range *r = &s->r[depth - 1];
        long long h_start, h_end;
        int same = PyObject_RichCompareBool(PyTuple_GET_ITEM(holder, 0), s->thread, Py_EQ);
        if (same < 0 || row_int(holder, 1, &h_start) || row_int(holder, 2, &h_end)) goto done;
        replace = !(same && h_start <= r->start_ns && h_end >= r->end_ns);
        if (replace && PyDict_DelItem(self->fwd, key) < 0) goto done;
    }
    if (prev == NULL || replace) {
        PyObject *snapshot = PyList_New(depth);
        if (snapshot == NULL) goto done;
        for (Py_ssize_t k = 0; k < depth; k++) {
            PyObject *row = row_of(s, &s->r[k]);
            if (row == NULL) {
                Py_DECREF(snapshot);
                goto done;
            }
            PyList_SET_ITEM(snapshot, k, Py_NewRef(row));
        }
        int added = bounded_add(self->fwd, key, snapshot, self->fwd_max);
        Py_DECREF(snapshot);
        if (added < 0) goto done;
    }
    rc = 0;
done:
    Py_DECREF(key);
    return rc;
}

/* correlate._push of self->next on its thread's stack (the range is moved there, or dropped) */
static int push(RangeFeed *self) {
    Range r = self->next;
    memset(&self->next, 0, sizeof self->next);
    self->has_next = 0;
    Stack *s = stack_of(self, self->next_thread);
    if (s == NULL) {
        range_clear(&r);
        return -1;
    }
    while (s->n > 0 && s->r[s->n - 1].end_ns <= r.start_ns)
        if (pop_top(self, s) < 0) {
            range_clear(&r);
            return -1;
        }
    Py_ssize_t n = s->n;
    if (n >= self->max_depth) {
        range_clear(&r);
        return count_oddity(self->oddities, self->deep_ranges);
    }
    if (n == s->cap) {
        Py_ssize_t cap = s->cap ? 2 * s->cap : 16;
        Range *grown = PyMem_Realloc(s->r, (size_t)cap * sizeof(Range));
        if (grown == NULL) {
            range_clear(&r);
            PyErr_NoMemory();
            return -1;
        }
        s->r = grown;
        s->cap = cap;
    }
    Py_ssize_t at = n;
    if (n > 0 && s->r[n - 1].start_ns == r.start_ns && s->r[n - 1].end_ns < r.end_ns) {
        /* equal starts: the later end encloses (correlate._push's bisection) */
        Py_ssize_t lo = 0, hi = n - 1;
        while (lo < hi) {
            Py_ssize_t mid = (lo + hi) / 2;
            if (s->r[mid].start_ns == r.start_ns && s->r[mid].end_ns < r.end_ns)
                hi = mid;
            else
                lo = mid + 1;
        }
        at = lo;
        memmove(&s->r[at + 1], &s->r[at], (size_t)(n - at) * sizeof(Range));
    }
    s->r[at] = r;
    s->n = n + 1;
    if (s->synced > at) s->synced = at;
    Py_ssize_t depth = at + 1;
    PyObject *seq = range_seq(self, s, at);
    if (seq == NULL) return -1;
    if (seq != Py_None && depth > 1) {
        PyObject *parent = s->r[depth - 2].text;
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
    int rc = seq == Py_None ? 0 : remember_forward(self, s, depth, seq);
    Py_DECREF(seq);
    return rc;
}

int feed_push_until(PyObject *feed, long long until) {
    RangeFeed *self = (RangeFeed *)feed;
    while (self->has_next && self->next.start_ns <= until)
        if (push(self) < 0 || read_next(self) < 0) return -1;
    return 0;
}

int feed_push_one(PyObject *feed) {
    RangeFeed *self = (RangeFeed *)feed;
    if (!self->has_next) return 0;
    return push(self) < 0 ? -1 : read_next(self);
}

int feed_next_start(PyObject *feed, long long *start) {
    RangeFeed *self = (RangeFeed *)feed;
    if (!self->has_next) return 0;
    *start = self->next.start_ns;
    return 1;
}

int feed_ready(PyObject *feed, long long thread, long long start_ns) {
    RangeFeed *self = (RangeFeed *)feed;
    Stack *s = find_stack(self, thread);
    if (s == NULL) return 0;
    while (s->n > 0 && s->r[s->n - 1].end_ns < start_ns)
        if (pop_top(self, s) < 0) return -1;
    return sync_list(s);
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
    if (!self->has_next) Py_RETURN_NONE;
    return PyLong_FromLongLong(self->next.start_ns);
}

static PyObject *RangeFeed_ready(RangeFeed *self, PyObject *args) {
    PyObject *thread;
    long long start_ns;
    if (!PyArg_ParseTuple(args, "OL", &thread, &start_ns)) return NULL;
    int overflow = 0;
    long long t = PyLong_Check(thread) ? PyLong_AsLongLongAndOverflow(thread, &overflow) : 0;
    if (t == -1 && PyErr_Occurred()) return NULL;
    /* no stack is keyed by anything but a 64-bit int: the Python code finds none for another thread either */
    if (!PyLong_Check(thread) || overflow) Py_RETURN_NONE;
    if (feed_ready((PyObject *)self, t, start_ns) < 0) return NULL;
    Py_RETURN_NONE;
}

static void close_db(RangeFeed *self) {
    ahead_close(self->rows);
    self->rows = NULL;
}

void feed_close(PyObject *feed) {
    RangeFeed *self = (RangeFeed *)feed;
    close_db(self);
    range_clear(&self->next);
    self->has_next = 0;
}

static PyObject *RangeFeed_close(RangeFeed *self, PyObject *Py_UNUSED(ignored)) {
    feed_close((PyObject *)self);
    Py_RETURN_NONE;
}

#define FEED_OBJECTS(X)                                                                                              \
    X(stacks) X(state) X(fwd) X(marker_type) X(engine_seq_type) X(undecoded) X(backward_thread) X(wanted)          \
    X(oddities) X(process_of) X(take_output_shapes) X(name_engine_range) X(quick_seq) X(is_backward_text)           \
    X(deep_ranges) X(reader_oddities) X(not_utf8) X(texts)

static int RangeFeed_traverse(RangeFeed *self, visitproc visit, void *arg) {
#define VISIT(f) Py_VISIT(self->f);
    FEED_OBJECTS(VISIT)
#undef VISIT
    for (size_t i = 0; i < self->table_cap; i++) {
        Stack *s = self->table[i];
        if (s == NULL) continue;
        Py_VISIT(s->list);
        for (Py_ssize_t k = 0; k < s->n; k++) Py_VISIT(s->r[k].row);
    }
    return 0;
}

static int RangeFeed_clear(RangeFeed *self) {
    range_clear(&self->next);
    self->has_next = 0;
    free_stacks(self);
#define CLEAR(f) Py_CLEAR(self->f);
    FEED_OBJECTS(CLEAR)
#undef CLEAR
    return 0;
}

static void RangeFeed_dealloc(RangeFeed *self) {
    PyObject_GC_UnTrack(self);
    close_db(self);
    RangeFeed_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* RangeFeed(path, query (ahead_query), stacks, state, fwd, backward_thread, wanted, oddities, process_of,
 *           take_output_shapes, name_engine_range, quick_seq, is_backward_text, deep_ranges, max_depth,
 *           reader_oddities, not_utf8) */
static int RangeFeed_init(RangeFeed *self, PyObject *args, PyObject *kwds) {
    const char *path, *sql;
    PyObject *query, *shape, *o[14];
    Py_ssize_t max_depth;
    if (!PyArg_ParseTuple(args, "sOO!O!OO!O!O!OOOOOUnO!U", &path, &query, &PyDict_Type, &o[0], &PyDict_Type, &o[1],
                          &o[2], &PyDict_Type, &o[3], &PyDict_Type, &o[4], &PyDict_Type, &o[5], &o[6], &o[7], &o[8],
                          &o[9], &o[10], &o[11], &max_depth, &PyDict_Type, &o[12], &o[13]) ||
        ahead_query(query, &sql, &shape) < 0)
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
    if ((self->texts = PyDict_New()) == NULL ||
        ahead_open(path, sql, shape, core_read_ahead, CoreError, &self->rows) < 0)
        return -1;
    if (ahead_columns(self->rows) != 5) {
        PyErr_SetString(PyExc_ValueError, "a range row has (thread, start, end, text, payload)");
        return -1;
    }
    return read_next(self);
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
    {"ready", (PyCFunction)RangeFeed_ready, METH_VARARGS,
     "ready(thread, start_ns): the thread's stack without the ranges ended before start_ns, its list up to date."},
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

int feed_check(PyObject *o) { return Py_IS_TYPE(o, &RangeFeedType); }

int core_add_feed(PyObject *module) {
    INPUT_KEY_STR = PyUnicode_InternFromString(", input_op_ids = ");
    SEQ_KEY_STR = PyUnicode_InternFromString(SEQ_KEY);
    ENGINE_PREFIX_STR = PyUnicode_InternFromString(ENGINE_PREFIX);
    ONE = PyLong_FromLong(1);
    if (!INPUT_KEY_STR || !SEQ_KEY_STR || !ENGINE_PREFIX_STR || !ONE || PyType_Ready(&RangeFeedType) < 0) return -1;
    return PyModule_AddObjectRef(module, "RangeFeed", (PyObject *)&RangeFeedType);
}
