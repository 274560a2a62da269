/* pyprof.parse._core.Attributor: a launch's attribution and its JSON parts in C (docs/parse.md, "The compiled core").
 *
 * The same work as correlate.Correlator._launch_attribution, _attribute, _forward_link and _info with
 * encode.attribution, done on the Correlator's own state (its stacks, per-range state, forward-op memory and
 * decoded-marker cache) and on the Python classes that define the data: correlate.Attribution and markers.Marker.
 * Their slots are read and written at the offsets their member descriptors give, so the Python code that reads
 * or changes them (Correlator._take_output_shapes, _name_engine_range) sees one object, and the classes stay the
 * one definition. Texts are decoded once per open range as on the Python path (_attribute_emit.c); the JSON is
 * written by _attribute_json.c.
 *
 * Where the input is odd for C (a range time that is no 64-bit int, a text that is not a str), the chain is handed
 * to the Python method, which defines the answer.
 */
#include "_attribute.h"

#include <string.h>
#ifndef Py_T_OBJECT_EX  /* before Python 3.12 */
#include <structmember.h>
#define Py_T_OBJECT_EX T_OBJECT_EX
#endif

/* the slots' and encoders' names, as the Python classes and record.Field.json spell them */
static const char *A_NAMES[N_A_SLOTS] = {
    "ranges", "layer", "trace", "marker", "reprMarkers", "seqMarker", "seqId", "altSeqId", "dir", "recompute",
    "mod", "op", "args", "outputs", "waiting", "callsite", "host_ns", "fwd", "call", "until_ns", "info",
    "range_ns"};
static const char *M_NAMES[N_M_SLOTS] = {"kind", "name", "mod", "op", "args", "site", "stack", "seq", "stashed",
                                         "op_id", "raw_sizes", "outputs", "backward", "data", "container",
                                         "_args_json", "_lean_json", "dtypes", "concrete"};
static const char *E_NAMES[N_ENCODERS] = {"strings", "nested", "json_items", "ints", "str", "bool", "json", "str?",
                                          "int?"};

static const char ENGINE[] = "autograd::engine::evaluate_function: ";

/* offsets of a slotted class's members, by name */
int slot_offsets(PyObject *type, const char **names, int n, Py_ssize_t *out) {
    for (int i = 0; i < n; i++) {
        PyObject *descr = PyObject_GetAttrString(type, names[i]);
        if (descr == NULL) return -1;
        if (!Py_IS_TYPE(descr, &PyMemberDescr_Type) ||
            ((PyMemberDescrObject *)descr)->d_member->type != Py_T_OBJECT_EX) {
            Py_DECREF(descr);
            PyErr_Format(PyExc_TypeError, "%R.%s is not a slot", type, names[i]);
            return -1;
        }
        out[i] = ((PyMemberDescrObject *)descr)->d_member->offset;
        Py_DECREF(descr);
    }
    return 0;
}

/* ---- rows ------------------------------------------------------------------------------------------------- */

/* row[i] as a 64-bit int; 1 when it is not one (the caller hands the work to Python) */
static int row_ll(PyObject *row, Py_ssize_t i, long long *out) {
    PyObject *v = PyTuple_GET_ITEM(row, i);
    if (!PyLong_CheckExact(v)) return 1;
    int overflow;
    *out = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (*out == -1 && PyErr_Occurred()) return -1;
    return overflow ? 1 : 0;
}

static PyObject *row_key(PyObject *row) { return PyLong_FromVoidPtr(row); }

/* a new Attribution with the values Attribution.__init__ gives */
static PyObject *new_attribution(Attributor *self) {
    PyTypeObject *type = (PyTypeObject *)self->attribution_type;
    PyObject *a = type->tp_alloc(type, 0);
    if (a == NULL) return NULL;
    static const int lists[] = {A_RANGES, A_LAYER, A_TRACE, A_MARKER, A_REPR, A_SEQ_MARKER, A_SEQ_ID, A_ALT_SEQ_ID,
                                A_MOD, A_OP, A_OUTPUTS, A_RANGE_NS};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        PyObject *l = PyList_New(0);
        if (l == NULL) {
            Py_DECREF(a);
            return NULL;
        }
        A(self, a, lists[i]) = l;
    }
    PyObject *zero = PyLong_FromLong(0);
    if (zero == NULL) {
        Py_DECREF(a);
        return NULL;
    }
    A(self, a, A_DIR) = Py_NewRef(self->no_text);
    A(self, a, A_ARGS) = Py_NewRef(self->no_args);
    A(self, a, A_UNTIL_NS) = zero;
    A(self, a, A_RECOMPUTE) = Py_NewRef(Py_False);
    A(self, a, A_WAITING) = Py_NewRef(Py_False);
    static const int nones[] = {A_CALLSITE, A_HOST_NS, A_FWD, A_CALL, A_INFO};
    for (size_t i = 0; i < sizeof nones / sizeof nones[0]; i++) A(self, a, nones[i]) = Py_NewRef(Py_None);
    return a;
}


/* ---- markers ---------------------------------------------------------------------------------------------- */

/* a range's decoded marker (a new reference, or Py_None) as correlate._attribute finds it */
static PyObject *range_marker(Attributor *self, PyObject *row, PyObject *text, int in_engine, int counters) {
    PyObject *key = row_key(row);
    if (key == NULL) return NULL;
    PyObject *m = NULL;
    if (!counters) {
        PyObject *known = PyDict_GetItemWithError(self->markers, key);
        if (known == NULL && PyErr_Occurred()) goto done;
        if (known != NULL && PyTuple_Check(known) && PyTuple_GET_SIZE(known) == 2 && PyTuple_GET_ITEM(known, 0) == row)
            m = Py_NewRef(PyTuple_GET_ITEM(known, 1));
        else
            m = decode_text(self, text);
        goto done;
    }
    PyObject *s = PyDict_GetItemWithError(self->state, key);
    if (s == NULL && PyErr_Occurred()) goto done;
    if (s != NULL && (!PyList_CheckExact(s) || PyList_GET_SIZE(s) != 3)) {
        PyErr_SetString(PyExc_TypeError, "a range's state is [marker, attribution, call]");
        goto done;
    }
    PyObject *s0 = s ? PyList_GET_ITEM(s, 0) : NULL;
    if (s != NULL && s0 != self->undecoded && !Py_IS_TYPE(s0, (PyTypeObject *)self->engine_seq_type)) {
        m = Py_NewRef(s0);
        goto done;
    }
    m = decode_text(self, text);
    if (m == NULL) goto done;
    if (s == NULL) {
        if (new_range_state(self->state, key, m) == NULL) goto fail;
    } else if (s0 == self->undecoded) {
        PyList_SetItem(s, 0, Py_NewRef(m));
    } else {  /* an engine range whose node's seq is known (_EngineSeq) */
        PyObject *seq = Py_NewRef(PyTuple_GET_ITEM(s0, 0));
        PyList_SetItem(s, 0, Py_NewRef(m));
        if (m != Py_None) set_slot(m, self->m_off[M_SEQ], seq);
        Py_DECREF(seq);
        goto done;
    }
    int forward = 0;  /* a forward op's marker, which a backward node's link reads (correlate.Correlator._markers) */
    if (m != Py_None && kind_is(self, m, K_SEQ) && !in_engine) {
        PyObject *backward = mslot(self, m, M_BACKWARD);
        int b = backward ? PyObject_IsTrue(backward) : -1;
        if (b < 0) goto fail;
        forward = !b;
    }
    if (forward) {
        PyObject *pair = PyTuple_Pack(2, row, m);
        if (pair == NULL) goto fail;
        int rc = bounded_add(self->markers, key, pair, self->markers_max);
        Py_DECREF(pair);
        if (rc < 0) goto fail;
    }
    goto done;
fail:
    Py_CLEAR(m);
done:
    Py_DECREF(key);
    return m;
}

