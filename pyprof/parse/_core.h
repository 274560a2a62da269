/* What the files of pyprof.parse._core share: the module's error, a growing byte buffer, the bounded dict. */
#ifndef PYPROF_PARSE_CORE_H
#define PYPROF_PARSE_CORE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <sqlite3.h>

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

/* state[key] = [first, None, None], a range's fresh entry in Correlator._state: borrowed, or NULL on error */
PyObject *new_range_state(PyObject *state, PyObject *key, PyObject *first);

/* common.BoundedDict.add on a dict: past max_entries, the oldest half goes at once */
int bounded_add(PyObject *d, PyObject *key, PyObject *value, Py_ssize_t max_entries);

#include "_ahead.h"

/* how the queries of the core's objects made from now on are stepped (an AHEAD_ mode; _core.read_ahead) */
extern int core_read_ahead;

/* _feed.c: the RangeFeed type; a feed's ranges pushed up to a start time, one more, the next start (1: there is one,
 * 0: none); feed_ready before a launch of ``thread`` at ``start_ns`` is attributed: the ranges of the thread's stack
 * that ended before it popped, and the Correlator's list of the stack's rows up to date */
int core_add_feed(PyObject *module);
int feed_check(PyObject *o);
int feed_push_until(PyObject *feed, long long until_ns);
int feed_push_one(PyObject *feed);
int feed_next_start(PyObject *feed, long long *start_ns);
int feed_ready(PyObject *feed, long long thread, long long start_ns);
void feed_close(PyObject *feed);

/* the offsets of a slotted class's members, by name (_attribute.c) */
int slot_offsets(PyObject *type, const char **names, int n, Py_ssize_t *out);

/* _attribute.c: the Attributor type, and what the sweep (_sweep.c) asks of one */
int core_add_attributor(PyObject *module);
int attributor_check(PyObject *o);
PyObject *attributor_launch(PyObject *att, PyObject *thread, PyObject *start_ns, PyObject *end_ns);
PyObject *attributor_info_of(PyObject *att, PyObject *a);
int attributor_waiting(PyObject *att, PyObject *a);
void attributor_stop_waiting(PyObject *att, PyObject *a);
PyObject *attributor_empty(PyObject *att);
PyObject *attributor_wanted(PyObject *att);

/* _launches.c: the line writer's launch calls by key (a launch key: a null flag and 8 bytes each of globalPid and
 * correlationId). What a launch gives each of its records: its API name's JSON part, start, end and thread, the
 * sweep's attribution parts (head and tail JSON) and op call, and its flags. */
#define LAUNCH_KEY_BYTES 18
typedef struct {
    char key[LAUNCH_KEY_BYTES];
    int state;
    long long seq;                       /* its insertion number (a bounded map's order) */
    size_t slot;                         /* its place in the map's index (_launches.c) */
    PyObject *api, *head, *tail, *call;  /* owned: str, str, str, int or None */
    long long start_ns, end_ns, thread;
    long flags;
} Launch;
typedef struct {
    uint32_t ref;                        /* 0 empty, 1 an entry dropped, else the entry's place + 2 */
    uint32_t tag;                        /* bits of the key's hash: most probes decide without the entry */
} LaunchSlot;
typedef struct {
    Launch *entries;                     /* in insertion order; a dropped one stays, GONE, until the next repack */
    size_t n_entries, entries_cap;
    LaunchSlot *index;                   /* open addressing over the entries */
    size_t cap, full, used;              /* index slots; entries kept; slots empty no more (kept and dropped) */
    long long next_seq, low;             /* the next insertion number; the oldest one kept */
    Py_ssize_t max_entries;              /* 0: unbounded; else common.BoundedDict's bound and policy */
} LaunchMap;
/* An entry's pointer holds until the next launches_put on its map. */
/* the entry of ``key``, or NULL */
Launch *launches_find(const LaunchMap *m, const char *key);
/* the entry of ``key``: the one there (its fields to be replaced), or a new one with its fields NULL and 0 (a
 * bounded map then drops its oldest half if past its bound); NULL with MemoryError set */
Launch *launches_put(LaunchMap *m, const char *key);
/* drop ``e`` (its references released) */
void launches_drop(LaunchMap *m, Launch *e);
void launches_free(LaunchMap *m);

/* _sweep.c: the Sweep type */
int core_add_sweep(PyObject *module);

#endif
