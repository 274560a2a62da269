/* pyprof.parse._core.Sweep: correlate.Correlator.sweep in C, for the compiled line writer.
 *
 * It reads the launch calls (start, end, globalTid, in the writer's order), pushes the ranges that start before each
 * on their stacks (a RangeFeed), asks the Attributor for the launch's attribution and yields
 * ``((number, (head, tail)), call, flags)`` for each launch, or ``(None, None, 0)`` outside every range. A launch
 * whose op waits for a consumer to name its output's shape (emit_nvtx, correlate.OUTPUT_WAIT_NS) holds back the
 * launches after it, as the Python generator does, so the infos come in launch order.
 */
#include "_core.h"

#include <limits.h>

typedef struct {
    PyObject_HEAD
    Ahead *launches;         /* positioned on its next row, or NULL after the last */
    PyObject *attributor, *feed;
    PyObject *held;          /* [(start_ns, attribution)] held back behind one that waits: a list used as a queue */
    Py_ssize_t held_from;    /* the first entry of ``held`` not handed on yet */
    PyObject *ready;         /* infos to hand on, in order; and its first not handed on */
    Py_ssize_t ready_from;
    PyObject *empty_info;    /* (None, None, 0) */
    long long wait_ns;
    int done;
    int started;             /* the launch query's first row read */
} Sweep;

static long long plus(long long a, long long b) {
    long long s;
    return __builtin_add_overflow(a, b, &s) ? (a < 0 ? LLONG_MIN : LLONG_MAX) : s;
}

static int hand_on(Sweep *self, PyObject *a) {
    PyObject *info = a == attributor_empty(self->attributor) ? Py_NewRef(self->empty_info)
                                                              : attributor_info_of(self->attributor, a);
    if (info == NULL) return -1;
    int rc = PyList_Append(self->ready, info);
    Py_DECREF(info);
    return rc;
}

static Py_ssize_t n_held(Sweep *self) { return PyList_GET_SIZE(self->held) - self->held_from; }
static PyObject *held_at(Sweep *self, Py_ssize_t k) { return PyList_GET_ITEM(self->held, self->held_from + k); }

/* the first held entry handed on: its attribution stops waiting where ``stop`` */
static int hand_on_first(Sweep *self, int stop) {
    PyObject *a = PyTuple_GET_ITEM(held_at(self, 0), 1);
    if (stop) attributor_stop_waiting(self->attributor, a);
    int rc = hand_on(self, a);
    self->held_from++;
    if (self->held_from > 1024 && self->held_from * 2 > PyList_GET_SIZE(self->held)) {
        if (PyList_SetSlice(self->held, 0, self->held_from, NULL) < 0) return -1;
        self->held_from = 0;
    }
    return rc;
}

static long long held_start(Sweep *self, Py_ssize_t k) {
    return PyLong_AsLongLong(PyTuple_GET_ITEM(held_at(self, k), 0));
}

/* one launch call through the sweep (correlate.Correlator.sweep's loop body) */
static int sweep_launch(Sweep *self) {
    Ahead *st = self->launches;
    long long start = ahead_int64(st, 0);
    while (n_held(self) > 0 && plus(held_start(self, 0), self->wait_ns) < start)
        if (hand_on_first(self, 1) < 0) return -1;
    long long thread_ll = ahead_int64(st, 2);
    if (self->feed != NULL && (feed_push_until(self->feed, start) < 0 || feed_ready(self->feed, thread_ll, start) < 0))
        return -1;
    PyObject *thread = PyLong_FromLongLong(thread_ll);
    PyObject *start_ns = PyLong_FromLongLong(start);
    PyObject *end_ns = PyLong_FromLongLong(ahead_int64(st, 1));
    PyObject *a = thread && start_ns && end_ns ? attributor_launch(self->attributor, thread, start_ns, end_ns) : NULL;
    Py_XDECREF(thread);
    Py_XDECREF(end_ns);
    int rc = -1;
    if (a == NULL) goto done;
    int waiting = attributor_waiting(self->attributor, a);
    if (waiting < 0) goto done;
    if (n_held(self) == 0 && !waiting) {
        PyObject *wanted = attributor_wanted(self->attributor);
        if (PyDict_GET_SIZE(wanted) > 0) PyDict_Clear(wanted);  /* what still waits is handed on: too late for it */
        rc = hand_on(self, a);
        goto done;
    }
    PyObject *entry = PyTuple_Pack(2, start_ns, a);
    if (entry == NULL || PyList_Append(self->held, entry) < 0) {
        Py_XDECREF(entry);
        goto done;
    }
    Py_DECREF(entry);
    rc = 0;
    while (rc == 0 && n_held(self) > 0) {
        int w = attributor_waiting(self->attributor, PyTuple_GET_ITEM(held_at(self, 0), 1));
        if (w != 0) {
            rc = w < 0 ? -1 : 0;
            break;
        }
        rc = hand_on_first(self, 0);
    }
done:
    Py_XDECREF(start_ns);
    Py_XDECREF(a);
    return rc;
}

