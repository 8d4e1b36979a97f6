/*
 * The Redisson peer of the compat tests: one RedissonClient (released Redisson, default Config
 * apart from the address, the watchdog timeout and the fair lock's wait timeout) driven line by
 * line over stdin by a C test.
 *
 * Usage: java -jar redisson-peer-<version>.jar <where> [lockWatchdogTimeout ms]
 * [fairLockWaitTimeout ms] (0: Redisson's default), where <where> is
 * a redis:// or rediss:// URL, or "cluster:" and a comma-separated list of seed URLs (see
 * Peers.java for TLS).
 * Prints "ready <redisson id> <redisson version>" once connected. Then each request line is
 *   <id> <worker> <op> <args...>
 * and runs on the worker's own thread (Redisson locks belong to threads), so requests on
 * different workers run at once; each answers one line "<id> <result...>". Times are
 * System.nanoTime() in ms, which on Linux is CLOCK_MONOTONIC, the clock of the C side.
 */
package rlock.compat;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.redisson.Redisson;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

public final class RedissonPeer {
    private static final PrintStream OUT =
            new PrintStream(System.out, false, StandardCharsets.UTF_8);
    private static final Map<String, ExecutorService> WORKERS = new ConcurrentHashMap<>();

    private RedissonPeer() {}

    /** Monotonic milliseconds, comparable with the C side's CLOCK_MONOTONIC. */
    static double nowMs() {
        return System.nanoTime() / 1e6;
    }

    static synchronized void reply(String id, String text) {
        OUT.println(id + " " + text);
        OUT.flush();
    }

    /** The Redisson version this peer was built against (peer.properties, filled by Maven). */
    static String redissonVersion() throws IOException {
        Properties p = new Properties();
        try (InputStream in = RedissonPeer.class.getResourceAsStream("/peer.properties")) {
            if (in != null) {
                p.load(in);
            }
        }
        return p.getProperty("redisson.version", "unknown");
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            System.err.println(
                    "usage: RedissonPeer <redis url> [lockWatchdogTimeout ms] [fairLockWaitTimeout ms]");
            System.exit(2);
        }
        Config config = Peers.config(args[0]);
        // 0 keeps Redisson's default, so a fair wait timeout can be given alone.
        if (args.length > 1 && Long.parseLong(args[1]) > 0) {
            config.setLockWatchdogTimeout(Long.parseLong(args[1]));
        }
        if (args.length > 2 && Long.parseLong(args[2]) > 0) {
            config.setFairLockWaitTimeout(Long.parseLong(args[2]));
        }
        RedissonClient redisson = Redisson.create(config);
        Ops ops = new Ops(redisson);
        String version = redissonVersion();
        reply("ready", redisson.getId() + " " + version);
        BufferedReader in =
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split(" ");
            if (w.length < 3) {
                continue;
            }
            if (w[2].equals("quit")) {
                break;
            }
            ExecutorService ex = WORKERS.computeIfAbsent(w[1], k -> Executors.newSingleThreadExecutor());
            ex.execute(() -> {
                String result;
                try {
                    result = ops.run(w);
                } catch (Throwable e) {
                    result = "err " + e.getClass().getSimpleName() + " " + e.getMessage();
                }
                reply(w[0], result);
            });
        }
        // "quit" (or the end of stdin) lets every worker finish what it was asked first.
        for (ExecutorService ex : WORKERS.values()) {
            ex.shutdown();
            ex.awaitTermination(30, TimeUnit.SECONDS);
        }
        redisson.shutdown();
        reply("bye", "");
        System.exit(0);
    }
}
