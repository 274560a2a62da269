/* Rows read ahead: one query of an export, stepped by a thread of its own (docs/parse.md, "The compiled core").
 *
 * SQLite's stepping was a sixth of a compiled parse's time, all of it on the thread that builds the Python objects.
 * Stepping needs no Python, so each query of the core gets its own connection and a reader thread that steps it
 * and copies the rows' values into a few blocks; the parsing thread takes the rows from the blocks in order.
 * What the parsing thread sees is what stepping the query itself shows: the same rows, types and values, and
 * SQLite's own message where a step fails, after the rows before it. With read-ahead off (one CPU, or
 * PYPROF_READ_AHEAD=0: native.py) the same calls step the query in the parsing thread.
 *
 * The reader thread never touches Python: its memory is malloc's, its only lock the block queue's.
 */
#include "_ahead.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define N_BLOCKS 4          /* blocks in flight: the reader fills one while the parser reads another */
#define BLOCK_ROWS 512      /* rows in a block, at most */
#define BLOCK_BYTES 262144  /* a block's texts; past this it is handed on before BLOCK_ROWS */
#define SHAPE_COLUMNS 64    /* a shaped query's columns, at most */

/* sqlrows.Query.plain's shape, read: the type tests its SQL form makes, made here on each row stepped. */
enum { AS_IS, FIRST_INTEGER, FIRST_TEXT };  /* sqlrows' ways of taking a column */
typedef struct {
    int n_out;                              /* the columns given */
    unsigned char taken[SHAPE_COLUMNS];
    unsigned char n_sources[SHAPE_COLUMNS];
    unsigned char first[SHAPE_COLUMNS];     /* a column's first source in ``sources`` */
    unsigned char sources[256];             /* the statement's columns each source is */
    int n_needed;
    unsigned char needed[256];              /* the statement's columns that must hold integers */
    int end, start;                         /* and the end not before the start */
} Shape;

typedef struct {
    int type;              /* SQLITE_INTEGER, _FLOAT, _TEXT, _BLOB or _NULL */
    long long i;           /* an integer's value; of a float, SQLite's integer reading of it */
    double d;              /* a float's value */
    size_t at, n;          /* a text's or blob's bytes in the block's ``bytes`` */
} Cell;

typedef struct {
    Cell *cells;           /* BLOCK_ROWS rows of n_cols cells */
    char *bytes;
    size_t used, cap;
    int n_rows;
    int last;              /* the query ends after these rows (done, or failed: Ahead.error) */
} Block;

struct Ahead {
    sqlite3 *db;
    sqlite3_stmt *stmt;
    Shape *shape;             /* NULL: the statement's columns as they are */
    int n_cols, threaded;     /* n_cols: the columns given (the shape's, else the statement's) */
    /* read-ahead */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    Block blocks[N_BLOCKS];
    long long filled, taken;  /* blocks the reader has filled, and the parser has finished with */
    int stop;                 /* the parser closes before the end: the reader stops at its next block */
    char *error;              /* SQLite's message where a step failed (malloc'd), else NULL */
    PyObject *error_type;     /* the extension's exception */
    /* the parser's position: its block (NULL before the first) and row */
    Block *at;
    int row;
    int ended;                /* ahead_step returned 0 or -1 */
    int failed;               /* ahead_step_quiet met a failure (its message: error) */
};

static int keep_bytes(Block *b, const void *data, size_t n, size_t *at) {
    if (b->used + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->used + n) cap *= 2;
        char *more = realloc(b->bytes, cap);
        if (more == NULL) return -1;
        b->bytes = more;
        b->cap = cap;
    }
    if (n) memcpy(b->bytes + b->used, data, n);
    *at = b->used;
    b->used += n;
    return 0;
}

/* Whether the statement's current row is one the shape's SQL form gives: its needed values integers, its end not
 * before its start and its duration 64-bit (ahead_timed: sqlrows.timed in SQL). */
static int shaped_row(const Ahead *a) {
    const Shape *s = a->shape;
    for (int k = 0; k < s->n_needed; k++)
        if (sqlite3_column_type(a->stmt, s->needed[k]) != SQLITE_INTEGER) return 0;
    return ahead_timed(sqlite3_column_int64(a->stmt, s->start), sqlite3_column_int64(a->stmt, s->end));
}

/* The statement's column that gives column ``i`` of the current row, -1 for NULL (no source of the wanted type). */
static int source_of(const Ahead *a, int i) {
    const Shape *s = a->shape;
    if (s == NULL) return i;
    const unsigned char *src = s->sources + s->first[i];
    if (s->taken[i] == AS_IS) return src[0];
    int want = s->taken[i] == FIRST_INTEGER ? SQLITE_INTEGER : SQLITE_TEXT;
    for (int k = 0; k < s->n_sources[i]; k++)
        if (sqlite3_column_type(a->stmt, src[k]) == want) return src[k];
    return -1;
}