/* correlate._range_name */
static PyObject *range_name(Attributor *self, PyObject *m, PyObject *text) {
    if (kind_is(self, m, K_OP)) {
        PyObject *mod = mslot(self, m, M_MOD), *op = mslot(self, m, M_OP);
        if (mod == NULL || op == NULL) return NULL;
        int has_mod = PyObject_IsTrue(mod);
        if (has_mod < 0) return NULL;
        return has_mod ? PyUnicode_FromFormat("%S.%S", mod, op) : PyObject_Str(op);
    }
    if (kind_is(self, m, K_MODULE)) {
        PyObject *name = mslot(self, m, M_NAME);
        return name ? PyUnicode_FromFormat("module:%S", name) : NULL;
    }
    if (kind_is(self, m, K_SEQ)) return Py_XNewRef(mslot(self, m, M_NAME));
    return Py_NewRef(text);
}

/* ---- one attribution -------------------------------------------------------------------------------------- */

typedef struct {
    PyObject *m, *row;  /* borrowed: held by ``held`` and the chain */
    Py_ssize_t i;
    int side;           /* 0: op, 1: forward seq, 2: backward seq, -1: dropped (recompute) */
} Item;

enum { OPS, FWD_SEQ, BWD_SEQ };

static PyObject *attribute(Attributor *self, PyObject *chain, int counters);

/* correlate._forward_link: the JSON of the forward op of the innermost numbered backward range, or None */
static PyObject *forward_link(Attributor *self, Item *items, Py_ssize_t n) {
    /* nested: more than one distinct seq among the backward ranges, or more than one engine range among them */
    PyObject *first_seq = NULL;
    int nested = 0, engines = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        if (items[k].side != BWD_SEQ) continue;
        PyObject *seq = M(self, items[k].m, M_SEQ);
        if (seq != NULL && seq != Py_None) {
            if (first_seq == NULL) first_seq = seq;
            else {
                int same = PyObject_RichCompareBool(first_seq, seq, Py_EQ);
                if (same < 0) return NULL;
                if (!same) nested = 1;
            }
        }
        PyObject *text = PyTuple_GET_ITEM(items[k].row, 3);
        if (PyUnicode_Check(text) && PyUnicode_GET_LENGTH(text) > 0) {
            Py_ssize_t is = PyUnicode_Tailmatch(text, self->engine_prefix, 0, PY_SSIZE_T_MAX, -1);
            if (is < 0) return NULL;
            engines += (int)is;
        }
    }
    if (engines > 1) nested = 1;
    for (Py_ssize_t k = n - 1; k >= 0; k--) {
        if (items[k].side != BWD_SEQ) continue;
        PyObject *seq = M(self, items[k].m, M_SEQ);
        if (seq == NULL || seq == Py_None) continue;
        PyObject *process = PyObject_CallOneArg(self->process_of, PyTuple_GET_ITEM(items[k].row, 0));
        if (process == NULL) return NULL;
        for (int side = 0; side < 2; side++) {
            PyObject *on_engine = (side == 0) == nested ? Py_True : Py_False;
            PyObject *key = PyTuple_Pack(3, process, seq, on_engine);
            if (key == NULL) {
                Py_DECREF(process);
                return NULL;
            }
            PyObject *f = PyDict_GetItemWithError(self->fwd, key);
            if (f == NULL) {
                Py_DECREF(key);
                if (PyErr_Occurred()) {
                    Py_DECREF(process);
                    return NULL;
                }
                continue;
            }
            Py_INCREF(f);
            if (PyList_CheckExact(f)) {  /* a stack snapshot: attributed once, without links of its own; kept as JSON */
                Py_ssize_t len = PyList_GET_SIZE(f);
                PyObject *chain = PyList_New(0);
                long long last_end = 0;
                int odd = chain == NULL ? -1 : (len ? row_ll(PyList_GET_ITEM(f, len - 1), 2, &last_end) : 0);
                for (Py_ssize_t r = 0; odd == 0 && r < len; r++) {
                    long long end = 0;
                    odd = row_ll(PyList_GET_ITEM(f, r), 2, &end);
                    if (odd == 0 && end >= last_end && PyList_Append(chain, PyList_GET_ITEM(f, r)) < 0) odd = -1;
                }
                PyObject *made = NULL;
                if (odd == 0) made = attribute(self, chain, 0);
                else if (odd > 0) made = PyObject_CallMethod(self->correlator, "_attribute", "OO",
                                                            chain ? chain : Py_None, Py_False);
                Py_XDECREF(chain);
                Py_DECREF(f);
                f = made ? link_json(self, made, seq) : NULL;
                Py_XDECREF(made);
                if (f == NULL || PyDict_SetItem(self->fwd, key, f) < 0) {
                    Py_XDECREF(f);
                    Py_DECREF(key);
                    Py_DECREF(process);
                    return NULL;
                }
            }
            Py_DECREF(key);
            Py_DECREF(process);
            if (!PyUnicode_CheckExact(f)) {
                Py_DECREF(f);
                PyErr_SetString(PyExc_TypeError, "the forward-op memory holds stacks and link JSON");
                return NULL;
            }
            return f;
        }
        Py_DECREF(process);
    }
    Py_RETURN_NONE;
}

