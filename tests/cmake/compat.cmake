# Redisson compatibility: rlock against a raw client speaking Redisson's lock protocol.
rlock_add_test(NAME test_redisson_compat SOURCES compat/test_redisson_compat.c
               LABELS redis TIMEOUT 60)
rlock_add_test(NAME test_redisson_compat_cluster SOURCES compat/test_redisson_compat_cluster.c
               LABELS redis TIMEOUT 180)