/* the statement's current row copied into ``b`` */
static int copy_row(Ahead *a, Block *b) {
    Cell *row = b->cells + (size_t)b->n_rows * (size_t)a->n_cols;
    for (int i = 0; i < a->n_cols; i++) {
        Cell *c = row + i;
        int at = source_of(a, i);
        c->type = at < 0 ? SQLITE_NULL : sqlite3_column_type(a->stmt, at);
        switch (c->type) {
        case SQLITE_INTEGER:
            c->i = sqlite3_column_int64(a->stmt, at);
            break;
        case SQLITE_FLOAT:
            c->d = sqlite3_column_double(a->stmt, at);
            c->i = sqlite3_column_int64(a->stmt, at);
            break;
        case SQLITE_TEXT:
        case SQLITE_BLOB: {
            const void *data = c->type == SQLITE_TEXT ? (const void *)sqlite3_column_text(a->stmt, at)
                                                      : sqlite3_column_blob(a->stmt, at);
            int n = sqlite3_column_bytes(a->stmt, at);
            if ((data == NULL && n > 0) || keep_bytes(b, data, (size_t)n, &c->at) < 0) return -1;
            c->n = (size_t)n;
            break;
        }
        default:
            break;
        }
    }
    b->n_rows++;
    return 0;
}

static void fail(Ahead *a, const char *message) {
    if (a->error == NULL) a->error = strdup(message ? message : "out of memory");
}

/* the reader thread: fill blocks until the query ends, fails or the parser stops */
static void *read_ahead(void *arg) {
    Ahead *a = arg;
    for (;;) {
        pthread_mutex_lock(&a->lock);
        while (a->filled - a->taken >= N_BLOCKS && !a->stop) pthread_cond_wait(&a->changed, &a->lock);
        int stop = a->stop;
        pthread_mutex_unlock(&a->lock);
        if (stop) return NULL;
        Block *b = &a->blocks[a->filled % N_BLOCKS];
        b->n_rows = 0;
        b->used = 0;
        b->last = 0;
        while (!b->last && b->n_rows < BLOCK_ROWS && b->used < BLOCK_BYTES) {
            int rc = sqlite3_step(a->stmt);
            if (rc == SQLITE_ROW) {
                if (a->shape != NULL && !shaped_row(a)) continue;
                if (copy_row(a, b) < 0) {
                    fail(a, "out of memory");
                    b->last = 1;
                }
            } else {
                if (rc != SQLITE_DONE) fail(a, sqlite3_errmsg(a->db));
                b->last = 1;
            }
        }
        pthread_mutex_lock(&a->lock);
        a->filled++;
        pthread_cond_broadcast(&a->changed);
        pthread_mutex_unlock(&a->lock);
        if (b->last) return NULL;
    }
}

/* ``uri``: sqlrows.uri's, the one name every connection opens (read-only, immutable: no lock, no journal, no -wal
 * or -shm beside the user's export). NOMUTEX: each connection is used by one thread at a time (the reader's while
 * it reads), and SQLite's own locks were 7% of a parse's time under perf. */
static int open_readonly(const char *uri, PyObject *error, sqlite3 **db) {
    if (strncmp(uri, "file:", 5) != 0) {  /* a plain path would be opened without immutable's guarantees */
        PyErr_SetString(PyExc_ValueError, "the core opens an export by its URI (sqlrows.uri), not by its path");
        return -1;
    }
    int rc = sqlite3_open_v2(uri, db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, NULL);
    /* Each query reads its table's pages once, in order: SQLite's default page cache (2 MB a connection, a dozen
     * connections between the parse and its worker) only held memory. 256 kB keeps the b-trees' inner pages. */
    if (rc == SQLITE_OK) rc = sqlite3_exec(*db, "PRAGMA cache_size = -256", NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        PyErr_SetString(error, *db ? sqlite3_errmsg(*db) : sqlite3_errstr(rc));
        sqlite3_close(*db);
        *db = NULL;
        return -1;
    }
    return 0;
}