/* correlate._call_id */
static PyObject *call_id(Attributor *self, PyObject *row) {
    PyObject *key = row_key(row);
    if (key == NULL) return NULL;
    PyObject *s = PyDict_GetItemWithError(self->state, key), *out = NULL;
    if (s == NULL && (PyErr_Occurred() || (s = new_range_state(self->state, key, self->undecoded)) == NULL))
        goto done;
    if (PyList_GET_ITEM(s, 2) == Py_None) {
        PyObject *n = PyIter_Next(self->calls);
        if (n == NULL) goto done;
        PyList_SetItem(s, 2, n);
    }
    out = Py_NewRef(PyList_GET_ITEM(s, 2));
done:
    Py_DECREF(key);
    return out;
}

static int append_all(PyObject *list, PyObject *items) {
    if (items == NULL || items == Py_None) return 0;
    Py_ssize_t n = PyList_GET_SIZE(list);
    return PyList_SetSlice(list, n, n, items);
}

static int truthy_slot(Attributor *self, PyObject *m, int i) {
    PyObject *v = mslot(self, m, i);
    return v == NULL ? -1 : PyObject_IsTrue(v);
}

/* _backward_graph(m): a kernel of a compiled backward graph */
static int backward_graph(Attributor *self, PyObject *m) {
    PyObject *mod = mslot(self, m, M_MOD), *data = mslot(self, m, M_DATA);
    if (mod == NULL || data == NULL) return -1;
    int is = PyObject_RichCompareBool(mod, self->compiled_mod, Py_EQ);
    if (is <= 0 || !PyDict_CheckExact(data)) return is < 0 ? -1 : 0;
    PyObject *graph = PyDict_GetItemString(data, "graph");
    return graph != NULL && PyUnicode_Check(graph) && PyUnicode_CompareWithASCIIString(graph, "backward") == 0;
}

/* _numbered_in_backward(m): a seq that says autograd numbered the op (0 is none, in backward work) */
static int numbered_in_backward(Attributor *self, PyObject *m) {
    PyObject *seq = M(self, m, M_SEQ);
    if (seq == Py_None) return 0;
    if (!PyLong_CheckExact(seq)) return 1;  /* readers give ints; anything else is not 0, as in Python */
    int overflow;
    long v = PyLong_AsLongAndOverflow(seq, &overflow);
    if (v == -1 && PyErr_Occurred()) PyErr_Clear();  /* cannot fail on an exact int */
    return v != 0 || overflow != 0;
}

/* Marker.args_json() (a new reference), encoded once per marker: its common cases here, an op without arguments
 * (get_args gives [], kept as the marker's args) and an emit_nvtx sizes text already encoded (markers._sizes_json);
 * the method for the rest. */
static PyObject *args_json(Attributor *self, PyObject *m) {
    PyObject *done = M(self, m, M_ARGS_JSON);
    if (done != NULL && PyUnicode_CheckExact(done)) return Py_NewRef(done);
    PyObject *args = M(self, m, M_ARGS), *sizes = M(self, m, M_RAW_SIZES);
    if (args == Py_None && M(self, m, M_DTYPES) == Py_None && M(self, m, M_CONCRETE) == Py_None && sizes != NULL) {
        if (sizes == Py_None) {
            PyObject *none = PyList_New(0);
            if (none == NULL) return NULL;
            set_slot(m, self->m_off[M_ARGS], none);
            Py_DECREF(none);
            set_slot(m, self->m_off[M_ARGS_JSON], self->no_args);
            return Py_NewRef(self->no_args);
        }
        if (PyUnicode_CheckExact(sizes)) {
            PyObject *known = PyDict_GetItemWithError(self->sizes_json, sizes);
            if (known != NULL) {
                set_slot(m, self->m_off[M_ARGS_JSON], known);
                return Py_NewRef(known);
            }
            if (PyErr_Occurred()) return NULL;
        }
    }
    return PyObject_CallMethod(m, "args_json", NULL);
}

