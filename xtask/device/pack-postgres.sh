#!/usr/bin/env bash
# Packs this machine's PostgreSQL server (Debian's postgresql-15) with the shared libraries it
# links, for a GPU machine that has none: `service.sh ... queue` runs it there with
# PG_BINDIR=DIR/usr/lib/postgresql/15/bin PG_LIBDIR=DIR/libs after `tar -xJf OUT -C DIR`.
# glibc's own libraries stay behind (the GPU machine's newer glibc runs these binaries).
# Usage: pack-postgres.sh OUT.tar.xz (about 20 MB).
set -eu
out=$(realpath -m "${1:?output .tar.xz}")
v=${PG_VERSION:-15}
src=/usr/lib/postgresql/$v
[ -x "$src/bin/initdb" ] || { echo "no $src/bin/initdb (apt-get install postgresql-$v)"; exit 1; }
d=$(mktemp -d)
# The archive's top folder takes this mode, and the server runs as `nobody` there.
chmod 755 "$d"
trap 'rm -rf "$d"' EXIT
mkdir -p "$d/usr/lib/postgresql/$v/bin" "$d/usr/lib/postgresql/$v/lib" "$d/usr/share/postgresql" "$d/libs"
cp -a "$src"/bin/{postgres,initdb,pg_ctl,psql} "$d/usr/lib/postgresql/$v/bin/"
# initdb loads these two: the PL/pgSQL language and the snowball text-search dictionaries.
cp -a "$src"/lib/{plpgsql.so,dict_snowball.so} "$d/usr/lib/postgresql/$v/lib/"
cp -a "/usr/share/postgresql/$v" "$d/usr/share/postgresql/"
rm -rf "$d/usr/share/postgresql/$v"/{man,contrib}
for f in "$d/usr/lib/postgresql/$v"/bin/* "$d/usr/lib/postgresql/$v"/lib/*; do
    ldd "$f" | awk '$3 ~ /^\// {print $3}'
done | sort -u | grep -v -E '/(libc|libm|libresolv|libpthread|libdl|librt)\.so' | xargs -I{} cp -L {} "$d/libs/"
tar -C "$d" -cJf "$out" .
ls -la "$out"
