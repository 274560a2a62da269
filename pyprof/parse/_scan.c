/* pyprof.parse._scan: one pass over a table of an nsys export, through SQLite's C API, that gives what the reader
 * needs of it before and beside its records (pyprof/parse/readers/nsys_scan.py: what each fact is, and which SQL of
 * nsys.py and nsys_host.py is its reference, kept as the fallback).
 *
 * The row tests here are those SQL conditions written in C, on the storage class of each value (typeof): the
 * rules of nsys._VALID_ACTIVITY, _VALID_LAUNCH, _VALID_RANGE and the push/pop event type. A comparison whose
 * result depends on a column's type affinity (eventType = 59, textId IN (...)) is taken here only where that
 * affinity is INTEGER (nsys_scan.takes checks it): there a value equals an integer only when it is stored as one.
 *
 * Every SQLite call's result is checked; an error is raised as _scan.Error with SQLite's own message.
 */
#define PY_SSIZE_T_CLEAN
#include "_ahead.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

static PyObject *ScanError;

/* The column layouts of the three kinds of table, in the order nsys_scan selects them. */
enum { ACTIVITIES, CALLS, RANGES };
static const int N_COLUMNS[] = {2, 4, 8};
enum { START, END, THREAD, CORRELATION };                          /* ACTIVITIES: the first two */
enum { R_TYPE, R_START, R_END, R_THREAD, R_TEXT, R_TEXT_ID, R_JSON, R_JSON_ID }; /* RANGES */

/* Rows between two looks for a pending signal (Ctrl-C during a scan of millions of rows). */
#define SIGNAL_ROWS (1 << 16)
/* Intervals a group holds before it is merged (then again each time it doubles): memory follows the merged
 * intervals, not the rows (nsys_host merges block by block for the same reason). */
#define MERGE_MIN (1 << 16)

/* ---- intervals grouped by (process, category) -------------------------------------------------------------- */

typedef struct {
    int64_t start, end;
} Interval;

typedef struct {
    int64_t pid;
    int code;
    Interval *iv;
    size_t n, cap;
    PyObject *names; /* the kept group's names (a list), else NULL */
} Group;

typedef struct {
    Group *groups;
    size_t n, cap;
    size_t *slots; /* open addressing: a group's index + 1, 0 for none */
    size_t n_slots;
} Groups;

static size_t slot_of(int64_t pid, int code, size_t n_slots) {
    uint64_t h = ((uint64_t)pid * 16u + (uint64_t)code) * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 17) & (n_slots - 1);
}

static int groups_rehash(Groups *g, size_t n_slots) {
    size_t *slots = calloc(n_slots, sizeof *slots);
    if (slots == NULL) return -1;
    for (size_t i = 0; i < g->n; i++) {
        size_t s = slot_of(g->groups[i].pid, g->groups[i].code, n_slots);
        while (slots[s]) s = (s + 1) & (n_slots - 1);
        slots[s] = i + 1;
    }
    free(g->slots);
    g->slots = slots;
    g->n_slots = n_slots;
    return 0;
}

/* The group of (pid, code), made when new; NULL when out of memory (an exception set only for a named group's
 * list, which is made holding the GIL: the pass's caller sets MemoryError where none is). */
static Group *group_of(Groups *g, int64_t pid, int code, int named) {
    if (g->n_slots == 0 && groups_rehash(g, 16) < 0) return NULL;
    size_t s = slot_of(pid, code, g->n_slots);
    for (; g->slots[s]; s = (s + 1) & (g->n_slots - 1)) {
        Group *x = &g->groups[g->slots[s] - 1];
        if (x->pid == pid && x->code == code) return x;
    }
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 8;
        Group *more = realloc(g->groups, cap * sizeof *more);
        if (more == NULL) return NULL;
        g->groups = more;
        g->cap = cap;
    }
    Group *x = &g->groups[g->n];
    memset(x, 0, sizeof *x);
    x->pid = pid;
    x->code = code;
    if (named && (x->names = PyList_New(0)) == NULL) return NULL;
    g->slots[s] = ++g->n;
    if (2 * g->n > g->n_slots && groups_rehash(g, 2 * g->n_slots) < 0) return NULL;
    return x;
}