/* correlate.Correlator._attribute: a new reference to the Attribution of a launch enclosed by ``chain`` */
static PyObject *attribute(Attributor *self, PyObject *chain, int counters) {
    Py_ssize_t n = PyList_GET_SIZE(chain);
    /* times that are no 64-bit ints, texts that are no str: the Python method defines what they give */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *row = PyList_GET_ITEM(chain, i);
        long long v;
        int odd = PyTuple_GET_SIZE(row) < 5 ? 1 : row_ll(row, 1, &v);
        if (odd == 0) odd = row_ll(row, 2, &v);
        if (odd == 0 && PyTuple_GET_ITEM(row, 3) != Py_None && !PyUnicode_Check(PyTuple_GET_ITEM(row, 3))) odd = 1;
        if (odd < 0) return NULL;
        if (odd) return PyObject_CallMethod(self->correlator, "_attribute", "OO", chain, counters ? Py_True : Py_False);
    }
    PyObject *a = new_attribution(self);
    if (a == NULL) return NULL;
    Item *items = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Item));
    PyObject *held = PyList_New(0);  /* the markers of the chain, alive until the end */
    Py_ssize_t n_items = 0;
    if (items == NULL || held == NULL) goto fail;
    PyObject *until = NULL;
    long long until_ll = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        long long end = 0;
        row_ll(PyList_GET_ITEM(chain, i), 2, &end);
        if (until == NULL || end < until_ll) {
            until = PyTuple_GET_ITEM(PyList_GET_ITEM(chain, i), 2);
            until_ll = end;
        }
    }
    if (until != NULL) set_slot(a, self->a_off[A_UNTIL_NS], until);
    PyObject *ranges = A(self, a, A_RANGES), *trace = A(self, a, A_TRACE), *layer = A(self, a, A_LAYER);
    PyObject *range_ns = A(self, a, A_RANGE_NS);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *row = PyList_GET_ITEM(chain, i);
        if (PyList_Append(range_ns, PyTuple_GET_ITEM(row, 1)) < 0 ||
            PyList_Append(range_ns, PyTuple_GET_ITEM(row, 2)) < 0)
            goto fail;
    }
    int in_engine = 0, node;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *row = PyList_GET_ITEM(chain, i), *text = PyTuple_GET_ITEM(row, 3);
        int has_text = text != Py_None && PyUnicode_GET_LENGTH(text) > 0;
        node = in_engine;
        in_engine = 0;
        if (has_text) {
            Py_ssize_t is = PyUnicode_Tailmatch(text, self->engine_prefix, 0, PY_SSIZE_T_MAX, -1);
            if (is < 0) goto fail;
            in_engine = (int)is;
        }
        if (!has_text) {
            if (PyList_Append(ranges, self->no_text) < 0) goto fail;
            continue;
        }
        PyObject *m = range_marker(self, row, text, in_engine, counters);
        if (m == NULL) goto fail;
        int rc = PyList_Append(held, m);
        Py_DECREF(m);
        if (rc < 0) goto fail;
        if (m == Py_None) {
            if (PyList_Append(ranges, text) < 0) goto fail;
            continue;
        }
        PyObject *name = range_name(self, m, text);
        if (name == NULL) goto fail;
        rc = PyList_Append(ranges, name);
        Py_DECREF(name);
        if (rc < 0) goto fail;
        Item *it = &items[n_items];
        it->m = m;
        it->row = row;
        it->i = i;
        it->side = -2;
        if (kind_is(self, m, K_SEQ)) {
            int backward = truthy_slot(self, m, M_BACKWARD);
            PyObject *seq = mslot(self, m, M_SEQ);
            if (backward < 0 || seq == NULL) goto fail;
            it->side = backward || (node && seq != Py_None) ? BWD_SEQ : FWD_SEQ;
        } else if (kind_is(self, m, K_OP)) {
            it->side = OPS;
            PyObject *stack = mslot(self, m, M_STACK), *site = mslot(self, m, M_SITE);
            if (stack == NULL || site == NULL) goto fail;
            int has_stack = PyObject_IsTrue(stack), has_site = PyObject_IsTrue(site);
            if (has_stack < 0 || has_site < 0) goto fail;
            if (has_stack ? append_all(trace, stack) < 0 : has_site && PyList_Append(trace, site) < 0)
                goto fail;
        } else if (kind_is(self, m, K_MODULE) || kind_is(self, m, K_LAYER)) {
            PyObject *mname = mslot(self, m, M_NAME);
            if (mname == NULL || PyList_Append(layer, mname) < 0) goto fail;
        } else if (kind_is(self, m, K_TRACE)) {
            PyObject *stack = mslot(self, m, M_STACK);
            if (stack == NULL || append_all(trace, stack) < 0) goto fail;
        } else if (kind_is(self, m, K_REPR)) {
            PyObject *data = mslot(self, m, M_DATA);
            if (data == NULL || PyList_Append(A(self, a, A_REPR), data) < 0) goto fail;
        }
        if (it->side != -2) n_items++;
    }
    /* activation checkpointing: a numbered forward op inside backward work is a recomputed forward op */
    Py_ssize_t inner = -1;
    for (Py_ssize_t k = 0; k < n_items; k++)
        if (items[k].side == BWD_SEQ) inner = items[k].i;
    if (inner >= 0) {
        int recompute = 0;
        for (Py_ssize_t k = 0; k < n_items && !recompute; k++)
            recompute = items[k].side == FWD_SEQ && items[k].i > inner && numbered_in_backward(self, items[k].m);
        if (recompute) {
            set_slot(a, self->a_off[A_RECOMPUTE], Py_True);
            for (Py_ssize_t k = 0; k < n_items; k++)
                if (items[k].side == BWD_SEQ || items[k].i <= inner) items[k].side = -1;
        }
    }
    int any_ops = 0, any_fwd = 0, any_bwd = 0;
    for (Py_ssize_t k = 0; k < n_items; k++) {
        any_ops |= items[k].side == OPS;
        any_fwd |= items[k].side == FWD_SEQ;
        any_bwd |= items[k].side == BWD_SEQ;
    }
    PyObject *thread_side = PyDict_GetItemWithError(self->backward_thread,
                                                    PyTuple_GET_ITEM(PyList_GET_ITEM(chain, 0), 0));
    if (thread_side == NULL && PyErr_Occurred()) goto fail;
    int engine_thread = thread_side == Py_True;
    /* seqMarker, seqId, altSeqId in chain order; an op's seq of 0 in backward work is no seqId */
    PyObject *seq_marker = A(self, a, A_SEQ_MARKER), *seq_id = A(self, a, A_SEQ_ID);
    for (Py_ssize_t k = 0; k < n_items; k++) {
        if (items[k].side != FWD_SEQ && items[k].side != BWD_SEQ) continue;
        PyObject *m = items[k].m, *text = PyTuple_GET_ITEM(items[k].row, 3);
        int has_text = text != Py_None && PyUnicode_GET_LENGTH(text) > 0;
        if (PyList_Append(seq_marker, has_text ? text : M(self, m, M_NAME)) < 0) goto fail;
        PyObject *seq = M(self, m, M_SEQ);
        if (seq != Py_None && (items[k].side == BWD_SEQ || !(any_bwd || engine_thread)
                               || numbered_in_backward(self, m))) {
            int known = PySequence_Contains(seq_id, seq);
            if (known < 0 || (!known && PyList_Append(seq_id, seq) < 0)) goto fail;
        }
        PyObject *stashed = mslot(self, m, M_STASHED);
        if (stashed == NULL || (stashed != Py_None && PyList_Append(A(self, a, A_ALT_SEQ_ID), stashed) < 0)) goto fail;
    }
    for (Py_ssize_t k = 0; k < n_items; k++) {
        if (items[k].side != OPS) continue;
        PyObject *lean = lean_json(self, items[k].m, PyTuple_GET_ITEM(items[k].row, 4));
        if (lean == NULL) goto fail;
        int rc = PyList_Append(A(self, a, A_MARKER), lean);
        Py_DECREF(lean);
        if (rc < 0) goto fail;
    }
    /* named: the ops, else the numbered ranges that are not containers, else any numbered range */
    int named_side = -1, named_uncontained = 0;
    if (any_ops) {
        named_side = OPS;
    } else {
        for (int side = FWD_SEQ; side <= BWD_SEQ && named_side < 0; side++)
            for (Py_ssize_t k = 0; k < n_items; k++) {
                if (items[k].side != side) continue;
                int c = truthy_slot(self, items[k].m, M_CONTAINER);
                if (c < 0) goto fail;
                if (!c) {
                    named_side = side;
                    named_uncontained = 1;
                    break;
                }
            }
        if (named_side < 0) named_side = any_fwd ? FWD_SEQ : any_bwd ? BWD_SEQ : -1;
    }
    int engine_work = 0;
    if (!any_bwd && A(self, a, A_RECOMPUTE) != Py_True) {
        engine_work = engine_thread;
        for (Py_ssize_t k = 0; k < n_items && engine_work; k++)
            if (items[k].side == FWD_SEQ && numbered_in_backward(self, items[k].m)) engine_work = 0;
    }
    if (named_side < 0) {
        if (engine_work) set_slot(a, self->a_off[A_DIR], self->bprop);
        goto done;
    }
    int is_bprop = any_bwd || engine_work;
    for (Py_ssize_t k = 0; k < n_items && !is_bprop; k++) {
        if (items[k].side != OPS) continue;
        int is = backward_graph(self, items[k].m);
        if (is < 0) goto fail;
        is_bprop = is;
    }
    set_slot(a, self->a_off[A_DIR], is_bprop ? self->bprop : self->fprop);
    /* mod, op of the named ranges; the first of them gives args, outputs, callsite, host time */
    Item *first = NULL;
    PyObject *mods = A(self, a, A_MOD), *ops = A(self, a, A_OP);
    for (Py_ssize_t k = 0; k < n_items; k++) {
        if (items[k].side != named_side) continue;
        if (named_uncontained) {
            int c = truthy_slot(self, items[k].m, M_CONTAINER);
            if (c < 0) goto fail;
            if (c) continue;
        }
        PyObject *mod = mslot(self, items[k].m, M_MOD), *op = mslot(self, items[k].m, M_OP);
        if (mod == NULL || op == NULL || PyList_Append(mods, mod) < 0 || PyList_Append(ops, op) < 0) goto fail;
        if (first == NULL) first = &items[k];
    }
    PyObject *fm = first->m, *shaped = fm;
    PyObject *fargs = mslot(self, fm, M_ARGS), *fsizes = mslot(self, fm, M_RAW_SIZES);
    if (fargs == NULL || fsizes == NULL) goto fail;
    if (fargs == Py_None && fsizes == Py_None && kind_is(self, fm, K_OP)) {
        for (Py_ssize_t k = 0; k < n_items; k++) {
            if (items[k].side != FWD_SEQ) continue;
            if (M(self, items[k].m, M_RAW_SIZES) != Py_None || M(self, items[k].m, M_ARGS) != Py_None) {
                shaped = items[k].m;
                break;
            }
        }
    }
    PyObject *args = args_json(self, shaped);
    if (args == NULL) goto fail;
    set_slot(a, self->a_off[A_ARGS], args);
    Py_DECREF(args);
    PyObject *outputs = mslot(self, shaped, M_OUTPUTS);
    if (outputs == NULL) goto fail;
    int has_outputs = PyObject_IsTrue(outputs);
    if (has_outputs < 0) goto fail;
    if (has_outputs) set_slot(a, self->a_off[A_OUTPUTS], outputs);
    PyObject *site = mslot(self, fm, M_SITE), *stack = mslot(self, fm, M_STACK);
    if (site == NULL || stack == NULL) goto fail;
    int truthy = PyObject_IsTrue(site);
    if (truthy < 0) goto fail;
    PyObject *callsite = NULL;
    if (truthy) callsite = Py_NewRef(site);
    else {
        int has_stack = PyObject_IsTrue(stack);
        if (has_stack < 0) goto fail;
        if (has_stack) {
            callsite = PyObject_CallOneArg(self->user_site, stack);  /* frames.user_site: None where all are torch's */
            if (callsite == NULL) goto fail;
            if (callsite == Py_None) Py_CLEAR(callsite);
        }
    }
    if (callsite == NULL && any_ops && PyList_GET_SIZE(trace) > 0) {
        callsite = PyObject_CallOneArg(self->user_site, trace);
        if (callsite == NULL) goto fail;
        if (callsite == Py_None) Py_CLEAR(callsite);
    }
    if (callsite != NULL) {
        set_slot(a, self->a_off[A_CALLSITE], callsite);
        Py_DECREF(callsite);
    }
    long long fstart = 0, fend = 0;
    row_ll(first->row, 1, &fstart);
    row_ll(first->row, 2, &fend);
    if (fend >= fstart) {
        PyObject *host = PyNumber_Subtract(PyTuple_GET_ITEM(first->row, 2), PyTuple_GET_ITEM(first->row, 1));
        if (host == NULL) goto fail;
        set_slot(a, self->a_off[A_HOST_NS], host);
        Py_DECREF(host);
    }
    if (counters) {
        Item *inner_bwd = NULL;
        for (Py_ssize_t k = 0; k < n_items; k++)
            if (items[k].side == BWD_SEQ) inner_bwd = &items[k];
        Item *last_op = NULL;
        for (Py_ssize_t k = 0; k < n_items; k++)
            if (items[k].side == OPS) last_op = &items[k];
        int own = 0;
        if (inner_bwd && last_op) {
            PyObject *mod = mslot(self, last_op->m, M_MOD);
            if (mod == NULL) goto fail;
            own = PyObject_RichCompareBool(mod, self->compiled_mod, Py_EQ);
            if (own < 0) goto fail;
        }
        PyObject *call_row = first->row;
        if (inner_bwd && !own) {  /* correlate._node_call: the engine's range around the node, else the node's */
            call_row = inner_bwd->row;
            if (inner_bwd->i > 0) {
                PyObject *up = PyList_GET_ITEM(chain, inner_bwd->i - 1), *text = PyTuple_GET_ITEM(up, 3);
                if (text != Py_None && PyUnicode_GET_LENGTH(text) > 0) {
                    Py_ssize_t is = PyUnicode_Tailmatch(text, self->engine_prefix, 0, PY_SSIZE_T_MAX, -1);
                    if (is < 0) goto fail;
                    if (is) call_row = up;
                }
            }
        }
        PyObject *call = call_id(self, call_row);
        if (call == NULL) goto fail;
        set_slot(a, self->a_off[A_CALL], call);
        Py_DECREF(call);
        if (inner_bwd) {
            PyObject *link = forward_link(self, items, n_items);
            if (link == NULL) goto fail;
            set_slot(a, self->a_off[A_FWD], link);
            Py_DECREF(link);
        } else if (kind_is(self, fm, K_SEQ) && M(self, fm, M_OP_ID) != Py_None && PyUnicode_CheckExact(fsizes)) {
            /* emit_nvtx with shapes: an op whose output shape its inputs do not tell waits for its consumer */
            PyObject *op = mslot(self, fm, M_OP);
            PyObject *hit = op ? PyObject_CallOneArg(self->output_ops, op) : NULL;
            if (hit == NULL) goto fail;
            int waits = hit != Py_None;
            Py_DECREF(hit);
            if (waits) {
                set_slot(a, self->a_off[A_WAITING], Py_True);
                PyObject *process = PyObject_CallOneArg(self->process_of, PyTuple_GET_ITEM(first->row, 0));
                PyObject *key = process ? PyTuple_Pack(2, process, M(self, fm, M_OP_ID)) : NULL;
                Py_XDECREF(process);
                if (key == NULL) goto fail;
                PyObject *fresh = PyList_New(0);
                PyObject *waiting = fresh ? PyDict_SetDefault(self->wanted, key, fresh) : NULL;
                Py_XDECREF(fresh);
                Py_DECREF(key);
                if (waiting == NULL || PyList_Append(waiting, a) < 0) goto fail;
            }
        }
    }
