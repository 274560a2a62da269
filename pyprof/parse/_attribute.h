/* What the files of the Attributor share (_attribute.c, _attribute_emit.c, _attribute_json.c): its state, the slots of
 * the Python classes it reads and writes (correlate.Attribution, markers.Marker) and the functions each file gives
 * the others. */
#ifndef PYPROF_PARSE_ATTRIBUTE_H
#define PYPROF_PARSE_ATTRIBUTE_H

#include "_core.h"

/* Attribution's slots (correlate.Attribution) the code touches, by name */
enum { A_RANGES, A_LAYER, A_TRACE, A_MARKER, A_REPR, A_SEQ_MARKER, A_SEQ_ID, A_ALT_SEQ_ID, A_DIR, A_RECOMPUTE,
       A_MOD, A_OP, A_ARGS, A_OUTPUTS, A_WAITING, A_CALLSITE, A_HOST_NS, A_FWD, A_CALL, A_UNTIL_NS, A_INFO,
       A_RANGE_NS, N_A_SLOTS };
/* Marker's slots (markers.Marker) */
enum { M_KIND, M_NAME, M_MOD, M_OP, M_ARGS, M_SITE, M_STACK, M_SEQ, M_STASHED, M_OP_ID, M_RAW_SIZES, M_OUTPUTS,
       M_BACKWARD, M_DATA, M_CONTAINER, M_ARGS_JSON, M_LEAN_JSON, M_DTYPES, M_CONCRETE, N_M_SLOTS };
/* the JSON encoders of the attribution fields (record.Field.json) */
enum { E_STRINGS, E_NESTED, E_JSON_ITEMS, E_INTS, E_STR, E_BOOL, E_JSON, E_STR_OPT, E_INT_OPT, N_ENCODERS };
enum { K_SEQ, K_OP, K_MODULE, K_LAYER, K_TRACE, K_REPR, N_KINDS };
#define MAX_FIELDS 24
#define N_RUNS 2


typedef struct {
    Py_ssize_t slot;  /* offset in Attribution */
    int encoder, always;
    PyObject *key;      /* '"name":' */
    PyObject *fallback; /* the Python encoder (encode.ENCODERS) for what C does not write itself */
    PyObject *default_json;
} FieldSpec;

/* The Python objects an Attributor holds (its traverse and clear visit these): the Correlator and its state; what the
 * Python definitions provide; for emit_nvtx texts decoded in C (markers._decode_emit_nvtx's common case), the Marker
 * class and the cache of split names; markers.decode's cache of JSON texts and Marker.args_json's of sizes texts;
 * texts made once (the engine range's prefix, the directions, "" and "[]"); the texts markers.decode found plain
 * (decode_text). */
#define ATTRIBUTOR_OBJECTS(X)                                                                                         \
    X(correlator) X(stacks) X(state) X(fwd) X(markers) X(wanted) X(backward_thread) X(calls) X(process_of)           \
    X(attribution_type) X(decode) X(output_ops) X(engine_seq_type) X(undecoded) X(empty) X(backward_bare) X(serials) \
    X(string_json) X(compiled_mod) X(user_site)                                                                     \
    X(marker_type) X(names) X(split_name) X(call_key) X(decoded) X(sizes_json)                                       \
    X(engine_prefix) X(bprop) X(fprop) X(no_text) X(no_args) X(plain)

typedef struct {
    PyObject_HEAD
#define ATTRIBUTOR_FIELD(f) PyObject *f;
    ATTRIBUTOR_OBJECTS(ATTRIBUTOR_FIELD)
#undef ATTRIBUTOR_FIELD
    PyObject *kinds[N_KINDS];
    Py_ssize_t markers_max, names_max;
    Py_ssize_t a_off[N_A_SLOTS], m_off[N_M_SLOTS];
    Py_ssize_t n_marker_slots, *marker_slots, raw_inputs_off;
    FieldSpec fields[N_RUNS][MAX_FIELDS];
    int n_fields[N_RUNS];
    int raw_markers;
    Buffer buf;
} Attributor;

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))
#define A(self, obj, i) SLOT(obj, (self)->a_off[i])
#define M(self, obj, i) SLOT(obj, (self)->m_off[i])

/* obj.<slot> = value (a reference is taken) */
static inline void set_slot(PyObject *obj, Py_ssize_t off, PyObject *value) {
    PyObject *old = SLOT(obj, off);
    SLOT(obj, off) = Py_NewRef(value);
    Py_XDECREF(old);
}

/* A marker's slot, borrowed; an unset one raises as Python would. */
static inline PyObject *mslot(Attributor *self, PyObject *m, int i) {
    PyObject *v = M(self, m, i);
    if (v == NULL) PyErr_SetString(PyExc_AttributeError, "a Marker slot the attribution reads is unset");
    return v;
}

static inline int kind_is(Attributor *self, PyObject *m, int k) {
    PyObject *kind = M(self, m, M_KIND);
    if (kind == self->kinds[k]) return 1;
    if (kind == NULL || !PyUnicode_Check(kind)) return 0;
    return PyUnicode_Compare(kind, self->kinds[k]) == 0;
}

/* _attribute_emit.c: markers.decode(text), its emit_nvtx common case in C (a new reference) */
PyObject *decode_text(Attributor *self, PyObject *text);

/* _attribute_json.c: encode.forward_link of a forward op's Attribution; Marker.lean_json(call); one run of an
 * Attribution's fields as encode.attribution writes it (new references) */
PyObject *link_json(Attributor *self, PyObject *f, PyObject *seq);
PyObject *lean_json(Attributor *self, PyObject *m, PyObject *call);
PyObject *run_json(Attributor *self, PyObject *a, int run);

#endif