static void groups_free(Groups *g) {
    for (size_t i = 0; i < g->n; i++) {
        free(g->groups[i].iv);
        Py_XDECREF(g->groups[i].names);
    }
    free(g->groups);
    free(g->slots);
    memset(g, 0, sizeof *g);
}

static int by_start(const void *a, const void *b) {
    const Interval *x = a, *y = b;
    return (x->start > y->start) - (x->start < y->start);
}

/* host.union in place: the disjoint intervals covering iv[0..n), in time order, touching ones joined; returns
 * their number. Which of equal starts comes first does not change the union, so the sort need not be stable. */
static size_t union_in_place(Interval *iv, size_t n) {
    if (n == 0) return 0;
    for (size_t i = 1; i < n; i++)
        if (iv[i].start < iv[i - 1].start) {
            qsort(iv, n, sizeof *iv, by_start);
            break;
        }
    size_t last = 0;
    for (size_t i = 1; i < n; i++) {
        if (iv[i].start > iv[last].end)
            iv[++last] = iv[i];
        else if (iv[i].end > iv[last].end)
            iv[last].end = iv[i].end;
    }
    return last + 1;
}

/* Add [start, end] to the group of (pid, code); a kept group (steps) keeps each interval and its name (the GIL held
 * for it). -1 when out of memory, as group_of says. */
static int add_interval(Groups *g, int64_t pid, int code, int keep, int64_t start, int64_t end, PyObject *name) {
    Group *x = group_of(g, pid, code, keep);
    if (x == NULL) return -1;
    if (x->n == x->cap) {
        if (!keep && x->cap >= MERGE_MIN) x->n = union_in_place(x->iv, x->n);
        if (x->n == x->cap || (!keep && x->n > x->cap / 2)) {
            size_t cap = x->cap ? 2 * x->cap : 256;
            Interval *more = realloc(x->iv, cap * sizeof *more);
            if (more == NULL) return -1;
            x->iv = more;
            x->cap = cap;
        }
    }
    x->iv[x->n].start = start;
    x->iv[x->n].end = end;
    x->n++;
    return keep ? PyList_Append(x->names, name) : 0;
}

/* [(pid, code, starts, ends, names or None)] with starts and ends as bytes of native int64 (numpy.frombuffer):
 * kept groups in the order their rows came, the others merged. */
static PyObject *groups_result(Groups *g, int keep_code) {
    PyObject *out = PyList_New(0);
    if (out == NULL) return NULL;
    for (size_t i = 0; i < g->n; i++) {
        Group *x = &g->groups[i];
        if (x->code != keep_code) x->n = union_in_place(x->iv, x->n);
        PyObject *starts = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(x->n * sizeof(int64_t)));
        PyObject *ends = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(x->n * sizeof(int64_t)));
        PyObject *item = NULL;
        if (starts != NULL && ends != NULL) {
            int64_t *s = (int64_t *)PyBytes_AS_STRING(starts), *e = (int64_t *)PyBytes_AS_STRING(ends);
            for (size_t k = 0; k < x->n; k++) {
                s[k] = x->iv[k].start;
                e[k] = x->iv[k].end;
            }
            item = Py_BuildValue("(LiOOO)", (long long)x->pid, x->code, starts, ends,
                                 x->names ? x->names : Py_None);
        }
        Py_XDECREF(starts);
        Py_XDECREF(ends);
        if (item == NULL || PyList_Append(out, item) < 0) {
            Py_XDECREF(item);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(item);
    }
    return out;
}

/* ---- a range's category (nsys_host.category_of), of its inline text or its registered string --------------- */

typedef struct {
    const char *text;
    Py_ssize_t len;
    int code;
} Prefix;

