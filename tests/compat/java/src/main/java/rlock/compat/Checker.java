/*
 * The Java side of the compat tests' independent checker (tests/compat/redisson_java.h): a file
 * both the C processes and this JVM map, per slot 8 longs (writers inside, readers inside,
 * violations, exclusive sections, read sections). It talks to no Redis, so a lock bug on either
 * side cannot hide behind it.
 */
package rlock.compat;

import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

final class Checker {
    private static final VarHandle LONGS =
            MethodHandles.byteBufferViewVarHandle(long[].class, ByteOrder.nativeOrder());
    private static final int WRITERS = 0, READERS = 1, VIOLATIONS = 2, ENTRIES = 3, READS = 4;
    private final MappedByteBuffer map;
    private final int base;

    Checker(String file, int slot) throws IOException {
        try (FileChannel ch = FileChannel.open(Path.of(file), StandardOpenOption.READ,
                StandardOpenOption.WRITE)) {
            map = ch.map(FileChannel.MapMode.READ_WRITE, 0, ch.size());
        }
        base = slot * 64;
    }

    private long add(int field, long delta) {
        return (long) LONGS.getAndAdd(map, base + field * 8, delta);
    }

    private long get(int field) {
        return (long) LONGS.getVolatile(map, base + field * 8);
    }

    /** A flag the C side raises: the first long of the slot is not 0. */
    boolean raised() {
        return get(WRITERS) != 0;
    }

    void enter() {
        if (add(WRITERS, 1) != 0 || get(READERS) != 0) {
            add(VIOLATIONS, 1);
        }
        add(ENTRIES, 1);
    }

    void leave() {
        add(WRITERS, -1);
    }

    void readEnter() {
        add(READERS, 1);
        if (get(WRITERS) != 0) {
            add(VIOLATIONS, 1);
        }
        add(READS, 1);
    }

    /** A permit holder's section: at most bound inside at once. */
    void permitEnter(long bound) {
        if (add(READERS, 1) + 1 > bound) {
            add(VIOLATIONS, 1);
        }
        add(READS, 1);
    }

    void readLeave() {
        add(READERS, -1);
    }
}
