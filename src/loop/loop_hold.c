/*
 * A loop client's hold records (loop_hold.h): found by lock name, owner and side in the client's
 * list, made on a first grant; and the fencing token read from them.
 */
#include <stdlib.h>
#include <string.h>

#include "loop_hold.h"

int rlk_loop_hold_side(const rlock *lock)
{
    return lock->kind == RLOCK_READ    ? RLK_LOOP_READ
           : lock->kind == RLOCK_WRITE ? RLK_LOOP_WRITE
                                       : RLK_LOOP_HASH;
}

rlk_loop_hold *rlk_loop_hold_get(rlk_loop_client *lc, const char *name, size_t len, uint64_t tid,
                                 int side, int create)
{
    for (rlk_loop_hold *h = lc->holds; h != NULL; h = h->next) {
        if (h->tid == tid && h->side == side && h->name_len == len &&
            memcmp(h->name, name, len) == 0) {
            return h;
        }
    }
    if (!create) {
        return NULL;
    }
    rlk_loop_hold *h = calloc(1, sizeof(*h));
    char *copy = malloc(len + 1);
    if (h == NULL || copy == NULL) {
        free(h);
        free(copy);
        return NULL;
    }
    memcpy(copy, name, len);
    copy[len] = '\0';
    *h =
        (rlk_loop_hold){.name = copy, .name_len = len, .tid = tid, .side = side, .next = lc->holds};
    if (lc->holds != NULL) {
        lc->holds->prev = h;
    }
    lc->holds = h;
    return h;
}

uint64_t rlk_loop_token(rlock *lock, uint64_t tid)
{
    rlk_loop_client *lc = lock->client->loop; /* not rlk_loop_of(): loop_client.c calls in here */
    rlk_loop_hold *h = lc != NULL ? rlk_loop_hold_get(lc, lock->name, lock->name_len, tid,
                                                      rlk_loop_hold_side(lock), 0)
                                  : NULL;
    return h != NULL && h->count > 0 && !h->lost ? h->token : 0;
}