done:
    Py_DECREF(held);
    PyMem_Free(items);
    return a;
fail:
    Py_XDECREF(held);
    PyMem_Free(items);
    Py_DECREF(a);
    return NULL;
}

/* ---- the launch's attribution ----------------------------------------------------------------------------- */

static PyObject *outside(Attributor *self, PyObject *thread) {
    PyObject *side = PyDict_GetItemWithError(self->backward_thread, thread);
    if (side == NULL && PyErr_Occurred()) return NULL;
    int bw = side ? PyObject_IsTrue(side) : 0;
    if (bw < 0) return NULL;
    return Py_NewRef(bw ? self->backward_bare : self->empty);
}

/* Correlator._launch_attribution(thread, start_ns, end_ns) */
static PyObject *launch_attribution(Attributor *self, PyObject *thread, PyObject *start_obj, PyObject *end_obj) {
    long long start_ns, end_ns;
    int o1, o2;
    start_ns = PyLong_AsLongLongAndOverflow(start_obj, &o1);
    if (start_ns == -1 && PyErr_Occurred()) return NULL;
    end_ns = PyLong_AsLongLongAndOverflow(end_obj, &o2);
    if (end_ns == -1 && PyErr_Occurred()) return NULL;
    if (o1 || o2) return PyObject_CallMethod(self->correlator, "_launch_attribution", "OOO", thread, start_obj, end_obj);
    PyObject *st = PyDict_GetItemWithError(self->stacks, thread);
    if (st == NULL && PyErr_Occurred()) return NULL;
    if (st == NULL || PyList_GET_SIZE(st) == 0) return outside(self, thread);
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(st); k++) {
        long long v;
        int odd = row_ll(PyList_GET_ITEM(st, k), 1, &v);
        if (odd == 0) odd = row_ll(PyList_GET_ITEM(st, k), 2, &v);
        if (odd < 0) return NULL;
        if (odd) return PyObject_CallMethod(self->correlator, "_launch_attribution", "OOO", thread, start_obj, end_obj);
    }
    Py_ssize_t n = PyList_GET_SIZE(st);
    while (n > 0) {
        long long end = 0;
        PyObject *top = PyList_GET_ITEM(st, n - 1);
        row_ll(top, 2, &end);
        if (end >= start_ns) break;
        PyObject *key = row_key(top);
        if (key == NULL) return NULL;
        int rc = PyDict_Contains(self->state, key);
        if (rc > 0) rc = PyDict_DelItem(self->state, key);
        Py_DECREF(key);
        if (rc < 0 || PyList_SetSlice(st, n - 1, n, NULL) < 0) return NULL;
        n--;
    }
    if (n == 0) return outside(self, thread);
    PyObject *top = PyList_GET_ITEM(st, n - 1);
    PyObject *key = row_key(top);
    if (key == NULL) return NULL;
    PyObject *s = PyDict_GetItemWithError(self->state, key);
    if (s == NULL && PyErr_Occurred()) goto fail;
    if (s != NULL && PyList_CheckExact(s) && PyList_GET_SIZE(s) == 3 && PyList_GET_ITEM(s, 1) != Py_None) {
        PyObject *cached = PyList_GET_ITEM(s, 1);
        PyObject *until = A(self, cached, A_UNTIL_NS);
        int overflow;
        long long until_ns = until ? PyLong_AsLongLongAndOverflow(until, &overflow) : 0;
        if (until != NULL && !overflow && !(until_ns == -1 && PyErr_Occurred()) && until_ns >= end_ns) {
            Py_DECREF(key);
            return Py_NewRef(cached);
        }
        PyErr_Clear();
    }
    PyObject *chain = PyList_New(0);
    if (chain == NULL) goto fail;
    for (Py_ssize_t k = 0; k < n; k++) {
        long long end = 0;
        row_ll(PyList_GET_ITEM(st, k), 2, &end);
        if (end >= end_ns && PyList_Append(chain, PyList_GET_ITEM(st, k)) < 0) {
            Py_DECREF(chain);
            goto fail;
        }
    }
    if (PyList_GET_SIZE(chain) == 0) {
        Py_DECREF(chain);
        Py_DECREF(key);
        return outside(self, thread);
    }
    Py_XINCREF(s);  /* the entry as it was before attribute(), which may add one */
    PyObject *info = attribute(self, chain, 1);
    Py_ssize_t whole = PyList_GET_SIZE(chain) == n;
    Py_DECREF(chain);
    if (info == NULL) {
        Py_XDECREF(s);
        goto fail;
    }
    if (whole) {
        /* as the Python method: a range without an entry before gets a fresh one, over any attribute() made */
        if (s == NULL) {
            if ((s = new_range_state(self->state, key, self->undecoded)) == NULL) goto fail_info;
            Py_INCREF(s);  /* released below, as the entry taken before */
        }
        int rc = PyList_SetItem(s, 1, Py_NewRef(info));
        Py_DECREF(s);
        if (rc < 0) goto fail_info;
    } else {
        Py_XDECREF(s);
    }
    Py_DECREF(key);
    return info;
