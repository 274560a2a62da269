/* pyprof.parse._core: the per-row work of the SQLite readers in C (docs/parse.md, "The compiled core").
 *
 * This file: the module, its functions, and LineWriter, which writes the record lines joined to the sweep's infos.
 * The others: the ranges pushed on their stacks (_feed.c), the sweep (_sweep.c), the attributions (_attribute*.c),
 * the launch calls' table (_launches.c), the queries read ahead (_ahead.c).
 *
 * Every SQLite call's result is checked; an error is raised as _core.Error with SQLite's own message.
 */
#include "_core.h"
#include <limits.h>
#include <string.h>

PyObject *CoreError;
int core_read_ahead = AHEAD_OFF;
static PyObject *ONE;  /* made once, at import */

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
    return buf_ll(b, ahead_int64(rows, col));
}

/* v in decimal, as "%lld" writes it: by hand, as snprintf parsed its format for each of a line's eight or so
 * numbers (a tenth of the line writer's own time) */
int buf_ll(Buffer *b, long long v) {
    char text[24];
    char *end = text + sizeof text, *p = end;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;  /* LLONG_MIN too */
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) *--p = '-';
    return buf_put(b, p, end - p);
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
#define N_SEGMENTS 15
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
    PyObject *call_ids;            /* op call -> its call_id, as writer._merge_lines' ``call_ids`` */
    long long next_call_id;
    PyObject *no_call, *empty_head, *empty_tail, *api_end_key;
    PyObject *stats;
    long long clock_skew_ns;
    Py_ssize_t recent_max, window_max;
    Py_ssize_t piece_chars;        /* 0: a line at a time; else lines to a str until they pass it */
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

/* call_id: the op call's number, given in order of first record (writer._merge_lines' ``call_ids``); a new
 * reference, or None */
static PyObject *call_number(LineWriter *self, PyObject *call) {
    if (call == Py_None) Py_RETURN_NONE;
    PyObject *id = PyDict_GetItemWithError(self->call_ids, call);
    if (id != NULL) return Py_NewRef(id);
    if (PyErr_Occurred() || (id = PyLong_FromLongLong(self->next_call_id)) == NULL) return NULL;
    if (bounded_add(self->call_ids, call, id, self->recent_max) < 0) {
        Py_DECREF(id);
        return NULL;
    }
    self->next_call_id++;
    return id;
}

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

/* One record's line (writer._merge_lines, for the activity statement ``t`` is on), added to self->line: 0, or -1
 * with an error set. */
