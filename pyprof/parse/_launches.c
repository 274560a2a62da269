/* The line writer's launch calls by key (_core.c's LineWriter): writer._merge_lines' ``pending`` dict and ``recent``
 * BoundedDict, as C structs in an open-addressing table instead of tuples of Python ints in dicts keyed by bytes.
 * Each line looked its launch up in one and moved it to the other as tuples of Python ints; as structs, the whole
 * parse of a 50k-kernel export took 6-8% less.
 *
 * A bounded map keeps common.BoundedDict's one policy: entries stay in the order they were first added (setting a
 * key again keeps its place), and an addition past ``max_entries`` drops the oldest max_entries / 2 at once. Its
 * entries leave by that alone, so their insertion numbers are one run [low, next_seq) and the oldest half is every
 * entry numbered below low + drop.
 */
#include "_core.h"

#include <string.h>

enum { EMPTY, FULL, GONE };

static uint64_t hash_key(const char *key) {
    uint64_t a, b;
    memcpy(&a, key + 1, 8);
    memcpy(&b, key + 10, 8);
    uint64_t h = (a * 0x9E3779B97F4A7C15ull) ^ (b * 0xC2B2AE3D27D4EB4Full) ^ (uint64_t)(key[0] * 2 + key[9]);
    return h ^ (h >> 29);
}

static Launch *slot_of(const LaunchMap *m, const char *key, int for_insert) {
    size_t mask = m->cap - 1, i = (size_t)hash_key(key) & mask;
    Launch *tomb = NULL;
    for (;;) {
        Launch *e = &m->slots[i];
        if (e->state == EMPTY) return for_insert && tomb ? tomb : e;
        if (e->state == GONE) {
            if (tomb == NULL) tomb = e;
        } else if (memcmp(e->key, key, LAUNCH_KEY_BYTES) == 0) {
            return e;
        }
        i = (i + 1) & mask;
    }
}

static int rehash(LaunchMap *m, size_t cap) {
    Launch *old = m->slots;
    size_t old_cap = m->cap;
    m->slots = PyMem_Calloc(cap, sizeof(Launch));
    if (m->slots == NULL) {
        m->slots = old;
        PyErr_NoMemory();
        return -1;
    }
    m->cap = cap;
    m->used = m->full;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].state == FULL) *slot_of(m, old[i].key, 1) = old[i];
    PyMem_Free(old);
    return 0;
}

static void release(Launch *e) {
    Py_CLEAR(e->api);
    Py_CLEAR(e->head);
    Py_CLEAR(e->tail);
    Py_CLEAR(e->call);
}

Launch *launches_find(const LaunchMap *m, const char *key) {
    if (m->full == 0) return NULL;
    Launch *e = slot_of(m, key, 0);
    return e->state == FULL ? e : NULL;
}

Launch *launches_put(LaunchMap *m, const char *key) {
    if (m->cap == 0 && rehash(m, 64) < 0) return NULL;
    Launch *e = slot_of(m, key, 1);
    if (e->state == FULL) return e;  /* set again: its place in the order kept */
    if (4 * (m->used + 1) > 3 * m->cap) {
        size_t cap = m->cap;
        while (4 * (m->full + 1) > cap) cap *= 2;  /* at most a quarter full after it */
        if (rehash(m, cap) < 0) return NULL;
        e = slot_of(m, key, 1);
    }
    if (e->state == EMPTY) m->used++;
    memset(e, 0, sizeof *e);
    memcpy(e->key, key, LAUNCH_KEY_BYTES);
    e->state = FULL;
    e->seq = m->next_seq++;
    m->full++;
    if (m->max_entries > 0 && (Py_ssize_t)m->full > m->max_entries) {
        long long drop = m->max_entries / 2 > 1 ? m->max_entries / 2 : 1, below = m->low + drop;
        for (size_t i = 0; i < m->cap; i++)
            if (m->slots[i].state == FULL && m->slots[i].seq < below) launches_drop(m, &m->slots[i]);
        m->low = below;
    }
    return e;
}

void launches_drop(LaunchMap *m, Launch *e) {
    release(e);
    e->state = GONE;
    m->full--;
}

void launches_free(LaunchMap *m) {
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].state == FULL) release(&m->slots[i]);
    PyMem_Free(m->slots);
    memset(m, 0, sizeof *m);
}