/* ``bytes`` read as a shape of a statement of ``n_columns`` columns: 0, or -1 with ValueError set */
static int read_shape(PyObject *bytes, int n_columns, Shape *s) {
    char *data;
    Py_ssize_t n, at = 0;
    if (PyBytes_AsStringAndSize(bytes, &data, &n) < 0) return -1;
    const unsigned char *b = (const unsigned char *)data;
#define NEXT(v) do { if (at >= n) goto bad; (v) = b[at++]; } while (0)
    NEXT(s->n_out);
    if (s->n_out > SHAPE_COLUMNS) goto bad;
    int used = 0;
    for (int i = 0; i < s->n_out; i++) {
        NEXT(s->taken[i]);
        NEXT(s->n_sources[i]);
        if (s->taken[i] > FIRST_TEXT || s->n_sources[i] == 0 || (s->taken[i] == AS_IS && s->n_sources[i] != 1) ||
            used + s->n_sources[i] > (int)sizeof s->sources)
            goto bad;
        s->first[i] = (unsigned char)used;
        for (int k = 0; k < s->n_sources[i]; k++) {
            NEXT(s->sources[used]);
            if (s->sources[used++] >= n_columns) goto bad;
        }
    }
    NEXT(s->n_needed);
    for (int k = 0; k < s->n_needed; k++) {
        NEXT(s->needed[k]);
        if (s->needed[k] >= n_columns) goto bad;
    }
    NEXT(s->end);
    NEXT(s->start);
    int end_needed = 0, start_needed = 0;  /* compared as integers only where the row has them as such */
    for (int k = 0; k < s->n_needed; k++) {
        end_needed |= s->needed[k] == s->end;
        start_needed |= s->needed[k] == s->start;
    }
    if (at == n && end_needed && start_needed) return 0;
#undef NEXT
bad:
    PyErr_SetString(PyExc_ValueError, "a query's shape does not fit its SQL");
    return -1;
}

int ahead_query(PyObject *query, const char **sql, PyObject **shape) {
    if (!PyTuple_Check(query) || PyTuple_GET_SIZE(query) != 2 || !PyUnicode_Check(PyTuple_GET_ITEM(query, 0)) ||
        !PyBytes_Check(PyTuple_GET_ITEM(query, 1))) {
        PyErr_SetString(PyExc_TypeError, "a query is (its plain SQL, its shape): sqlrows.Query.plain()");
        return -1;
    }
    *shape = PyTuple_GET_ITEM(query, 1);
    *sql = PyUnicode_AsUTF8(PyTuple_GET_ITEM(query, 0));
    return *sql == NULL ? -1 : 0;
}