typedef struct {
    Prefix *prefixes; /* in the order they are tried */
    Py_ssize_t n_prefixes;
    const char **parts; /* a text holding all of them is a node's (node_code) */
    Py_ssize_t *part_lens, n_parts;
    int node_code;
    int64_t *reg_ids;     /* the registered strings' ids, sorted, with their codes: read without the GIL */
    int *reg_codes;
    Py_ssize_t n_reg;
    PyObject *names;      /* registered string id -> name, of the kept code's strings (read holding the GIL) */
    int keep_code;
} Categories;

static int contains(const char *s, Py_ssize_t n, const char *needle, Py_ssize_t k) {
    for (Py_ssize_t i = 0; i + k <= n; i++)
        if (s[i] == needle[0] && memcmp(s + i, needle, (size_t)k) == 0) return 1;
    return k == 0;
}

/* category_of on a text's bytes: the prefixes are ASCII, so the SQL's substr on characters is a byte prefix. */
static int inline_code(const Categories *c, const char *s, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < c->n_prefixes; i++)
        if (n >= c->prefixes[i].len && memcmp(s, c->prefixes[i].text, (size_t)c->prefixes[i].len) == 0)
            return c->prefixes[i].code;
    for (Py_ssize_t i = 0; i < c->n_parts; i++)
        if (!contains(s, n, c->parts[i], c->part_lens[i])) return -1;
    return c->node_code;
}

