/*
 * The Redisson peer's requests on semaphore operations beyond acquire and release (Ops.java
 * hands it every request it does not know): drain, release-if-exists, set permits, total and
 * leased permits, several leased permits per call, trySetPermits with a TTL, leases of
 * permit-expirable semaphores, and latch deletes.
 */
package rlock.compat;

import java.lang.reflect.Method;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;

final class SemOps {
    private SemOps() {
    }

    /** RSemaphore.releaseIfExists, which Redisson 3.x lacks (the peer builds against both):
     * called by reflection, "err NoSuchMethodException ..." where it is missing. */
    private static String releaseIfExists(RSemaphore s, int permits) throws Exception {
        Method m = RSemaphore.class.getMethod("releaseIfExists", int.class);
        return "" + m.invoke(s, permits);
    }

    static String run(RedissonClient r, String op, String[] w) throws Exception {
        String name = w[3];
        switch (op) {
            case "sdrain": return "" + r.getSemaphore(name).drainPermits();
            case "psetp": r.getPermitExpirableSemaphore(name).setPermits(Integer.parseInt(w[4]));
                return "ok";
            case "sriex": return releaseIfExists(r.getSemaphore(name), Integer.parseInt(w[4]));
            case "ldel": return "" + r.getCountDownLatch(name).delete();
            case "pacqn": {
                List<String> ids = r.getPermitExpirableSemaphore(name).tryAcquire(
                        Integer.parseInt(w[4]), Long.parseLong(w[5]), Long.parseLong(w[6]),
                        TimeUnit.MILLISECONDS);
                return ids == null || ids.isEmpty() ? "null" : String.join(",", ids);
            }
            case "preln":
                return "" + r.getPermitExpirableSemaphore(name).tryRelease(
                        Arrays.asList(w[4].split(",")));
            case "ssetttl":
                return "" + r.getSemaphore(name).trySetPermits(Integer.parseInt(w[4]),
                        Duration.ofMillis(Long.parseLong(w[5])));
            case "pperm": return "" + r.getPermitExpirableSemaphore(name).getPermits();
            case "pheld": return "" + r.getPermitExpirableSemaphore(name).acquiredPermits();
            case "pupd":
                return "" + r.getPermitExpirableSemaphore(name).updateLeaseTime(w[4],
                        Long.parseLong(w[5]), TimeUnit.MILLISECONDS);
            case "please": return "" + r.getPermitExpirableSemaphore(name).getLeaseTime(w[4]);
            default: throw new IllegalArgumentException(op);
        }
    }
}