fail_info:
    Py_DECREF(info);
fail:
    Py_DECREF(key);
    return NULL;
}

/* ---- the launch info and its JSON -------------------------------------------------------------------------- */

/* correlate._info in the form the compiled line writer takes: ((number, (head, tail)), call, flags) */
static PyObject *Attributor_info(Attributor *self, PyObject *a) {
    if (!Py_IS_TYPE(a, (PyTypeObject *)self->attribution_type)) {
        PyErr_SetString(PyExc_TypeError, "info() takes an Attribution");
        return NULL;
    }
    PyObject *head = run_json(self, a, 0);
    PyObject *tail = head ? run_json(self, a, 1) : NULL;
    PyObject *number = tail ? PyIter_Next(self->serials) : NULL;
    PyObject *info = NULL;
    if (number != NULL) {
        long flags = 0;
        int bprop = A(self, a, A_DIR) == self->bprop ||
                    (PyUnicode_Check(A(self, a, A_DIR)) && PyUnicode_Compare(A(self, a, A_DIR), self->bprop) == 0);
        if (PyList_GET_SIZE(A(self, a, A_OP)) > 0) flags |= 1;        /* HAS_OP */
        if (bprop) flags |= 2;                                         /* BPROP */
        if (A(self, a, A_FWD) != Py_None) flags |= 4;                  /* HAS_FWD */
        if (bprop) {                                                   /* NUMBERED */
            PyObject *ids = A(self, a, A_SEQ_ID);
            for (Py_ssize_t k = 0; k < PyList_GET_SIZE(ids); k++)
                if (PyList_GET_ITEM(ids, k) != Py_None) {
                    flags |= 8;
                    break;
                }
        }
        if (A(self, a, A_RECOMPUTE) == Py_True) flags |= 16;           /* RECOMPUTE */
        info = Py_BuildValue("((O(OO))Ol)", number, head, tail, A(self, a, A_CALL), flags);
        if (info != NULL) set_slot(a, self->a_off[A_INFO], info);
    }
    Py_XDECREF(head);
    Py_XDECREF(tail);
    Py_XDECREF(number);
    return info;
}

