# Build and install svm for C and C++ users (docs/install.md):
#
#   make                                    # cargo build --release of libraries and binaries
#   make install [PREFIX=/usr/local] [DESTDIR=]
#
# Then: cc $(pkg-config --cflags svm) prog.c $(pkg-config --libs svm) -o prog; svmrun -n 4 ./prog

PREFIX ?= /usr/local
DESTDIR ?=
CARGO ?= cargo

.PHONY: all build install
all: build

build:
	$(CARGO) build --release --workspace --lib --bins

install: build
	sh scripts/install.sh --prefix "$(PREFIX)" --destdir "$(DESTDIR)" --build target/release
