/*
 * The requests of the Redisson peer (RedissonPeer.java). Every request runs on its worker's
 * thread and returns the reply text; an exception becomes "err <class> <message>". A grant
 * answers the time it returned, a release the time just before it was sent, so that the C side
 * measures a wake-up from release to grant.
 */
package rlock.compat;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.redisson.RedissonMultiLock;
import org.redisson.api.RFencedLock;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;

final class Ops {
    private static final TimeUnit MS = TimeUnit.MILLISECONDS;
    private final RedissonClient r;
    private final Bench bench;

    Ops(RedissonClient r) {
        this.r = r;
        this.bench = new Bench(r);
    }

    /** The lock of a kind: lock (RLock), fair, read, write, fenced. */
    private RLock lock(String kind, String name) {
        switch (kind) {
            case "lock": return r.getLock(name);
            case "fair": return r.getFairLock(name);
            case "read": return r.getReadWriteLock(name).readLock();
            case "write": return r.getReadWriteLock(name).writeLock();
            case "fenced": return r.getFencedLock(name);
            default: throw new IllegalArgumentException(kind);
        }
    }

    private static String t() {
        return String.format("%.3f", RedissonPeer.nowMs());
    }

    String run(String[] w) throws Exception {
        String op = w[2];
        switch (op) {
            case "owner": return r.getId() + ":" + Thread.currentThread().getId();
            case "sleep": Thread.sleep(Long.parseLong(w[3])); return "ok";
            case "lock": return lockOp(w[3], w[4], Long.parseLong(w[5]));
            case "try": return tryOp(w[3], w[4], Long.parseLong(w[5]), Long.parseLong(w[6]));
            case "unlock": {
                String before = t();
                lock(w[3], w[4]).unlock();
                return "ok " + before;
            }
            case "force": {
                String before = t();
                return lock(w[3], w[4]).forceUnlock() + " " + before;
            }
            case "locked": return lock(w[3], w[4]).isLocked() ? "1" : "0";
            case "held": return lock(w[3], w[4]).isHeldByCurrentThread() ? "1" : "0";
            case "multi": return multiOp(Long.parseLong(w[3]), Long.parseLong(w[4]), w, 5);
            case "munlock": multi(w, 3).unlock(); return "ok";
            case "stress": return stress(w);
            case "pairs": return bench.pairs(w[3], Integer.parseInt(w[4]));
            case "handoff": return bench.handoff(w[3], Integer.parseInt(w[4]));
            case "cpu": return "ok " + Bench.cpuNs();
            case "mstress": return multiStress(w);
            case "fstress": return failoverStress(w);
            case "sstress": return semaphoreStress(w);
            default: return syncOp(op, w);
        }
    }

    private String lockOp(String kind, String name, long lease) {
        RLock l = lock(kind, name);
        if (l instanceof RFencedLock) {
            RFencedLock f = (RFencedLock) l;
            Long token = lease < 0 ? f.lockAndGetToken() : f.lockAndGetToken(lease, MS);
            return "ok " + t() + " " + token;
        }
        if (lease < 0) {
            l.lock();
        } else {
            l.lock(lease, MS);
        }
        return "ok " + t();
    }

    private String tryOp(String kind, String name, long wait, long lease) throws Exception {
        RLock l = lock(kind, name);
        if (l instanceof RFencedLock) {
            Long token = ((RFencedLock) l).tryLockAndGetToken(wait, lease, MS);
            return token == null ? "0 " + t() : "1 " + t() + " " + token;
        }
        boolean ok = lease < 0 ? l.tryLock(wait, MS) : l.tryLock(wait, lease, MS);
        return (ok ? "1 " : "0 ") + t();
    }

    private RLock multi(String[] w, int from) {
        List<RLock> members = new ArrayList<>();
        for (int i = from; i < w.length; i++) {
            members.add(r.getLock(w[i]));
        }
        return new RedissonMultiLock(members.toArray(new RLock[0]));
    }

    private String multiOp(long wait, long lease, String[] w, int from) throws Exception {
        RLock m = multi(w, from);
        boolean ok = lease < 0 ? m.tryLock(wait, MS) : m.tryLock(wait, lease, MS);
        return (ok ? "1 " : "0 ") + t();
    }

    /** stress KIND NAME ITERATIONS HOLD_US CHECKER_FILE SLOT: lock, section, unlock, n times. */
    private String stress(String[] w) throws Exception {
        String kind = w[3];
        RLock l = lock(kind, w[4]);
        int n = Integer.parseInt(w[5]);
        long holdNs = Long.parseLong(w[6]) * 1000;
        Checker ck = new Checker(w[7], Integer.parseInt(w[8]));
        boolean read = kind.equals("read");
        for (int i = 0; i < n; i++) {
            l.lock();
            if (read) {
                ck.readEnter();
            } else {
                ck.enter();
            }
            LockSupport.parkNanos(holdNs);
            if (read) {
                ck.readLeave();
            } else {
                ck.leave();
            }
            l.unlock();
        }
        return "ok " + n;
    }