/* ---- the type ------------------------------------------------------------------------------------------------ */

static int Attributor_traverse(Attributor *self, visitproc visit, void *arg) {
#define VISIT(f) Py_VISIT(self->f);
    ATTRIBUTOR_OBJECTS(VISIT)
#undef VISIT
    for (int k = 0; k < N_KINDS; k++) Py_VISIT(self->kinds[k]);
    for (int r = 0; r < N_RUNS; r++)
        for (int k = 0; k < self->n_fields[r]; k++) {
            Py_VISIT(self->fields[r][k].key);
            Py_VISIT(self->fields[r][k].fallback);
            Py_VISIT(self->fields[r][k].default_json);
        }
    return 0;
}

static int Attributor_clear(Attributor *self) {
#define CLEAR(f) Py_CLEAR(self->f);
    ATTRIBUTOR_OBJECTS(CLEAR)
#undef CLEAR
    for (int k = 0; k < N_KINDS; k++) Py_CLEAR(self->kinds[k]);
    for (int r = 0; r < N_RUNS; r++) {
        for (int k = 0; k < self->n_fields[r]; k++) {
            Py_CLEAR(self->fields[r][k].key);
            Py_CLEAR(self->fields[r][k].fallback);
            Py_CLEAR(self->fields[r][k].default_json);
        }
        self->n_fields[r] = 0;
    }
    return 0;
}