/* The code of registered string ``id`` (-1 for none). */
static int registered_code(const Categories *c, int64_t id) {
    Py_ssize_t lo = 0, hi = c->n_reg;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (c->reg_ids[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < c->n_reg && c->reg_ids[lo] == id ? c->reg_codes[lo] : -1;
}

typedef struct {
    int64_t id;
    int code;
} Registered;

static int by_id(const void *a, const void *b) {
    const Registered *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

/* ``registered`` (id -> code) as the sorted arrays registered_code searches */
static int registered_init(Categories *c, PyObject *registered) {
    Py_ssize_t n = PyDict_GET_SIZE(registered), pos = 0, i = 0;
    Registered *pairs = PyMem_Calloc((size_t)n + 1, sizeof *pairs);
    c->reg_ids = PyMem_Calloc((size_t)n + 1, sizeof *c->reg_ids);
    c->reg_codes = PyMem_Calloc((size_t)n + 1, sizeof *c->reg_codes);
    if (!pairs || !c->reg_ids || !c->reg_codes) {
        PyMem_Free(pairs);
        PyErr_NoMemory();
        return -1;
    }
    PyObject *key, *value;
    while (PyDict_Next(registered, &pos, &key, &value)) {
        pairs[i].id = PyLong_AsLongLong(key);
        pairs[i].code = (int)PyLong_AsLong(value);
        if (PyErr_Occurred()) {
            PyMem_Free(pairs);
            return -1;
        }
        i++;
    }
    qsort(pairs, (size_t)n, sizeof *pairs, by_id);
    for (i = 0; i < n; i++) {
        c->reg_ids[i] = pairs[i].id;
        c->reg_codes[i] = pairs[i].code;
    }
    c->n_reg = n;
    PyMem_Free(pairs);
    return 0;
}

static int categories_init(Categories *c, PyObject *prefixes, PyObject *parts, PyObject *registered) {
    c->n_prefixes = PyTuple_GET_SIZE(prefixes);
    c->n_parts = PyTuple_GET_SIZE(parts);
    c->prefixes = PyMem_Calloc((size_t)c->n_prefixes + 1, sizeof *c->prefixes);
    c->parts = PyMem_Calloc((size_t)c->n_parts + 1, sizeof *c->parts);
    c->part_lens = PyMem_Calloc((size_t)c->n_parts + 1, sizeof *c->part_lens);
    if (!c->prefixes || !c->parts || !c->part_lens) {
        PyErr_NoMemory();
        return -1;
    }
    if (registered_init(c, registered) < 0) return -1;
    for (Py_ssize_t i = 0; i < c->n_prefixes; i++) {
        PyObject *p = PyTuple_GET_ITEM(prefixes, i);
        char *text;
        if (!PyTuple_Check(p) || PyTuple_GET_SIZE(p) != 2 ||
            PyBytes_AsStringAndSize(PyTuple_GET_ITEM(p, 0), &text, &c->prefixes[i].len) < 0) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "a prefix is (bytes, code)");
            return -1;
        }
        c->prefixes[i].text = text;
        c->prefixes[i].code = (int)PyLong_AsLong(PyTuple_GET_ITEM(p, 1));
        if (c->prefixes[i].code == -1 && PyErr_Occurred()) return -1;
    }
    for (Py_ssize_t i = 0; i < c->n_parts; i++) {
        char *text;
        if (PyBytes_AsStringAndSize(PyTuple_GET_ITEM(parts, i), &text, &c->part_lens[i]) < 0) return -1;
        c->parts[i] = text;
    }
    return 0;
}

static void categories_free(Categories *c) {
    PyMem_Free(c->prefixes);
    PyMem_Free((void *)c->parts);
    PyMem_Free(c->part_lens);
    PyMem_Free(c->reg_ids);
    PyMem_Free(c->reg_codes);
}

/* ---- the pass ------------------------------------------------------------------------------------------------ */

typedef struct {
    long long invalid; /* rows of the kind the reader reads, with unusable times or ids (check()'s count) */
    int in_order;      /* the rows read are stored (in rowid order) in start order */
    int any_payload;   /* some range has a JSON payload */
    int have_prev;
    int64_t first_start, prev_start;  /* of the rows read: the first's, the last's */
} Facts;

#define IS_INT(i) (ahead_type(stmt, (i)) == SQLITE_INTEGER)
#define INT(i) ((int64_t)ahead_int64(stmt, (i)))

static void saw_start(Facts *f, int64_t start) {
    if (f->have_prev && start < f->prev_start) f->in_order = 0;
    if (!f->have_prev) f->first_start = start;
    f->have_prev = 1;
    f->prev_start = start;
}

/* SQL's ``column = value``, of a column of INTEGER affinity (nsys_scan.takes): a real stored there is no whole
 * number of 64 bits (those are stored as integers), and a text no number at all, so neither equals an integer. */
static int equals(Ahead *stmt, int i, long long value) {
    return ahead_type(stmt, i) == SQLITE_INTEGER && ahead_int64(stmt, i) == value;
}

static int64_t pid_of(int64_t thread, int shift, int64_t mask) {
    return (thread >> shift) & mask; /* numpy's >> on int64, as nsys_host does it: arithmetic */
}

/* One row of a kernel, memcpy or memset table: _VALID_ACTIVITY. */
static void activity_row(Ahead *stmt, Facts *f) {
    if (IS_INT(START) && IS_INT(END) && ahead_timed(INT(START), INT(END)))
        saw_start(f, INT(START));
    else
        f->invalid++;
}

/* One row of the runtime calls: _VALID_LAUNCH decides what is read and counted; every call with integer times
 * and thread (launch or not) is a host interval (nsys_host.calls). */
static int call_row(Ahead *stmt, Facts *f, Groups *host, int shift, int64_t mask) {
    int timed = IS_INT(START) && IS_INT(END) && ahead_timed(INT(START), INT(END)) && IS_INT(THREAD);
    if (timed && IS_INT(CORRELATION))
        saw_start(f, INT(START));
    else
        f->invalid++;
    if (host == NULL || !timed) return 0;
    return add_interval(host, pid_of(INT(THREAD), shift, mask), 0, 0, INT(START), INT(END), NULL);
}

/* One row of NVTX_EVENTS: push/pop ranges (the event type) with integer times and thread are read; one with an
 * end that is not so is counted; marks and other events are neither. Called without the GIL, which a step's row
 * takes (``*released``: the thread state to restore) for its name. */
static int range_row(Ahead *stmt, Facts *f, Groups *host, const Categories *c, long long event_type,
                     int shift, int64_t mask, PyThreadState **released) {
    if (!equals(stmt, R_TYPE, event_type)) return 0;
    int end_type = ahead_type(stmt, R_END);
    if (!(IS_INT(R_START) && end_type == SQLITE_INTEGER && IS_INT(R_THREAD) && ahead_timed(INT(R_START), INT(R_END)))) {
        if (end_type != SQLITE_NULL) f->invalid++;
        return 0;
    }
    saw_start(f, INT(R_START));
    if (ahead_type(stmt, R_JSON) != SQLITE_NULL || ahead_type(stmt, R_JSON_ID) != SQLITE_NULL)
        f->any_payload = 1;
    if (host == NULL) return 0;
    int code;
    const char *text = NULL;
    Py_ssize_t n = 0;
    if (ahead_type(stmt, R_TEXT) == SQLITE_TEXT) {
        if ((text = ahead_bytes(stmt, R_TEXT, &n)) == NULL) return -1;  /* SQLite out of memory */
        code = inline_code(c, text, n);
    } else if (IS_INT(R_TEXT_ID)) {
        code = registered_code(c, INT(R_TEXT_ID));
    } else {
        return 0;
    }
    if (code < 0) return 0;
    int64_t pid = pid_of(INT(R_THREAD), shift, mask);
    if (code != c->keep_code) return add_interval(host, pid, code, 0, INT(R_START), INT(R_END), NULL);
    /* a step (a few hundred in a capture): its name is a Python string, made holding the GIL */
    PyEval_RestoreThread(*released);
    PyObject *name = NULL;
    if (text != NULL) {
        name = PyUnicode_DecodeUTF8(text, n, "replace");
    } else {
        PyObject *key = PyLong_FromLongLong(INT(R_TEXT_ID));
        if (key != NULL) {
            name = PyDict_GetItemWithError(c->names, key);
            Py_DECREF(key);
            if (name == NULL && !PyErr_Occurred())
                PyErr_SetString(PyExc_KeyError, "a registered step without its name");
            Py_XINCREF(name);
        }
    }
    int rc = name == NULL ? -1 : add_interval(host, pid, code, 1, INT(R_START), INT(R_END), name);
    Py_XDECREF(name);
    *released = PyEval_SaveThread();
    return rc;
}

PyDoc_STRVAR(scan_doc,
"scan(uri, sql, layout, host, event_type, prefixes, node_parts, node_code, registered, names, keep_code,\n"
"     pid_shift, pid_mask)\n"
"-> (invalid, in_order, any_payload, groups or None, first start or None, last start or None)\n\n"
"One pass over the rows of ``sql`` (in rowid order; its columns as ``layout`` lays them out: 0 a kernel, memcpy\n"
"or memset table's start, end; 1 the runtime calls' start, end, globalTid, correlationId; 2 NVTX_EVENTS'\n"
"eventType, start, end, globalTid, text, textId, jsonText, jsonTextId). With ``host``, groups lists the host\n"
"intervals by (pid, code): (pid, code, starts, ends, names) with starts and ends as bytes of int64, the group of\n"
"``keep_code`` as its rows came with their names, the others merged; the first and last starts of the rows read\n"
"(None if none is). The calling thread steps the query and lets go of the GIL while it does (it takes it back for a\n"
"step's name and to look for signals), so the passes over several tables, or parts of one, run at once in threads.\n"
"Raises _scan.Error with SQLite's message.");

static PyObject *scan(PyObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"uri", "sql", "layout", "host", "event_type", "prefixes", "node_parts", "node_code",
                             "registered", "names", "keep_code", "pid_shift", "pid_mask", NULL};
    const char *uri, *sql;
    int layout, want_host, node_code, keep_code, shift;
    long long event_type, mask;
    PyObject *prefixes, *parts, *registered, *names;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "ssipLO!O!iO!O!iiL", kwlist, &uri, &sql, &layout, &want_host,
                                     &event_type, &PyTuple_Type, &prefixes, &PyTuple_Type, &parts, &node_code,
                                     &PyDict_Type, &registered, &PyDict_Type, &names, &keep_code, &shift, &mask))
        return NULL;
    if (layout < ACTIVITIES || layout > RANGES || shift < 0 || shift > 62) {
        PyErr_SetString(PyExc_ValueError, "layout is 0, 1 or 2; pid_shift 0 to 62");
        return NULL;
    }
    Categories cats = {.node_code = node_code, .names = names, .keep_code = keep_code};
    Facts f = {.in_order = 1};
    Groups host = {0};
    Ahead *stmt = NULL;
    PyObject *result = NULL;
    if (categories_init(&cats, prefixes, parts, registered) < 0 ||
        ahead_open(uri, sql, NULL, AHEAD_OFF, ScanError, &stmt) < 0)
        goto done;
    if (ahead_columns(stmt) != N_COLUMNS[layout]) {
        PyErr_Format(PyExc_ValueError, "layout %d reads %d columns, the query gives %d", layout, N_COLUMNS[layout],
                     ahead_columns(stmt));
        goto done;
    }
    Groups *h = (want_host && layout != ACTIVITIES) ? &host : NULL;
    long long rows = 0;
    int rc, bad = 0;
    /* Nothing here touches Python but a step's name (range_row) and the look for signals, each holding the GIL. */
    PyThreadState *released = PyEval_SaveThread();
    while ((rc = ahead_step_quiet(stmt)) == 1) {
        if (layout == ACTIVITIES)
            activity_row(stmt, &f);
        else if (layout == CALLS)
            bad = call_row(stmt, &f, h, shift, mask);
        else
            bad = range_row(stmt, &f, h, &cats, event_type, shift, mask, &released);
        if (bad < 0) break;
        if (++rows % SIGNAL_ROWS == 0) {
            PyEval_RestoreThread(released);
            bad = PyErr_CheckSignals();
            released = PyEval_SaveThread();
            if (bad < 0) break;
        }
    }
    PyEval_RestoreThread(released);
    if (bad < 0) {
        if (!PyErr_Occurred()) PyErr_NoMemory();  /* what failed without the GIL: an allocation */
        goto done;
    }
    if (rc < 0) {
        ahead_raise(stmt);
        goto done;
    }
    PyObject *groups = h ? groups_result(h, keep_code) : Py_NewRef(Py_None);
    if (groups != NULL) {
        PyObject *first = f.have_prev ? PyLong_FromLongLong(f.first_start) : Py_NewRef(Py_None);
        PyObject *last = f.have_prev ? PyLong_FromLongLong(f.prev_start) : Py_NewRef(Py_None);
        if (first != NULL && last != NULL)
            result = Py_BuildValue("(LOONNN)", f.invalid, f.in_order ? Py_True : Py_False,
                                   f.any_payload ? Py_True : Py_False, groups, first, last);
        else {
            Py_XDECREF(first);
            Py_XDECREF(last);
            Py_DECREF(groups);
        }
    }