    /** fstress NAME ITERATIONS HOLD_US CHECKER_FILE LEASE_MS: the RLock stress through a failover,
     * at least ITERATIONS sections and on until the C side raises the checker's slot 15: a lock
     * that fails (the master is switching) is retried after 20 ms, an unlock that fails is
     * counted and left to its lease. Answers "ok <sections> <lock errors> <unlock errors>". */
    private String failoverStress(String[] w) throws Exception {
        RLock l = r.getLock(w[3]);
        int n = Integer.parseInt(w[4]);
        long holdNs = Long.parseLong(w[5]) * 1000;
        Checker ck = new Checker(w[6], 0);
        Checker stop = new Checker(w[6], 15);
        long lease = Long.parseLong(w[7]);
        int done = 0, lockErrors = 0, unlockErrors = 0;
        while (done < n || !stop.raised()) {
            try {
                l.lock(lease, MS);
            } catch (Exception e) {
                lockErrors++;
                Thread.sleep(20);
                continue;
            }
            ck.enter();
            LockSupport.parkNanos(holdNs);
            ck.leave();
            done++;
            try {
                l.unlock();
            } catch (Exception e) {
                unlockErrors++;
            }
        }
        return "ok " + done + " " + lockErrors + " " + unlockErrors;
    }

    /** mstress ITERATIONS HOLD_US CHECKER_FILE NAME...: a RedissonMultiLock over the names,
     * whose section is exclusive on checker slots 0 .. n-1 (slot i for name i). */
    private String multiStress(String[] w) throws Exception {
        int n = Integer.parseInt(w[3]);
        long holdNs = Long.parseLong(w[4]) * 1000;
        RLock m = multi(w, 6);
        int k = w.length - 6;
        Checker[] ck = new Checker[k];
        for (int i = 0; i < k; i++) {
            ck[i] = new Checker(w[5], i);
        }
        for (int it = 0; it < n; it++) {
            m.lock();
            for (Checker c : ck) {
                c.enter();
            }
            LockSupport.parkNanos(holdNs);
            for (Checker c : ck) {
                c.leave();
            }
            m.unlock();
        }
        return "ok " + n;
    }

    /** sstress NAME ITERATIONS HOLD_US CHECKER_FILE SLOT BOUND: RSemaphore acquire(1), a section
     * that at most BOUND holders share, release(1). */
    private String semaphoreStress(String[] w) throws Exception {
        org.redisson.api.RSemaphore s = r.getSemaphore(w[3]);
        int n = Integer.parseInt(w[4]);
        long holdNs = Long.parseLong(w[5]) * 1000;
        Checker ck = new Checker(w[6], Integer.parseInt(w[7]));
        long bound = Long.parseLong(w[8]);
        for (int i = 0; i < n; i++) {
            s.acquire();
            ck.permitEnter(bound);
            LockSupport.parkNanos(holdNs);
            ck.readLeave();
            s.release();
        }
        return "ok " + n;
    }

    /** Semaphores (s*), permit-expirable semaphores (p*) and latches (l*). */
    private String syncOp(String op, String[] w) throws Exception {
        String name = w[3];
        switch (op) {
            case "sset": return "" + r.getSemaphore(name).trySetPermits(Integer.parseInt(w[4]));
            case "sacq":
                return (r.getSemaphore(name).tryAcquire(Integer.parseInt(w[4]),
                        Long.parseLong(w[5]), MS) ? "1 " : "0 ") + t();
            case "srel": {
                String before = t();
                r.getSemaphore(name).release(Integer.parseInt(w[4]));
                return "ok " + before;
            }
            case "savail": return "" + r.getSemaphore(name).availablePermits();
            case "pset":
                return "" + r.getPermitExpirableSemaphore(name).trySetPermits(Integer.parseInt(w[4]));
            case "pacq": {
                String id = r.getPermitExpirableSemaphore(name).tryAcquire(Long.parseLong(w[4]),
                        Long.parseLong(w[5]), MS);
                return (id == null ? "null" : id) + " " + t();
            }
            case "prel": {
                String before = t();
                return r.getPermitExpirableSemaphore(name).tryRelease(w[4]) + " " + before;
            }
            case "pavail": return "" + r.getPermitExpirableSemaphore(name).availablePermits();
            case "lset": return "" + r.getCountDownLatch(name).trySetCount(Long.parseLong(w[4]));
            case "lcount": return "" + r.getCountDownLatch(name).getCount();
            case "ldown": {
                String before = t();
                r.getCountDownLatch(name).countDown();
                return "ok " + before;
            }
            case "lawait":
                return (r.getCountDownLatch(name).await(Long.parseLong(w[4]), MS) ? "1 " : "0 ")
                        + t();
            default: return SemOps.run(r, op, w);
        }
    }
}
