/*
 * The Redisson side of the benchmark's `redisson` scenario (tests/bench/bench_redisson.c): blocks
 * of work on one worker thread each, timed inside the JVM so the pipe to the C side is not in the
 * numbers.
 */
package rlock.compat;

import java.lang.management.ManagementFactory;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;

final class Bench {
    /** The last release (System.nanoTime()) of each hand-off lock, shared by its workers. */
    private static final Map<String, AtomicLong> LAST_RELEASE = new ConcurrentHashMap<>();
    private final RedissonClient r;

    Bench(RedissonClient r) {
        this.r = r;
    }

    /** The CPU time of the whole JVM so far, in ns (the client's cost, JIT and GC included). */
    static long cpuNs() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory
                .getOperatingSystemMXBean()).getProcessCpuTime();
    }

    /** pairs NAME COUNT: COUNT lock() + unlock() pairs on RLock NAME; "ok <seconds>". */
    String pairs(String name, int count) {
        RLock l = r.getLock(name);
        long t0 = System.nanoTime();
        for (int i = 0; i < count; i++) {
            l.lock();
            l.unlock();
        }
        return "ok " + (System.nanoTime() - t0) / 1e9;
    }

    /** handoff NAME ROUNDS: ROUNDS lock() + unlock() on a lock other workers contend for; each
     * grant that follows another worker's release records release-to-grant in microseconds.
     * Answers "ok <us>,<us>,...". */
    String handoff(String name, int rounds) {
        RLock l = r.getLock(name);
        AtomicLong last = LAST_RELEASE.computeIfAbsent(name, k -> new AtomicLong());
        StringBuilder out = new StringBuilder("ok ");
        long mine = -1;
        for (int i = 0; i < rounds; i++) {
            l.lock();
            long now = System.nanoTime();
            long prev = last.get();
            if (prev != 0 && prev != mine) {
                out.append((now - prev) / 1000).append(',');
            }
            mine = System.nanoTime();
            last.set(mine);
            l.unlock();
        }
        return out.toString();
    }
}