static int activity_line(LineWriter *self, int t) {
    Ahead *st = self->acts[t];
    PyObject *name = NULL, *place = NULL, *shape = NULL, *sub = NULL, *call_id = NULL;
    int rc = -1;
    long long start = ahead_int64(st, A_START), end = ahead_int64(st, A_END);
    /* the horizon start + skew, saturated: past 64 bits every launch start is before it, as in Python */
    long long horizon;
    if (__builtin_add_overflow(start, self->clock_skew_ns, &horizon)) horizon = start < 0 ? LLONG_MIN : LLONG_MAX;
    while (self->launches != NULL && ahead_int64(self->launches, L_START) <= horizon)
        if (take_launch(self) < 0) return -1;
    Launch *record;
    if (launch_of(self, st, &record) < 0) return -1;
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
    if (sub == NULL || (call_id = call_number(self, call)) == NULL ||
        activity_parts(self, t, &name, &place, &shape) < 0)
        goto done;
    if (!PyTuple_Check(shape) || PyTuple_GET_SIZE(shape) != 2) {
        PyErr_SetString(PyExc_TypeError, "a shape's parts are (config, copy)");
        goto done;
    }
    Buffer *b = &self->line;
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
    if (buf_str(b, seg[12]) || (call_id == Py_None ? buf_put(b, "null", 4) : buf_ll(b, PyLong_AsLongLong(call_id))))
        goto done;
    if (buf_str(b, seg[13]) || buf_str(b, tail) || buf_str(b, seg[14])) goto done;
    if (PyErr_Occurred()) goto done;
    rc = 0;
done:
    Py_DECREF(call);
    Py_XDECREF(api);
    Py_DECREF(head);
    Py_DECREF(tail);
    Py_XDECREF(sub);
    Py_XDECREF(call_id);
    Py_XDECREF(name);
    Py_XDECREF(place);
    Py_XDECREF(shape);
    return rc;
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

/* The next line, or with piece_chars the next lines, each ended by a newline, until they pass piece_chars. */
static PyObject *LineWriter_next(LineWriter *self) {
    Buffer *b = &self->line;
    b->size = 0;
    for (;;) {
        int t = first_activity(self);
        if (t < 0) {
            if (b->size > 0) break;  /* the last piece now, the end at the next call */
            store_stats(self);
            return NULL;  /* StopIteration, or the error store_stats set */
        }
        if (activity_line(self, t) < 0 || step(&self->acts[t]) < 0) return NULL;
        if (self->piece_chars == 0) break;
        if (buf_put(b, "\n", 1) < 0) return NULL;
        if ((Py_ssize_t)b->size >= self->piece_chars) break;
    }
    return PyUnicode_DecodeUTF8(b->data, (Py_ssize_t)b->size, "strict");
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
    X(counts) X(call_ids) X(no_call) X(empty_head) X(empty_tail) X(api_end_key) X(stats)

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

/* a query opened (its reading thread started); its first row is read by the caller, once every query is open */
static int prepare(const char *uri, PyObject *query, Ahead **stmt, int columns) {
    if (query == Py_None) return 0;
    const char *sql;
    PyObject *shape;
    if (ahead_query(query, &sql, &shape) < 0 || ahead_open(uri, sql, shape, core_read_ahead, CoreError, stmt) < 0)
        return -1;
    if (ahead_columns(*stmt) != columns) {
        PyErr_SetString(PyExc_ValueError, "a query of the line writer has the wrong number of columns");
        return -1;
    }
    return 0;
}

/* LineWriter(uri (sqlrows.uri), (kernel query, memcpy query, memset query), launch query, infos, segments, parts, no_call,
 *            (empty head, empty tail), api_end_key, stats, clock_skew_ns, recent_max, window_max, piece_chars)
 * A query (ahead_query) is None where its table is absent. piece_chars 0: each line on its own, without its
 * newline; else lines with their newlines, as many to a str as pass piece_chars. */
static int LineWriter_init(LineWriter *self, PyObject *args, PyObject *kwds) {
    const char *uri;
    PyObject *sqls, *launch_sql, *infos, *segments, *parts, *no_call, *empty, *api_end_key, *stats;
    long long skew;
    Py_ssize_t recent_max, window_max, piece_chars;
    if (!PyArg_ParseTuple(args, "sO!OOO!OUO!UOLnnn", &uri, &PyTuple_Type, &sqls, &launch_sql, &infos, &PyTuple_Type,
                          &segments, &parts, &no_call, &PyTuple_Type, &empty, &api_end_key, &stats, &skew,
                          &recent_max, &window_max, &piece_chars))
        return -1;
    if (self->parts != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "LineWriter initialised twice");
        return -1;
    }
    if (PyTuple_GET_SIZE(sqls) != N_TABLES || PyTuple_GET_SIZE(segments) != N_SEGMENTS ||
        PyTuple_GET_SIZE(empty) != 2) {
        PyErr_SetString(PyExc_ValueError, "LineWriter: 3 queries, 15 line segments and 2 empty parts");
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
    self->next_call_id = 0;
    self->window_max = window_max;
    self->piece_chars = piece_chars < 0 ? 0 : piece_chars;
    self->recent.max_entries = recent_max;
    PyObject **caches[] = {&self->names, &self->places, &self->shapes, &self->apis, &self->counts,
                           &self->call_ids};
    for (int i = 0; i < 6; i++)
        if ((*caches[i] = PyDict_New()) == NULL) return -1;
    int columns[N_TABLES] = {K_COLUMNS, C_COLUMNS, C_COLUMNS};
    for (int t = 0; t < N_TABLES; t++)
        if (prepare(uri, PyTuple_GET_ITEM(sqls, t), &self->acts[t], columns[t]) < 0) return -1;
    if (prepare(uri, launch_sql, &self->launches, L_COLUMNS) < 0) return -1;
    /* the launch calls' first rows come after SQLite has gathered their filter's ids (9 ms on a 50k export): read
     * once every query is under way, their waits overlap */
    for (int t = 0; t < N_TABLES; t++)
        if (self->acts[t] != NULL && step(&self->acts[t]) < 0) return -1;
    if (self->launches != NULL && step(&self->launches) < 0) return -1;
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

static int is_container(PyObject *x) {
    return PyList_Check(x) || PyTuple_Check(x) || PyDict_Check(x) || PyAnySet_Check(x);
}

/* whether ``v`` (one level, with ``left`` levels allowed from it down) holds containers deeper than allowed:
 * 1, 0, or -1 with an error */
static int nests_deeper(PyObject *v, long left) {
    if (left <= 0) return 1;
    int rc = 0;
    if (PyDict_CheckExact(v)) {  /* what JSON makes: read in place (a subclass's values() is called below) */
        Py_ssize_t pos = 0;
        PyObject *key, *x;
        while (rc == 0 && PyDict_Next(v, &pos, &key, &x))
            if (is_container(x)) {
                Py_INCREF(x);
                rc = nests_deeper(x, left - 1);
                Py_DECREF(x);
            }
        return rc;
    }
    PyObject *it = PyDict_Check(v) ? PyObject_CallMethod(v, "values", NULL) : Py_NewRef(v);
    PyObject *items = it ? PySequence_Fast(it, "markers._deeper_than iterates each level") : NULL;
    Py_XDECREF(it);
    if (items == NULL) return -1;
    for (Py_ssize_t i = 0; rc == 0 && i < PySequence_Fast_GET_SIZE(items); i++) {
        PyObject *x = PySequence_Fast_GET_ITEM(items, i);
        if (is_container(x)) rc = nests_deeper(x, left - 1);
    }
    Py_DECREF(items);
    return rc;
}

/* markers._deeper_than(value, limit): a JSON marker's containers walked in C, where the Python walk took 110 us of
 * the 170 us of decoding an optimizer's foreach marker (three lists of a model's parameters), distinct in every step
 * of a pyprof.init() capture. The depth is bounded by ``limit``, so is the recursion. */
static PyObject *deeper_than(PyObject *module, PyObject *args) {
    PyObject *value;
    long limit;
    if (!PyArg_ParseTuple(args, "Ol", &value, &limit)) return NULL;
    int rc = nests_deeper(value, limit);
    if (rc < 0) return NULL;
    return PyBool_FromLong(rc);
}

/* ---- a long JSON marker's arguments, split ------------------------------------------------------------------ */

static int json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* whether d[from:to] is JSON whitespace only */
static int all_space(const char *d, Py_ssize_t from, Py_ssize_t to) {
    while (from < to && json_space(d[from])) from++;
    return from == to;
}

/* the end of the JSON string that starts at d[i] (just past its closing quote), or -1 */
static Py_ssize_t string_end(const char *d, Py_ssize_t n, Py_ssize_t i) {
    for (i++; i < n; i++) {
        if (d[i] == '\\') i++;
        else if (d[i] == '"') return i + 1;
    }
    return -1;
}

/* text[from:to] appended to ``pieces``; -1 with an error */
static int add_piece(PyObject *pieces, PyObject *text, Py_ssize_t from, Py_ssize_t to) {
    PyObject *e = PyUnicode_Substring(text, from, to);
    int rc = e == NULL ? -1 : PyList_Append(pieces, e);
    Py_XDECREF(e);
    return rc;
}

/* split_args(text): (the text with its top-level "args" list emptied, the list's element texts), or None.
 *
 * An optimizer's foreach marker lists every parameter tensor, three or four lists of them, and its scalars make it a
 * new text every step: decoding it whole, walking its depth and encoding its arguments again took about 170 us, a
 * quarter of the sweep of a 50k-kernel pyprof.init() export. Its lists repeat from step to step as texts of their
 * own, so markers._decode_split decodes each element text once. Only the places of the elements are found here
 * (strings skipped, brackets counted); json.loads still decides what each piece is, and a piece that is not JSON
 * sends the whole text the whole way. None where splitting is no help or could read the text differently from
 * json.loads: not ASCII, not one object, no "args" list or an empty one, a second "args" key (json.loads keeps the
 * last), a key with an escape in it (which could spell "args"), or anything but whitespace after the object. */
static PyObject *split_args(PyObject *module, PyObject *text) {
    if (!PyUnicode_Check(text) || !PyUnicode_IS_ASCII(text)) Py_RETURN_NONE;
    const char *d = (const char *)PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), i = 0;
    while (i < n && json_space(d[i])) i++;
    if (i == n || d[i] != '{') Py_RETURN_NONE;
    Py_ssize_t open = -1, close = -1, from = 0, end = -1;
    int depth = 0, key_next = 0, in_args = 0;  /* key_next: the next string at depth 1 is a key */
    PyObject *elements = PyList_New(0);
    if (elements == NULL) return NULL;
    for (; i < n && end < 0; i++) {
        char c = d[i];
        if (c == '"') {
            Py_ssize_t j = string_end(d, n, i);
            if (j < 0) goto none;
            if (depth == 1 && key_next) {
                key_next = 0;
                if (memchr(d + i + 1, '\\', (size_t)(j - i - 2)) != NULL) goto none;
                if (j - i - 2 == 4 && memcmp(d + i + 1, "args", 4) == 0) {
                    if (open >= 0) goto none;
                    Py_ssize_t k = j;
                    while (k < n && json_space(d[k])) k++;
                    if (k == n || d[k] != ':') goto none;
                    for (k++; k < n && json_space(d[k]); k++) {}
                    if (k == n || d[k] != '[') goto none;
                    open = i = k;  /* the loop goes on past the list's bracket, counted here */
                    from = k + 1;
                    in_args = 1;
                    depth = 2;
                    continue;
                }
            }
            i = j - 1;
        } else if (c == '{' || c == '[') {
            if (++depth == 1) key_next = 1;
        } else if (c == '}' || c == ']') {
            if (in_args && depth == 2) {  /* the "args" list ends: its last element */
                if (c != ']') goto none;
                if (add_piece(elements, text, from, i) < 0) goto fail;
                close = i;
                in_args = 0;
            }
            if (--depth == 0) end = i + 1;
        } else if (c == ',') {
            if (depth == 1) key_next = 1;
            else if (in_args && depth == 2) {
                if (add_piece(elements, text, from, i) < 0) goto fail;
                from = i + 1;
            }
        }
    }
    /* not one object; whitespace only in "args" (nothing to split); anything after the object */
    if (end < 0 || close < 0 || all_space(d, open + 1, close) || !all_space(d, end, n)) goto none;
    PyObject *head = PyUnicode_Substring(text, 0, open + 1), *tail = PyUnicode_Substring(text, close, n);
    PyObject *skeleton = head && tail ? PyUnicode_Concat(head, tail) : NULL;
    Py_XDECREF(head);
    Py_XDECREF(tail);
    PyObject *parts = skeleton ? PyList_AsTuple(elements) : NULL;
    Py_DECREF(elements);
    if (parts == NULL) {
        Py_XDECREF(skeleton);
        return NULL;
    }
    return Py_BuildValue("(NN)", skeleton, parts);
none:
    Py_DECREF(elements);
    Py_RETURN_NONE;
fail:
    Py_DECREF(elements);
    return NULL;
}

/* ---- a host line's intervals ----------------------------------------------------------------------------- */

/* int64_json(array): the JSON of a one-dimensional array of int64 (any strides), "[1,2,3]": what json.dumps writes of
 * its tolist(). A 50k-kernel pyprof.init() export's host lines hold 432k such numbers, which json took 0.024 s to
 * write on two cores: 4% of the parse, at its end, after the last record. */
static PyObject *int64_json(PyObject *module, PyObject *obj) {
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_STRIDES | PyBUF_FORMAT) < 0) return NULL;
    PyObject *out = NULL;
    const char *f = view.format ? view.format : "B";
    if (*f == '<' || *f == '=' || *f == '@') f++;
    if (view.ndim != 1 || view.itemsize != 8 || !(strcmp(f, "q") == 0 || strcmp(f, "l") == 0)) {
        PyErr_SetString(PyExc_TypeError, "int64_json takes a one-dimensional array of int64");
        goto done;
    }
    Py_ssize_t n = view.shape[0], stride = view.strides[0];
    /* at most 20 characters a number ("-9223372036854775808"), a comma each, and the brackets */
    char *text = PyMem_Malloc((size_t)n * 21 + 2);
    if (text == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    char *w = text, digits[20];
    *w++ = '[';
    for (Py_ssize_t i = 0; i < n; i++) {
        long long v;
        memcpy(&v, (const char *)view.buf + i * stride, sizeof v);
        if (i) *w++ = ',';
        unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
        int k = 0;
        do {
            digits[k++] = (char)('0' + u % 10);
            u /= 10;
        } while (u);
        if (v < 0) *w++ = '-';
        while (k) *w++ = digits[--k];
    }
    *w++ = ']';
    out = PyUnicode_FromStringAndSize(text, w - text);
    PyMem_Free(text);
done:
    PyBuffer_Release(&view);
    return out;
}

static PyMethodDef core_functions[] = {
    {"read_ahead", set_read_ahead, METH_O,
     "read_ahead(on): whether the queries of RangeFeeds, Sweeps and LineWriters made from now on are stepped by "
     "threads of their own (_ahead.c)."},
    {"deeper_than", deeper_than, METH_VARARGS,
     "deeper_than(value, limit): markers._deeper_than (the reference), in C."},
    {"split_args", split_args, METH_O,
     "split_args(text): (the JSON marker text with its \"args\" list emptied, the list's element texts), or None "
     "where splitting could read it differently or is no help."},
    {"int64_json", int64_json, METH_O,
     "int64_json(array): the JSON of a one-dimensional int64 array, as json.dumps writes its tolist()."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT, "pyprof.parse._core", "The per-row work of parse's SQLite readers, in C.", -1,
    core_functions,
};

PyMODINIT_FUNC PyInit__core(void) {
    if (PyType_Ready(&LineWriterType) < 0) return NULL;
    if ((ONE = PyLong_FromLong(1)) == NULL) return NULL;
    PyObject *m = PyModule_Create(&core_module);
    if (m == NULL) return NULL;
    CoreError = PyErr_NewException("pyprof.parse._core.Error", NULL, NULL);
    if (CoreError == NULL || PyModule_AddObjectRef(m, "Error", CoreError) < 0 ||
        PyModule_AddObjectRef(m, "LineWriter", (PyObject *)&LineWriterType) < 0 || core_add_feed(m) < 0 ||
        core_add_attributor(m) < 0 || core_add_sweep(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
