/*
 * Sentinel deployments (redis-sentinel:// URLs): finding the current master by asking the
 * Sentinels in turn, and confirming with ROLE that the node they name is a master. This header
 * declares sentinel.c's functions; sentinel_watch.h the +switch-master subscription's.
 */
#ifndef RLK_SENTINEL_H
#define RLK_SENTINEL_H

#include <hiredis.h>

#include "context.h"

/* Asks each Sentinel of the client's URL in turn for the master (SENTINEL
 * get-master-addr-by-name), dials the node it names and checks ROLE; the first master found is
 * recorded as the client's data node. A Sentinel that is down, does not know the master or
 * answers nonsense, and a named node that is down or not a master, are skipped. Bounded by
 * deadline_ms (monotonic). RLOCK_OK; RLOCK_ECONN naming every Sentinel and what went wrong
 * with it; RLOCK_EAUTH when the master refused the data nodes' credentials; RLOCK_ENOMEM. */
int rlk_sentinel_discover(rlock_client *c, int64_t deadline_ms);

/* Checks a reply of SENTINEL get-master-addr-by-name and copies the address into host
 * (RLK_HOST_MAX bytes) and *port. RLOCK_OK; RLOCK_EPROTO (no such master, no address, a bad
 * port) or RLOCK_EREDIS (an error reply), with a message. Pure: the loop client's discovery
 * (src/loop/loop_sentinel.c) parses with it too. */
int rlk_sentinel_parse_addr(const char *master_name, const redisReply *r, char *host, int *port);
/* 1 if r, a reply of ROLE, says master. */
int rlk_sentinel_role_is_master(const redisReply *r);

/* How often at most a failover recheck asks the Sentinels. */
#define RLK_SENTINEL_RECHECK_MS 200

/* Called on signs that the master moved (a lost connection, READONLY, LOADING): asks the
 * Sentinels again (at most every RLK_SENTINEL_RECHECK_MS, one thread at a time) and, when they
 * name a new master, moves the pool there. A no-op for other deployments. */
void rlk_sentinel_recheck(rlock_client *c);

/* A Sentinel announced (+switch-master) that the master is now host:port: checks with ROLE that
 * it is a master and moves the client there as a recheck does (rlk_sentinel_recheck's switch:
 * the pool's generation, the replica count, the master generation the subscriber follows). A
 * no-op when host:port is already the master. RLOCK_OK (moved, or nothing to do), or the error
 * of the ROLE check (unreachable, not a master): then nothing moved. */
int rlk_sentinel_switch_to(rlock_client *c, const char *host, int port);

#endif
