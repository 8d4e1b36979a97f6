/*
 * Leader election (election.c): the pure decoder of its leader script's reply, apart so that
 * tests can feed it replies of any shape.
 */
#ifndef RLK_ELECTION_H
#define RLK_ELECTION_H

#include <hiredis.h>
#include <stdint.h>

/* lua/election_leader.lua's reply {held, term, value, since}: RLOCK_OK with *held (1 while the
 * recorded leader holds the lock) and *term, or RLOCK_EPROTO for any other shape. */
int rlk_election_reply(const redisReply *r, int *held, uint64_t *term);

#endif
