/*
 * The Redisson peer's requests on semaphore operations beyond acquire and release (Ops.java
 * hands it every request it does not know): drain, set permits, total and leased permits, and
 * leases of permit-expirable semaphores.
 */
package rlock.compat;

import java.util.concurrent.TimeUnit;
import org.redisson.api.RedissonClient;

final class SemOps {
    private SemOps() {
    }

    static String run(RedissonClient r, String op, String[] w) {
        String name = w[3];
        switch (op) {
            case "sdrain": return "" + r.getSemaphore(name).drainPermits();
            case "psetp": r.getPermitExpirableSemaphore(name).setPermits(Integer.parseInt(w[4]));
                return "ok";
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
