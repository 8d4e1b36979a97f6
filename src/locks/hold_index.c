/*
 * Which handles hold records of which owner (rlock_owner), so that rlock_unlock_ex,
 * rlock_extend and rlock_is_held_by through one handle find an owner's hold taken through
 * another handle of the same lock. Only owners are indexed: thread holds stay per handle.
 */
#include <stdlib.h>
#include <string.h>

#include "hold_index.h"
#include "lock.h"
#include "lock_hold.h"

typedef struct index_entry {
    struct index_entry *next;
    uint64_t tid;
    rlock *lock;
} index_entry;

static pthread_mutex_t index_mu = PTHREAD_MUTEX_INITIALIZER;
static index_entry *index_head;
static pthread_once_t index_once = PTHREAD_ONCE_INIT;

static void index_fork_prepare(void)
{
    pthread_mutex_lock(&index_mu);
}

static void index_fork_parent(void)
{
    pthread_mutex_unlock(&index_mu);
}

/* A fork child forgets the parent's owner holds (rlk_handle_refresh), and their index with them. */
static void index_fork_child(void)
{
    while (index_head != NULL) {
        index_entry *e = index_head;
        index_head = e->next;
        free(e);
    }
    pthread_mutex_unlock(&index_mu);
}

static void index_init(void)
{
    (void)pthread_atfork(index_fork_prepare, index_fork_parent, index_fork_child);
}

void rlk_hold_index_add(rlock *l, uint64_t tid)
{
    if (tid < RLK_OWNER_TID_BASE) {
        return;
    }
    pthread_once(&index_once, index_init);
    index_entry *e = calloc(1, sizeof(*e));
    if (e == NULL) {
        return; /* the hold is then found through its own handle only */
    }
    e->tid = tid;
    e->lock = l;
    pthread_mutex_lock(&index_mu);
    e->next = index_head;
    index_head = e;
    pthread_mutex_unlock(&index_mu);
}

void rlk_hold_index_remove(rlock *l, uint64_t tid)
{
    if (tid < RLK_OWNER_TID_BASE) {
        return;
    }
    pthread_mutex_lock(&index_mu);
    for (index_entry **pp = &index_head; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->tid == tid && (*pp)->lock == l) {
            index_entry *e = *pp;
            *pp = e->next;
            free(e);
            break;
        }
    }
    pthread_mutex_unlock(&index_mu);
}

/* Two single-key handles of one lock: same client, type and name. */
static int index_same_lock(const rlock *a, const rlock *b)
{
    return !a->ops->group && a->ops == b->ops && a->single == b->single && a->client == b->client &&
           a->name_len == b->name_len && memcmp(a->name, b->name, a->name_len) == 0;
}

rlock *rlk_hold_index_find(rlock *l, uint64_t tid)
{
    if (tid < RLK_OWNER_TID_BASE || l->ops->group) {
        return l;
    }
    rlock *found = l;
    pthread_mutex_lock(&index_mu);
    for (index_entry *e = index_head; e != NULL; e = e->next) {
        if (e->tid == tid && e->lock != l && index_same_lock(e->lock, l)) {
            found = e->lock;
            break;
        }
    }
    pthread_mutex_unlock(&index_mu);
    return found;
}