/* after the last launch: ranges may still name the shapes that held launches wait for; then the rest goes */
static int sweep_end(Sweep *self) {
    while (self->feed != NULL && n_held(self) > 0 && PyDict_GET_SIZE(attributor_wanted(self->attributor)) > 0) {
        long long next;
        int has = feed_next_start(self->feed, &next);
        if (has < 0) return -1;
        if (!has || next > plus(held_start(self, n_held(self) - 1), self->wait_ns)) break;
        if (feed_push_one(self->feed) < 0) return -1;
    }
    if (self->feed != NULL) feed_close(self->feed);
    while (n_held(self) > 0)
        if (hand_on_first(self, 1) < 0) return -1;
    self->done = 1;
    return 0;
}

static int step_launches(Sweep *self) {
    int rc = ahead_step(self->launches);
    if (rc == 1) return 0;
    ahead_close(self->launches);
    self->launches = NULL;
    return rc;
}

static PyObject *Sweep_next(Sweep *self) {
    if (!self->started) {  /* the first row waited for here, not in Sweep(): the writer's queries start meanwhile */
        self->started = 1;
        if (step_launches(self) < 0) return NULL;
    }
    while (self->ready_from >= PyList_GET_SIZE(self->ready)) {
        if (self->ready_from > 0) {
            if (PyList_SetSlice(self->ready, 0, PyList_GET_SIZE(self->ready), NULL) < 0) return NULL;
            self->ready_from = 0;
        }
        if (self->done) return NULL;
        if (self->launches == NULL) {
            if (sweep_end(self) < 0) return NULL;
            continue;
        }
        if (sweep_launch(self) < 0 || step_launches(self) < 0) return NULL;
    }
    return Py_NewRef(PyList_GET_ITEM(self->ready, self->ready_from++));
}

static void close_db(Sweep *self) {
    ahead_close(self->launches);
    self->launches = NULL;
}

static int Sweep_traverse(Sweep *self, visitproc visit, void *arg) {
    Py_VISIT(self->attributor);
    Py_VISIT(self->feed);
    Py_VISIT(self->held);
    Py_VISIT(self->ready);
    Py_VISIT(self->empty_info);
    return 0;
}

static int Sweep_clear(Sweep *self) {
    Py_CLEAR(self->attributor);
    Py_CLEAR(self->feed);
    Py_CLEAR(self->held);
    Py_CLEAR(self->ready);
    Py_CLEAR(self->empty_info);
    return 0;
}

static void Sweep_dealloc(Sweep *self) {
    PyObject_GC_UnTrack(self);
    close_db(self);
    Sweep_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Sweep_close(Sweep *self, PyObject *Py_UNUSED(ignored)) {
    close_db(self);
    if (self->feed) feed_close(self->feed);
    Py_RETURN_NONE;
}

/* Sweep(path, launch query (ahead_query; start, end, globalTid first), attributor, range feed or None (no ranges),
 *       output wait ns) */
static int Sweep_init(Sweep *self, PyObject *args, PyObject *kwds) {
    const char *path, *sql;
    PyObject *query, *shape, *attributor, *feed;
    long long wait_ns;
    if (!PyArg_ParseTuple(args, "sOOOL", &path, &query, &attributor, &feed, &wait_ns) ||
        ahead_query(query, &sql, &shape) < 0)
        return -1;
    if (self->attributor != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Sweep initialised twice");
        return -1;
    }
    if (!attributor_check(attributor) || (feed != Py_None && !feed_check(feed))) {
        PyErr_SetString(PyExc_TypeError, "Sweep takes an Attributor and a RangeFeed or None");
        return -1;
    }
    self->attributor = Py_NewRef(attributor);
    self->feed = feed == Py_None ? NULL : Py_NewRef(feed);
    self->wait_ns = wait_ns;
    if ((self->held = PyList_New(0)) == NULL || (self->ready = PyList_New(0)) == NULL ||
        (self->empty_info = Py_BuildValue("(OOi)", Py_None, Py_None, 0)) == NULL)
        return -1;
    if (ahead_open(path, sql, shape, core_read_ahead, CoreError, &self->launches) < 0) return -1;
    if (ahead_columns(self->launches) < 3) {
        PyErr_SetString(PyExc_ValueError, "Sweep: the launch query gives start, end, globalTid first");
        return -1;
    }
    return 0;
}

static PyMethodDef Sweep_methods[] = {
    {"close", (PyCFunction)Sweep_close, METH_NOARGS, "Close the database and the range feed's."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject SweepType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pyprof.parse._core.Sweep",
    .tp_basicsize = sizeof(Sweep),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Each launch call's info, in launch order: correlate.Correlator.sweep with an Attributor.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Sweep_init,
    .tp_dealloc = (destructor)Sweep_dealloc,
    .tp_traverse = (traverseproc)Sweep_traverse,
    .tp_clear = (inquiry)Sweep_clear,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)Sweep_next,
    .tp_methods = Sweep_methods,
};

int core_add_sweep(PyObject *module) {
    if (PyType_Ready(&SweepType) < 0) return -1;
    return PyModule_AddObjectRef(module, "Sweep", (PyObject *)&SweepType);
}