done:
    ahead_close(stmt);
    groups_free(&host);
    categories_free(&cats);
    return result;
}

/* The passes build and merge their intervals in threads of their own, and what they free stays in malloc's heaps
 * (glibc keeps a heap per thread): 50 MB after the checks of a 1M-kernel export here, 70 MB more on a machine of 16
 * cores. A sweep worker forked after the checks shares those pages with the parser, which counts them twice over;
 * trimming gives them back first. */
static PyObject *trim_heap(PyObject *self, PyObject *Py_UNUSED(ignored)) {
#ifdef __GLIBC__
    malloc_trim(0);
#endif
    Py_RETURN_NONE;
}

static PyMethodDef scan_methods[] = {
    {"scan", (PyCFunction)(void (*)(void))scan, METH_VARARGS | METH_KEYWORDS, scan_doc},
    {"trim_heap", trim_heap, METH_NOARGS, "Give the memory the passes freed back to the system (glibc's malloc_trim)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef scan_module = {
    PyModuleDef_HEAD_INIT, "pyprof.parse._scan",
    "One pass over a table of an nsys export: what the reader needs of it before and beside its records.", -1,
    scan_methods,
};

PyMODINIT_FUNC PyInit__scan(void) {
    PyObject *m = PyModule_Create(&scan_module);
    if (m == NULL) return NULL;
    ScanError = PyErr_NewException("pyprof.parse._scan.Error", NULL, NULL);
    if (ScanError == NULL || PyModule_AddObjectRef(m, "Error", ScanError) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