int ahead_open(const char *uri, const char *sql, PyObject *shape, int mode, PyObject *error, Ahead **out) {
    *out = NULL;
    Ahead *a = PyMem_Calloc(1, sizeof *a);
    if (a == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    a->error_type = error;
    if (open_readonly(uri, error, &a->db) < 0) {
        PyMem_Free(a);
        return -1;
    }
    if (sqlite3_prepare_v2(a->db, sql, -1, &a->stmt, NULL) != SQLITE_OK) {
        PyErr_SetString(error, sqlite3_errmsg(a->db));
        ahead_close(a);
        return -1;
    }
    a->n_cols = sqlite3_column_count(a->stmt);
    if (shape != NULL) {
        if ((a->shape = malloc(sizeof *a->shape)) == NULL) {
            PyErr_NoMemory();
            ahead_close(a);
            return -1;
        }
        if (read_shape(shape, a->n_cols, a->shape) < 0) {
            ahead_close(a);
            return -1;
        }
        a->n_cols = a->shape->n_out;
    }
    *out = a;
    if (mode == AHEAD_OFF || a->n_cols == 0) return 0;
    for (int k = 0; k < N_BLOCKS; k++)
        if ((a->blocks[k].cells = malloc(sizeof(Cell) * BLOCK_ROWS * (size_t)a->n_cols)) == NULL) {
            PyErr_NoMemory();
            ahead_close(a);
            *out = NULL;
            return -1;
        }
    if (pthread_mutex_init(&a->lock, NULL) != 0) goto no_thread;
    if (pthread_cond_init(&a->changed, NULL) != 0) {
        pthread_mutex_destroy(&a->lock);
        goto no_thread;
    }
    if (pthread_create(&a->thread, NULL, read_ahead, a) != 0) {
        pthread_cond_destroy(&a->changed);
        pthread_mutex_destroy(&a->lock);
        goto no_thread;
    }
    a->threaded = 1;
    return 0;
no_thread:  /* no thread to be had: the rows are stepped here, as with read-ahead off */
    return 0;
}

int ahead_columns(const Ahead *a) { return a->n_cols; }

/* the next block from the reader; the one finished with goes back to it */
static Block *next_block(Ahead *a) {
    pthread_mutex_lock(&a->lock);
    if (a->at != NULL) {
        a->taken++;
        pthread_cond_broadcast(&a->changed);
    }
    while (a->filled <= a->taken) pthread_cond_wait(&a->changed, &a->lock);
    Block *b = &a->blocks[a->taken % N_BLOCKS];
    pthread_mutex_unlock(&a->lock);
    return b;
}

/* the statement stepped to its next row the shape keeps: SQLite's result code */
static int step(Ahead *a) {
    int rc;
    do rc = sqlite3_step(a->stmt);
    while (rc == SQLITE_ROW && a->shape != NULL && !shaped_row(a));
    return rc;
}

int ahead_step(Ahead *a) {
    if (a->ended) {
        PyErr_SetString(a->error_type, "a query was read past its end");
        return -1;
    }
    if (!a->threaded) {
        int rc = step(a);
        if (rc == SQLITE_ROW) return 1;
        a->ended = 1;
        if (rc == SQLITE_DONE) return 0;
        PyErr_SetString(a->error_type, sqlite3_errmsg(a->db));
        return -1;
    }
    if (a->at != NULL && a->row + 1 < a->at->n_rows) {
        a->row++;
        return 1;
    }
    while (a->at == NULL || !a->at->last) {
        a->at = next_block(a);
        a->row = 0;
        if (a->at->n_rows > 0) return 1;
    }
    a->ended = 1;
    if (a->error == NULL) return 0;
    PyErr_SetString(a->error_type, a->error);
    return -1;
}

int ahead_step_quiet(Ahead *a) {
    if (a->threaded || a->ended) return -1;
    int rc = step(a);
    if (rc == SQLITE_ROW) return 1;
    a->ended = 1;
    if (rc == SQLITE_DONE) return 0;
    a->error = strdup(sqlite3_errmsg(a->db));  /* NULL when out of memory: raised as such */
    a->failed = 1;
    return -1;
}

void ahead_raise(Ahead *a) {
    if (a->threaded)
        PyErr_SetString(PyExc_RuntimeError, "ahead_step_quiet takes a query stepped by its caller");
    else if (!a->failed)
        PyErr_SetString(a->error_type, "a query was read past its end");
    else if (a->error == NULL)
        PyErr_NoMemory();
    else
        PyErr_SetString(a->error_type, a->error);
}

static const Cell *cell(const Ahead *a, int i) {
    return a->at->cells + (size_t)a->row * (size_t)a->n_cols + (size_t)i;
}

int ahead_type(const Ahead *a, int i) {
    if (a->threaded) return cell(a, i)->type;
    int at = source_of(a, i);
    return at < 0 ? SQLITE_NULL : sqlite3_column_type(a->stmt, at);
}

long long ahead_int64(const Ahead *a, int i) {
    if (!a->threaded) {
        int at = source_of(a, i);
        return at < 0 ? 0 : sqlite3_column_int64(a->stmt, at);
    }
    const Cell *c = cell(a, i);
    return c->type == SQLITE_INTEGER || c->type == SQLITE_FLOAT ? c->i : 0;  /* the header's contract: no text */
}

double ahead_double(const Ahead *a, int i) {
    if (!a->threaded) {
        int at = source_of(a, i);
        return at < 0 ? 0.0 : sqlite3_column_double(a->stmt, at);
    }
    const Cell *c = cell(a, i);
    return c->type == SQLITE_FLOAT ? c->d : c->type == SQLITE_INTEGER ? (double)c->i : 0.0;
}

const char *ahead_bytes(const Ahead *a, int i, Py_ssize_t *n) {
    if (!a->threaded) {
        int at = source_of(a, i);
        int type = at < 0 ? SQLITE_NULL : sqlite3_column_type(a->stmt, at);
        const char *data = type == SQLITE_BLOB ? sqlite3_column_blob(a->stmt, at)
                         : type == SQLITE_TEXT ? (const char *)sqlite3_column_text(a->stmt, at) : NULL;
        *n = data != NULL ? sqlite3_column_bytes(a->stmt, at) : 0;
        if (data == NULL && type == SQLITE_TEXT) return NULL;  /* SQLite out of memory */
        return data != NULL ? data : "";
    }
    const Cell *c = cell(a, i);
    if (c->type != SQLITE_TEXT && c->type != SQLITE_BLOB) {
        *n = 0;
        return "";
    }
    *n = (Py_ssize_t)c->n;
    return c->n ? a->at->bytes + c->at : "";
}

void ahead_close(Ahead *a) {
    if (a == NULL) return;
    if (a->threaded) {
        pthread_mutex_lock(&a->lock);
        a->stop = 1;
        pthread_cond_broadcast(&a->changed);
        pthread_mutex_unlock(&a->lock);
        /* a step under way ends at once rather than the reader filling its block first: it fails as interrupted,
         * and nobody reads its rows any more */
        sqlite3_interrupt(a->db);
        pthread_join(a->thread, NULL);
        pthread_cond_destroy(&a->changed);
        pthread_mutex_destroy(&a->lock);
    }
    for (int k = 0; k < N_BLOCKS; k++) {
        free(a->blocks[k].cells);
        free(a->blocks[k].bytes);
    }
    free(a->error);
    free(a->shape);
    if (a->stmt) sqlite3_finalize(a->stmt);
    if (a->db) sqlite3_close(a->db);
    PyMem_Free(a);
}
