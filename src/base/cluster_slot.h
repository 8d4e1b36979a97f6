/*
 * Private header: the hash slot of a key in Redis Cluster.
 *
 * Redis Cluster maps every key to one of 16384 slots: CRC16 (the XMODEM variant) of the key,
 * modulo 16384. When the key holds a hash tag, a '{' followed later by a '}' with at least one
 * byte between them, only the bytes between the first '{' and the first '}' after it are hashed,
 * so that keys sharing a tag share a slot. Redisson names every key and channel of one lock with
 * the tag {name}; routing by the slot of a script's first key therefore sends all of a lock's
 * traffic to the node that owns it. These functions depend on nothing but the C library.
 */
#ifndef RLK_CLUSTER_SLOT_H
#define RLK_CLUSTER_SLOT_H

#include <stddef.h>
#include <stdint.h>

#define RLK_CLUSTER_SLOTS 16384

/* CRC16/XMODEM (polynomial 0x1021, initial value 0) of len bytes at buf. */
uint16_t rlk_crc16(const void *buf, size_t len);

/* The slot (0..16383) of the key of len bytes at key, hash tags applied as Redis does. */
int rlk_cluster_key_slot(const void *key, size_t len);

/* 1 when the key of len bytes holds a hash tag as Redis reads one (the bytes between its first
 * '{' and the first '}' after it, at least one), else 0. */
int rlk_cluster_has_tag(const void *key, size_t len);

#endif /* RLK_CLUSTER_SLOT_H */