static void Attributor_dealloc(Attributor *self) {
    PyObject_GC_UnTrack(self);
    Attributor_clear(self);
    PyMem_Free(self->buf.data);
    PyMem_Free(self->marker_slots);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *attr(PyObject *o, const char *name) { return PyObject_GetAttrString(o, name); }

/* Attributor(correlator, defs, runs, raw_markers)
 *   defs: a dict of what the Python definitions provide (native_lines._attributor builds it);
 *   runs: for each run of attribution fields on a line, ((slot name, encoder name, always, default JSON), ...) */
static int Attributor_init(Attributor *self, PyObject *args, PyObject *kwds) {
    PyObject *correlator, *defs, *runs;
    int raw_markers;
    if (!PyArg_ParseTuple(args, "OO!O!p", &correlator, &PyDict_Type, &defs, &PyTuple_Type, &runs, &raw_markers))
        return -1;
    if (self->correlator != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Attributor initialised twice");
        return -1;
    }
    self->correlator = Py_NewRef(correlator);
    self->raw_markers = raw_markers;
    struct { PyObject **to; const char *name; } from_correlator[] = {
        {&self->stacks, "_stacks"}, {&self->state, "_state"}, {&self->fwd, "_fwd"}, {&self->markers, "_markers"},
        {&self->wanted, "_wanted"}, {&self->backward_thread, "_backward_thread"}, {&self->calls, "_calls"},
        {&self->process_of, "_process_of"}};
    for (size_t i = 0; i < sizeof from_correlator / sizeof from_correlator[0]; i++)
        if ((*from_correlator[i].to = attr(correlator, from_correlator[i].name)) == NULL) return -1;
    if (!PyDict_Check(self->stacks) || !PyDict_Check(self->state) || !PyDict_Check(self->fwd) ||
        !PyDict_Check(self->markers) || !PyDict_Check(self->wanted) || !PyDict_Check(self->backward_thread)) {
        PyErr_SetString(PyExc_TypeError, "the Correlator's state is dicts");
        return -1;
    }
    PyObject *max_entries = attr(self->markers, "max_entries");
    if (max_entries == NULL) return -1;
    self->markers_max = PyLong_AsSsize_t(max_entries);
    Py_DECREF(max_entries);
    if (self->markers_max == -1 && PyErr_Occurred()) return -1;
    struct { PyObject **to; const char *name; } from_defs[] = {
        {&self->attribution_type, "Attribution"}, {&self->decode, "decode"}, {&self->output_ops, "output_ops"},
        {&self->engine_seq_type, "EngineSeq"}, {&self->undecoded, "UNDECODED"}, {&self->empty, "EMPTY"},
        {&self->backward_bare, "BACKWARD_BARE"}, {&self->serials, "serials"}, {&self->string_json, "string"},
        {&self->compiled_mod, "COMPILED_MOD"}, {&self->user_site, "user_site"},
        {&self->decoded, "decoded"}, {&self->sizes_json, "sizes_json"},
        {&self->kinds[K_SEQ], "SEQ"}, {&self->kinds[K_OP], "OP"}, {&self->kinds[K_MODULE], "MODULE"},
        {&self->kinds[K_LAYER], "LAYER"}, {&self->kinds[K_TRACE], "TRACE"}, {&self->kinds[K_REPR], "REPR"}};
    for (size_t i = 0; i < sizeof from_defs / sizeof from_defs[0]; i++) {
        PyObject *v = PyDict_GetItemString(defs, from_defs[i].name);
        if (v == NULL) {
            PyErr_Format(PyExc_KeyError, "Attributor: no %s", from_defs[i].name);
            return -1;
        }
        *from_defs[i].to = Py_NewRef(v);
    }
    PyObject *marker_type = PyDict_GetItemString(defs, "Marker"), *encoders = PyDict_GetItemString(defs, "ENCODERS");
    if (marker_type == NULL || encoders == NULL || !PyType_Check(marker_type) ||
        !PyType_Check(self->attribution_type) || !PyType_Check(self->engine_seq_type)) {
        PyErr_SetString(PyExc_TypeError, "Attributor: Marker, Attribution, EngineSeq are classes; ENCODERS given");
        return -1;
    }
    if (!PyDict_Check(self->decoded) || !PyDict_Check(self->sizes_json)) {
        PyErr_SetString(PyExc_TypeError, "Attributor: decoded and sizes_json are dicts");
        return -1;
    }
    if (slot_offsets(self->attribution_type, A_NAMES, N_A_SLOTS, self->a_off) < 0 ||
        slot_offsets(marker_type, M_NAMES, N_M_SLOTS, self->m_off) < 0)
        return -1;
    self->marker_type = Py_NewRef(marker_type);
    struct { PyObject **to; const char *text; } texts[] = {
        {&self->call_key, "call"}, {&self->engine_prefix, ENGINE}, {&self->bprop, "bprop"}, {&self->fprop, "fprop"},
        {&self->no_text, ""}, {&self->no_args, "[]"}};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        if ((*texts[i].to = PyUnicode_InternFromString(texts[i].text)) == NULL) return -1;
    if ((self->plain = PyDict_New()) == NULL) return -1;
    self->names = Py_XNewRef(PyDict_GetItemString(defs, "names"));
    self->split_name = Py_XNewRef(PyDict_GetItemString(defs, "split_name"));
    if (self->names == NULL || !PyDict_Check(self->names) || self->split_name == NULL) {
        PyErr_SetString(PyExc_TypeError, "Attributor: names (a BoundedDict) and split_name given");
        return -1;
    }
    PyObject *names_max = attr(self->names, "max_entries"), *slots = attr(marker_type, "__slots__");
    self->names_max = names_max ? PyLong_AsSsize_t(names_max) : -1;
    Py_XDECREF(names_max);
    if (self->names_max < 0 || slots == NULL || !PyTuple_Check(slots)) {
        Py_XDECREF(slots);
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "Attributor: Marker.__slots__ is a tuple");
        return -1;
    }
    self->n_marker_slots = PyTuple_GET_SIZE(slots);
    self->marker_slots = PyMem_Calloc((size_t)self->n_marker_slots + 1, sizeof(Py_ssize_t));
    const char **slot_names = PyMem_Calloc((size_t)self->n_marker_slots + 1, sizeof(char *));
    int bad = self->marker_slots == NULL || slot_names == NULL;
    for (Py_ssize_t k = 0; !bad && k < self->n_marker_slots; k++)
        bad = (slot_names[k] = PyUnicode_AsUTF8(PyTuple_GET_ITEM(slots, k))) == NULL;
    const char *raw_inputs = "raw_inputs";
    if (!bad) bad = slot_offsets(marker_type, slot_names, (int)self->n_marker_slots, self->marker_slots) < 0 ||
                    slot_offsets(marker_type, &raw_inputs, 1, &self->raw_inputs_off) < 0;
    PyMem_Free(slot_names);
    Py_DECREF(slots);
    if (bad) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        return -1;
    }
    if (PyTuple_GET_SIZE(runs) != N_RUNS) {
        PyErr_SetString(PyExc_ValueError, "Attributor: two runs of attribution fields");
        return -1;
    }
    for (int r = 0; r < N_RUNS; r++) {
        PyObject *run = PyTuple_GET_ITEM(runs, r);
        if (!PyTuple_Check(run) || PyTuple_GET_SIZE(run) > MAX_FIELDS) {
            PyErr_SetString(PyExc_ValueError, "Attributor: a run is a tuple of fields");
            return -1;
        }
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(run); k++) {
            const char *name, *encoder;
            int always;
            PyObject *default_json;
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(run, k), "ssiU", &name, &encoder, &always, &default_json))
                return -1;
            FieldSpec *f = &self->fields[r][k];
            if (slot_offsets(self->attribution_type, &name, 1, &f->slot) < 0) return -1;
            f->encoder = -1;
            for (int e = 0; e < N_ENCODERS; e++)
                if (strcmp(encoder, E_NAMES[e]) == 0) f->encoder = e;
            f->fallback = Py_XNewRef(PyDict_GetItemString(encoders, encoder));
            if (f->encoder < 0 || f->fallback == NULL) {
                PyErr_Format(PyExc_ValueError, "Attributor: no encoder %s", encoder);
                return -1;
            }
            f->always = always;
            f->key = PyUnicode_FromFormat("\"%s\":", name);
            f->default_json = Py_NewRef(default_json);
            self->n_fields[r] = (int)k + 1;
            if (f->key == NULL) return -1;
        }
    }
    return 0;
}



static PyTypeObject AttributorType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pyprof.parse._core.Attributor",
    .tp_basicsize = sizeof(Attributor),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A Correlator's launch attributions and their JSON parts, in C, for a Sweep.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Attributor_init,
    .tp_dealloc = (destructor)Attributor_dealloc,
    .tp_traverse = (traverseproc)Attributor_traverse,
    .tp_clear = (inquiry)Attributor_clear,
};

int core_add_attributor(PyObject *module) {
    if (PyType_Ready(&AttributorType) < 0) return -1;
    return PyModule_AddObjectRef(module, "Attributor", (PyObject *)&AttributorType);
}

/* ---- what the sweep asks (_sweep.c) --------------------------------------------------------------------------- */

int attributor_check(PyObject *o) { return Py_IS_TYPE(o, &AttributorType); }

PyObject *attributor_launch(PyObject *att, PyObject *thread, PyObject *start_ns, PyObject *end_ns) {
    return launch_attribution((Attributor *)att, thread, start_ns, end_ns);
}

/* a.info, made once */
PyObject *attributor_info_of(PyObject *att, PyObject *a) {
    PyObject *info = A((Attributor *)att, a, A_INFO);
    if (info != NULL && info != Py_None) return Py_NewRef(info);
    return Attributor_info((Attributor *)att, a);
}

int attributor_waiting(PyObject *att, PyObject *a) {
    PyObject *w = A((Attributor *)att, a, A_WAITING);
    return w == NULL ? 0 : PyObject_IsTrue(w);
}

void attributor_stop_waiting(PyObject *att, PyObject *a) { set_slot(a, ((Attributor *)att)->a_off[A_WAITING], Py_False); }

PyObject *attributor_empty(PyObject *att) { return ((Attributor *)att)->empty; }

PyObject *attributor_wanted(PyObject *att) { return ((Attributor *)att)->wanted; }
