/*
 * The peer's Config: Redisson's defaults apart from where the servers are. A "cluster:" prefix
 * gives useClusterServers() over the comma-separated seeds (default pub/sub mode),
 * "sentinel:<master name>:" useSentinelServers() over the comma-separated Sentinels, anything
 * else useSingleServer(). Over TLS (rediss://) the peer trusts the test CA, $RH_TLS_DIR/ca.crt, the
 * directory the C harness starts its TLS servers with.
 */
package rlock.compat;

import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.cert.CertificateFactory;
import javax.net.ssl.TrustManagerFactory;
import org.redisson.config.BaseConfig;
import org.redisson.config.Config;

final class Peers {
    private Peers() {}

    static Config config(String where) throws Exception {
        Config config = new Config();
        BaseConfig<?> base;
        if (where.startsWith("cluster:")) {
            base = config.useClusterServers().addNodeAddress(where.substring(8).split(","));
        } else if (where.startsWith("sentinel:")) {
            String[] w = where.split(":", 3);
            base = config.useSentinelServers().setMasterName(w[1])
                    .addSentinelAddress(w[2].split(","));
        } else {
            base = config.useSingleServer().setAddress(where);
        }
        String dir = System.getenv("RH_TLS_DIR");
        if (where.contains("rediss://") && dir != null && !dir.isEmpty()) {
            base.setSslTrustManagerFactory(trust(Path.of(dir, "ca.crt")));
        }
        return config;
    }

    /** A TrustManagerFactory that trusts the one CA certificate in the PEM file ca. */
    private static TrustManagerFactory trust(Path ca) throws Exception {
        KeyStore ks = KeyStore.getInstance(KeyStore.getDefaultType());
        ks.load(null, null);
        try (InputStream in = Files.newInputStream(ca)) {
            ks.setCertificateEntry("ca", CertificateFactory.getInstance("X.509").generateCertificate(in));
        }
        TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        tmf.init(ks);
        return tmf;
    }
}
