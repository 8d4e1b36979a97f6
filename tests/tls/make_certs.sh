#!/bin/sh
# tests/tls/make_certs.sh DIR - throwaway certificates for the TLS tests, written into DIR:
#   ca.crt/.key                    the test CA
#   server.crt/.key                signed by ca, SAN IP:127.0.0.1, DNS:localhost (valid 10 days)
#   client.crt/.key                signed by ca, for mutual TLS (extendedKeyUsage clientAuth)
#   other_ca.crt/.key              a second, unrelated CA
#   other_server.crt/.key          signed by other_ca, same names as server.crt
#   expired.crt/.key               signed by ca, same names, valid 2020-01-01 .. 2020-01-02 only
# EC P-256 keys, so the whole set takes well under a second. Never use these outside tests.
set -eu
DIR=${1:?usage: make_certs.sh DIR}
mkdir -p "$DIR"
cd "$DIR"
O=openssl
SAN="subjectAltName=IP:127.0.0.1,DNS:localhost"

key() { $O genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key" 2>/dev/null; }

ca() { # ca NAME CN
    key "$1"
    $O req -x509 -new -key "$1.key" -sha256 -days 10 -subj "/CN=$2" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
        -out "$1.crt" 2>/dev/null
}

leaf() { # leaf NAME CA CN EXT
    key "$1"
    $O req -new -key "$1.key" -subj "/CN=$3" -out "$1.csr" 2>/dev/null
    printf '%s\n' "$4" "basicConstraints=CA:FALSE" >"$1.ext"
    $O x509 -req -in "$1.csr" -CA "$2.crt" -CAkey "$2.key" -CAcreateserial -sha256 -days 10 \
        -extfile "$1.ext" -out "$1.crt" 2>/dev/null
    rm -f "$1.csr" "$1.ext"
}

ca ca "rlock test CA"
ca other_ca "rlock other test CA"
leaf server ca 127.0.0.1 "$SAN"
leaf client ca "rlock test client" "extendedKeyUsage=clientAuth"
leaf other_server other_ca 127.0.0.1 "$SAN"

# An expired certificate needs dates in the past, which only `openssl ca` can set.
key expired
$O req -new -key expired.key -subj "/CN=127.0.0.1" -out expired.csr 2>/dev/null
mkdir -p ca_db
: >ca_db/index.txt
cat >ca_db/ca.cnf <<CNF
[ca]
default_ca = test
[test]
database = ca_db/index.txt
new_certs_dir = ca_db
serial = ca_db/serial
default_md = sha256
policy = any
copy_extensions = none
x509_extensions = ext
[any]
commonName = supplied
[ext]
basicConstraints = CA:FALSE
$SAN
CNF
echo 01 >ca_db/serial
$O ca -batch -config ca_db/ca.cnf -cert ca.crt -keyfile ca.key -in expired.csr \
    -startdate 20200101000000Z -enddate 20200102000000Z -notext -out expired.crt 2>/dev/null
rm -rf ca_db expired.csr ./*.srl
chmod 600 ./*.key
