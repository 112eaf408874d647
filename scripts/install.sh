#!/bin/sh
# Installs svm into a prefix: binaries (svmrun, svm-config), the shared libraries of the native
# C API and the personalities, their headers, the SPLASH-2 m4 macro file and main-wrapper stubs,
# and pkg-config files (svm, svm-smi, svm-splash, svm-cvm, svm-deck). See docs/install.md.
#
#   scripts/install.sh [--prefix DIR] [--destdir DIR] [--build DIR]
#
#   --prefix DIR   where the files will live (default: $PREFIX, else /usr/local)
#   --destdir DIR  staging root prepended to every installed path (default: $DESTDIR); the
#                  files still name PREFIX (packaging)
#   --build DIR    the cargo output directory holding the built binaries and libraries
#                  (default: target/release; build it first: `make` or
#                  `cargo build --release --workspace --lib --bins`)
#
# `make install PREFIX=... DESTDIR=...` builds and then runs this script.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
prefix=${PREFIX:-/usr/local}
destdir=${DESTDIR:-}
build=$root/target/release

while [ $# -gt 0 ]; do
    case $1 in
    --prefix) prefix=${2:?--prefix needs a directory}; shift 2 ;;
    --prefix=*) prefix=${1#*=}; shift ;;
    --destdir) destdir=${2?--destdir needs a directory}; shift 2 ;;
    --destdir=*) destdir=${1#*=}; shift ;;
    --build) build=${2:?--build needs a directory}; shift 2 ;;
    --build=*) build=${1#*=}; shift ;;
    -h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done
case $prefix in
/*) ;;
*) echo "install.sh: --prefix must be an absolute path, not '$prefix'" >&2; exit 2 ;;
esac

version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n 1)
libs="svm svm_smi svm_splash svm_cvm svm_deck"
for f in svmrun svm-config; do
    [ -f "$build/$f" ] || { echo "install.sh: $build/$f is missing: build first (make, or cargo build --release --workspace --lib --bins)" >&2; exit 1; }
done
for l in $libs; do
    [ -f "$build/lib$l.so" ] || { echo "install.sh: $build/lib$l.so is missing: build first (make, or cargo build --release --workspace --lib --bins)" >&2; exit 1; }
done

bindir=$destdir$prefix/bin
libdir=$destdir$prefix/lib
incdir=$destdir$prefix/include/svm
datadir=$destdir$prefix/share/svm
pcdir=$destdir$prefix/lib/pkgconfig
mkdir -p "$bindir" "$libdir" "$incdir" "$datadir" "$pcdir"

install -m 755 "$build/svmrun" "$build/svm-config" "$bindir/"
for l in $libs; do
    install -m 755 "$build/lib$l.so" "$libdir/"
done
for d in svm-api-c svm-api-smi svm-api-splash svm-api-cvm svm-api-deck; do
    for h in "$root/$d"/include/*; do
        install -m 644 "$h" "$incdir/"
    done
done
install -m 644 "$root/svm-api-splash/macros/c.m4.svm" "$root/svm-api-splash/stub/svm_splash_stub.c" \
    "$root/svm-api-cvm/stub/svm_cvm_stub.c" "$datadir/"

# pc NAME LIB DESCRIPTION [EXTRA-LIBS-BEFORE] [EXTRA-LIBS-AFTER] [EXTRA-VARIABLES]
pc() {
    cat > "$pcdir/$1.pc" <<PC
prefix=$prefix
exec_prefix=\${prefix}
libdir=\${exec_prefix}/lib
includedir=\${prefix}/include/svm
datadir=\${prefix}/share/svm
$6
Name: $1
Description: $3
Version: $version
Cflags: -I\${includedir}
Libs: $4-L\${libdir} -Wl,-rpath,\${libdir} -l$2$5 -pthread
PC
}
wrap=" -Wl,--wrap=main -Wl,-z,now"
pc svm svm "svm: page-based software distributed shared memory, native C and C++ API (svm.h, svm.hpp)" "" "" ""
pc svm-smi svm_smi "svm: the SMI (Shared Memory Interface) personality (smi.h)" "" "" ""
pc svm-splash svm_splash "svm: the SPLASH-2 / PARMACS personality (splash_svm.h; m4 file: --variable=m4file)" \
    "\${datadir}/svm_splash_stub.c " "$wrap" "m4file=\${datadir}/c.m4.svm"
pc svm-cvm svm_cvm "svm: the CVM personality (cvm.h)" "\${datadir}/svm_cvm_stub.c " "$wrap" ""
pc svm-deck svm_deck "svm: the DECK personality (deck.h)" "" "" ""

echo "installed svm $version into $destdir$prefix"
echo "  cc \$(pkg-config --cflags svm) prog.c \$(pkg-config --libs svm) -o prog && $prefix/bin/svmrun -n 4 ./prog"
case $prefix in
/usr | /usr/local) ;;
*) echo "  (pkg-config finds the .pc files with PKG_CONFIG_PATH=$prefix/lib/pkgconfig)" ;;
esac
