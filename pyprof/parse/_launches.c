/* The line writer's launch calls by key (_core.c's LineWriter): writer._merge_lines' ``pending`` dict and ``recent``
 * BoundedDict, as C structs instead of tuples of Python ints in dicts keyed by bytes. Each line looked its launch up
 * in one and moved it to the other as tuples of Python ints; as structs, the whole parse of a 50k-kernel export took
 * 6-8% less.
 *
 * The entries lie in one array in the order they were added, and a table of 8-byte slots (an entry's place and bits
 * of its key's hash) finds them, as CPython's dicts do. Each activity moves its launch into ``recent``, which keeps
 * 16k-32k launches: as a table of whole entries (96 bytes a slot, at most a quarter full) it spread over 6-12 MB,
 * and each insertion probed a line of memory no cache held. Now an insertion probes 1 MB of slots and writes its
 * entry after the one before.
 *
 * A bounded map keeps common.BoundedDict's one policy: entries stay in the order they were first added (setting a
 * key again keeps its place), and an addition past ``max_entries`` drops the oldest max_entries / 2 at once. Its
 * entries leave by that alone, so their insertion numbers are one run [low, next_seq) and the oldest half is every
 * entry numbered below low + drop: a run at the front of the array.
 */
#include "_core.h"

#include <string.h>

enum { FULL = 1, GONE };  /* an entry's state (an empty place is the index's to say: SLOT_EMPTY) */
enum { SLOT_EMPTY = 0, SLOT_DROPPED = 1, SLOT_FIRST = 2 };

static uint64_t hash_key(const char *key) {
    uint64_t a, b;
    memcpy(&a, key + 1, 8);
    memcpy(&b, key + 10, 8);
    uint64_t h = (a * 0x9E3779B97F4A7C15ull) ^ (b * 0xC2B2AE3D27D4EB4Full) ^ (uint64_t)(key[0] * 2 + key[9]);
    return h ^ (h >> 29);
}

/* The slot holding ``key`` (*found set), else the slot an insertion takes: the first dropped one on the way when
 * ``for_insert``, else the empty one that ended the probe. */
static size_t slot_of(const LaunchMap *m, const char *key, uint64_t h, int for_insert, int *found) {
    size_t mask = m->cap - 1, i = (size_t)h & mask, tomb = (size_t)-1;
    uint32_t tag = (uint32_t)(h >> 32);
    for (;;) {
        const LaunchSlot *s = &m->index[i];
        if (s->ref == SLOT_EMPTY) {
            *found = 0;
            return for_insert && tomb != (size_t)-1 ? tomb : i;
        }
        if (s->ref == SLOT_DROPPED) {
            if (tomb == (size_t)-1) tomb = i;
        } else if (s->tag == tag && memcmp(m->entries[s->ref - SLOT_FIRST].key, key, LAUNCH_KEY_BYTES) == 0) {
            *found = 1;
            return i;
        }
        i = (i + 1) & mask;
    }
}

static void release(Launch *e) {
    Py_CLEAR(e->api);
    Py_CLEAR(e->head);
    Py_CLEAR(e->tail);
    Py_CLEAR(e->call);
}

/* The kept entries moved to the front of the array (their order kept) and indexed again in a table at most a quarter
 * full; -1 with MemoryError set (the map as it was). */
static int repack(LaunchMap *m) {
    size_t cap = 64;
    while (4 * (m->full + 1) > cap) cap *= 2;
    LaunchSlot *index = PyMem_Calloc(cap, sizeof(LaunchSlot));
    if (index == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    size_t kept = 0;
    for (size_t k = 0; k < m->n_entries; k++) {
        if (m->entries[k].state != FULL) continue;
        if (kept != k) m->entries[kept] = m->entries[k];
        uint64_t h = hash_key(m->entries[kept].key);
        size_t i = (size_t)h & (cap - 1);
        while (index[i].ref != SLOT_EMPTY) i = (i + 1) & (cap - 1);
        index[i].ref = (uint32_t)(kept + SLOT_FIRST);
        index[i].tag = (uint32_t)(h >> 32);
        m->entries[kept].slot = i;
        kept++;
    }
    PyMem_Free(m->index);
    m->index = index;
    m->cap = cap;
    m->n_entries = kept;
    m->used = kept;
    return 0;
}

Launch *launches_find(const LaunchMap *m, const char *key) {
    if (m->full == 0) return NULL;
    int found;
    size_t i = slot_of(m, key, hash_key(key), 0, &found);
    return found ? &m->entries[m->index[i].ref - SLOT_FIRST] : NULL;
}

Launch *launches_put(LaunchMap *m, const char *key) {
    if (m->cap == 0 && repack(m) < 0) return NULL;
    uint64_t h = hash_key(key);
    int found;
    size_t i = slot_of(m, key, h, 1, &found);
    if (found) return &m->entries[m->index[i].ref - SLOT_FIRST];  /* set again: its place in the order kept */
    if (4 * (m->used + 1) > 3 * m->cap) {  /* too few empty slots left: probes grow long */
        if (repack(m) < 0) return NULL;
        i = slot_of(m, key, h, 1, &found);
    }
    if (m->n_entries == m->entries_cap) {
        if (m->n_entries > 0 && 2 * m->full <= m->n_entries) {  /* half of them dropped: room enough once packed */
            if (repack(m) < 0) return NULL;
            i = slot_of(m, key, h, 1, &found);
        } else {
            size_t more = m->entries_cap ? 2 * m->entries_cap : 64;
            Launch *grown = PyMem_Realloc(m->entries, more * sizeof(Launch));
            if (grown == NULL) {
                PyErr_NoMemory();
                return NULL;
            }
            m->entries = grown;  /* the slots hold places, not pointers: they stay right */
            m->entries_cap = more;
        }
    }
    if (m->index[i].ref == SLOT_EMPTY) m->used++;
    size_t at = m->n_entries++;
    m->index[i].ref = (uint32_t)(at + SLOT_FIRST);
    m->index[i].tag = (uint32_t)(h >> 32);
    Launch *e = &m->entries[at];
    memset(e, 0, sizeof *e);
    memcpy(e->key, key, LAUNCH_KEY_BYTES);
    e->slot = i;
    e->state = FULL;
    e->seq = m->next_seq++;
    m->full++;
    if (m->max_entries > 0 && (Py_ssize_t)m->full > m->max_entries) {
        long long drop = m->max_entries / 2 > 1 ? m->max_entries / 2 : 1, below = m->low + drop;
        for (size_t k = 0; k < m->n_entries && m->entries[k].seq < below; k++)
            if (m->entries[k].state == FULL) launches_drop(m, &m->entries[k]);
        m->low = below;
        if (repack(m) < 0) return NULL;
        e = &m->entries[m->n_entries - 1];  /* the newest: never among the oldest half */
    }
    return e;
}

void launches_drop(LaunchMap *m, Launch *e) {
    m->index[e->slot].ref = SLOT_DROPPED;  /* its slot kept in it: the activity that drops it has just found it */
    release(e);
    e->state = GONE;
    m->full--;
}

void launches_free(LaunchMap *m) {
    for (size_t k = 0; k < m->n_entries; k++)
        if (m->entries[k].state == FULL) release(&m->entries[k]);
    PyMem_Free(m->entries);
    PyMem_Free(m->index);
    memset(m, 0, sizeof *m);
}
