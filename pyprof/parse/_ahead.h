/* _ahead.c: one query's rows, read ahead by a thread of their own (else stepped when asked), on a read-only
 * connection of its own, opened by ``uri`` (sqlrows.uri's, as every connection of a parse: a "file:" URI, else
 * ValueError). ``mode``: AHEAD_OFF steps in the calling thread (which may let go of the GIL meanwhile:
 * ahead_step_quiet, the checks' pass); AHEAD_ON reads ahead. Shared by both extensions
 * (_core and _scan): errors are raised as ``error``, the extension's own exception type (borrowed: it lives as long
 * as the module).
 * ahead_open: -1 with ``error`` (SQLite's message) or MemoryError set. ahead_step: 1 a row, 0 the end, -1 with
 * ``error`` and SQLite's message where a step failed, after the rows before it. The accessors read the current
 * row as sqlite3_column_* do, with one contract: ahead_int64 and ahead_double are asked of integers, floats and
 * NULLs only (every caller checks the storage class first, or reads a column its query makes an integer or NULL);
 * a row read ahead keeps no numeric reading of a text or blob, which would cost the reading thread a conversion per
 * text for nothing. A text's or blob's bytes stay valid until the next step (NULL: SQLite ran out of memory).
 * ahead_close takes NULL. */
#ifndef PYPROF_PARSE_AHEAD_H
#define PYPROF_PARSE_AHEAD_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <sqlite3.h>

typedef struct Ahead Ahead;
enum { AHEAD_OFF, AHEAD_ON };
/* ``shape``: NULL, or the bytes of sqlrows.Query.plain's shape; the rows are then those the query's SQL form gives
 * (rows whose needed values are not integers, or whose end is before its start, skipped; each column the first of
 * its sources of the wanted type, else NULL), the columns read as such. */
int ahead_open(const char *uri, const char *sql, PyObject *shape, int mode, PyObject *error, Ahead **out);
/* A query as Python passes it to the core: (the plain SQL, the shape), sqlrows.Query.plain(). 0, or -1 with
 * TypeError set (borrowed references). */
int ahead_query(PyObject *query, const char **sql, PyObject **shape);
int ahead_step(Ahead *a);
/* ahead_step of a query opened AHEAD_OFF, callable without the GIL: 1 a row, 0 the end, -1 a failure, which
 * ahead_raise then raises (holding the GIL) as ahead_step would have. */
int ahead_step_quiet(Ahead *a);
void ahead_raise(Ahead *a);
int ahead_columns(const Ahead *a);
int ahead_type(const Ahead *a, int i);
long long ahead_int64(const Ahead *a, int i);
double ahead_double(const Ahead *a, int i);
const char *ahead_bytes(const Ahead *a, int i, Py_ssize_t *n);
void ahead_close(Ahead *a);

/* A row's times as a record can hold them: the end not before the start, and end - start a 64-bit integer (a start
 * near -2**63 would make a longer duration, which prof refuses). sqlrows.timed is the same test in SQL. */
static inline int ahead_timed(long long start, long long end) {
    long long duration;
    return end >= start && !__builtin_sub_overflow(end, start, &duration);
}

#endif
